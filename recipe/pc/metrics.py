"""Per-step Pilot-Commit metrics from a step's state (plain numpy; logged through verl's Tracking by the trainer).

The allocator reports its own (the buffer's) once a step, from ``Allocator.end_step``; nothing here repeats them.
"""

from __future__ import annotations

import numpy as np

from recipe.pc import metric_names as m
from recipe.pc.step import StepState


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
    state: StepState, trained_rows: int, trained_prompts: int, target_prompts: int, p_lower: float, p_upper: float
) -> dict[str, float]:
    candidates = max(state.pilot_prompts, 1)
    metrics = {
        m.PROMPTS_IN_BATCH: trained_prompts,
        m.ROUNDS: state.rounds + state.dropped_rounds,
        m.UNFILLED_BATCH: int(trained_prompts < target_prompts),
        m.UNFILLED_DROPPED_PROMPTS: state.unfilled_dropped_prompts,
        m.ROLLOUTS_PILOT: state.pilot_rollouts,
        m.ROLLOUTS_COMMIT: state.commit_rollouts,
        m.ROLLOUTS_SAMPLED: state.sampled_rollouts,
        m.ROLLOUTS_TRAINED: trained_rows,
        m.ROLLOUTS_PADDING: state.padding_rollouts,
        m.ROLLOUTS_DOWNSAMPLED: state.downsampled_rollouts,
        m.CANDIDATES: state.pilot_prompts,
        m.PASS_COUNT: state.passed,
        m.PASS_RATE: state.passed / candidates,
        m.TOO_CORRECT_COUNT: state.too_correct,
        m.TOO_CORRECT_RATE: state.too_correct / candidates,
        m.TOO_INCORRECT_COUNT: state.too_incorrect,
        m.TOO_INCORRECT_RATE: state.too_incorrect / candidates,
        m.EVICT_MARKED: state.evict_marked,
        m.SCREENED_OUT: state.screened_out,
        m.BAND_UPPER: 1.0 - p_upper,
        m.BAND_LOWER: p_lower,
    }
    ages = np.concatenate(state.commit_ages) if state.commit_ages else np.zeros(0)
    metrics.update(_summary(m.OFF_POLICY, ages.astype(np.float64)))
    metrics.update(pilot_metrics(state))
    return metrics


def pilot_metrics(state: StepState) -> dict[str, float]:
    """How the pilot saw the prompts it sampled this step (the spread of pass rates drives the band)."""
    if not state.pilot_means:
        return {}
    means = np.concatenate(state.pilot_means)
    values = np.concatenate(state.pilot_values)
    return {
        m.PILOT_METRIC_MEAN: float(values.mean()),
        m.PILOT_MEAN_OF_MEANS: float(means.mean()),
        m.PILOT_STD_OF_MEANS: float(means.std()),
        m.PILOT_FRAC_ALL_ZERO: float((means <= 0.0).mean()),
        m.PILOT_FRAC_ALL_ONE: float((means >= 1.0).mean()),
    }
