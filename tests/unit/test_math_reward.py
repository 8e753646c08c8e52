"""The math-verify reward: box extraction, equivalent forms, timeouts from worker threads, and verl's DAPO manager."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from verl import DataProto

from recipe.pc.rewards.math_reward import NO_BOX, NO_GROUND_TRUTH, TIMEOUT, compute_score, extract_boxed_answer
from recipe.pc.testing import compose_pc_config

# (response, ground truth, acc, pred)
GOLDEN = [
    ("I could not solve it. The answer is 5.", "5", False, NO_BOX),
    (r"The answer is \boxed{}.", "5", False, ""),
    (r"So $x = \boxed{\frac{1}{\sqrt{2}}}$.", r"\frac{\sqrt{2}}{2}", True, r"\frac{1}{\sqrt{2}}"),
    (r"Let S = {1, 2}} be wrong}. Then \boxed{7}", "7", True, "7"),
    (r"First \boxed{3}, but on reflection \boxed{4}.", "4", True, "4"),
    (r"First \boxed{3}, but on reflection \boxed{4}.", "3", False, "4"),
    (r"\boxed{\frac12}", "0.5", True, r"\frac12"),
    (r"\boxed{0.5}", r"\frac12", True, "0.5"),
    (r"\boxed{\sqrt{2}/2}", r"\frac{\sqrt{2}}{2}", True, r"\sqrt{2}/2"),
    (r"\boxed{1/2}", r"\frac{1}{2}", True, "1/2"),
    (r"\boxed{3.0}", "3", True, "3.0"),
    (r"\boxed{[1, 3)}", "[1,3)", True, "[1, 3)"),
    (r"\boxed{(1, 2)}", "(2,1)", False, "(1, 2)"),
    (r"\boxed{\{2, 1\}}", r"\{1,2\}", True, r"\{2, 1\}"),
    (r"\boxed{4}", "3", False, "4"),
    (r"\boxed{-3}", "3", False, "-3"),
    (r"\boxed{\text{Monday}}", "Monday", True, r"\text{Monday}"),
    (r"\boxed{\text{Tuesday}}", r"\text{Monday}", False, r"\text{Tuesday}"),
    (r"\fbox{12}", "12", True, "12"),
    ("so the answer is $\\boxed 5$.\nDone.", "5", True, "5"),
    (r"\boxed{1} and finally \boxed{\frac{2", "1", False, NO_BOX),
]


@pytest.mark.parametrize("response, truth, acc, pred", GOLDEN)
def test_golden(response, truth, acc, pred):
    result = compute_score("math", response, truth, extra_info={"index": 0})
    assert result == {"score": 1.0 if acc else -1.0, "acc": acc, "pred": pred}


@given(
    prefix=st.text(alphabet="ab {}$\n", max_size=30),
    answer=st.recursive(st.text(alphabet="x1+", max_size=3), lambda inner: inner.map(lambda s: "{" + s + "}")),
    suffix=st.text(alphabet="ab }$\n", max_size=30),
)
@settings(max_examples=200, deadline=None)
def test_stray_braces_outside_the_last_box_never_abort_extraction(prefix, answer, suffix):
    assert extract_boxed_answer(f"{prefix}\\boxed{{{answer}}}{suffix}") == answer.strip()


def test_math_dapo_grader_is_verls_string_scorer():
    assert compute_score("math", r"so \boxed{5}", "5", grader="math_dapo") == {"score": 1.0, "acc": True, "pred": "5"}
    # A string match: equivalent forms that math-verify accepts are wrong here.
    assert compute_score("math", "Answer: 0.5", r"\frac12", grader="math_dapo") == {
        "score": -1.0,
        "acc": False,
        "pred": "0.5",
    }


def test_bad_configuration_raises():
    with pytest.raises(ValueError, match="grader='sympy'"):
        compute_score("math", r"\boxed{1}", "1", grader="sympy")
    with pytest.raises(ValueError, match="timeout_s"):
        compute_score("math", r"\boxed{1}", "1", timeout_s=0)


def test_pathological_inputs_return_quickly_from_a_worker_thread():
    huge_text = "word " * 1_000_000  # 5 MB
    cases = [
        (huge_text, "1", 5.0, NO_BOX),
        ("\\boxed{" + "{" * 1_000_000, "1", 5.0, NO_BOX),
        ("\\boxed{" + "1+" * 1_000_000 + "1}", "1", 5.0, ("1+" * 1000)[1:] + "1"),
        (r"\boxed{9^{9^{9^{9^{9}}}}}", "1", 1.0, TIMEOUT),
    ]
    # From a worker thread, as the reward manager calls it: SIGALRM-based timeouts would fail there.
    with ThreadPoolExecutor(max_workers=1) as pool:
        for response, truth, timeout_s, pred in cases:
            start = time.monotonic()
            result = pool.submit(compute_score, "math", response, truth, timeout_s=timeout_s).result()
            assert time.monotonic() - start < timeout_s + 3.0
            assert result == {"score": -1.0, "acc": False, "pred": pred}
        # The timed-out grader was replaced, not left blocking the pool.
        assert pool.submit(compute_score, "math", huge_text + r"\boxed{2}", "2").result()["acc"] is True


def test_concurrent_threads_get_their_own_answers():
    cases = GOLDEN * 3 + [(r"\boxed{9^{9^{9^{9^{9}}}}}", "1", False, TIMEOUT)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda c: compute_score("math", c[0], c[1], timeout_s=2.0), cases))
    for (_, _, acc, pred), result in zip(cases, results, strict=True):
        assert result == {"score": 1.0 if acc else -1.0, "acc": acc, "pred": pred}


class PieceTokenizer:
    """Token id i decodes to pieces[i]; id 0 is padding."""

    def __init__(self, pieces):
        self.pieces = pieces

    def decode(self, ids, skip_special_tokens=True):
        return "".join(self.pieces[i] for i in ids.tolist() if i != 0)


def test_through_verls_dapo_reward_manager_with_overlong_penalty():
    from verl.trainer.ppo.reward import load_reward_manager

    config = compose_pc_config(
        [
            "data.max_response_length=8",
            "reward.reward_manager.name=dapo",
            "reward.custom_reward_function.path=pkg://recipe.pc.rewards.math_reward",
            "reward.custom_reward_function.name=compute_score",
            "+reward.custom_reward_function.reward_kwargs.timeout_s=3.0",
            "reward.reward_kwargs.overlong_buffer_cfg.enable=True",
            "reward.reward_kwargs.overlong_buffer_cfg.len=4",
            "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
            "reward.reward_kwargs.overlong_buffer_cfg.log=True",
        ]
    )
    pieces = ["<pad>", "so ", r"\boxed{", r"\frac12", "0.25", "}", " hmm", "Q"]
    # Valid lengths 3, 6 and 4 against an expected length of 8 - 4 = 4: only the second row is overlong.
    responses = torch.tensor(
        [
            [2, 3, 5, 0, 0, 0, 0, 0],
            [1, 6, 6, 2, 3, 5, 0, 0],
            [1, 2, 4, 5, 0, 0, 0, 0],
        ]
    )
    prompts = torch.tensor([[7, 7]] * 3)
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "attention_mask": torch.cat([torch.ones_like(prompts), (responses != 0).long()], dim=1),
        },
        non_tensors={
            "data_source": np.array(["math"] * 3, dtype=object),
            "reward_model": np.array([{"ground_truth": "0.5", "style": "rule"}] * 3, dtype=object),
            "extra_info": np.array([{"index": i} for i in range(3)], dtype=object),
        },
    )
    manager = load_reward_manager(config, PieceTokenizer(pieces))

    async def score_rows():
        return await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(len(data))))

    outputs = manager.loop.run_until_complete(score_rows())
    assert [out["reward_score"] for out in outputs] == [1.0, 1.0 - 0.5, -1.0]
    assert [out["reward_extra_info"]["acc"] for out in outputs] == [True, True, False]
    assert [out["reward_extra_info"]["score"] for out in outputs] == [1.0, 1.0, -1.0]
    assert [out["reward_extra_info"]["pred"] for out in outputs] == [r"\frac12", r"\frac12", "0.25"]
    assert [out["reward_extra_info"]["overlong"] for out in outputs] == [False, True, False]


def _reward_rows(responses: list[str], truths: list) -> tuple:
    """A reward batch as verl's agent loop hands it to the reward manager: token ids, one decoded piece each."""
    pieces = ["<pad>", *responses]
    responses_ids = torch.tensor([[i + 1, 0] for i in range(len(responses))])
    prompts = torch.tensor([[1, 1]] * len(responses))
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses_ids,
            "attention_mask": torch.cat([torch.ones_like(prompts), (responses_ids != 0).long()], dim=1),
        },
        non_tensors={
            "data_source": np.array(["deepmath"] * len(responses), dtype=object),
            "reward_model": np.array([{"ground_truth": t, "style": "rule"} for t in truths], dtype=object),
            "extra_info": np.array([{"index": i} for i in range(len(responses))], dtype=object),
        },
    )
    return data, PieceTokenizer(pieces)


def _through_verls_reward_manager(grader: str, responses: list[str], truths: list) -> list[dict]:
    """Each row's reward_extra_info from verl 0.9.1's DAPO reward manager (experimental/reward_loop/reward_manager/
    dapo.py, run_single), which calls compute_score(data_source=, solution_str=, ground_truth=, extra_info=) from
    an executor thread and lets anything it raises through."""
    from verl.trainer.ppo.reward import load_reward_manager

    config = compose_pc_config(
        [
            "reward.reward_manager.name=dapo",
            "reward.custom_reward_function.path=pkg://recipe.pc.rewards.math_reward",
            "reward.custom_reward_function.name=compute_score",
            f"+reward.custom_reward_function.reward_kwargs.grader={grader}",
        ]
    )
    data, tokenizer = _reward_rows(responses, truths)
    manager = load_reward_manager(config, tokenizer)

    async def score_rows():
        return await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(len(data))))

    return [out["reward_extra_info"] for out in manager.loop.run_until_complete(score_rows())]


# Ground truths a data file may hold (None: missing), each with a response boxing 5 and one boxing nothing.
BAD_TRUTHS = ["", "   ", None, 5, 0.5, True, np.array(["5"], dtype=object)]
RESPONSES = [r"so \boxed{5}", r"so \boxed{}"]


def _graded(result: dict) -> tuple:
    return result["score"], result["acc"], result["pred"]


def test_a_reward_batch_with_bad_ground_truths_is_graded_never_raised():
    responses = [r for _ in BAD_TRUTHS for r in RESPONSES]
    truths = [t for t in BAD_TRUTHS for _ in RESPONSES]
    # The authors' grader: an empty or blank truth is a string (an empty box matches it), a missing one never matches,
    # any other type scores as its timeout.
    reference = [_graded(r) for r in _through_verls_reward_manager("reference", responses, truths)]
    assert reference == [
        *[(-1.0, False, "5"), (1.0, True, "")] * 2,
        (-1.0, False, "5"),
        (-1.0, False, ""),
        *[(-1.0, False, TIMEOUT)] * 8,
    ]
    # Ours: a number is graded as it prints; the rest has nothing to grade against.
    improved = [_graded(r) for r in _through_verls_reward_manager("math_verify", responses, truths)]
    assert improved == [
        *[(-1.0, False, NO_GROUND_TRUTH)] * 6,
        (1.0, True, "5"),
        (-1.0, False, ""),
        (-1.0, False, "5"),
        (-1.0, False, ""),
        *[(-1.0, False, NO_GROUND_TRUTH)] * 4,
    ]
