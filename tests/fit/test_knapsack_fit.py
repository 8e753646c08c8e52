"""``algorithm.rollout_allocation=knapsack`` through the real fit() on the stand-ins: groups of different sizes train
as whole groups, every full step spends and trains what Pilot-Commit's does, an edge prompt's commit trains with its
pilot, and a resumed run does what the uninterrupted one did."""

import dataclasses
from collections import Counter

import numpy as np
import pytest
import torch
from verl import DataProto

from recipe.pc import metric_names as names
from recipe.pc.step import StepState
from recipe.pc.testing import N_COMMIT, N_PILOT, B, assert_resumed_like, build_trainer, fit_run, resume_run

STEPS = 5
KNAPSACK = [
    "algorithm.rollout_allocation=knapsack",
    "algorithm.knapsack.unit=2",
    "algorithm.knapsack.min_commit=2",
    "algorithm.knapsack.max_commit=16",
    # A prior of two successes and two failures: an all-wrong pilot of 4 may be worth a large commit (with the
    # uniform prior, its value stays below every band prompt's but a 3-of-4 one's).
    "algorithm.knapsack.prior_alpha=2",
    "algorithm.knapsack.prior_beta=2",
    f"algorithm.min_train_prompts={B}",
    f"trainer.total_training_steps={STEPS}",
]


def test_groups_of_different_sizes_train_as_pilot_commit_steps_do_and_resume_like_an_uninterrupted_run(
    tmp_path, tokenizer
):
    extra = [*KNAPSACK, "trainer.save_freq=3"]
    run = fit_run(tmp_path / "full", tokenizer, extra)
    updates = [c for c in run.trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert len(updates) == len(run.steps) == STEPS
    sizes = Counter()
    edge_groups = 0
    for call in updates:
        uids = np.asarray(call.uids)
        groups = Counter(uids.tolist())
        assert len(groups) == B and len(uids) == B * (N_PILOT + N_COMMIT)  # Pilot-Commit's rows, unequal groups
        sizes.update(groups.values())
        acc, pilot = np.asarray(call.acc, dtype=float), np.asarray(call.is_pilot, dtype=bool)
        for uid, size in groups.items():
            rows = uids == uid
            assert pilot[rows].sum() == N_PILOT and len(np.unique(np.asarray(call.prompt_ids)[rows])) == 1
            pilot_agrees = len(np.unique(acc[rows & pilot])) == 1
            edge_groups += pilot_agrees and len(np.unique(acc[rows])) == 2 and size > N_PILOT + N_COMMIT
    assert len(sizes) > 1 and set(sizes) <= {N_PILOT + c for c in range(2, 17, 2)}
    assert edge_groups > 0  # an edge prompt's large commit disagreed: it trained as one group with its pilot
    for step, call in zip(run.steps, updates, strict=True):
        assert step[names.ROLLOUTS_COMMIT] == B * N_COMMIT and step[names.PROMPTS_IN_BATCH] == B
        assert step[names.KNAPSACK_VALUE] >= step[names.KNAPSACK_UNIFORM_VALUE] - 1e-12
        # The logged commit sizes are the trained groups' commit rows.
        commits = np.array(sorted(Counter(call.uids).values())) - N_PILOT
        logged = [step[f"{names.KNAPSACK_COMMIT_SIZE}/{stat}"] for stat in ("count", "min", "max", "mean")]
        assert logged == [len(commits), commits.min(), commits.max(), pytest.approx(commits.mean())]
    # The rollout counters are exact: every generated row is counted once, as a pilot or a commit.
    sampled = [s[names.ROLLOUTS_SAMPLED] for s in run.steps]
    assert sampled == [s[names.ROLLOUTS_PILOT] + s[names.ROLLOUTS_COMMIT] for s in run.steps]
    assert [s[names.CUMULATIVE_SAMPLED] for s in run.steps] == np.cumsum(sampled).tolist()
    padding = sum(s[names.ROLLOUTS_PADDING] for s in run.steps)
    generated = [c for c in run.trainer.async_rollout_manager.calls if not c.validate]
    assert run.steps[-1][names.CUMULATIVE_SAMPLED] + padding == sum(c.num_rows for c in generated)
    trained = [s[names.ROLLOUTS_TRAINED] for s in run.steps]
    assert trained == [len(c.uids) for c in updates]
    assert [s[names.CUMULATIVE_TRAINED] for s in run.steps] == np.cumsum(trained).tolist()
    assert sum(s[names.KNAPSACK_EDGE_COMMITTED] for s in run.steps) > 0

    # Resumed mid-run, it generates and trains what the uninterrupted run did (the buffer, the edges, the RNG).
    cut = 3
    checkpoint = tmp_path / "full" / "ckpt" / f"global_step_{cut}"
    resumed = resume_run(tmp_path / f"resume_{cut}", tokenizer, extra, checkpoint)
    assert_resumed_like(resumed, run, cut)
    assert resumed.trainer._pc_state_summary() == run.trainer._pc_state_summary()


def test_a_full_step_whose_rows_are_not_the_checked_arithmetic_is_refused(tmp_path, tokenizer, monkeypatch):
    """The start-up checks split data.train_batch_size x the mean group size into mini-batches: a full step of other
    rows stops before the update, however its groups are sized."""
    from recipe.pc.allocators import knapsack as module

    sized_right = module.size_commits

    def one_unit_short(*args, **kwargs):
        sized = sized_right(*args, **kwargs)
        sizes = sized.sizes.copy()
        sizes[np.argmax(sizes)] -= 2  # still a size the range allows
        return dataclasses.replace(sized, sizes=sizes)

    monkeypatch.setattr(module, "size_commits", one_unit_short)
    with pytest.raises(RuntimeError, match=f"4 groups of sizes .* rows\\); expected at most {B} groups of 6 to 20"):
        fit_run(tmp_path, tokenizer, [*KNAPSACK, "trainer.total_training_steps=1"])


def test_a_step_counts_its_trained_prompts_by_their_groups_not_by_rows_over_a_group_size(tmp_path, tokenizer):
    """Three groups of 6, 6 and 20 rows are three trained prompts, though their 32 rows are four groups of the
    configured size (4 pilots + 4 commits)."""
    trainer = build_trainer(tmp_path, tokenizer, extra=KNAPSACK)
    uids = np.repeat(np.array(["1:0", "1:1", "2:5"], dtype=object), [6, 6, 20])
    batch = DataProto.from_dict(tensors={"x": torch.zeros(len(uids), 1)}, non_tensors={"uid": uids})
    metrics = trainer._pc_step_metrics(StepState(), batch)
    assert metrics[names.PROMPTS_IN_BATCH] == 3 and metrics[names.ROLLOUTS_TRAINED] == 32
    assert metrics[names.UNFILLED_BATCH] == 1
