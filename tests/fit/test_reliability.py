"""Resume, epoch boundaries, too-hard data and bad input, through the real fit() loop."""

import os
import re

import numpy as np
import pandas as pd
import pytest
from support import env_file_logger

from recipe.pc import metric_names as names
from recipe.pc.dataset import PilotCommitDataset
from recipe.pc.settings import PCConfigError, PCSettings
from recipe.pc.testing import (
    N_COMMIT,
    N_PILOT,
    B,
    G,
    assert_resumed_like,
    build_trainer,
    compose_pc_config,
    fit_run,
    read_metrics,
    resume_run,
    step_records,
)
from recipe.pc.testing.standins import write_prompt_parquet


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path, tokenizer):
    save = ["trainer.save_freq=3"]
    full = fit_run(tmp_path / "full", tokenizer, [*save, "trainer.total_training_steps=7"])
    fit_run(tmp_path / "cut", tokenizer, [*save, "trainer.total_training_steps=3"])
    assert os.path.exists(tmp_path / "cut" / "ckpt" / "global_step_3" / "pilot_commit_state.pt")
    # The same folder and command with more steps: verl's auto-resume from the latest checkpoint.
    resumed = fit_run(tmp_path / "cut", tokenizer, [*save, "trainer.total_training_steps=7"])
    # Same pilot draws and buffer commits, round by round; same training groups (uid, pilot step, correctness).
    assert_resumed_like(resumed, full, 3)
    keys = [
        names.CUMULATIVE_SAMPLED,
        names.TOTAL_SAMPLING_ROUNDS,
        names.EPOCH,
        names.BUFFER_SIZE,
        names.NUM_EVICTED_PROMPTS,
    ]
    assert [[s[k] for k in keys] for s in resumed.steps] == [[s[k] for k in keys] for s in full.steps[3:]]
    assert {s[names.EPOCH] for s in full.steps[3:]} != {full.steps[2][names.EPOCH]}  # crossed an epoch


@pytest.mark.parametrize("carry", [True, False])
def test_epoch_boundary_carry_or_flush_and_every_rollout_counted(tmp_path, tokenizer, carry):
    log = env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=[f"algorithm.carry_over_epoch={str(carry).lower()}"])
    trainer.fit()
    records = read_metrics(log)
    epochs = [r["data"] for r in records if names.EXCLUSION_EPOCH in r["data"]]
    assert epochs
    if carry:
        assert all(e[names.FLUSHED_BUFFER_ENTRIES] == 0 for e in epochs)
        assert any(e[names.CARRIED_BUFFER_ENTRIES] + e[names.CARRIED_PROMPTS] for e in epochs)
    else:
        assert all(e[names.CARRIED_BUFFER_ENTRIES] == 0 for e in epochs)
        assert any(e[names.FLUSHED_BUFFER_ENTRIES] + e[names.DROPPED_PARTIAL_PROMPTS] for e in epochs)
    steps = step_records(log)
    generated = sum(c.num_rows for c in trainer.async_rollout_manager.calls)
    padding = sum(s[names.ROLLOUTS_PADDING] for s in steps)
    assert steps[-1][names.CUMULATIVE_SAMPLED] + padding == generated
    # ... and every generation call as a round, including those of a partial batch dropped at an epoch end
    assert sum(s[names.ROUNDS] for s in steps) == len(trainer.async_rollout_manager.calls)
    for call in (c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"):
        ids = {uid.split(":")[1] for uid in call.uids}
        assert len(ids) == B  # never the same prompt twice in a batch, even across the boundary


def test_too_hard_data_trains_on_an_unfilled_batch(tmp_path, tokenizer):
    log = env_file_logger(tmp_path)
    probs = [0.0] * 32 + [0.5] * 8
    trainer = build_trainer(
        tmp_path, tokenizer, probs=probs, extra=["algorithm.max_num_gen_batches=2", "trainer.total_training_steps=4"]
    )
    trainer.fit()
    steps = step_records(log)
    assert len(steps) == 4
    unit = 2  # 2 prompts x 8 rows = one mini-batch of 4 x rollout.n(4) rows over 2 ranks
    unfilled = [s for s in steps if s[names.UNFILLED_BATCH]]
    assert unfilled
    for s in unfilled:
        assert s[names.PROMPTS_IN_BATCH] % unit == 0 and 0 < s[names.PROMPTS_IN_BATCH] < B
        assert s[names.ROLLOUTS_TRAINED] == s[names.PROMPTS_IN_BATCH] * (N_PILOT + N_COMMIT)
    trained = [c.num_rows for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert all(rows % 16 == 0 for rows in trained)
    # The run's trained-rollout counter adds what each step trained, an unfilled batch's smaller count included.
    assert [s[names.CUMULATIVE_TRAINED] for s in steps] == np.cumsum(trained).tolist()


def test_min_train_prompts_above_what_is_collected_keeps_generating(tmp_path, tokenizer):
    log = env_file_logger(tmp_path)
    probs = [0.0] * 32 + [0.5] * 8
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        probs=probs,
        extra=[
            "algorithm.max_num_gen_batches=2",
            f"algorithm.min_train_prompts={B}",
            "trainer.total_training_steps=2",
        ],
    )
    trainer.fit()
    steps = step_records(log)
    assert all(s[names.PROMPTS_IN_BATCH] == B and s[names.UNFILLED_BATCH] == 0 for s in steps)
    assert max(s[names.ROUNDS] for s in steps) > 2


def test_eviction_emptying_the_data_finishes_with_a_final_checkpoint(tmp_path, tokenizer, caplog):
    log = env_file_logger(tmp_path)
    probs = [1.0] * 32 + [0.5] * 8
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        probs=probs,
        extra=[
            "algorithm.exclude_threshold_upper=0.5",
            "trainer.total_training_steps=100",
            "trainer.total_epochs=50",
            "trainer.save_freq=1000",
        ],
    )
    with caplog.at_level("WARNING"):
        trainer.fit()
    steps = step_records(log)
    assert 0 < len(steps) < 100
    assert len(trainer.train_dataset) < G
    assert "every other prompt is solved" in caplog.text
    with open(tmp_path / "ckpt" / "latest_checkpointed_iteration.txt") as f:
        assert int(f.read()) == len(steps)


def test_non_binary_metric_bands_the_mean_and_never_trains_flat_groups(tmp_path, tokenizer):
    """Catches: a flat group whose mean lies in the band trained anyway (the old test's seq_reward was +-1)."""
    log = env_file_logger(tmp_path)
    flat = set(range(8))

    def graded_reward(data_source, solution_str, ground_truth, extra_info):
        # Prompts 0-7 always score 0.5 (in the band, no spread); the others score in quarters by length.
        partial = 0.5 if extra_info["index"] in flat else (len(solution_str) % 5) / 4
        return {"score": partial, "acc": partial > 0.5, "partial": partial}

    trainer = build_trainer(
        tmp_path,
        tokenizer,
        reward_fn=graded_reward,
        extra=["algorithm.agg_metric=partial", "trainer.total_training_steps=3"],
    )
    trainer.fit()
    steps = step_records(log)
    assert len(steps) == 3
    piloted = {int(p) for c in trainer.async_rollout_manager.calls for p in c.prompt_ids}
    assert len(flat & piloted) >= 4  # flat prompts were piloted, their mean 0.5 in the band
    for call in (c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"):
        ids, scores = np.asarray(call.prompt_ids), call.scores.numpy()
        assert not flat & set(ids.tolist())
        assert len(np.unique(scores)) > 2  # the metric really is non-binary
        assert all(scores[ids == pid].std() > 0 for pid in np.unique(ids))
    assert all(s[names.ZERO_VARIANCE_GROUP_FRAC] == 0.0 for s in steps)


def test_reward_function_that_raises_is_reported_with_its_round_and_prompts(tmp_path, tokenizer):
    env_file_logger(tmp_path)

    def flaky_reward(data_source, solution_str, ground_truth, extra_info):
        if extra_info["index"] == 5:
            raise ZeroDivisionError("bad row")
        return {"score": 1.0, "acc": True, "pred": ground_truth}

    trainer = build_trainer(tmp_path, tokenizer, reward_fn=flaky_reward, extra=["data.shuffle=false"])
    with pytest.raises(RuntimeError, match=r"round 1 \(step 1\) for prompt ids \[0, 1, 2, 3, 4, 5") as info:
        trainer.fit()
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_duplicate_prompt_ids_in_train_data_are_named(tmp_path, tokenizer):
    env_file_logger(tmp_path)

    def duplicate(frame):
        frame.at[3, "extra_info"] = {"index": 7, "success_prob": 0.5}

    with pytest.raises(ValueError, match=r"duplicate extra_info.index values \[7\]"):
        build_trainer(tmp_path, tokenizer, edit_rows=duplicate)


def test_duplicate_prompt_ids_in_a_generation_batch_are_named(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer)
    batch = next(iter(trainer.train_dataloader))
    batch["index"] = np.array([3, 3] + list(batch["index"][2:]), dtype=object)
    with pytest.raises(ValueError, match=r"prompt ids \[3\] more than once"):
        trainer._to_prompts(batch)


def test_rows_with_a_bad_ground_truth_load_and_a_file_without_the_field_is_named(tmp_path, tokenizer):
    """Such a row is graded (the start-up checks warn about it); a file without the field would crash verl's reward
    loop, which reads reward_model["ground_truth"] from every row."""
    path = write_prompt_parquet(str(tmp_path / "train.parquet"), [0.5] * 4, first_id=10)
    frame = pd.read_parquet(path)
    frame.at[2, "reward_model"] = {"ground_truth": None, "style": "rule"}
    frame.at[3, "reward_model"] = {"ground_truth": "  ", "style": "rule"}
    frame.to_parquet(path)
    cfg = compose_pc_config([f"data.train_files={path}", "data.filter_overlong_prompts=False"])
    loaded = PilotCommitDataset(data_files=path, tokenizer=tokenizer, config=cfg.data)
    assert [loaded[i]["reward_model"]["ground_truth"] for i in (2, 3)] == [None, "  "]
    frame["reward_model"] = [{"style": "rule"}] * 4
    frame.to_parquet(path)
    with pytest.raises(ValueError, match="reward_model has no ground_truth field"):
        PilotCommitDataset(data_files=path, tokenizer=tokenizer, config=cfg.data)


def test_train_data_smaller_than_a_generation_batch_is_refused(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    with pytest.raises(PCConfigError, match="fewer than one generation batch"):
        build_trainer(tmp_path, tokenizer, probs=[0.5] * (G - 1))


def test_rounds_that_cannot_fill_a_batch_are_refused():
    cfg = compose_pc_config(["data.train_batch_size=64", "data.gen_batch_size=16", "algorithm.max_num_gen_batches=3"])
    with pytest.raises(PCConfigError, match="cannot supply data.train_batch_size=64"):
        PCSettings.from_config(cfg)
    cfg = compose_pc_config(["algorithm.min_train_prompts=0"])
    with pytest.raises(PCConfigError, match="min_train_prompts"):
        PCSettings.from_config(cfg)


def test_resuming_from_a_checkpoint_without_pc_state_is_refused(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    build_trainer(tmp_path, tokenizer, extra=["trainer.save_freq=2", "trainer.total_training_steps=2"]).fit()
    os.remove(tmp_path / "ckpt" / "global_step_2" / "pilot_commit_state.pt")
    resumed = build_trainer(tmp_path, tokenizer, extra=["trainer.total_training_steps=4"])
    with pytest.raises(FileNotFoundError, match="resume_mode=disable"):
        resumed.fit()


def test_a_prompt_committed_in_a_round_is_not_queued_again_by_its_own_new_pilot(tmp_path, tokenizer):
    from verl.utils.dataset.rl_dataset import collate_fn

    from recipe.pc.step import StepState

    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, probs=[0.5] * 40, extra=["data.shuffle=false"])
    trainer.checkpoint_manager.update_weights(0)
    trainer.global_steps = 1
    data = trainer.train_dataset
    step = StepState()
    trainer._run_round(trainer._to_prompts(collate_fn([data[i] for i in range(G)])), step)
    entry = trainer.allocator.buffer.entries()[0]
    trainer.allocator.buffer.load_state_dict({"entries": [entry], "next_order": 1})  # the only prompt to commit
    # As after an epoch boundary: the next round pilots the buffered prompt again while committing it.
    again = collate_fn([data[entry.prompt_id]] + [data[i] for i in range(G, 2 * G - 1)])
    trainer._run_round(trainer._to_prompts(again), step)
    assert step.committed_ids == {entry.prompt_id}
    assert entry.prompt_id not in trainer.allocator.buffer


@pytest.mark.slow  # a resume at each of six steps, twice
@pytest.mark.parametrize("carry", [True, False])
def test_resume_from_every_step_across_an_epoch_boundary_with_evictions(tmp_path, tokenizer, carry, caplog):
    """Catches: any PC state (eviction set, buffer, counters, epoch, dataloader position) not restored."""
    caplog.set_level("INFO", logger="recipe.pc")
    steps = 7
    extra = ["trainer.save_freq=1", f"algorithm.carry_over_epoch={str(carry).lower()}"]
    extra.append(f"trainer.total_training_steps={steps}")
    keys = [
        names.CUMULATIVE_SAMPLED,
        names.CUMULATIVE_TRAINED,
        names.TOTAL_SAMPLING_ROUNDS,
        names.TOTAL_CONSUMED_PROMPTS,
        names.EPOCH,
        names.BUFFER_SIZE,
        names.NUM_EVICTED_PROMPTS,
    ]
    full = fit_run(tmp_path / "full", tokenizer, extra)
    saved = dict(re.findall(r"saved PC state at step (\d+): (.*)", caplog.text))
    evicted_at = [s[names.NUM_EVICTED_PROMPTS] for s in full.steps]
    assert evicted_at[0] == 0 < evicted_at[-1], "the run must cross an epoch boundary that evicts prompts"
    for cut in range(1, steps):
        checkpoint = tmp_path / "full" / "ckpt" / f"global_step_{cut}"
        resumed = resume_run(tmp_path / f"resume_{cut}", tokenizer, extra, checkpoint)
        assert_resumed_like(resumed, full, cut)
        got = [[s[k] for k in keys] for s in resumed.steps]
        assert got == [[s[k] for k in keys] for s in full.steps[cut:]], f"counters differ after step {cut}"
        assert resumed.trainer.train_dataset.evicted_ids == full.trainer.train_dataset.evicted_ids
        assert resumed.trainer._pc_state_summary() == full.trainer._pc_state_summary()
        # The console line at the resume repeats the one at the save (a GPU log is read for this).
        resumed_line = re.findall(rf"resumed PC state at step {cut}: (.*)", caplog.text)
        assert resumed_line == [saved[str(cut)]], cut


def test_a_step_that_committed_nothing_counts_its_rounds_across_an_epoch_end(tmp_path, tokenizer):
    """carry_over_epoch=false drops a partial batch; with nothing committed there is none, and the step's rounds
    before the epoch end still count against max_num_gen_batches (the authors' counter kept counting there)."""
    env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        probs=[0.0] * 2 * G,  # two rounds an epoch, and no pilot ever passes
        extra=[
            "algorithm.carry_over_epoch=false",
            "algorithm.max_num_gen_batches=3",
            "algorithm.raise_on_unfilled_batch=true",
        ],
    )
    with pytest.raises(RuntimeError, match="step 1: 3 generation rounds"):
        trainer.fit()
    assert trainer.counters.epoch == 1  # the third round was the second epoch's first


def test_rounds_of_a_partial_batch_dropped_at_an_epoch_end_are_still_logged(tmp_path, tokenizer):
    """With carry_over_epoch=false a step's rounds before the boundary are dropped with its batch, not forgotten."""
    log = env_file_logger(tmp_path)
    probs = [0.0] * 32 + [0.5] * 8  # few prompts pass, so a step's rounds run across the epoch boundary
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        probs=probs,
        extra=["algorithm.carry_over_epoch=false", "algorithm.max_num_gen_batches=0", "trainer.total_training_steps=4"],
    )
    trainer.fit()
    records = read_metrics(log)
    dropped = [r["data"][names.DROPPED_PARTIAL_PROMPTS] for r in records if names.EXCLUSION_EPOCH in r["data"]]
    assert any(dropped)  # the scenario happened
    steps = step_records(log)
    # The data runs out inside the last step: its rounds belong to no logged step.
    logged = [c for c in trainer.async_rollout_manager.calls if c.global_steps <= steps[-1][names.GLOBAL_STEP]]
    assert sum(s[names.ROUNDS] for s in steps) == len(logged)
