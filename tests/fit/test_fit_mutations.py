"""What the trainer hands verl, checked through the real fit() against independent recomputations.

Each test names the wrong trainer it catches.
"""

from collections import defaultdict

import numpy as np
import pytest
import torch
from support import env_file_logger

from recipe.pc import metric_names as names
from recipe.pc.testing import MAX_OFF, N_COMMIT, N_PILOT, PROBS, B, G, build_trainer, read_metrics, step_records

STEPS = 9
P_LOWER, P_UPPER = 0.125, 0.25  # pc_trainer.yaml's band


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from recipe.pc.testing.standins import make_tokenizer

    tmp_path = tmp_path_factory.mktemp("run")
    log = env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, make_tokenizer(), extra=[f"trainer.total_training_steps={STEPS}"])
    boundaries = []
    end_epoch = trainer._end_epoch

    def spy(step):  # at an epoch boundary: the step, its committed groups, the buffered ones
        committed = {u for seg in step.segments for u in np.asarray(seg.non_tensor["uid"])[seg.index]}
        buffered = {
            e.payload.round.prompts.non_tensor_batch["uid"][e.payload.position]
            for e in trainer.allocator.buffer.entries()
        }
        boundaries.append((trainer.global_steps, committed, buffered))
        return end_epoch(step)

    trainer._end_epoch = spy
    trainer.fit()
    return trainer, step_records(log), read_metrics(log), boundaries


def updates(trainer):
    return [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]


def row_advantages(call) -> np.ndarray:
    """The per-row scalar GRPO advantage (every response token of a row carries the same value)."""
    adv = call.advantages
    per_row = adv.sum(dim=-1) if not adv.is_nested else torch.stack([r.sum() for r in adv.unbind()])
    return (per_row / call.loss_tokens.clamp(min=1)).double().numpy()


def test_advantages_are_grpo_over_each_prompts_pilot_plus_commit_rows(run):
    """Catches: advantages normalised over the pilot rows and the commit rows as two separate groups."""
    trainer, _, _, _ = run
    assert len(updates(trainer)) == STEPS  # the checks below run on every step's update
    for call in updates(trainer):
        ids, scores, adv = np.asarray(call.prompt_ids), call.scores.double().numpy(), row_advantages(call)
        assert len(np.unique(ids)) == B
        for pid in np.unique(ids):
            rows = ids == pid
            assert rows.sum() == N_PILOT + N_COMMIT
            group = torch.tensor(scores[rows])
            # verl's compute_grpo_outcome_advantage: (score - mean) / (unbiased std + 1e-6) over the group
            expected = ((group - group.mean()) / (group.std() + 1e-6)).numpy()
            np.testing.assert_allclose(adv[rows], expected, rtol=1e-5, atol=1e-5)


def test_weights_are_synced_once_at_start_and_once_per_step(run):
    """Catches: update_weights every round (the stand-in also refuses it on awake replicas)."""
    trainer, _, _, _ = run
    assert trainer.checkpoint_manager.weight_updates == list(range(STEPS + 1))
    assert trainer.checkpoint_manager.sleeps == STEPS


def test_filter_counts_are_exact(run):
    """Catches: too-hard/too-easy/pass counts that are swapped, per rollout, or summed over the wrong rounds."""
    trainer, steps, _, _ = run
    expected = defaultdict(lambda: np.zeros(3, dtype=int))
    for call in trainer.async_rollout_manager.calls:
        pilot_means = np.asarray(call.correct[: G * N_PILOT], dtype=float).reshape(G, N_PILOT).mean(axis=1)
        too_hard = pilot_means < P_LOWER
        too_easy = pilot_means > 1 - P_UPPER
        expected[call.global_steps] += [too_hard.sum(), too_easy.sum(), (~too_hard & ~too_easy).sum()]
    assert len(steps) == STEPS
    for step, s in enumerate(steps, start=1):
        got = [s[names.TOO_INCORRECT_COUNT], s[names.TOO_CORRECT_COUNT]]
        got.append(s[names.PASS_COUNT])
        assert got == expected[step].tolist(), f"step {step}"
    # The p=0 and p=1 prompts are always too hard / too easy: at least once each per epoch they are piloted.
    assert sum(e[0] for e in expected.values()) >= PROBS.count(0.0)
    assert sum(e[1] for e in expected.values()) >= PROBS.count(1.0)


def test_prompts_carried_over_an_epoch_boundary_are_trained_in_that_step(run):
    """Catches: carry_over_epoch=true dropping the buffer or the partial batch (or training them a step late)."""
    trainer, _, _, boundaries = run
    assert any(buffered for _, _, buffered in boundaries), "the run must carry buffered prompts over a boundary"
    trained = updates(trainer)
    for step, committed, buffered in boundaries:
        uids = set(trained[step - 1].uids)
        assert committed <= uids
        # The first round after the boundary commits from the carried buffer alone.
        assert len(buffered & uids) >= min(B - len(committed), len(buffered))


def test_agent_loop_timing_is_aggregated_over_a_steps_rounds(run):
    """Catches: the per-round min/max/mean/slowest timings summed over rounds."""
    trainer, steps, _, _ = run
    calls = [c for c in trainer.async_rollout_manager.calls if not c.validate]
    multi_round = 0
    for step, s in enumerate(steps, start=1):
        rounds = [c for c in calls if c.global_steps == step]
        multi_round += len(rounds) > 1
        for part in ("generate_sequences", "compute_score", "num_preempted"):
            key = f"agent_loop/{part}"
            assert s[f"timing_s/{key}/min"] == pytest.approx(min(c.timing[f"{key}/min"] for c in rounds))
            assert s[f"timing_s/{key}/max"] == pytest.approx(max(c.timing[f"{key}/max"] for c in rounds))
            mean = sum(c.timing[f"{key}/mean"] * c.num_rows for c in rounds) / sum(c.num_rows for c in rounds)
            assert s[f"timing_s/{key}/mean"] == pytest.approx(mean)
        slowest = max(
            rounds,
            key=lambda c: sum(
                c.timing[f"agent_loop/slowest/{p}"] for p in ("generate_sequences", "tool_calls", "compute_score")
            ),
        )
        for key, value in slowest.timing.items():
            if "/slowest/" in key:
                assert s[f"timing_s/{key}"] == pytest.approx(value)
    assert multi_round, "some step must take several rounds"


def test_buffer_capacity_is_enforced(tmp_path, tokenizer):
    """Catches: algorithm.buffer_size not enforced (the old check, <= 100000 with 40 prompts, could not fail)."""
    log = env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, extra=[f"algorithm.buffer_size={B}", "trainer.total_training_steps=4"])
    added = []
    add = trainer.allocator.buffer.add

    def counting_add(*args, **kwargs):
        add(*args, **kwargs)
        added.append(len(trainer.allocator.buffer))

    trainer.allocator.buffer.add = counting_add
    trainer.fit()
    assert max(added) == B  # full at times, never above
    assert all(s[names.BUFFER_SIZE] <= B for s in step_records(log))


def test_colocated_reward_model_scores_each_round_with_the_replicas_asleep(tmp_path, tokenizer):
    """Catches: the colocated reward model woken while the rollout replicas still hold the GPU, or replicas
    left asleep (or woken without their weights) for the next round."""
    log = env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, colocated_rm=True, extra=["trainer.total_training_steps=3"])
    trainer.fit()
    rounds = trainer.counters.gen_round
    assert rounds > 3
    assert trainer.reward_loop_manager.scored_rows == [c.num_rows for c in trainer.async_rollout_manager.calls]
    # One sleep per round for the reward model and one per step for the actor; every sleep ends in a sync.
    assert trainer.checkpoint_manager.sleeps == rounds + 3
    assert len(trainer.checkpoint_manager.weight_updates) == 1 + rounds + 3
    steps = step_records(log)
    assert [s[names.PROMPTS_IN_BATCH] for s in steps] == [B] * 3
    assert all(s["timing_s/reward_colocated"] > 0 for s in steps)
    for call in updates(trainer):  # the reward model's scores are the rollouts' ground truth
        assert (call.scores.numpy() > 0).tolist() == [bool(a) for a in call.acc]


def test_colocated_rollouts_match_the_in_loop_reward_run(tmp_path, tokenizer):
    """The colocated path changes where rewards are computed, not what is trained."""
    traces = []
    for colocated in (False, True):
        folder = tmp_path / str(colocated)
        folder.mkdir()
        env_file_logger(folder)
        trainer = build_trainer(folder, tokenizer, colocated_rm=colocated, extra=["trainer.total_training_steps=2"])
        trainer.fit()
        traces.append([(sorted(c.uids), c.scores.tolist()) for c in updates(trainer)])
    assert traces[0] == traces[1]


def test_staleness_bound_holds_for_trained_pilots(run):
    trainer, _, _, _ = run
    assert len(updates(trainer)) == STEPS
    for step, call in enumerate(updates(trainer), start=1):
        pilot = np.asarray(call.is_pilot, dtype=bool)
        assert pilot.sum() == B * N_PILOT  # every group reuses its pilots: the bound is checked on each of them
        assert (step - np.asarray(call.rollout_steps)[pilot] <= MAX_OFF + 1).all()
