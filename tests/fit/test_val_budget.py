"""Validation at rollout budgets (trainer.val_rollout_interval) through the real fit() loop, in every arm.

The expected validation steps are derived from the run's own logged cumulative counts: the first step whose count
reaches each multiple of the interval, the last step, and (when set) every trainer.test_freq-th step.
"""

import shutil
from collections import Counter

import pytest
import torch

from recipe.pc import metric_names as names
from recipe.pc.checkpoint import STATE_FILE
from recipe.pc.testing import fit_run, read_metrics, resume_run
from recipe.pc.testing.standins import make_tokenizer
from recipe.pc_tools.logs import load_run

STEPS = 9
# Most prompts always fail or always pass: a PC step takes one to three rounds, so it costs 48 to 112 rollouts,
# from under one interval to two.
UNEVEN = [0.0] * 12 + [0.5] * 8 + [1.0] * 12 + [0.3] * 8
RARE = [0.0] * 16 + [0.5] * 8 + [1.0] * 16  # one epoch: one step, then rounds that never fill a second
# allocator: (its overrides, trainer.val_rollout_interval, trainer.test_freq). GRPO's last step reaches no budget;
# DAPO's steps 3 and 6 validate by test_freq alone.
ARMS = {
    "pilot_commit": ((), 56, -1),
    "grpo": (("data.gen_batch_size=4",), 56, -1),
    "dapo": ((), 100, 3),
}
VAL_ACC = "val-core/toy_arithmetic/acc/mean@1"


def overrides(method: str) -> list[str]:
    extra, interval, test_freq = ARMS[method]
    return [
        f"algorithm.rollout_allocation={method}",
        f"trainer.val_rollout_interval={interval}",
        f"trainer.test_freq={test_freq}",
        "trainer.val_before_train=true",
        "trainer.save_freq=1",
        f"trainer.total_training_steps={STEPS}",
        *extra,
    ]


def validations(folder) -> dict[int, dict]:
    """The logged record of each step that validated, by step (0: before training)."""
    found = {}
    for record in read_metrics(folder / "metrics.jsonl"):
        if VAL_ACC in record["data"]:
            assert record["step"] not in found, f"step {record['step']} logged two validations"
            found[record["step"]] = record["data"]
    return found


def budget_metrics(validated: dict[int, dict]) -> dict[int, dict]:
    return {step: {k: v for k, v in data.items() if k.startswith("val_budget/")} for step, data in validated.items()}


@pytest.fixture(scope="module")
def arm_runs(tmp_path_factory):
    """One finished run per arm, made when a test first asks for it (the resume test reads PC's checkpoints)."""
    done = {}

    def run(method):
        if method not in done:
            folder = tmp_path_factory.mktemp(method)
            done[method] = (folder, fit_run(folder, make_tokenizer(), overrides(method), probs=UNEVEN))
        return done[method]

    return run


@pytest.mark.parametrize("method", list(ARMS))
def test_each_budget_is_validated_once_at_the_first_step_that_reaches_it(arm_runs, method):
    folder, run = arm_runs(method)
    _, interval, test_freq = ARMS[method]
    counts = [s[names.CUMULATIVE_SAMPLED] for s in run.steps]
    assert len(counts) == STEPS
    crossed = {}  # step -> the budgets it reached first
    for k in range(1, counts[-1] // interval + 1):
        first = next(step for step, count in enumerate(counts, start=1) if count >= k * interval)
        crossed.setdefault(first, []).append(k * interval)
    by_steps = {s for s in range(1, STEPS + 1) if test_freq > 0 and s % test_freq == 0}
    validated = validations(folder)
    assert set(validated) == {0, *crossed, *by_steps, STEPS}
    # One validation call a validating step, even where both rules fire or several budgets are crossed.
    calls = Counter(c.global_steps for c in run.trainer.async_rollout_manager.calls if c.validate)
    assert calls == dict.fromkeys(validated, 1)

    assert validated[0][names.VAL_BUDGET_ROLLOUTS] == 0 and names.VAL_BUDGET not in validated[0]
    for step, data in validated.items():
        if step == 0:
            continue
        budgets = crossed.get(step, [])
        assert data[names.VAL_BUDGET_ROLLOUTS] == counts[step - 1]
        assert data[names.VAL_BUDGETS_REACHED] == len(budgets)
        assert data[names.VAL_BUDGET_INTERVAL] == interval
        assert data.get(names.VAL_BUDGET) == (budgets[-1] if budgets else None)
    # The report's reader sees each budget at the step that stands for it.
    table = load_run(folder / "metrics.jsonl")
    assert table[names.VAL_BUDGET].dropna().to_dict() == {step: budgets[-1] for step, budgets in crossed.items()}
    if method == "pilot_commit":  # the uneven step cost the test is about
        assert any(len(b) > 1 for b in crossed.values()), "no step crossed several budgets"
        assert set(range(1, STEPS)) - set(validated), "every step validated: the rule was not put to the test"
        cost = [s[names.ROLLOUTS_SAMPLED] for s in run.steps]
        assert max(cost) >= 2 * min(cost)


def test_a_resumed_run_validates_the_budgets_the_uninterrupted_one_did(arm_runs, tmp_path):
    """Resumed after a step that reached two budgets: the step saved before it validated them, so the resumed run
    validates them first, at that step's count and with its policy (the point the uninterrupted run logged there; a
    run killed between its save and its validation loses nothing), then the later ones; none before it again."""
    folder, full = arm_runs("pilot_commit")
    before = validations(folder)
    cut = next(s for s, data in sorted(before.items()) if data.get(names.VAL_BUDGETS_REACHED, 0) > 1 and s > 1)
    assert cut < STEPS - 1
    checkpoint = folder / "ckpt" / f"global_step_{cut}"
    # Without a validation before training: the budgets' own rule is what starts the resumed run with one.
    extra = [*overrides("pilot_commit"), "trainer.val_before_train=false"]
    resumed = resume_run(tmp_path / "resumed", make_tokenizer(), extra, checkpoint, probs=UNEVEN)
    after = validations(tmp_path / "resumed")
    counts = [s[names.CUMULATIVE_SAMPLED] for s in resumed.steps]
    assert counts == [s[names.CUMULATIVE_SAMPLED] for s in full.steps[cut:]]
    assert budget_metrics(after) == {step: data for step, data in budget_metrics(before).items() if step >= cut}

    # A checkpoint written before it held the validated budgets: every budget up to its count counts as validated.
    state_file = checkpoint / STATE_FILE
    state = torch.load(state_file, weights_only=True)
    del state["val_budgets"]
    old = tmp_path / "old_ckpt" / checkpoint.name
    shutil.copytree(checkpoint, old)
    torch.save(state, old / STATE_FILE)
    resume_run(tmp_path / "from_old", make_tokenizer(), extra, old, probs=UNEVEN)
    assert budget_metrics(validations(tmp_path / "from_old")) == {
        step: data for step, data in budget_metrics(before).items() if step > cut
    }


def test_a_run_whose_data_runs_out_validates_its_final_policy_at_the_final_step_s_count(tmp_path, tokenizer):
    folder = tmp_path / "run"
    run = fit_run(
        folder,
        tokenizer,
        [
            "trainer.total_epochs=1",
            "trainer.total_training_steps=100",
            f"trainer.val_rollout_interval={10**6}",
            "trainer.test_freq=-1",
        ],
        probs=RARE,
    )
    final = run.steps[-1]
    assert run.trainer.counters.cumulative_rollouts > final[names.CUMULATIVE_SAMPLED], (
        "the data ran out at a step boundary: nothing tells the final step's count from the run's"
    )
    validated = validations(folder)
    assert list(validated) == [len(run.steps)]
    data = validated[len(run.steps)]
    assert data[names.VAL_BUDGET_ROLLOUTS] == final[names.CUMULATIVE_SAMPLED]
    assert data[names.VAL_BUDGETS_REACHED] == 0 and names.VAL_BUDGET not in data
