"""Validation curves from a run's metrics: accuracy against cumulative generated rollouts, smoothed, averaged
over seeds (at equal steps, or interpolated at equal rollouts) and where they first reach a target."""

from __future__ import annotations

import importlib
import logging
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recipe.pc.metric_names import CUMULATIVE_SAMPLED as ROLLOUTS
from recipe.pc.metric_names import TOTAL_TRAINING_STEPS, VAL_CORE_ACC
from recipe.pc_tools.logs import ReportError, describe_metrics

logger = logging.getLogger(__name__)

SEED_SUFFIX = re.compile(r"^(?P<config>.+?)[_-]s(?:eed)?(?P<seed>\d+)$")
TOLERANCE = 1e-9
# How a run's accuracy is read between its validation points: straight lines, or PCHIP (piecewise cubic Hermite,
# monotone between points: no overshoot past a neighbouring point's value).
CURVE_KINDS = ("linear", "pchip")
# A mean of PCHIP pieces is not piecewise linear, so its peak and crossings are read on this many evenly spaced
# points besides the runs' own (linear between them: the crossing's error is far below a validation gap's).
PCHIP_GRID = 512
_CHUNK = 2_000  # resamples averaged at a time: a (resamples × runs × points) array of 10,000 rows is too large
INSTALL_SCIPY = 'pip install -e ".[report]"'


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


def scipy_module(name: str):
    """``scipy.<name>``, or a ReportError naming the install command (scipy is in the report extra)."""
    try:
        return importlib.import_module(f"scipy.{name}")
    except ImportError:
        raise ReportError(
            f"scipy is not installed: PCHIP curves, the equivalence test, --power and the seed plot's interval need it "
            f"({INSTALL_SCIPY})"
        ) from None


def _between_points(rollouts: np.ndarray, accuracy: np.ndarray, at: np.ndarray, kind: str) -> np.ndarray:
    """The accuracy at ``at`` (within the points' range), linear or PCHIP between the validation points."""
    if kind == "linear" or len(rollouts) < 2:
        return np.interp(at, rollouts, accuracy)
    # PCHIP needs increasing rollouts: of two validations at the same count (a resumed step), the later one counts.
    keep = np.append(np.diff(rollouts) > 0, True)
    if keep.sum() < 2:
        return np.interp(at, rollouts, accuracy)
    pchip = scipy_module("interpolate").PchipInterpolator(rollouts[keep], accuracy[keep])
    return pchip(np.clip(at, rollouts[0], rollouts[-1]))


def accuracy_at_rollouts(curve: pd.DataFrame, budgets: list[float], kind: str = "linear") -> list[float | None]:
    """The curve's smoothed accuracy at each budget of cumulative generated rollouts, linear (or PCHIP, ``kind``)
    between the validation points on either side; None before its first point or past its last (a run that stopped
    has no value there)."""
    rollouts, accuracy = curve["rollouts"].to_numpy(float), curve["smoothed"].to_numpy(float)
    first, last = rollouts[0] - TOLERANCE, rollouts[-1] + TOLERANCE
    inside = [b for b in budgets if first <= b <= last]
    read = iter(_between_points(rollouts, accuracy, np.array(inside, dtype=float), kind)) if inside else iter(())
    return [float(next(read)) if first <= b <= last else None for b in budgets]


def budget_gaps(curves: dict[str, pd.DataFrame], budgets: list[float], share: float) -> list[dict]:
    """Where a budget falls strictly between two of a run's validation points that lie more than ``share`` × the
    budget apart: the reading there rests on the curve's shape between far points. One dict per run and budget."""
    found = []
    for label, curve in curves.items():
        rollouts = curve["rollouts"].to_numpy(float)
        for budget in budgets:
            after = int(np.searchsorted(rollouts, budget - TOLERANCE))
            if 0 < after < len(rollouts) and abs(rollouts[after] - budget) > TOLERANCE:
                gap = rollouts[after] - rollouts[after - 1]
                if gap > share * budget:
                    found.append(
                        {
                            "run": label,
                            "budget": budget,
                            "before": rollouts[after - 1],
                            "after": rollouts[after],
                            "gap": gap,
                        }
                    )
    return found


# ------------------------------------------------------------------ interpolated read-off and intervals
def values_at(curves: list[pd.DataFrame], rollouts, kind: str = "linear") -> np.ndarray:
    """Each run's accuracy at each of ``rollouts`` (runs × rollouts), linear (or PCHIP) between its validation
    points; NaN outside them (``accuracy_at_rollouts``), so that a mean over runs is NaN where one has no value."""
    return np.array([accuracy_at_rollouts(curve, list(rollouts), kind) for curve in curves], dtype=float)


def run_ends(curves: list[pd.DataFrame]) -> np.ndarray:
    """Each run's last validation point in cumulative rollouts: nothing is read of it past there."""
    return np.array([float(curve["rollouts"].iloc[-1]) for curve in curves])


def stopped_runs(curves: list[pd.DataFrame]) -> np.ndarray:
    """True for a run that stopped early, so a target it did not reach is not read, not "not reached": its last
    logged step comes before its configured last step (``attrs["configured_last_step"]``, from the run's log or the
    report's ``--last-step``); a run that knows no configured last step stopped if its last validation step comes
    before the last of its configuration's runs (then configurations whose runs were all cut alike read as
    finished)."""
    last = np.array([curve.index[-1] for curve in curves])
    by_configuration = last < last.max()
    return np.array(
        [
            curve.attrs["last_step"] < curve.attrs["configured_last_step"]
            if curve.attrs.get("configured_last_step") is not None
            else guess
            for curve, guess in zip(curves, by_configuration, strict=True)
        ],
        dtype=bool,
    )


def mark_run_end(curve: pd.DataFrame, frame: pd.DataFrame, configured_last_step: int | None = None) -> None:
    """Record on ``curve`` (its ``attrs``) the run's last logged step and its configured last step: the logged
    ``training/total_training_steps``, else ``configured_last_step`` (None: unknown)."""
    curve.attrs["last_step"] = int(frame.index.max())
    logged = frame.get(TOTAL_TRAINING_STEPS)
    if logged is not None and logged.notna().any():
        configured_last_step = int(logged.dropna().iloc[-1])
    curve.attrs["configured_last_step"] = configured_last_step


def drawn_points(curves: list[pd.DataFrame], kind: str = "linear", extra=()) -> np.ndarray:
    """Where ``drawn_means`` reads the mean curves: every run's validation points and ``extra``, and for PCHIP an
    even grid over their range besides."""
    points = np.unique(
        np.concatenate([curve["rollouts"].to_numpy(float) for curve in curves] + [np.asarray(extra, float)])
    )
    if kind == "pchip":
        points = np.unique(np.concatenate([points, np.linspace(points[0], points[-1], PCHIP_GRID)]))
    return points


def drawn_means(
    curves: list[pd.DataFrame], draws: np.ndarray, kind: str = "linear", extra=()
) -> tuple[np.ndarray, np.ndarray]:
    """``drawn_points``, and per row of ``draws`` (indices into ``curves``) the pointwise mean of the drawn runs'
    curves there, NaN outside the range all of them cover. A mean of linear pieces is linear between its runs'
    points, so the points of runs not drawn lie on it: peak and crossings are those of the drawn mean."""
    points = drawn_points(curves, kind, extra)
    values = values_at(curves, points, kind)
    return points, np.concatenate([values[draws[i : i + _CHUNK]].mean(axis=1) for i in range(0, len(draws), _CHUNK)])


def interpolated_mean_curve(curves: list[pd.DataFrame], kind: str = "linear") -> pd.DataFrame:
    """The seeds' curves, each linear (or PCHIP) between its validation points in cumulative generated rollouts,
    averaged pointwise: ``rollouts`` every seed's points (and PCHIP's grid) within the range all of them cover,
    ``smoothed`` the mean there. Unlike ``mean_curve`` it pairs seeds at equal rollouts, not at equal steps (a PC
    seed's rollouts at a step vary)."""
    points, (mean,) = drawn_means(curves, np.arange(len(curves))[None, :], kind)
    return pd.DataFrame({"rollouts": points, "smoothed": mean}).dropna().reset_index(drop=True)


def mean_band(curves: list[pd.DataFrame], kind: str = "linear") -> pd.DataFrame:
    """``interpolated_mean_curve`` with a pointwise 95% interval of the mean: ``low`` and ``high`` are the mean ±
    Student's t quantile (n − 1 degrees of freedom) × the seeds' sample SD / √n at each point; NaN with one seed."""
    points = drawn_points(curves, kind)
    values = values_at(curves, points, kind)
    mean, n = values.mean(axis=0), len(curves)
    half = np.full_like(mean, np.nan)
    if n > 1:
        quantile = scipy_module("stats").t.ppf(0.975, n - 1)
        half = quantile * values.std(axis=0, ddof=1) / np.sqrt(n)
    band = pd.DataFrame({"rollouts": points, "smoothed": mean, "low": mean - half, "high": mean + half})
    return band.dropna(subset=["smoothed"]).reset_index(drop=True)


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


@dataclass(frozen=True)
class Crossing:
    """Where a configuration's mean curve first reaches a target: ``rollouts`` (inf: the runs read never reach it
    before the first of them that finished ends; NaN: not read), and the runs it was read from (indices)."""

    rollouts: float
    used: tuple[int, ...]


def read_crossing(curves: list[pd.DataFrame], target: float, kind: str = "linear") -> Crossing:
    """The crossing of the mean curve of the runs that cover the range up to it. All runs first; while their mean
    does not reach ``target`` before the shortest of them ends and that run stopped early (``stopped_runs``), it is
    left out and the mean of the others read. A crossing that falls before the end of a run left out is not read
    (that run covered it, and with it the mean had not got there); one that a finished run's end cuts off is inf."""
    ends, stopped = run_ends(curves), stopped_runs(curves)
    used, dropped = list(range(len(curves))), []
    while used:
        points, means = drawn_means([curves[i] for i in used], np.arange(len(used))[None, :], kind)
        crossing = float(_crossings(points, means, np.array([target]))[0])
        if np.isfinite(crossing):
            late = bool(dropped) and crossing <= ends[dropped].max() + TOLERANCE
            return Crossing(np.nan if late else crossing, tuple(used))
        limiting = [i for i in used if ends[i] <= ends[used].min() + TOLERANCE]
        if not stopped[limiting].all():
            return Crossing(np.inf, tuple(used))
        dropped += limiting
        used = [i for i in used if i not in limiting]
    return Crossing(np.nan, ())


def drawn_crossings(
    curves: list[pd.DataFrame], draws: np.ndarray, targets: np.ndarray, kind: str = "linear"
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``draws``: the bounds of the drawn mean curve's crossing of its row of ``targets``. Equal where it
    is read, or where it never reaches the target before a finished run ends (inf); where a run that stopped early
    ends the drawn range first, the crossing lies somewhere past that end (low: the end, high: inf); a target that
    is NaN (not read in that resample) leaves it anywhere (0, inf)."""
    points, means = drawn_means(curves, draws, kind)
    crossing = _crossings(points, means, targets)
    ends, stopped = run_ends(curves), stopped_runs(curves)
    drawn_end = ends[draws].min(axis=1)
    cut_by_finished = ((ends[draws] <= drawn_end[:, None] + TOLERANCE) & ~stopped[draws]).any(axis=1)
    low, high = crossing.copy(), crossing.copy()
    censored = np.isinf(crossing) & ~cut_by_finished
    low[censored] = drawn_end[censored]
    low[np.isnan(targets)], high[np.isnan(targets)] = 0.0, np.inf
    return low, high


def crossing_ratio(crossing: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Crossing over the baseline's: inf where only the configuration never gets there; NaN (not read) where the
    baseline never does, whatever the configuration did (no ratio to a target it never reached), or its crossing is
    at 0 rollouts."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((baseline > 0) & np.isfinite(baseline), crossing / baseline, np.nan)
