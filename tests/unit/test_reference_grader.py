"""GRADER=reference against the authors' own grader.

``tests/data/grader/labels.jsonl`` holds the verdicts of the authors' ``tinker_sympy`` grader on the pairs of
``tests/data/grader/corpus.jsonl``, produced by ``scripts/grader/label_corpus.py`` from a checkout of their release
(the commit is in the file's first line). Ours must agree on (score, acc, pred)."""

import hashlib
import json
import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from support import ROOT, TESTS

from recipe.pc.rewards import grader_pool, reference_grader
from recipe.pc.rewards.math_reward import compute_score

DATA = Path(TESTS) / "data" / "grader"
EXACT_CATEGORIES = ("named", "extraction")  # twelve hand-picked pairs and every extraction edge case


def load_labelled_corpus() -> tuple[dict, list[dict]]:
    corpus_bytes = (DATA / "corpus.jsonl").read_bytes()
    header, *labels = [json.loads(line) for line in (DATA / "labels.jsonl").read_text().splitlines()]
    corpus = [json.loads(line) for line in corpus_bytes.decode().splitlines()]
    # Labels made from another version of the corpus would test nothing: rerun label_corpus.py.
    assert header["corpus_sha256"] == hashlib.sha256(corpus_bytes).hexdigest()
    by_id = {label["id"]: label for label in labels}
    assert [row["id"] for row in corpus] == [label["id"] for label in labels]
    return header, [{**row, "label": by_id[row["id"]]} for row in corpus]


@pytest.fixture(scope="module")
def graded():
    header, rows = load_labelled_corpus()
    start = time.monotonic()
    for row in rows:
        # Directly: math_reward refuses an empty ground truth (a data error) before any grader sees it.
        row["ours"] = reference_grader.compute_score(row["response"], row["ground_truth"])
    return header, rows, time.monotonic() - start


def _agrees(row) -> bool:
    label = row["label"]
    return row["ours"] == {"score": label["score"], "acc": label["acc"], "pred": label["pred"]}


def _table(rows) -> str:
    total, agreed = Counter(r["category"] for r in rows), Counter(r["category"] for r in rows if _agrees(r))
    return "\n".join(f"{c:16s} {agreed[c]:4d}/{total[c]:4d}" for c in total)


def test_the_corpus_covers_every_category_with_enough_pairs(graded):
    header, rows, _ = graded
    counts = Counter(row["category"] for row in rows)
    assert len(rows) >= 1000 and header["authors_repo"] == "databricks/pilot-commit" and len(header["commit"]) == 40
    assert counts["named"] == 12 and all(n >= 30 for c, n in counts.items() if c != "named"), counts
    assert len(counts) == 15


# Pairs where ours may differ from the authors', each with the reason; at most 0.5% of the corpus. None today.
KNOWN_DIFFERENCES: dict[str, str] = {}


def test_agrees_with_the_authors_grader_on_the_whole_corpus(graded):
    _, rows, elapsed = graded
    misses = [r for r in rows if not _agrees(r)]
    assert len(KNOWN_DIFFERENCES) <= 0.005 * len(rows)
    assert {r["id"] for r in misses} == set(KNOWN_DIFFERENCES), f"per category:\n{_table(rows)}\nmisses: {misses[:5]}"
    for category in EXACT_CATEGORIES:
        assert not [r for r in misses if r["category"] == category], f"{category} must agree exactly"
    assert elapsed <= 30.0


@pytest.mark.parametrize(
    "category",
    ["integers_signs", "decimals", "fractions", "roots", "powers", "pi", "units_words", "percent_degrees"]
    + ["intervals", "tuples_sets", "text_choice", "equations", "mixed_numbers", *EXACT_CATEGORIES],
)
def test_each_category_agrees(graded, category):
    # A whole category going wrong shows here even where the overall rate would still pass.
    rows = [r for r in graded[1] if r["category"] == category]
    assert rows and sum(map(_agrees, rows)) >= 0.95 * len(rows), _table(rows)


# Readable cases; every verdict is the authors' label for the same corpus pair (checked below).
GOLDEN = [
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
    ("\\boxed{\\frac{1}{2}}", "\\frac{2}{4}", False),  # unreduced fractions must be written the same
    ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}", False),  # the sympy gate stays shut
    ("\\boxed{(x+1)^2}", "x^2+2x+1", False),
    ("\\boxed{\\pi/2}", "\\frac{\\pi}{2}", True),  # both read as pi/2 by the second normalisation
    ("\\boxed{7}", "42", False),
    ("a stray } here, then \\boxed{42}", "42", False),  # an unmatched } anywhere voids the response
    ("the answer is 42", "42", False),
    ("\\boxed 42 or \\boxed 7", "42", True),  # without braces: the first
]


def _answer(response):
    return reference_grader.extract_answer(response)


@pytest.mark.parametrize("response, truth, acc", GOLDEN)
def test_golden_cases_are_the_authors_verdicts(graded, response, truth, acc):
    labelled = {(_answer(r["response"]), r["ground_truth"]): r["label"] for r in graded[1]}
    assert labelled[(_answer(response), truth)]["acc"] is acc
    result = compute_score("deepmath", response, truth, grader="reference")
    assert result["acc"] is acc and result["score"] == (1.0 if acc else -1.0)


def test_no_box_and_an_unmatched_brace_score_minus_one_with_the_release_marker():
    no_box = {"score": -1.0, "acc": False, "pred": "[NO_BOXED_FOUND]"}
    assert compute_score("deepmath", "the answer is 42", "42", grader="reference") == no_box
    assert compute_score("deepmath", "} \\boxed{42}", "42", grader="reference") == no_box


GATE_OPEN = ("\\boxed{x^12^1}", "x^12")  # a stacked power with a two-digit exponent: only sympy says equal


def test_the_symbolic_check_runs_only_behind_the_inverted_gate():
    assert reference_grader.sympy_gate_open("(x^12)-(x^12^1)")
    assert not reference_grader.sympy_gate_open("(6)-(2*3)")  # the gate a careful reader expects would open
    assert compute_score("deepmath", *GATE_OPEN, grader="reference")["acc"] is True
    assert compute_score("deepmath", "\\boxed{2*3}", "6", grader="reference")["acc"] is False


class SlowHelper:
    """A stand-in helper whose symbolic check takes ``work_s`` and times out past ``timeout_s``, like the real one."""

    work_s = 0.3
    busy = 0
    most_busy = 0
    lock = threading.Lock()

    def __init__(self, task):
        pass

    def ask(self, args, timeout_s):
        with SlowHelper.lock:
            SlowHelper.busy += 1
            SlowHelper.most_busy = max(SlowHelper.most_busy, SlowHelper.busy)
        try:
            time.sleep(min(self.work_s, timeout_s))
            if self.work_s > timeout_s:
                raise TimeoutError
            return {"value": True}
        finally:
            with SlowHelper.lock:
                SlowHelper.busy -= 1

    def kill(self):
        pass


@pytest.fixture
def one_slow_helper(monkeypatch):
    monkeypatch.setattr(grader_pool, "_Helper", SlowHelper)
    monkeypatch.setattr(grader_pool, "_pools", {"sympy_zero": grader_pool.GraderPool("sympy_zero", size=1)})
    SlowHelper.most_busy = 0
    return SlowHelper


def test_waiting_for_a_busy_helper_never_counts_against_the_one_second(one_slow_helper):
    # Five answers at once through one helper: the last waits 1.2 s, longer than the budget, and is still graded.
    results = [None] * 5

    def grade(i):
        results[i] = reference_grader.compute_score(*GATE_OPEN)

    threads = [threading.Thread(target=grade, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert one_slow_helper.most_busy == 1
    assert [r["acc"] for r in results] == [True] * 5


def test_a_symbolic_check_past_the_budget_grades_as_incorrect_with_the_answer(one_slow_helper, monkeypatch):
    monkeypatch.setattr(SlowHelper, "work_s", 2.0)
    assert reference_grader.compute_score(*GATE_OPEN) == {"score": -1.0, "acc": False, "pred": "x^12^1"}


def test_any_other_failure_scores_as_the_release_does(monkeypatch):
    def broken(given, truth, timeout_s):
        raise RecursionError("deep latex")

    monkeypatch.setattr(reference_grader, "grade", broken)
    assert reference_grader.compute_score("\\boxed{42}", "42") == {"score": -1.0, "acc": False, "pred": "[TIMEOUT]"}


def test_the_committed_corpus_is_what_the_builder_writes(tmp_path):
    # The labels are only as good as the corpus they were made on: hand edits to corpus.jsonl would show here.
    import runpy

    builder = runpy.run_path(os.path.join(ROOT, "scripts", "grader", "build_corpus.py"))
    rows = builder["build"]()
    assert [json.loads(line) for line in (DATA / "corpus.jsonl").read_text().splitlines()] == rows


def test_the_first_normalisation_removes_a_percent_sign_twice_as_the_release():
    # Removing "\%" once leaves the "\%" it brought together; the release removed it a second time.
    assert reference_grader.mathd_normalize("5\\\\\\%%") == "5"
    assert compute_score("deepmath", "\\boxed{5\\\\\\%%0}", "50", grader="reference")["acc"] is True


@pytest.mark.parametrize("expr", ["(x^1^2)-(x)", "(x^12)-(x)"])
def test_the_sympy_gate_stays_shut_when_only_one_of_its_patterns_matches(expr):
    assert not reference_grader.sympy_gate_open(expr)


def test_a_multi_digit_exponent_alone_never_reaches_sympy():
    # sympy would call x^12*1 and x^12 equal; the release's gate, needing both patterns, never asked it.
    assert compute_score("deepmath", "\\boxed{x^12*1}", "x^12", grader="reference")["acc"] is False


# Ground truths the release graded without complaint, and what it gave (one column per response).
BAD_TRUTHS = [
    # truth, "\boxed{5}", "\boxed{}", no box
    ("", (-1.0, "5"), (1.0, ""), (-1.0, "[NO_BOXED_FOUND]")),
    ("  ", (-1.0, "5"), (1.0, ""), (-1.0, "[NO_BOXED_FOUND]")),
    (None, (-1.0, "5"), (-1.0, ""), (-1.0, "[NO_BOXED_FOUND]")),
    (5, (-1.0, "[TIMEOUT]"), (-1.0, "[TIMEOUT]"), (-1.0, "[NO_BOXED_FOUND]")),
    (0.5, (-1.0, "[TIMEOUT]"), (-1.0, "[TIMEOUT]"), (-1.0, "[NO_BOXED_FOUND]")),
    (True, (-1.0, "[TIMEOUT]"), (-1.0, "[TIMEOUT]"), (-1.0, "[NO_BOXED_FOUND]")),
    ([5], (-1.0, "[TIMEOUT]"), (-1.0, "[TIMEOUT]"), (-1.0, "[NO_BOXED_FOUND]")),
]


@pytest.mark.parametrize("truth, boxed, empty_box, no_box", BAD_TRUTHS)
def test_empty_missing_and_non_string_ground_truths_score_as_the_release(truth, boxed, empty_box, no_box):
    for response, (score, pred) in zip(("\\boxed{5}", "\\boxed{}", "no box"), (boxed, empty_box, no_box), strict=True):
        assert reference_grader.compute_score(response, truth) == {"score": score, "acc": score > 0, "pred": pred}


class FakeCPU:
    """The grading thread's CPU clock, moved on by hand: ``slow`` makes one call of a grader step cost ``seconds``."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def slow(self, monkeypatch, name: str, seconds: float = 2.0, call: int = 1):
        step, calls = getattr(reference_grader, name), []

        def slowed(*args, **kwargs):
            calls.append(None)
            if len(calls) == call:
                self.now += seconds
            return step(*args, **kwargs)

        monkeypatch.setattr(reference_grader, name, slowed)


@pytest.fixture
def cpu(monkeypatch):
    clock = FakeCPU()
    monkeypatch.setattr(reference_grader, "_cpu_time", clock)
    return clock


PI_HALF = ("\\boxed{\\pi/2}", "\\frac{\\pi}{2}")  # equal only once the second normalisation reads the LaTeX
HALF = ("\\boxed{0.5}", "\\frac12")  # equal only after the first normalisation


# Where the budget runs out, and the release's outcome there (checked against its code with a step slowed past 1 s).
TIMED_OUT = {"score": -1.0, "acc": False, "pred": "[TIMEOUT]"}
STAGES = [
    # the MATH normalisation of the ground truth, then of the answer: it keeps its input, grading goes on
    ("_mathd_steps", 1, HALF, {"score": -1.0, "acc": False, "pred": "0.5"}),
    ("_mathd_steps", 2, HALF, {"score": -1.0, "acc": False, "pred": "0.5"}),
    # the second normalisation's LaTeX-to-text step: dropped, grading goes on
    ("_latex_as_text", 1, PI_HALF, {"score": -1.0, "acc": False, "pred": "\\pi/2"}),
    # the rest of the second normalisation, and the element-wise comparison: the release's wrapper gave -1
    ("_as_float", 1, PI_HALF, TIMED_OUT),
    ("_is_integer_string", 2, ("\\boxed{5 cm}", "5"), TIMED_OUT),
    ("split_elements", 1, GATE_OPEN, TIMED_OUT),
    ("split_elements", 1, ("\\boxed{2/4}", "1/2"), TIMED_OUT),  # unequal fractions: no sympy check after it
]


@pytest.mark.parametrize("step, call, pair, expected", STAGES)
def test_the_budget_covers_the_whole_grade_with_the_release_outcome_where_it_runs_out(
    cpu, monkeypatch, step, call, pair, expected
):
    in_time = reference_grader.compute_score(*pair)
    assert in_time["pred"] == reference_grader.extract_answer(pair[0])
    cpu.slow(monkeypatch, step, call=call)
    assert reference_grader.compute_score(*pair) == expected


def test_the_sympy_check_gets_only_what_the_grade_left_of_its_second(cpu, monkeypatch, one_slow_helper):
    # 0.9 s before the symbolic check, which then needs 0.3 s: the release's alarm fired inside it ("not equal").
    cpu.slow(monkeypatch, "split_elements", seconds=0.9)
    assert reference_grader.compute_score(*GATE_OPEN) == {"score": -1.0, "acc": False, "pred": "x^12^1"}


def test_after_a_swallowed_alarm_the_sympy_check_still_gets_a_second_of_its_own(cpu, monkeypatch, one_slow_helper):
    cpu.slow(monkeypatch, "_mathd_steps")  # the budget runs out in the first normalisation, which swallows it
    assert reference_grader.compute_score(*GATE_OPEN)["acc"] is True


def once_before(monkeypatch, name: str, delay) -> None:
    """``reference_grader.<name>``'s first call runs ``delay()`` before the real step."""
    step, calls = getattr(reference_grader, name), []

    def delayed(*args, **kwargs):
        calls.append(None)
        if len(calls) == 1:
            delay()
        return step(*args, **kwargs)

    monkeypatch.setattr(reference_grader, name, delayed)


def test_the_budget_is_the_grading_threads_cpu_time_not_the_clock_nor_the_other_threads(monkeypatch):
    # A real wait of 1.2 s in the first normalisation, past the 1 s budget, while another thread spends 1.1 s of CPU:
    # the grade is not cut (a budget on the wall clock, or on the process's CPU time, would give -1 with "0.5").
    stop, spent = threading.Event(), [0.0]

    def spin():
        while not stop.is_set():
            spent[0] = time.thread_time()

    def wait():
        start = time.monotonic()
        while time.monotonic() - start < 1.2 or spent[0] < 1.1:  # on a loaded machine the spinner gets less CPU
            time.sleep(0.01)

    busy = threading.Thread(target=spin)
    once_before(monkeypatch, "_mathd_steps", wait)
    busy.start()
    try:
        graded = reference_grader.compute_score(*HALF)
    finally:
        stop.set()
        busy.join()
    assert reference_grader.TIMEOUT_S < 1.1
    assert graded == {"score": 1.0, "acc": True, "pred": "0.5"}


def test_a_grade_that_burns_cpu_past_its_budget_is_cut(monkeypatch):
    pair = ("\\boxed{5 cm}", "5")  # equal once the second normalisation drops the unit
    assert reference_grader.compute_score(*pair, timeout_s=0.05)["acc"] is True

    def burn(seconds=0.1):
        start = time.thread_time()
        while time.thread_time() - start < seconds:
            pass

    once_before(monkeypatch, "_as_float", burn)  # in the second normalisation: the release's wrapper gave -1
    assert reference_grader.compute_score(*pair, timeout_s=0.05) == TIMED_OUT
