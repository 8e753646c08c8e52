"""Per-step Pilot-Commit metrics (plain numpy; logged through verl's Tracking by the trainer)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from recipe.pc.allocation import GroupStats, PilotVerdict
from recipe.pc.replay_buffer import BufferCounters


@dataclass
class StepTally:
    """What the rounds of one optimizer step generated and decided, summed over its rounds."""

    rounds: int = 0
    # rounds of a partial batch dropped at an epoch end: logged with this step, not held against its round limit
    dropped_rounds: int = 0
    pilot_rollouts: int = 0
    commit_rollouts: int = 0
    padding_rollouts: int = 0  # generated only to make the batch divide; dropped, not trained
    downsampled_rollouts: int = 0  # generated for a kept group but left out of it by down-sampling
    screened_out: int = 0  # prompts whose screening pilot all agreed: no rest of the pilot
    committed_prompts: int = 0
    pilot_prompts: int = 0
    passed: int = 0
    too_correct: int = 0
    too_incorrect: int = 0
    evict_marked: int = 0
    unfilled_dropped_prompts: int = 0  # collected but cut from an unfilled batch to whole mini-batches
    committed_ids: set = field(default_factory=set)  # prompts already in this step's batch
    pilot_means: list[np.ndarray] = field(default_factory=list)
    pilot_values: list[np.ndarray] = field(default_factory=list)
    commit_ages: list[np.ndarray] = field(default_factory=list)
    group_stats: list[GroupStats] = field(default_factory=list)  # every rolled-out group, round by round

    @property
    def sampled_rollouts(self) -> int:
        return self.pilot_rollouts + self.commit_rollouts

    def add_verdict(self, verdict: PilotVerdict, metric_values: np.ndarray) -> None:
        self.pilot_prompts += verdict.num_prompts
        self.passed += int(verdict.passed.sum())
        self.too_correct += int(verdict.too_correct.sum())
        self.too_incorrect += int(verdict.too_incorrect.sum())
        self.evict_marked += int(verdict.evict.sum())
        self.pilot_means.append(verdict.stats.mean)
        self.pilot_values.append(np.asarray(metric_values, dtype=np.float64))
        self.group_stats.append(verdict.stats)

    def carry_counts_only(self) -> StepTally:
        """A fresh tally that keeps the rollouts generated so far (so none go uncounted) but no batch."""
        return StepTally(
            dropped_rounds=self.rounds + self.dropped_rounds,
            pilot_rollouts=self.pilot_rollouts,
            commit_rollouts=self.commit_rollouts,
            padding_rollouts=self.padding_rollouts,
            downsampled_rollouts=self.downsampled_rollouts,
        )


def _summary(prefix: str, values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {f"{prefix}/count": 0}
    return {
        f"{prefix}/count": int(values.size),
        f"{prefix}/mean": float(values.mean()),
        f"{prefix}/std": float(values.std()),
        f"{prefix}/min": float(values.min()),
        f"{prefix}/max": float(values.max()),
    }


def step_metrics(
    tally: StepTally,
    trained_rows: int,
    trained_prompts: int,
    target_prompts: int,
    buffer_counters: BufferCounters,
    buffer_size: int,
    p_lower: float,
    p_upper: float,
) -> dict[str, float]:
    candidates = max(tally.pilot_prompts, 1)
    metrics = {
        "training/num_prompt_in_batch": trained_prompts,
        "training/num_gen_batches": tally.rounds + tally.dropped_rounds,
        "training/unfilled_batch": int(trained_prompts < target_prompts),
        "training/unfilled_dropped_prompts": tally.unfilled_dropped_prompts,
        "rollout_stats/num_rollouts_sample_explore": tally.pilot_rollouts,
        "rollout_stats/num_rollouts_sample_commit": tally.commit_rollouts,
        "rollout_stats/num_rollouts_sample": tally.sampled_rollouts,
        "rollout_stats/num_rollouts_train": trained_rows,
        "rollout_stats/num_rollouts_padding": tally.padding_rollouts,
        "rollout_stats/num_rollouts_downsampled": tally.downsampled_rollouts,
        "buffer_stats/local/add_count": buffer_counters.add,
        "buffer_stats/local/pop_count": buffer_counters.pop,
        "buffer_stats/local/evict_count": buffer_counters.evict,
        "buffer_stats/local/overflow_count": buffer_counters.overflow,
        "buffer_stats/local/buffer_size": buffer_size,
        "filtering_stats/num_candidates": tally.pilot_prompts,
        "filtering_stats/pass_count": tally.passed,
        "filtering_stats/pass_rate": tally.passed / candidates,
        "filtering_stats/too_correct_count": tally.too_correct,
        "filtering_stats/too_correct_rate": tally.too_correct / candidates,
        "filtering_stats/too_incorrect_count": tally.too_incorrect,
        "filtering_stats/too_incorrect_rate": tally.too_incorrect / candidates,
        "filtering_stats/evict_marked_count": tally.evict_marked,
        "filtering_stats/screened_out_count": tally.screened_out,
        "filtering_stats/too_correct_threshold_upper": 1.0 - p_upper,
        "filtering_stats/too_correct_threshold_lower": p_lower,
    }
    ages = np.concatenate(tally.commit_ages) if tally.commit_ages else np.zeros(0)
    metrics.update(_summary("off_policy_stats/local", ages.astype(np.float64)))
    metrics.update(pilot_metrics(tally))
    return metrics


def pilot_metrics(tally: StepTally) -> dict[str, float]:
    """How the pilot saw the prompts it sampled this step (the spread of pass rates drives the band)."""
    if not tally.pilot_means:
        return {}
    means = np.concatenate(tally.pilot_means)
    values = np.concatenate(tally.pilot_values)
    return {
        "pilot_stats/metric_mean": float(values.mean()),
        "pilot_stats/prompt_mean_of_means": float(means.mean()),
        "pilot_stats/prompt_std_of_means": float(means.std()),
        "pilot_stats/frac_all_zero": float((means <= 0.0).mean()),
        "pilot_stats/frac_all_one": float((means >= 1.0).mean()),
    }
