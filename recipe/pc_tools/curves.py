"""Validation curves from a run's metrics: accuracy against cumulative generated rollouts, smoothed, averaged
over seeds (at equal steps, or interpolated at equal rollouts) and where they first reach a target."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recipe.pc.metric_names import CUMULATIVE_SAMPLED as ROLLOUTS
from recipe.pc.metric_names import VAL_CORE_ACC
from recipe.pc_tools.logs import ReportError, describe_metrics

logger = logging.getLogger(__name__)

SEED_SUFFIX = re.compile(r"^(?P<config>.+?)[_-]s(?:eed)?(?P<seed>\d+)$")
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Reach:
    """The first validation point at or above the target."""

    step: int
    rollouts: float
    accuracy: float


# ------------------------------------------------------------------ validation curves
def benchmark_columns(frame: pd.DataFrame) -> dict[str, str]:
    """data_source -> its ``val-core/<data_source>/acc/mean@N`` column (largest N if several)."""
    found: dict[str, list[tuple[int, str]]] = {}
    for column in frame.columns:
        match = VAL_CORE_ACC.match(column)
        if match:
            found.setdefault(match["source"], []).append((int(match["n"]), column))
    chosen = {}
    for source, columns in sorted(found.items()):
        columns.sort()
        if len(columns) > 1:
            logger.warning("benchmark %s logged as %s; using %s", source, [c for _, c in columns], columns[-1][1])
        chosen[source] = columns[-1][1]
    return chosen


def choose_benchmarks(per_run: dict[str, dict[str, str]], requested: list[str] | None) -> list[str]:
    """The benchmarks to average: ``requested``, or those every run has. Warns when runs differ."""
    if requested:
        return list(requested)
    sets = {label: set(columns) for label, columns in per_run.items()}
    common = set.intersection(*sets.values())
    if any(s != common for s in sets.values()):
        have = "; ".join(f"{label}: {', '.join(sorted(s)) or 'none'}" for label, s in sets.items())
        if not common:
            raise ReportError(f"the runs have no validation benchmark in common ({have})")
        logger.warning("runs validate on different benchmarks (%s); using the common ones: %s", have, sorted(common))
    return sorted(common)


def check_run(label: str, frame: pd.DataFrame, benchmarks: list[str] | tuple = ()) -> dict[str, str]:
    """Raise ReportError naming what ``label`` lacks; return its benchmark -> accuracy column map."""
    columns = benchmark_columns(frame)
    missing = [ROLLOUTS] if ROLLOUTS not in frame.columns else []
    if not columns:
        missing.append("val-core/<data_source>/acc/mean@<N>")
    missing += [f"val-core/{b}/acc/mean@<N>" for b in benchmarks if columns and b not in columns]
    if missing:
        has = describe_metrics(frame) + (f"; benchmarks: {', '.join(columns)}" if columns else "")
        raise ReportError(f"run {label}: missing metric {', '.join(missing)}; it has {has}")
    return columns


def smooth(values: pd.Series, k: int) -> pd.Series:
    """Trailing moving average over the last ``k`` points (fewer at the start); k=1 returns the values."""
    if k < 1:
        raise ReportError(f"--smooth must be >= 1, got {k}")
    return values.rolling(k, min_periods=1).mean()


def rollouts_at(frame: pd.DataFrame, steps) -> pd.Series:
    """Cumulative generated rollouts at each step: logged there, else the last before it, else 0."""
    logged = frame[ROLLOUTS].dropna()
    filled = logged.reindex(logged.index.union(pd.Index(steps))).ffill().fillna(0.0)
    return filled.loc[list(steps)]


def validation_curve(frame: pd.DataFrame, columns: dict[str, str], k: int = 1) -> pd.DataFrame:
    """Per validation step: ``rollouts``, ``accuracy`` (mean over ``columns``) and ``smoothed``."""
    values = frame[list(columns.values())]
    present = values.notna()
    partial = present.any(axis=1) & ~present.all(axis=1)
    if partial.any():
        logger.warning("validation steps %s lack some benchmarks; they are left out", list(partial[partial].index))
    values = values[present.all(axis=1)]
    curve = pd.DataFrame(index=values.index)
    curve["rollouts"] = rollouts_at(frame, values.index).to_numpy()
    curve["accuracy"] = values.mean(axis=1)
    curve["smoothed"] = smooth(curve["accuracy"], k)
    return curve


def rollouts_to_target(curve: pd.DataFrame, target: float) -> Reach | None:
    """The first validation point whose smoothed accuracy reaches ``target``; None if never."""
    hit = curve[curve["smoothed"] >= target - TOLERANCE]
    if hit.empty:
        return None
    step = int(hit.index[0])
    return Reach(step=step, rollouts=float(hit["rollouts"].iloc[0]), accuracy=float(hit["smoothed"].iloc[0]))


def seed_groups(labels: list[str]) -> dict[str, list[str]]:
    """Configuration -> its runs' labels, a configuration being a label less its seed suffix
    (``_s<N>``, ``-s<N>``, ``_seed<N>``, ``-seed<N>``); a label without one is a configuration of one run."""
    groups: dict[str, list[str]] = {}
    for label in labels:
        match = SEED_SUFFIX.match(label)
        groups.setdefault(match["config"] if match else label, []).append(label)
    return groups


def mean_curve(curves: list[pd.DataFrame], k: int = 1) -> pd.DataFrame:
    """Seeds' curves averaged at the validation steps they all logged: ``rollouts`` and ``accuracy`` are the
    seeds' means, ``smoothed`` the trailing average of that mean accuracy (see ``smooth``)."""
    steps = curves[0].index
    for curve in curves[1:]:
        steps = steps.intersection(curve.index)
    mean = pd.DataFrame(index=steps)
    for column in ("rollouts", "accuracy"):
        mean[column] = pd.concat([curve.loc[steps, column] for curve in curves], axis=1).mean(axis=1)
    mean["smoothed"] = smooth(mean["accuracy"], k)
    return mean


def interpolate_reach(curve: pd.DataFrame, accuracy: float) -> tuple[float, float] | None:
    """(step, cumulative rollouts) where ``curve``'s smoothed accuracy first reaches ``accuracy``, linear between
    its validation points; None if it never does."""
    reach = rollouts_to_target(curve, accuracy)
    if reach is None:
        return None
    i = curve.index.get_loc(reach.step)
    before = curve.iloc[i - 1] if i > 0 else None
    if before is None or reach.accuracy <= before["smoothed"]:
        return float(reach.step), reach.rollouts
    t = (accuracy - before["smoothed"]) / (reach.accuracy - before["smoothed"])
    step = curve.index[i - 1] + t * (reach.step - curve.index[i - 1])
    return float(step), float(before["rollouts"] + t * (reach.rollouts - before["rollouts"]))


def accuracy_at_rollouts(curve: pd.DataFrame, budgets: list[float]) -> list[float | None]:
    """The curve's smoothed accuracy at each budget of cumulative generated rollouts, linear between the validation
    points on either side; None before its first point or past its last (a run that stopped has no value there)."""
    rollouts, accuracy = curve["rollouts"].to_numpy(), curve["smoothed"].to_numpy()
    first, last = rollouts[0] - TOLERANCE, rollouts[-1] + TOLERANCE
    return [float(np.interp(b, rollouts, accuracy)) if first <= b <= last else None for b in budgets]


# ------------------------------------------------------------------ interpolated read-off and intervals
def values_at(curves: list[pd.DataFrame], rollouts) -> np.ndarray:
    """Each run's accuracy at each of ``rollouts`` (runs × rollouts), linear between its validation points; NaN
    outside them (``accuracy_at_rollouts``), so that a mean over runs is NaN where one of them has no value."""
    return np.array([accuracy_at_rollouts(curve, rollouts) for curve in curves], dtype=float)


def _drawn_means(curves: list[pd.DataFrame], draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every run's validation points, and per row of ``draws`` (indices into ``curves``) the pointwise mean of the
    drawn runs' curves there, NaN outside the range all of them cover. A mean of linear pieces is linear between
    its runs' points, so the points of runs not drawn lie on it: peak and crossings are those of the drawn mean."""
    points = np.unique(np.concatenate([curve["rollouts"].to_numpy() for curve in curves]))
    return points, values_at(curves, points)[draws].mean(axis=1)


def interpolated_mean_curve(curves: list[pd.DataFrame]) -> pd.DataFrame:
    """The seeds' curves, each linear between its validation points in cumulative generated rollouts, averaged
    pointwise: ``rollouts`` every seed's points within the range all of them cover, ``smoothed`` the mean there.
    Unlike ``mean_curve`` it pairs seeds at equal rollouts, not at equal steps (a PC seed's rollouts at a step vary)."""
    points, (mean,) = _drawn_means(curves, np.arange(len(curves))[None, :])
    return pd.DataFrame({"rollouts": points, "smoothed": mean}).dropna().reset_index(drop=True)


def _crossings(points: np.ndarray, means: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per row of ``means`` (mean curves on ``points``, NaN outside their range): the rollouts where it first reaches
    its target, linear from its point before (``interpolate_reach``'s rule, on arrays: the bootstrap asks 10,000
    times); its first point where that one reaches it already; inf where it never does."""
    reached = means >= targets[:, None] - TOLERANCE  # NaN compares False
    first = reached.argmax(axis=1)
    before, rows = np.maximum(first - 1, 0), np.arange(len(means))
    y0, y1, x0, x1 = means[rows, before], means[rows, first], points[before], points[first]
    with np.errstate(invalid="ignore", divide="ignore"):  # rows without a point before are taken from x1
        crossing = np.where((first == 0) | np.isnan(y0), x1, x0 + (targets - y0) / (y1 - y0) * (x1 - x0))
    return np.where(reached.any(axis=1), crossing, np.inf)


def interpolated_reading(
    runs: dict[str, list[pd.DataFrame]], baseline: str, target: float | None, draws: dict[str, np.ndarray] | None = None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per resample (``draws``: each configuration's drawn runs, one row a resample; default: all its runs, once):
    the target (``None``: the peak of the baseline's mean curve over its points) and each configuration's crossing
    of it (``_crossings``, the same rule for the baseline)."""
    draws = draws or {config: np.arange(len(curves))[None, :] for config, curves in runs.items()}
    drawn = {config: _drawn_means(curves, draws[config]) for config, curves in runs.items()}
    base = drawn[baseline][1]
    targets = np.nanmax(base, axis=1) if target is None else np.full(len(base), target)
    return targets, {config: _crossings(points, means, targets) for config, (points, means) in drawn.items()}


def crossing_ratio(crossing: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Crossing over the baseline's: inf where only the configuration never gets there, NaN where neither does or
    the baseline's crossing is at 0 rollouts."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(baseline > 0, crossing / baseline, np.nan)
