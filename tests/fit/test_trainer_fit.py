"""The real RayPCTrainer.fit() on CPU, with stand-ins only for the rollout manager and actor workers."""

import time
from collections import Counter

import numpy as np
import pytest
from support import env_file_logger

from recipe.pc import metric_names as names
from recipe.pc.testing import (
    ALWAYS_SOLVED,
    MAX_OFF,
    N_COMMIT,
    N_PILOT,
    PROBS,
    B,
    G,
    build_trainer,
    read_metrics,
    step_records,
)
from recipe.pc.testing.standins import make_tokenizer


def pilot_ids(call):
    """Prompt ids of a generation call's pilot part (the first G * N_PILOT rows)."""
    return call.prompt_ids[: G * N_PILOT : N_PILOT]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One run read by several tests (none changes it)."""
    tmp_path = tmp_path_factory.mktemp("finished_run")
    log = env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, make_tokenizer())
    ages_after_flush = []
    flush = trainer.allocator.buffer.flush_stale

    def checked_flush(step, max_off):
        dropped = flush(step, max_off)
        ages_after_flush.append(trainer.allocator.buffer.ages(step))
        return dropped

    trainer.allocator.buffer.flush_stale = checked_flush
    trainer.fit()
    return trainer, step_records(log), read_metrics(log), ages_after_flush


def test_every_step_trains_b_groups_of_pilot_plus_commit(finished_run):
    trainer, steps, _, _ = finished_run
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert len(updates) == 9 == len(steps)
    for step, call in enumerate(updates, start=1):
        groups = Counter(call.uids)
        assert len(groups) == B
        assert set(groups.values()) == {N_PILOT + N_COMMIT}
        assert call.mini_batch_rows == 4 * N_COMMIT  # reference mini-batch arithmetic: ppo_mini_batch_size x n
        steps_of = np.asarray(call.rollout_steps)
        pilot = np.asarray(call.is_pilot, dtype=bool)
        for uid in groups:
            rows = np.asarray(call.uids) == uid
            assert pilot[rows].sum() == N_PILOT
            assert (steps_of[rows & ~pilot] == step).all()  # commits are fresh
            pilot_step = steps_of[rows & pilot]
            assert len(set(pilot_step)) == 1  # a group's reused pilots come from one pilot round
            assert step - MAX_OFF - 1 <= pilot_step[0] <= step  # within the staleness bound


def test_old_log_probs_recomputed_for_every_trained_row(finished_run):
    trainer, _, _, _ = finished_run
    calls = trainer.actor_rollout_wg.calls
    kinds = [c.kind for c in calls]
    assert kinds == ["compute_log_prob", "update_actor"] * 9
    for recompute, update in zip(calls[::2], calls[1::2], strict=True):
        assert sorted(recompute.uids) == sorted(update.uids)


def test_one_generation_call_per_round_and_counters_add_up(finished_run):
    trainer, steps, _, _ = finished_run
    gen_calls = trainer.async_rollout_manager.calls
    assert len(gen_calls) == trainer.counters.gen_round
    assert trainer.counters.total_consumed_prompts == G * len(gen_calls)
    for call in gen_calls:
        assert call.num_rows % 6 == 0  # padded to lcm(agent workers 3, dp 2)
    padding = sum(s[names.ROLLOUTS_PADDING] for s in steps)
    for s in steps:
        assert s[names.ROLLOUTS_SAMPLED] == (s[names.ROLLOUTS_PILOT] + s[names.ROLLOUTS_COMMIT])
        assert s[names.ROLLOUTS_TRAINED] == B * (N_PILOT + N_COMMIT)
        assert s[names.PROMPTS_IN_BATCH] == B
        assert s[names.ROLLOUTS_COMMIT] == N_COMMIT * B
        assert s[names.ZERO_VARIANCE_GROUP_FRAC] == 0.0  # every committed group passed the band
    cumulative = [s[names.CUMULATIVE_SAMPLED] for s in steps]
    assert cumulative == list(np.cumsum([s[names.ROLLOUTS_SAMPLED] for s in steps]))
    generated = sum(c.num_rows for c in gen_calls)
    assert cumulative[-1] + padding == generated
    rounds = sum(s[names.ROUNDS] for s in steps)
    assert rounds <= len(gen_calls)  # rounds of partial batches dropped at epoch ends are not a step's
    # Every step names the configured last step (a log that stops below it was cut short) and when it was logged.
    assert {s[names.TOTAL_TRAINING_STEPS] for s in steps} == {trainer.total_training_steps} == {len(steps)}
    clock = [s[names.UNIX_TIME] for s in steps]
    assert clock == sorted(clock) and time.time() - 600 < clock[0] <= clock[-1] <= time.time()


def test_solved_prompts_are_evicted_and_never_return(finished_run):
    trainer, _, records, _ = finished_run
    epochs = [r["data"] for r in records if names.EXCLUSION_EPOCH in r.get("data", {})]
    assert len(epochs) >= 1, "the run must cross an epoch boundary"
    first_epoch_rounds = len(PROBS) // G
    piloted = Counter()
    for call in trainer.async_rollout_manager.calls:
        piloted.update(pilot_ids(call).tolist())
    for pid in ALWAYS_SOLVED:
        assert piloted[pid] == 1  # piloted once in epoch 1, evicted, never seen again
    later = [pid for call in trainer.async_rollout_manager.calls[first_epoch_rounds:] for pid in call.prompt_ids]
    assert not ALWAYS_SOLVED & set(int(p) for p in later)
    assert ALWAYS_SOLVED <= trainer.train_dataset.evicted_ids
    assert len(trainer.train_dataset) <= len(PROBS) - len(ALWAYS_SOLVED)


def test_buffer_never_holds_entries_older_than_the_bound(finished_run):
    _, steps, _, ages = finished_run
    assert ages and all((a <= MAX_OFF).all() for a in ages)
    assert max(s["off_policy_stats/local/max"] for s in steps if s["off_policy_stats/local/count"]) <= MAX_OFF + 1


@pytest.mark.slow  # two whole runs
def test_run_is_reproducible_from_its_seeds(tmp_path, tokenizer):
    runs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        env_file_logger(tmp_path / name)
        trainer = build_trainer(tmp_path / name, tokenizer)
        trainer.fit()
        runs.append(
            [c.prompt_ids.tolist() for c in trainer.async_rollout_manager.calls]
            + [sorted(c.uids) for c in trainer.actor_rollout_wg.calls]
        )
    assert runs[0] == runs[1]


def test_dataloader_workers_see_evictions(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=["data.dataloader_num_workers=2"])
    trainer.fit()
    later = trainer.async_rollout_manager.calls[len(PROBS) // G :]
    assert later
    assert not ALWAYS_SOLVED & {int(p) for call in later for p in call.prompt_ids}


def test_generation_batch_padding_when_sizes_do_not_divide(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=["trainer.total_training_steps=3"], agent_workers=5)
    trainer.fit()
    assert all(c.num_rows % 10 == 0 for c in trainer.async_rollout_manager.calls)
    assert len([c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]) == 3


def test_too_hard_data_stops_with_a_clear_error(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        probs=[0.0] * 40,
        extra=["algorithm.max_num_gen_batches=3", "algorithm.raise_on_unfilled_batch=true"],
    )
    with pytest.raises(RuntimeError, match="max_num_gen_batches=3"):
        trainer.fit()
    assert len(trainer.async_rollout_manager.calls) == 3


def test_mini_batch_that_does_not_divide_is_refused_before_generation(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=["actor_rollout_ref.actor.ppo_mini_batch_size=3"])
    with pytest.raises(ValueError, match="ppo_mini_batch_size=3"):
        trainer.fit()
    assert trainer.async_rollout_manager.calls == []


def test_validation_runs_between_steps_with_replicas_awake(tmp_path, tokenizer):
    log = env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        extra=["trainer.val_before_train=True", "trainer.test_freq=2", "trainer.total_training_steps=5"],
    )
    trainer.fit()
    validated = [r.get("step") for r in read_metrics(log) if "val-core/toy_arithmetic/acc/mean@1" in r.get("data", {})]
    assert validated == [0, 2, 4, 5]


def test_running_out_of_epochs_validates_the_final_policy(tmp_path, tokenizer):
    log = env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        extra=["trainer.total_epochs=1", "trainer.total_training_steps=100", "trainer.test_freq=50"],
    )
    trainer.fit()
    steps = step_records(log)
    assert 1 <= len(steps) < 100
    final = [r for r in read_metrics(log) if "val-core/toy_arithmetic/acc/mean@1" in r.get("data", {})]
    assert [r["step"] for r in final] == [len(steps)]


def test_n_effective_reuses_a_balanced_subset_of_each_pilot_group(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        extra=[
            "algorithm.exploration.n_effective=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=3",
            "trainer.total_training_steps=5",
        ],
    )
    trainer.fit()
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert len(updates) == 5
    for call in updates:
        uids, pilot, acc = np.asarray(call.uids), np.asarray(call.is_pilot, bool), np.asarray(call.acc, bool)
        assert set(Counter(call.uids).values()) == {2 + N_COMMIT}
        for uid in set(call.uids):
            reused = acc[(uids == uid) & pilot]
            assert len(reused) == 2 and reused.sum() == 1  # in-band groups hold both classes: one of each


def test_unknown_agg_metric_is_named(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=["algorithm.agg_metric=pass_at_1"])
    with pytest.raises(ValueError, match="agg_metric='pass_at_1'.*acc"):
        trainer.fit()


def test_mini_batch_unit_group_counts_whole_training_groups(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        extra=[
            "algorithm.mini_batch_unit=group",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "trainer.total_training_steps=2",
        ],
    )
    trainer.fit()
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    assert [c.mini_batch_rows for c in updates] == [2 * (N_PILOT + N_COMMIT)] * 2
    assert trainer.config.actor_rollout_ref.rollout.n == N_COMMIT  # restored after each update


def test_every_attribute_the_trainer_sets_is_declared_by_init(tmp_path, tokenizer):
    """Catches: an attribute first set in a later phase (a resume or a step would then meet a missing one)."""
    import ast
    import inspect

    from recipe.pc import checkpointing, generation, pc_ray_trainer, update

    assigned = {}
    for module in (pc_ray_trainer, generation, update, checkpointing):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in (t for top in targets if top is not None for t in ast.walk(top)):  # tuples unpacked too
                if isinstance(target, ast.Attribute) and getattr(target.value, "id", None) == "self":
                    assigned.setdefault(target.attr, module.__name__)
    assert {"global_steps", "counters", "_last_saved_step"} <= assigned.keys()  # the scan sees every module

    class Recording(pc_ray_trainer.RayPCTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            Recording.declared = set(vars(self))  # before build_trainer attaches the stand-in workers

    build_trainer(tmp_path, tokenizer, trainer_cls=Recording)
    assert {name: where for name, where in assigned.items() if name not in Recording.declared} == {}
