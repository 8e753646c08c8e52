"""GRADER=reference: golden cases of the authors' grader as it behaved in their runs (spec §10, §14.9-10),
including where it and math-verify disagree."""

import time

import pytest

from recipe.pc.rewards import reference_grader
from recipe.pc.rewards.math_reward import compute_score


def score(response, truth):
    return compute_score("deepmath", response, truth, grader="reference")


@pytest.mark.parametrize(
    "response, truth, acc",
    [
        ("so \\boxed{42}", "42", True),
        ("first \\boxed{3}, finally \\boxed{\\frac{1}{2}}", "\\frac12", True),  # the last box decides
        ("\\boxed{\\dfrac{1}{2}}", "1/2", True),
        ("\\boxed{0.5}", "\\frac{1}{2}", True),
        ("\\boxed{x = 5}", "5", True),
        ("\\boxed{1,000}", "1000", True),
        ("\\boxed{10^\\circ}", "10", True),
        ("\\boxed{\\text{(B)}}", "(B)", True),
        ("\\boxed{(1, \\frac{1}{2})}", "(1,1/2)", True),  # tuples element-wise
        ("\\boxed{[1, 2)}", "(1, 2)", False),  # intervals keep their brackets
        ("\\boxed{\\frac{1}{2}}", "\\frac{2}{4}", False),  # no symbolic check
        ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}", False),  # math-verify: equivalent
        ("\\boxed{(x+1)^2}", "x^2+2x+1", False),  # math-verify: equivalent
        ("\\boxed{\\pi/2}", "\\frac{\\pi}{2}", False),  # math-verify: equivalent
        ("\\boxed{7}", "42", False),
    ],
)
def test_golden_cases(response, truth, acc):
    result = score(response, truth)
    assert result["acc"] is acc
    assert result["score"] == (1.0 if acc else -1.0)


def test_an_unmatched_closing_brace_anywhere_scores_minus_one_even_with_a_valid_final_box():
    assert score("a stray } here, then \\boxed{42}", "42") == {"score": -1.0, "acc": False, "pred": "[NO_BOXED_FOUND]"}
    assert score("\\boxed{42}", "42")["acc"] is True  # the same box alone passes


def test_no_box_scores_minus_one_and_a_bare_box_takes_the_first():
    assert score("the answer is 42", "42")["pred"] == "[NO_BOXED_FOUND]"
    assert score("\\boxed 42 or \\boxed 7", "42")["acc"] is True


def test_grading_that_runs_past_the_timeout_scores_minus_one(monkeypatch):
    def slow(given, truth):
        time.sleep(0.5)
        return True

    monkeypatch.setattr(reference_grader, "_strings_match", slow)
    assert reference_grader.compute_score("\\boxed{42}", "42", timeout_s=0.05) == {
        "score": -1.0,
        "acc": False,
        "pred": "[TIMEOUT]",
    }
    assert reference_grader.compute_score("\\boxed{42}", "42", timeout_s=5.0)["acc"] is True
    assert reference_grader.TIMEOUT_S == 1.0


def test_a_grader_error_grades_as_incorrect(monkeypatch):
    def broken(given, truth):
        raise RecursionError("deep latex")

    monkeypatch.setattr(reference_grader, "_strings_match", broken)
    assert reference_grader.compute_score("\\boxed{42}", "42") == {"score": -1.0, "acc": False, "pred": "42"}
