"""GRPO and DAPO baselines through the real fit() loop: same metric keys as Pilot-Commit, own semantics."""

from collections import Counter

import numpy as np
import pytest
from support import env_file_logger

from recipe.pc import metric_names as names
from recipe.pc.settings import PCConfigError
from recipe.pc.testing import N_COMMIT, B, G, build_trainer, fit_run, step_records

STEPS = 5


def run(tmp_path, tokenizer, method, extra=()):
    done = fit_run(
        tmp_path, tokenizer, [f"algorithm.rollout_allocation={method}", f"trainer.total_training_steps={STEPS}", *extra]
    )
    return done.trainer, done.steps


@pytest.fixture
def pc_keys(tmp_path, tokenizer):
    last = fit_run(tmp_path / "pc", tokenizer, [f"trainer.total_training_steps={STEPS}"]).steps[-1]
    return {k for k in last if k.split("/")[0] in ("rollout_stats", "filtering_stats", "training")}


def test_grpo_is_one_round_of_b_by_n_per_step(tmp_path, tokenizer, pc_keys):
    trainer, steps = run(tmp_path, tokenizer, "grpo", extra=[f"data.gen_batch_size={B}"])
    assert len(steps) == STEPS
    assert pc_keys <= set(steps[-1])
    for s in steps:
        assert s[names.ROUNDS] == 1
        assert s[names.ROLLOUTS_SAMPLED] == s[names.ROLLOUTS_TRAINED] == B * N_COMMIT
        assert s[names.ROLLOUTS_PILOT] == 0
    assert steps[-1][names.CUMULATIVE_SAMPLED] == STEPS * B * N_COMMIT
    assert any(s[names.ZERO_VARIANCE_GROUP_FRAC] > 0 for s in steps)  # GRPO trains the p=0 and p=1 prompts
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert all(set(Counter(c.uids).values()) == {N_COMMIT} and len(set(c.uids)) == B for c in updates)


def test_dapo_keeps_only_groups_with_spread_and_counts_every_round(tmp_path, tokenizer, pc_keys):
    trainer, steps = run(tmp_path, tokenizer, "dapo")
    assert len(steps) == STEPS
    assert pc_keys <= set(steps[-1])
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    for call in updates:
        uids, acc = np.asarray(call.uids), np.asarray(call.acc, dtype=float)
        assert len(set(call.uids)) == B
        for uid in set(call.uids):
            assert 0 < acc[uids == uid].mean() < 1  # zero-variance groups never trained
    generated = sum(c.num_rows for c in trainer.async_rollout_manager.calls)
    padding = sum(s[names.ROLLOUTS_PADDING] for s in steps)
    carried = steps[-1][names.CUMULATIVE_SAMPLED]
    assert carried + padding <= generated  # rounds of a batch dropped at an epoch end may be unlogged yet
    assert sum(s[names.ROUNDS] for s in steps) >= STEPS
    # every round generates G x n (a step may also carry the rollouts of a batch dropped at an epoch end)
    assert all(s[names.ROLLOUTS_SAMPLED] >= s[names.ROUNDS] * G * N_COMMIT for s in steps)
    assert all(s[names.ROLLOUTS_SAMPLED] % (G * N_COMMIT) == 0 for s in steps)
    assert sum(s[names.TOO_INCORRECT_COUNT] for s in steps) > 0  # the p=0 prompts


def test_grpo_refuses_a_generation_batch_it_would_waste(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    with pytest.raises(PCConfigError, match="gen_batch_size"):
        build_trainer(tmp_path, tokenizer, extra=["algorithm.rollout_allocation=grpo"])


@pytest.mark.parametrize("method", ["dapo", "pilot_commit"])
def test_with_carry_over_off_dapo_keeps_its_partial_batch_and_rounds_and_pilot_commit_drops_them(
    tmp_path, tokenizer, method
):
    """The authors' DAPO carried its partial batch and round count across an epoch end; their PC dropped both."""
    from recipe.pc.testing import read_metrics

    log = env_file_logger(tmp_path)
    # 40 prompts in rounds of 8, five rounds an epoch, of which only 8 vary: a step takes several rounds, and some
    # step is cut by an epoch end.
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        probs=[0.0] * 32 + [0.5] * 8,
        extra=[
            f"algorithm.rollout_allocation={method}",
            "algorithm.carry_over_epoch=false",
            "trainer.total_training_steps=12",
        ],
    )
    trainer.fit()
    ends = [r["data"] for r in read_metrics(log) if names.EXCLUSION_EPOCH in r["data"]]
    cut = [e for e in ends if e[names.CARRIED_PROMPTS] + e[names.DROPPED_PARTIAL_PROMPTS]]
    assert cut, "no epoch ended inside a step"
    if method == "dapo":
        assert all(e[names.DROPPED_PARTIAL_PROMPTS] == 0 for e in ends)
        assert sum(e[names.CARRIED_PROMPTS] for e in ends) > 0
    else:
        assert all(e[names.CARRIED_PROMPTS] == 0 for e in ends)
        assert sum(e[names.DROPPED_PARTIAL_PROMPTS] for e in ends) > 0
    # Either way every round is counted in some step, and each trained step has B prompts.
    steps = step_records(log)
    assert sum(s[names.ROUNDS] for s in steps) <= trainer.counters.gen_round
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert all(len(set(c.uids)) == B for c in updates)


@pytest.mark.parametrize("unit", ["round", "update"])
def test_dapo_total_training_steps_counts_rounds_or_updates(unit, tmp_path, tokenizer):
    budget = 7
    log = env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        # Rounds of B prompts: dropped zero-spread groups make most steps take several rounds.
        extra=[
            "algorithm.rollout_allocation=dapo",
            f"data.gen_batch_size={B}",
            f"algorithm.dapo_step_unit={unit}",
            f"trainer.total_training_steps={budget}",
        ],
    )
    trainer.fit()
    rounds = [s[names.ROUNDS] for s in step_records(log)]
    assert sum(rounds) == trainer.counters.gen_round
    if unit == "update":
        assert len(rounds) == budget
    else:
        # The run ends with the first step completed in or after round `budget`, as the reference's DAPO.
        assert sum(rounds) >= budget > sum(rounds[:-1])
        assert len(rounds) < budget
