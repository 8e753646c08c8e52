"""The Pilot-Commit allocation policy as plain numpy functions.

Nothing here needs Ray, a GPU or verl: the trainer calls these with arrays pulled out of a
DataProto, and the tests call them directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recipe.pc.errors import PCConfigError
from recipe.pc.registry import KeyGroup, key, register_keys

# Inclusive band edges are compared with a small tolerance so that e.g. 3/4 == 1 - 0.25 passes
# whatever rounding the two sides picked up.
_BAND_EPS = 1e-9


@dataclass(frozen=True)
class GroupStats:
    """Per-prompt statistics of one metric over that prompt's rollouts (rows grouped by id)."""

    prompt_ids: np.ndarray  # unique ids, in order of first appearance
    mean: np.ndarray
    std: np.ndarray  # population std (ddof=0): zero exactly when all rollouts agree
    count: np.ndarray
    first_row: np.ndarray  # index of each prompt's first row in the input


def subset_stats(stats: GroupStats, mask: np.ndarray) -> GroupStats:
    """The groups of ``stats`` where ``mask`` holds."""
    return GroupStats(*(getattr(stats, f)[mask] for f in ("prompt_ids", "mean", "std", "count", "first_row")))


def group_stats(prompt_ids: np.ndarray, values: np.ndarray) -> GroupStats:
    """Mean/std/count of ``values`` per prompt id, vectorised (no per-row Python)."""
    prompt_ids = np.asarray(prompt_ids)
    values = np.asarray(values, dtype=np.float64)
    if prompt_ids.shape[0] != values.shape[0]:
        raise ValueError(f"{prompt_ids.shape[0]} prompt ids but {values.shape[0]} metric values")
    uniq, first, inverse, count = np.unique(prompt_ids, return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(first, kind="stable")  # report prompts in the order they were generated
    total = np.bincount(inverse, weights=values, minlength=len(uniq))
    mean = total / count
    sq_dev = np.bincount(inverse, weights=(values - mean[inverse]) ** 2, minlength=len(uniq))
    std = np.sqrt(sq_dev / count)
    return GroupStats(
        prompt_ids=uniq[order], mean=mean[order], std=std[order], count=count[order], first_row=first[order]
    )


@dataclass(frozen=True)
class GroupVerdict:
    """What a classified set of groups (a pilot, a screen, a baseline's round) says about each prompt (all arrays
    aligned with ``stats.prompt_ids``)."""

    stats: GroupStats
    passed: np.ndarray  # through the filter (PC: in the band with nonzero spread, so buffered)
    too_correct: np.ndarray  # PC: mean above 1 - p_upper, skipped this epoch; baselines: all agree above 0
    too_incorrect: np.ndarray  # PC: mean below p_lower, deferred to the next epoch; baselines: all agree at 0 or below
    evict: np.ndarray  # mean at or above the eviction threshold: removed from later epochs (PC only)

    @property
    def num_prompts(self) -> int:
        return int(self.stats.prompt_ids.shape[0])


PilotVerdict = GroupVerdict  # its name while only the pilot's groups were classified


def classify_pilot(
    prompt_ids: np.ndarray,
    metric_values: np.ndarray,
    p_lower: float,
    p_upper: float,
    evict_threshold: float | None,
) -> GroupVerdict:
    """Band-filter pilot groups on the per-prompt mean of the aggregation metric.

    A prompt passes when ``p_lower <= mean <= 1 - p_upper`` (inclusive) and its rollouts do not
    all agree: with non-binary metrics a mean inside the band can still have zero spread, and a
    zero-spread group gives GRPO no gradient.
    """
    stats = group_stats(prompt_ids, metric_values)
    upper = 1.0 - p_upper
    too_correct = stats.mean > upper + _BAND_EPS
    too_incorrect = stats.mean < p_lower - _BAND_EPS
    passed = ~too_correct & ~too_incorrect & (stats.std > 0)
    if evict_threshold is None:
        evict = np.zeros_like(passed)
    else:
        evict = stats.mean >= evict_threshold - _BAND_EPS
    return GroupVerdict(stats=stats, passed=passed, too_correct=too_correct, too_incorrect=too_incorrect, evict=evict)


def classify_by_spread(prompt_ids: np.ndarray, metric_values: np.ndarray) -> GroupVerdict:
    """DAPO dynamic sampling: keep groups whose rollouts disagree (single-rollout groups are kept).

    Zero-spread groups are reported as too correct (mean above 0) or too incorrect (mean at or below 0).
    """
    stats = group_stats(prompt_ids, metric_values)
    flat = (stats.std == 0) & (stats.count > 1)
    return GroupVerdict(
        stats=stats,
        passed=~flat,
        too_correct=flat & (stats.mean > 0),
        too_incorrect=flat & (stats.mean <= 0),
        evict=np.zeros_like(flat),
    )


def group_rows(first_rows: np.ndarray, group_size: int) -> np.ndarray:
    """Row indices of interleaved groups (each ``group_size`` consecutive rows) given their first rows."""
    return (np.asarray(first_rows, dtype=np.int64)[:, None] + np.arange(group_size)).ravel()


def commit_size(needed: int, available: int) -> int:
    """Prompts to commit this round: as many as the batch still needs, at most what is buffered."""
    return max(0, min(int(needed), int(available)))


def generation_divisor(num_agent_workers: int, dp_size: int) -> int:
    """Row count a generation batch must divide by: agent-loop chunking and data-parallel dispatch."""
    return math.lcm(max(1, int(num_agent_workers)), max(1, int(dp_size)))


def stale_mask(inserted_steps: np.ndarray, current_step: int, max_off_steps: int) -> np.ndarray:
    """Entries older than ``max_off_steps`` at ``current_step`` (flushed after the step)."""
    return (int(current_step) - np.asarray(inserted_steps, dtype=np.int64)) > int(max_off_steps)


def select_responses(values: np.ndarray, m: int, strategy: str, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``m`` of a prompt's stored rollouts to reuse in its training group.

    ``first_n`` keeps the first ``m``. ``max_variance`` keeps the subset of size ``m`` with the
    largest reward variance (PODS): after sorting, the best subset is always some top-k plus
    bottom-(m-k), so only m+1 candidates are scored. With binary rewards that is the most
    balanced correct/incorrect split, floor(m/2) correct when both classes are plentiful.
    Rollouts with equal values are taken in a random (seeded) order.
    """
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    if not 0 < m <= n:
        raise ValueError(f"cannot keep {m} of {n} rollouts")
    if m == n:
        return np.arange(n)
    if strategy == "first_n":
        return np.arange(m)
    if strategy != "max_variance":
        raise ValueError(f"unknown buffer_response_sampling_method {strategy!r}; use 'max_variance' or 'first_n'")
    shuffled = rng.permutation(n)
    order = shuffled[np.argsort(values[shuffled], kind="stable")]
    sorted_vals = values[order]
    prefix = np.concatenate([[0.0], np.cumsum(sorted_vals)])
    prefix_sq = np.concatenate([[0.0], np.cumsum(sorted_vals**2)])
    k = np.arange(m + 1)  # k rollouts from the top, m - k from the bottom
    total = (prefix[n] - prefix[n - k]) + prefix[m - k]
    total_sq = (prefix_sq[n] - prefix_sq[n - k]) + prefix_sq[m - k]
    variance = total_sq / m - (total / m) ** 2
    best = int(np.argmax(np.round(variance, 12)))  # first maximum = fewest from the top
    return np.sort(np.concatenate([order[n - best :], order[: m - best]]))


# ------------------------------------------------------------------ PODS-style down-sampling
# Down-sampling serves every allocator that generates groups (GRPO, DAPO, Pilot-Commit's commits, the knapsack's), so
# its keys belong to the allocation primitives, not to one allocator.
@register_keys
@dataclass(frozen=True)
class DownsampleSettings(KeyGroup):
    """PODS-style down-sampling: generate ``n`` rollouts a GRPO/DAPO group or a commit, train ``rollout.n`` of them,
    those with the largest spread of ``algorithm.agg_metric`` (advantages then use the kept ones only)."""

    name = "downsample"
    n: int | None = key("algorithm.downsample.n", None)  # generated per group or commit (null: off)

    def check(self, pc) -> None:
        if self.n is not None and self.n < pc.n_commit:
            raise PCConfigError(
                f"algorithm.downsample.n={self.n} must be at least actor_rollout_ref.rollout.n={pc.n_commit}: it is "
                "the rollouts generated, of which rollout.n are trained (null: off)"
            )


def generated_per_group(pc) -> int:
    """Rollouts generated per trained group (baselines) or per commit (PC); ``rollout.n`` of them train."""
    n = pc.group(DownsampleSettings).n
    return pc.n_commit if n is None else n


def downsample_rows(values: np.ndarray, first_rows: np.ndarray, n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """Row indices keeping ``m`` of the ``n`` consecutive rows of each group starting at ``first_rows``: per group
    ``select_responses(..., "max_variance")``, for binary rewards the most balanced split, so a group that had any
    spread keeps it. Groups are kept in the order given, rows in row order."""
    values = np.asarray(values, dtype=np.float64)
    first_rows = np.asarray(first_rows, dtype=np.int64)
    if first_rows.size and (first_rows.min() < 0 or first_rows.max() + n > values.shape[0]):
        raise ValueError(f"groups of {n} rows starting at {first_rows.tolist()} exceed the {values.shape[0]} rows")
    if first_rows.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(
        [start + select_responses(values[start : start + n], m, "max_variance", rng) for start in first_rows.tolist()]
    )
