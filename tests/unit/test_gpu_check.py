"""recipe.pc_tools.gpu_check on synthetic logs whose verdict is known."""

import json
import math

import pytest

from recipe.pc import metric_names as names
from recipe.pc_tools import gpu_check
from recipe.pc_tools.gpu_check import PROBS_DIFF, REFERENCE_UPDATE, main

REWARD = names.PILOT_METRIC_MEAN


def write_run(folder, rows, log=""):
    """``rows``: one dict of metrics a step, from step 1; written as verl's file logger does."""
    folder.mkdir(parents=True)
    with open(folder / "metrics.jsonl", "w") as f:
        for step, data in enumerate(rows, start=1):
            f.write(json.dumps({"step": step, "data": data}) + "\n")
    (folder / "log.txt").write_text(log)
    return str(folder)


def tp2_run(folder, diff, rewards):
    return write_run(folder, [{PROBS_DIFF: diff, REWARD: r} for r in rewards])


RISING = [0.2 + 0.03 * i for i in range(12)]  # first five average 0.26, last five 0.47: a gain of 0.21
FLAT = [0.3] * 12


@pytest.mark.parametrize(
    "diff_tp2, rewards_tp1, rewards_tp2, code",
    [
        (0.014, RISING, RISING, 0),
        (0.016, RISING, RISING, 1),
        (0.010, RISING, FLAT, 1),
        (0.010, FLAT, RISING, 1),  # the gain is required at both sizes, not at TP 2 alone
    ],
    ids=["within_both_rules", "diff_ratio_1.6", "no_learning_at_tp2", "no_learning_at_tp1"],
)
def test_tp2_passes_only_within_the_ratio_and_with_the_reward_gain(
    tmp_path, capsys, diff_tp2, rewards_tp1, rewards_tp2, code
):
    tp1 = tp2_run(tmp_path / "tp1", 0.010, rewards_tp1)
    tp2 = tp2_run(tmp_path / "tp2", diff_tp2, rewards_tp2)
    assert main(["tp2", "--pair", "pc", tp1, tp2, "--steps", "12"]) == code
    row = capsys.readouterr().out.splitlines()[2]
    gain1, gain2 = (0.21 if rewards is RISING else 0.0 for rewards in (rewards_tp1, rewards_tp2))
    verdict = "no" if code else "yes"
    ratio = diff_tp2 / 0.01
    assert row == f"| pc | 0.0100 | {diff_tp2:.4f} | {ratio:.2f} | {gain1:+.3f} | {gain2:+.3f} | {verdict} |"


def test_tp2_fails_a_run_that_stopped_early_or_lost_the_difference_on_a_step(tmp_path, capsys):
    tp1 = tp2_run(tmp_path / "tp1", 0.010, RISING)
    stopped = tp2_run(tmp_path / "stopped", 0.010, RISING)  # 12 of 20 steps
    assert main(["tp2", "--pair", "pc", tp1, stopped, "--steps", "20"]) == 1
    assert f"fail: {stopped}: 12 steps trained, not 20" in capsys.readouterr().out
    rows = [{PROBS_DIFF: 0.01, REWARD: r} for r in RISING]
    rows[3][PROBS_DIFF] = None  # verl's file logger writes a NaN as null
    nan = write_run(tmp_path / "nan", rows)
    assert main(["tp2", "--pair", "pc", tp1, nan, "--steps", "12"]) == 1
    assert f"fail: {nan}: no {PROBS_DIFF} at steps [4]" in capsys.readouterr().out


def test_tp2_leaves_out_a_validation_before_training(tmp_path, capsys):
    tp1 = tp2_run(tmp_path / "tp1", 0.010, RISING)
    tp2 = tp2_run(tmp_path / "tp2", 0.010, RISING)
    with open(tmp_path / "tp2" / "metrics.jsonl", "a") as f:  # step 0: validation only, no reward, no difference
        f.write(json.dumps({"step": 0, "data": {"val-core/arith/acc/mean@4": 0.1}}) + "\n")
    assert main(["tp2", "--pair", "grpo", tp1, tp2, "--steps", "12"]) == 0


def test_tp2_reads_the_reward_of_the_first_and_last_five_steps():
    rewards = [0.0] * 5 + [9.0] * 3 + [0.25] * 5  # the middle steps do not count
    frame = gpu_check.pd.DataFrame({REWARD: rewards}, index=range(1, 14))
    assert gpu_check.reward_gain(frame, "run") == pytest.approx(0.25)


def test_tp2_names_the_missing_metric_and_the_key_that_logs_it(tmp_path, capsys):
    tp1 = write_run(tmp_path / "tp1", [{REWARD: r} for r in RISING])
    tp2 = tp2_run(tmp_path / "tp2", 0.01, RISING)
    assert main(["tp2", "--pair", "grpo", tp1, tp2, "--steps", "12"]) == 2
    assert capsys.readouterr().err == (
        f"gpu_check: {tmp_path / 'tp1' / 'metrics.jsonl'}: no {PROBS_DIFF} "
        "(log it with actor_rollout_ref.rollout.calculate_log_probs=true)\n"
    )
    short = tp2_run(tmp_path / "short", 0.01, RISING[:9])
    assert main(["tp2", "--pair", "grpo", tp2, short, "--steps", "12"]) == 2
    assert "9 steps with a reward, fewer than the 10 the rule reads" in capsys.readouterr().err


UPDATE = (
    "(TaskRunner pid=7) INFO recipe.pc.pc_ray_trainer: update: pilot_commit, policy loss pc_reference (token-mean), "
    "64 rows a step in reference row order over 2 ranks, mini-batches of 12 rows (rollout_n), 6 a rank, a partial last "
    "mini-batch of 2 rows a rank\n"
)


def reference_rows(change=None, steps=6):
    rows = [
        {
            "actor/grad_norm": 1.5,
            names.PPO_MINI_BATCHES: 6,
            names.OPTIMIZER_STEPS: 6,
            names.PARTIAL_MINI_BATCH_WEIGHT: 1 / 3,
        }
        for _ in range(steps)
    ]
    for (step, key), value in (change or {}).items():
        rows[step - 1][key] = value
    return rows


def test_reference_passes_a_log_that_ran_the_authors_update(tmp_path, capsys):
    rows = [{"val-core/arith/acc/mean@4": 0.2}] + reference_rows()  # step 1 is a validation without an update
    run = write_run(tmp_path / "ref", rows, log="loading\n" + UPDATE)
    assert all(words in UPDATE for words in REFERENCE_UPDATE)
    assert main(["reference", run]) == 0
    assert capsys.readouterr().out == f"{run}: 6 steps read, pass\n"


@pytest.mark.parametrize(
    "change, log, problem",
    [
        ({(2, "actor/grad_norm"): None}, UPDATE, "actor/grad_norm is not finite at steps [2]"),
        ({(3, "actor/grad_norm"): math.inf}, UPDATE, "actor/grad_norm is not finite at steps [3]"),
        ({(1, names.OPTIMIZER_STEPS): 5}, UPDATE, "optimizer steps differ from PPO mini-batches at steps [1]"),
        (
            {(4, names.PARTIAL_MINI_BATCH_WEIGHT): 1.0},
            UPDATE,
            "no partial mini-batch weighted below 1 at steps [4]",
        ),
        ({}, UPDATE.replace("pc_reference", "vanilla"), "the update line lacks 'policy loss pc_reference'"),
        ({}, UPDATE.replace("reference row", "verl row"), "the update line lacks 'reference row order'"),
        ({}, "no such line\n", "no 'update:' line"),
        ({}, UPDATE.replace("recipe.pc.pc_ray_trainer: ", ""), "no 'update:' line"),  # not the trainer's line
    ],
    ids=[
        "null_grad_norm",
        "inf_grad_norm",
        "skipped_update",
        "no_partial",
        "vanilla_loss",
        "verl_order",
        "no_line",
        "other_line",
    ],
)
def test_reference_fails_on_each_broken_rule(tmp_path, capsys, change, log, problem):
    run = write_run(tmp_path / "ref", reference_rows(change), log=log)
    assert main(["reference", run]) == 1
    out = capsys.readouterr().out
    assert problem in out and out.endswith("6 steps read, fail\n")


def test_reference_fails_a_run_that_stopped_early(tmp_path, capsys):
    run = write_run(tmp_path / "ref", reference_rows(steps=2), log=UPDATE)
    assert main(["reference", run]) == 1
    assert f"fail: {run}: 2 steps trained, not 6" in capsys.readouterr().out
    assert main(["reference", run, "--steps", "2"]) == 0


SAMPLED, CUMULATIVE = names.ROLLOUTS_SAMPLED, names.CUMULATIVE_SAMPLED
TWO_NODES_LOG = """(TaskRunner pid=7) INFO recipe.pc.checkpointing: saved PC state at step 2: buffer 3, evicted 0
(TaskRunner pid=7) INFO recipe.pc.checkpointing: saved PC state at step 4: buffer 8, evicted 3
first: exit code 0
(TaskRunner pid=9) INFO recipe.pc.checkpointing: resumed PC state at step 4: buffer 8, evicted 3
(TaskRunner pid=9) INFO recipe.pc.checkpointing: saved PC state at step 6: buffer 5, evicted 3
resumed: exit code 0
"""


def two_nodes_run(folder, resumed_from=400, log=TWO_NODES_LOG, phases=("first", "resumed"), last_resumed=6):
    folder.mkdir()
    (folder / "log.txt").write_text(log)
    steps = {"first": range(1, 5), "resumed": range(5, last_resumed + 1)}
    for phase in phases:
        with open(folder / f"metrics_{phase}.jsonl", "w") as f:
            start = 0 if phase == "first" else resumed_from - 400
            if phase == "first":  # a validation before training: a step 0 that trains nothing
                f.write(json.dumps({"step": 0, "data": {"val-core/arith/acc/mean@4": 0.1}}) + "\n")
            for step in steps[phase]:
                data = {SAMPLED: 100, CUMULATIVE: start + 100 * step}
                f.write(json.dumps({"step": step, "data": data}) + "\n")
    return str(folder)


def test_resume_passes_a_run_that_resumed_its_whole_state(tmp_path, capsys):
    run = two_nodes_run(tmp_path / "two")
    assert main(["resume", run]) == 0
    assert capsys.readouterr().out == f"{run}: 6 steps read, pass\n"


@pytest.mark.parametrize(
    "change, problem",
    [
        (dict(resumed_from=0), "generated rollouts did not go on from step 4 (400): step 5 logged 100 in all"),
        (dict(phases=("first",)), "metrics_resumed.jsonl: no such file (the metrics did not reach the configured"),
        (
            dict(log=TWO_NODES_LOG.replace("saved PC state at step 4: buffer 8", "saved PC state at step 4: buffer 9")),
            "the state resumed at step 4 (buffer 8, evicted 3) is not the one saved (buffer 9, evicted 3)",
        ),
        (dict(log=TWO_NODES_LOG.replace("resumed PC state at step 4", "nothing")), "'resumed PC state' at steps []"),
        (
            dict(log=TWO_NODES_LOG.replace("resumed: exit code 0", "resumed: exit code 1")),
            "no 'resumed: exit code 0'",
        ),
        (dict(log=TWO_NODES_LOG.replace("at step 2", "at step 3")), "no 'saved PC state' line at step(s) 2"),
        (dict(last_resumed=5), "metrics_resumed.jsonl: training steps [5], not [5, 6]"),
    ],
    ids=[
        "counters_restarted",
        "metrics_elsewhere",
        "state_differs",
        "not_resumed",
        "failed_exit",
        "no_save_at_2",
        "resumed_stopped_early",
    ],
)
def test_resume_fails_on_each_broken_rule(tmp_path, capsys, change, problem):
    run = two_nodes_run(tmp_path / "two", **change)
    assert main(["resume", run]) == 1
    out = capsys.readouterr().out
    assert problem in out and out.endswith("steps read, fail\n"), out
