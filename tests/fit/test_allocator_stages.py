"""Allocators behind one round loop, and the stages that compose with them."""

import dataclasses
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support import env_file_logger

from recipe.pc import metric_names as names
from recipe.pc.allocation import GroupStats, downsample_rows
from recipe.pc.allocators import ALLOCATORS
from recipe.pc.settings import PCConfigError
from recipe.pc.stages.skip import PromptSkipper, adapt, admit, skip_probability, update_streaks
from recipe.pc.testing import (
    ALWAYS_SOLVED,
    N_COMMIT,
    N_PILOT,
    B,
    G,
    assert_resumed_like,
    build_trainer,
    fit_run,
    resume_run,
    step_records,
)
from recipe.pc_tools.defaults import SKIP

STEPS = 4
N_GEN = 8  # algorithm.downsample.n in the fit tests: twice rollout.n


def test_every_method_has_an_allocator_module():
    expected = {"pilot_commit", "grpo", "dapo", "knapsack"}
    assert {cls.__module__.rsplit(".", 1)[1] for cls in ALLOCATORS.values()} == expected


# ------------------------------------------------------------------ down-sampling (PODS)
def test_downsample_keeps_the_most_balanced_subset_of_each_group():
    values = np.array([1, 1, 1, 0, 0, 1, 0, 0, 1, 1, 1, 1], dtype=float)  # groups of 4: 3 ones; 1 one; 4 ones
    rows = downsample_rows(values, np.array([0, 4, 8]), n=4, m=2, rng=np.random.default_rng(0))
    assert rows.shape == (6,)
    kept = values[rows].reshape(3, 2)
    assert kept[0].tolist() == [1, 0] and sorted(kept[1].tolist()) == [0, 1] and kept[2].tolist() == [1, 1]
    assert all(start <= r < start + 4 for start, pair in zip([0, 4, 8], rows.reshape(3, 2), strict=True) for r in pair)


def test_downsample_refuses_groups_past_the_rows():
    with pytest.raises(ValueError, match="exceed"):
        downsample_rows(np.zeros(6), np.array([0, 4]), n=4, m=2, rng=np.random.default_rng(0))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 1), min_size=6, max_size=6), min_size=1, max_size=5), st.integers(2, 6))
def test_downsample_keeps_spread_wherever_the_group_had_it(groups, m):
    values = np.array(groups, dtype=float).ravel()
    rows = downsample_rows(values, np.arange(len(groups)) * 6, n=6, m=m, rng=np.random.default_rng(1))
    kept = values[rows].reshape(len(groups), m)
    for full, sub in zip(np.array(groups), kept, strict=True):
        assert (sub.std() > 0) == (full.std() > 0)
        ones = int(full.sum())
        assert abs(int(sub.sum()) - m / 2) <= max(abs(min(ones, m) - m / 2), abs(max(0, m - (6 - ones)) - m / 2))


@pytest.mark.parametrize(
    ("override", "match"),
    [
        (f"algorithm.downsample.n={N_COMMIT - 1}", "algorithm.downsample.n=3 must be at least"),
        ("algorithm.downsample.n='lots'", "algorithm.downsample.n='lots'"),
        ("algorithm.exploration.screen_n=1", "algorithm.exploration.screen_n=1 must lie in"),
        (f"algorithm.exploration.screen_n={N_PILOT}", f"algorithm.exploration.screen_n={N_PILOT} must lie in"),
        ("algorithm.exploration.screen_n=2.5", "algorithm.exploration.screen_n=2.5"),
    ],
)
def test_bad_downsample_and_screen_keys_name_the_key(tmp_path, tokenizer, override, match):
    env_file_logger(tmp_path)
    with pytest.raises(PCConfigError, match=match):
        build_trainer(tmp_path, tokenizer, extra=[override])


def test_a_split_that_does_not_divide_says_the_group_counts_kept_rollouts(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        extra=[f"algorithm.downsample.n={N_GEN}", "actor_rollout_ref.actor.ppo_mini_batch_size=3"],
    )
    with pytest.raises(PCConfigError, match=f"keeps rollout.n={N_COMMIT} of the algorithm.downsample.n={N_GEN}"):
        trainer.fit()


def run(tmp_path, tokenizer, extra):
    done = fit_run(tmp_path, tokenizer, [f"trainer.total_training_steps={STEPS}", *extra])
    return done.trainer, done.steps


def generation_calls(trainer):
    return [c for c in trainer.async_rollout_manager.calls if not c.validate]


def generated_rows(trainer) -> int:
    return sum(c.num_rows for c in generation_calls(trainer))


def test_grpo_with_downsampling_trains_rollout_n_of_the_generated(tmp_path, tokenizer):
    trainer, steps = run(
        tmp_path,
        tokenizer,
        ["algorithm.rollout_allocation=grpo", f"data.gen_batch_size={B}", f"algorithm.downsample.n={N_GEN}"],
    )
    assert len(steps) == STEPS
    for s in steps:
        assert s[names.ROLLOUTS_SAMPLED] == B * N_GEN
        assert s[names.ROLLOUTS_TRAINED] == B * N_COMMIT
        assert s[names.ROLLOUTS_DOWNSAMPLED] == B * (N_GEN - N_COMMIT)
    padding = sum(s[names.ROLLOUTS_PADDING] for s in steps)
    assert steps[-1][names.CUMULATIVE_SAMPLED] + padding == generated_rows(trainer)
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert all(set(Counter(c.uids).values()) == {N_COMMIT} and len(set(c.uids)) == B for c in updates)
    # Max-variance subsets: a group that had both outcomes among its N_GEN trains a balanced N_COMMIT.
    gen_acc = {}  # uid -> the outcomes of its N_GEN rollouts (a GRPO uid is "<round>:<prompt id>")
    for round_index, call in enumerate(generation_calls(trainer), start=1):
        real = slice(0, B * N_GEN)  # rows past these are padding
        for pid, acc in zip(call.prompt_ids[real], call.correct[real], strict=True):
            gen_acc.setdefault(f"{round_index}:{pid}", []).append(float(acc))
    assert {len(v) for v in gen_acc.values()} == {N_GEN}
    for call in updates:
        uids, acc = np.asarray(call.uids), np.asarray(call.acc, dtype=float)
        for uid in set(call.uids):
            if 0 < np.mean(gen_acc[uid]) < 1:
                assert acc[uids == uid].sum() == N_COMMIT // 2 or min(sum(gen_acc[uid]), N_GEN - sum(gen_acc[uid])) < 2


def test_pilot_commit_with_downsampling_trains_pilot_plus_rollout_n(tmp_path, tokenizer):
    trainer, steps = run(tmp_path, tokenizer, [f"algorithm.downsample.n={N_GEN}"])
    assert len(steps) == STEPS
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert all(set(Counter(c.uids).values()) == {N_PILOT + N_COMMIT} and len(set(c.uids)) == B for c in updates)
    for s in steps:
        commits = s[names.ROLLOUTS_COMMIT]
        assert commits % N_GEN == 0
        assert s[names.ROLLOUTS_DOWNSAMPLED] == commits // N_GEN * (N_GEN - N_COMMIT)
    padding = sum(s[names.ROLLOUTS_PADDING] for s in steps)
    assert steps[-1][names.CUMULATIVE_SAMPLED] + padding == generated_rows(trainer)


# ------------------------------------------------------------------ history-based skipping (GRESO)
def stats_of(ids, means, stds, count=4):
    ids = np.asarray(ids)
    return GroupStats(
        prompt_ids=ids,
        mean=np.asarray(means, dtype=float),
        std=np.asarray(stds, dtype=float),
        count=np.full(len(ids), count),
        first_row=np.arange(len(ids)) * count,
    )


def test_admit_leaves_out_prompts_already_waiting_for_a_round():
    assert admit(np.array([3, 7]), np.array([1, 7, 3, 9])).tolist() == [0, 3]
    assert admit(np.array([], dtype=np.int64), np.array([5, 6])).tolist() == [0, 1]
    assert admit(np.array([5, 6], dtype=object), np.array([6, 5], dtype=object)).tolist() == []


def test_prompts_evicted_at_an_epoch_end_leave_the_pool_of_kept_prompts():
    from verl import DataProto

    from recipe.pc.stages.skip import SkippingFilter

    skipping = SkippingFilter(SKIP, gen_batch_size=8)
    skipping.pool = DataProto.from_dict(tensors={"x": torch.arange(4)}, non_tensors={"index": np.array([4, 8, 15, 16])})
    skipping.end_epoch({8, 16, 42})
    assert skipping.pool.non_tensor_batch["index"].tolist() == [4, 15]
    assert skipping.pool.batch["x"].tolist() == [0, 2]
    skipping.end_epoch({4, 8, 15, 16, 42})
    assert skipping.pool is None
    skipping.end_epoch({4})  # nothing waiting: nothing to do
    assert skipping.pool is None


def test_streaks_count_consecutive_zero_variance_groups_of_one_kind():
    streaks = {}
    assert update_streaks(streaks, stats_of([1, 2, 3], [1.0, 0.0, 0.5], [0, 0, 0.5])) == (1, 1)
    assert streaks == {1: 1, 2: -1}
    update_streaks(streaks, stats_of([1, 2], [1.0, 0.0], [0, 0]))
    assert streaks == {1: 2, 2: -2}
    update_streaks(streaks, stats_of([1, 2], [0.0, 0.5], [0, 0.5]))  # 1 turns hard, 2 shows spread
    assert streaks == {1: -1}
    update_streaks(streaks, stats_of([5], [1.0], [0.0], count=1))  # one rollout says nothing about spread
    assert 5 not in streaks


def test_skip_probability_follows_the_streak_and_keeps_a_floor():
    p = skip_probability(np.array([0, 1, 3, -2, 40]), p_easy=0.5, p_hard=0.8, floor=0.01)
    np.testing.assert_allclose(p, [0.0, 0.5, 1 - 0.125, 1 - 0.64, 0.99])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-30, 30), min_size=1, max_size=20), st.floats(0.05, 0.95), st.floats(0.001, 1.0))
def test_skip_probability_is_a_probability_below_one_minus_the_floor(streak, p, floor):
    probs = skip_probability(np.array(streak), p, p, floor)
    assert ((probs >= 0) & (probs <= 1 - floor + 1e-12)).all()
    assert (probs[np.array(streak) == 0] == 0).all()


def test_exploration_probabilities_move_towards_the_target_within_bounds():
    rule = dataclasses.replace(SKIP, p_step=0.1, p_min=0.2, p_max=0.6)
    assert adapt(0.5, observed_ratio=0.5, target_ratio=0.1, rule=rule) == pytest.approx(0.4)
    assert adapt(0.5, observed_ratio=0.0, target_ratio=0.1, rule=rule) == pytest.approx(0.6)
    assert adapt(0.6, observed_ratio=0.0, target_ratio=0.1, rule=rule) == pytest.approx(0.6)
    assert adapt(0.25, observed_ratio=0.9, target_ratio=0.1, rule=rule) == pytest.approx(0.2)


def test_the_first_epoch_only_gathers_history():
    skipper = PromptSkipper(dataclasses.replace(SKIP, p_step=0.1))
    skipper.observe([stats_of([1, 2], [1.0, 1.0], [0, 0])])
    skipper.end_step(epoch=0)
    assert skipper.p_easy == skipper.p_hard == 0.5
    skipper.observe([stats_of([1, 2], [1.0, 1.0], [0, 0])])
    metrics = skipper.end_step(epoch=1)
    assert skipper.p_easy == pytest.approx(0.4) and skipper.p_hard == pytest.approx(0.6)
    assert metrics[names.SKIP_P_EASY] == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("algorithm.skip.explore_floor=0", "algorithm.skip.explore_floor=0.0 must lie in"),
        ("algorithm.skip.p_init=0.99", "algorithm.skip.p_init=0.99"),
        ("algorithm.skip.p_step=-1", "algorithm.skip.p_step=-1.0"),
        ("algorithm.skip.target_zero_variance=2", "algorithm.skip.target_zero_variance=2.0"),
        ("algorithm.skip.enable=yes", "algorithm.skip.enable='yes'"),
    ],
)
def test_bad_skip_keys_name_the_key(tmp_path, tokenizer, override, match):
    env_file_logger(tmp_path)
    with pytest.raises(PCConfigError, match=match):
        build_trainer(tmp_path, tokenizer, extra=[override])


def record_skips(trainer):
    """(generation calls made so far, prompt ids skipped) for each skip decision of the run."""
    skipped = []
    decide = trainer.prompt_filter.skipper.keep_mask

    def recording(prompt_ids, rng):
        keep = decide(prompt_ids, rng)
        skipped.append((len(trainer.async_rollout_manager.calls), np.asarray(prompt_ids)[~keep].tolist()))
        return keep

    trainer.prompt_filter.skipper.keep_mask = recording
    return skipped


@pytest.mark.parametrize("method", ["grpo", "pilot_commit", "dapo"])
def test_skipping_keeps_batch_sizes_counts_every_rollout_and_brings_prompts_back(tmp_path, tokenizer, method):
    steps = 24
    log = env_file_logger(tmp_path)
    extra = [f"algorithm.rollout_allocation={method}", "algorithm.skip.enable=true", "algorithm.skip.p_init=0.3"]
    extra += [f"data.gen_batch_size={B}"] if method == "grpo" else []
    trainer = build_trainer(
        tmp_path, tokenizer, extra=[*extra, f"trainer.total_training_steps={steps}", "trainer.total_epochs=200"]
    )
    skips = record_skips(trainer)
    pool_checks = []
    drop_evicted = trainer.prompt_filter.end_epoch
    trainer.prompt_filter.end_epoch = lambda ids: (pool_checks.append(trainer.counters.epoch), drop_evicted(ids))
    trainer.fit()
    records = step_records(log)
    assert len(records) == steps
    assert pool_checks == list(range(trainer.counters.epoch))  # every epoch's end takes evicted prompts out of the pool
    padding = sum(s[names.ROLLOUTS_PADDING] for s in records)
    assert records[-1][names.CUMULATIVE_SAMPLED] + padding == generated_rows(trainer)
    skipped_total = sum(s[names.SKIPPED] for s in records)
    assert skipped_total == sum(len(ids) for _, ids in skips) > 0
    assert records[-1][names.SKIP_TOTAL] == skipped_total

    calls = generation_calls(trainer)
    per_round = trainer.pc.gen_batch_size
    first_part = N_PILOT if method == "pilot_commit" else N_COMMIT
    new_prompts = [len(set(c.prompt_ids[: per_round * first_part : first_part].tolist())) for c in calls]
    # Every round is full, of distinct prompts: skipped prompts are replaced from the dataloader, and kept prompts
    # short of a round at an epoch's end wait for the next epoch's (as one round of their own they starved steps).
    assert new_prompts == [per_round] * len(calls)
    # Skipped prompts come back: of those skipped in the first half of the run, many are generated later
    # (not all: a prompt that fails again grows its streak, and the run is only a few epochs long).
    half = len(calls) // 2
    early = [(at, pid) for at, ids in skips if at < half for pid in ids]
    came_back = [pid for at, pid in early if any(pid in c.prompt_ids for c in calls[at + 1 :])]
    assert early and len(came_back) >= len(early) // 3
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert all(len(set(c.uids)) == B for c in updates)


def test_running_out_of_epochs_while_skipping_says_how_many_epochs_and_skips_the_last_step_took(
    tmp_path, tokenizer, caplog
):
    # Batch 18's PC runs on 480 prompts: once nearly every prompt had a streak, a round needed many passes over
    # the data, and trainer.total_epochs (not the steps) ended the run. Here every prompt gets a long streak
    # after the first step of the third epoch (some prompts were skipped by then), so no round fills again.
    env_file_logger(tmp_path)
    epochs = 8
    extra = ["algorithm.skip.enable=true", "algorithm.skip.explore_floor=1e-9", "algorithm.skip.p_min=0.01"]
    trainer = build_trainer(
        tmp_path, tokenizer, extra=[*extra, "trainer.total_training_steps=50", f"trainer.total_epochs={epochs}"]
    )
    skips = record_skips(trainer)
    marks = []
    end_step = trainer.prompt_filter.skipper.end_step

    def hopeless_after_the_step(epoch):
        metrics = end_step(epoch)
        if epoch >= 2:
            trainer.prompt_filter.skipper.p_easy = trainer.prompt_filter.skipper.p_hard = 0.01
            trainer.prompt_filter.skipper.streaks = {i: -50 for i in range(len(trainer.train_dataset.dataframe))}
        marks.append((epoch, len(skips)))
        return metrics

    trainer.prompt_filter.skipper.end_step = hopeless_after_the_step
    with caplog.at_level("WARNING"):
        trainer.fit()
    epoch_of_last_step, seen = marks[-1]
    skipped_since = sum(len(ids) for _, ids in skips[seen:])
    assert trainer.counters.epoch == epochs and epoch_of_last_step == 2 and skipped_since > 0
    assert sum(len(ids) for _, ids in skips[:seen]) > 0  # the count is the last step's, not the run's
    assert (
        f"training data ran out at step {len(marks)} (trainer.total_epochs={epochs}, "
        "trainer.total_training_steps=50); with algorithm.skip.enable every pass over the" in caplog.text
    )
    assert (
        f"step {len(marks) + 1} was unfinished after {epochs - epoch_of_last_step} epochs and {skipped_since} "
        "skipped prompt draws; raise trainer.total_epochs" in caplog.text
    )


@pytest.mark.slow  # four resumed runs of a 12-step run, for each allocator
@pytest.mark.parametrize("method", ["pilot_commit", "grpo"])
def test_resume_restores_the_skip_history_and_the_pool_of_kept_prompts(tmp_path, tokenizer, method):
    """Catches: skip streaks, exploration probabilities or pooled prompts not saved, or not restored."""
    steps = 12
    extra = [
        f"algorithm.rollout_allocation={method}",
        "algorithm.skip.enable=true",
        "algorithm.skip.p_init=0.3",
        "trainer.save_freq=1",
        "trainer.total_epochs=40",
        f"trainer.total_training_steps={steps}",
        *([f"data.gen_batch_size={B}"] if method == "grpo" else ["data.gen_batch_size=6"]),
    ]
    full = fit_run(tmp_path / "full", tokenizer, extra)
    pooled = []
    for cut in range(2, steps, 3):
        checkpoint = tmp_path / "full" / "ckpt" / f"global_step_{cut}"
        pooled.append(torch.load(checkpoint / "pilot_commit_state.pt")["skip"]["pool"] is not None)
        resumed = resume_run(tmp_path / f"resume_{cut}", tokenizer, extra, checkpoint)
        assert_resumed_like(resumed, full, cut)
        assert resumed.trainer._pc_state_summary() == full.trainer._pc_state_summary()
        skipper = resumed.trainer.prompt_filter.skipper
        assert skipper.state_dict() == full.trainer.prompt_filter.skipper.state_dict()
    if method == "pilot_commit":  # rounds of 6 prompts: skipping leaves kept prompts pooled at some saves
        assert any(pooled)


# ------------------------------------------------------------------ screening pilot
SCREEN = 2


def test_screening_is_refused_for_the_baselines(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    with pytest.raises(PCConfigError, match="screen_n=2 screens pilots"):
        build_trainer(
            tmp_path, tokenizer, extra=["algorithm.rollout_allocation=dapo", f"algorithm.exploration.screen_n={SCREEN}"]
        )


def test_screened_prompts_get_exactly_the_rest_of_their_pilot_in_the_next_call(tmp_path, tokenizer):
    trainer, steps = run(tmp_path, tokenizer, [f"algorithm.exploration.screen_n={SCREEN}"])
    assert len(steps) == STEPS
    calls = generation_calls(trainer)
    rest = N_PILOT - SCREEN
    continued = 0
    for call, following in zip(calls[:-1], calls[1:], strict=True):
        screen_ids = call.prompt_ids[: G * SCREEN].reshape(G, SCREEN)[:, 0]
        outcomes = np.asarray(call.correct[: G * SCREEN], dtype=float).reshape(G, SCREEN)
        mixed = screen_ids[outcomes.min(axis=1) != outcomes.max(axis=1)]
        continued += len(mixed)
        block = following.prompt_ids[G * SCREEN : G * SCREEN + len(mixed) * rest]
        assert block.tolist() == np.repeat(mixed, rest).tolist()
        # ... and nothing else of theirs beyond the screen part (commits aside, which come from the buffer)
    assert continued > 0
    assert sum(s[names.SCREENED_OUT] for s in steps) > 0
    padding = sum(s[names.ROLLOUTS_PADDING] for s in steps)
    assert steps[-1][names.CUMULATIVE_SAMPLED] + padding == generated_rows(trainer)
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert all(set(Counter(c.uids).values()) == {N_PILOT + N_COMMIT} and len(set(c.uids)) == B for c in updates)
    # A screen that is all correct never evicts: the always-solved prompts stay in the data.
    assert not trainer.train_dataset.evicted_ids & ALWAYS_SOLVED


@pytest.mark.slow  # four resumed runs
def test_resume_restores_screens_waiting_across_a_step_boundary(tmp_path, tokenizer):
    steps = 8
    extra = [f"algorithm.exploration.screen_n={SCREEN}", "trainer.save_freq=1", f"trainer.total_training_steps={steps}"]
    full = fit_run(tmp_path / "full", tokenizer, extra)
    waiting = []
    for cut in range(1, steps, 2):
        checkpoint = tmp_path / "full" / "ckpt" / f"global_step_{cut}"
        waiting.append("screened" in torch.load(checkpoint / "pilot_commit_state.pt")["allocator"]["state"])
        resumed = resume_run(tmp_path / f"resume_{cut}", tokenizer, extra, checkpoint)
        assert_resumed_like(resumed, full, cut)
        assert resumed.trainer._pc_state_summary() == full.trainer._pc_state_summary()
    assert any(waiting)
