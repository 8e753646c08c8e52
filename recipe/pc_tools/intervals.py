"""The interpolated read-off of configurations' mean curves (``--interpolate``) and its bootstrap intervals, exact
permutation p-values and equivalence tests against the baseline (``--ci``)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recipe.pc_tools.curves import (
    SEED_SUFFIX,
    TOLERANCE,
    crossing_ratio,
    drawn_crossings,
    drawn_means,
    interpolated_mean_curve,
    read_crossing,
    scipy_module,
    values_at,
)
from recipe.pc_tools.logs import ReportError
from recipe.pc_tools.tables import crossing_cell, format_cell, left_out_runs, reached_cell

CI_RESAMPLES = 10_000
INTERVALS = ("percentile", "studentized")


@dataclass(frozen=True)
class Target:
    """What a crossing is read against: the peak of the baseline's mean curve (both fields None), an accuracy fixed
    in advance (``accuracy``) or the baseline's mean curve at ``at`` rollouts."""

    accuracy: float | None = None
    at: float | None = None

    def source(self, baseline: str) -> str:
        if self.accuracy is not None:
            return "given"
        if self.at is not None:
            return f"{baseline}'s interpolated mean curve at {self.at:,.0f} rollouts"
        return f"peak of {baseline}'s interpolated mean curve over its points"


def targets(accuracy: float | None = None, at: float | None = None) -> list[Target]:
    """The targets to read: one fixed in advance first where given, and the baseline's peak always."""
    fixed = [Target(accuracy=accuracy)] if accuracy is not None else []
    fixed += [Target(at=at)] if at is not None else []
    return [*fixed, Target()]


def _target_value(base: list[pd.DataFrame], target: Target, kind: str) -> float:
    """The target's accuracy from the baseline's runs (for ``at``: those that got that far)."""
    if target.accuracy is not None:
        return target.accuracy
    if target.at is not None:
        there = values_at(base, [target.at], kind)[:, 0]
        if np.isnan(there).all():
            raise ReportError(f"--target-at {target.at:,.0f}: no baseline run got that far")
        return float(np.nanmean(there))
    return float(interpolated_mean_curve(base, kind)["smoothed"].max())


def _drawn_targets(base: list[pd.DataFrame], draws: np.ndarray, target: Target, kind: str) -> np.ndarray:
    """The target in each resample (rows of ``draws``, the baseline's drawn runs); NaN where not read there."""
    if target.accuracy is not None:
        return np.full(len(draws), target.accuracy)
    if target.at is not None:
        points, means = drawn_means(base, draws, kind, extra=[target.at])
        return means[:, np.searchsorted(points, target.at)]
    return np.nanmax(drawn_means(base, draws, kind)[1], axis=1)


def _suffix(i: int, target: Target) -> str:
    """Column-name suffix of the i-th target read (the first keeps the plain names)."""
    return "" if i == 0 else ("_peak" if target == Target() else f"_{i}")


def interpolated_table(
    curves: dict[str, pd.DataFrame],
    groups: dict[str, list[str]],
    baseline: str,
    budgets: list[float],
    target: float | None = None,
    target_at: float | None = None,
    kind: str = "linear",
) -> pd.DataFrame:
    """Per configuration: its interpolated mean curve's accuracy at each budget (NaN: not every run got there, not
    read), its peak, and per target (``targets``) its crossing (``read_crossing``: inf never reached, NaN not read)
    and that crossing over the baseline's; the first target's columns are plainly named, a later one's suffixed."""
    runs = {config: [curves[label] for label in labels] for config, labels in groups.items()}
    readings = []
    for goal in targets(target, target_at):
        value = _target_value(runs[baseline], goal, kind)
        readings.append((goal, value, {config: read_crossing(runs[config], value, kind) for config in groups}))
    rows = []
    for config, labels in groups.items():
        at = values_at(runs[config], budgets, kind).mean(axis=0)
        row = {"configuration": config, "runs": len(labels)}
        row.update({f"accuracy_at_{b:.0f}": float(value) for b, value in zip(budgets, at, strict=True)})
        row["peak_mean_accuracy"] = float(interpolated_mean_curve(runs[config], kind)["smoothed"].max())
        for i, (goal, value, crossings) in enumerate(readings):
            own, base = crossings[config], crossings[baseline]
            suffix = _suffix(i, goal)
            row[f"rollouts_to_target{suffix}"] = own.rollouts
            ratio = crossing_ratio(np.array([own.rollouts]), np.array([base.rollouts]))[0]
            row[f"rollouts_ratio{suffix}_vs_{baseline}"] = float(ratio)
            row[f"target{suffix}"] = value
            row[f"left_out{suffix}"] = left_out_runs(labels, own.used, runs[config], short=True)
        rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs["targets"] = [(goal, value) for goal, value, _ in readings]
    return table


def interpolated_markdown(table: pd.DataFrame, budgets: list[float], baseline: str, caption: str) -> str:
    goals = table.attrs.get("targets", [(Target(), None)])
    header = ["configuration", "runs", *(f"acc. at {b:,.0f} rollouts" for b in budgets), "peak of mean curve"]
    for i, (goal, value) in enumerate(goals):
        if i == 0:
            header += ["mean curve reaches target at", f"rollouts to target × {baseline}"]
        else:
            header += [f"reaches {value:.4f} ({goal.source(baseline)}) at", f"× {baseline}"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        cells = [row["configuration"], str(row["runs"])]
        cells += [format_cell(row[f"accuracy_at_{b:.0f}"], ".3f", "not read") for b in budgets]
        cells += [f"{row['peak_mean_accuracy']:.4f}"]
        for i, (goal, _) in enumerate(goals):
            suffix = _suffix(i, goal)
            cells += [
                crossing_cell(row[f"rollouts_to_target{suffix}"], row[f"left_out{suffix}"]),
                reached_cell(row[f"rollouts_ratio{suffix}_vs_{baseline}"], ".2f", "×"),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_MAX_SPLITS = 1_000_000  # an exact permutation test enumerates every split; 10 + 10 runs are 184,756
PERMUTATION_DRAWS = 200_000  # random splits beyond _MAX_SPLITS: a p-value near 0.05 to about ±0.001


def permutation_p(values: np.ndarray, baseline: np.ndarray, seed: int = 0) -> float:
    """Two-sided p-value of the permutation test of the difference of means: the share of splits of the pooled runs
    into groups of the original sizes whose difference is at least the observed one in absolute value. Exact (every
    split, the observed one included) up to ``_MAX_SPLITS`` splits; beyond, ``PERMUTATION_DRAWS`` random splits
    from ``numpy.random.default_rng(seed)`` with the observed split counted once, (1 + k) / (1 + draws)."""
    pooled = np.concatenate([values, baseline])
    observed = abs(values.mean() - baseline.mean()) - TOLERANCE
    if math.comb(len(pooled), len(values)) > _MAX_SPLITS:
        # 13 + 13 runs are 10,400,600 splits: too many to enumerate, so a random sample of them.
        order = np.random.default_rng(seed).random((PERMUTATION_DRAWS, len(pooled))).argsort(axis=1)
        sums = pooled[order[:, : len(values)]].sum(axis=1)
        differences = sums / len(values) - (pooled.sum() - sums) / len(baseline)
        return float((1 + np.count_nonzero(np.abs(differences) >= observed)) / (1 + PERMUTATION_DRAWS))
    splits = np.array(list(itertools.combinations(range(len(pooled)), len(values))))
    sums = pooled[splits].sum(axis=1)
    differences = sums / len(values) - (pooled.sum() - sums) / len(baseline)
    return float(np.mean(np.abs(differences) >= observed))


def _percentile_interval(values: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles (numpy's linear rule), +inf counting as above every number: numpy itself
    gives NaN between two infinite neighbours, so inf stands in as one above the largest finite value, and a
    percentile above that value touched an infinite neighbour, so it is inf. NaN anywhere gives NaN."""
    finite = values[np.isfinite(values)]
    top = float(finite.max()) if finite.size else 0.0
    ends = np.percentile(np.where(np.isposinf(values), top + 1.0, values), [2.5, 97.5])
    return tuple(np.inf if end > top else float(end) for end in ends)


def _joined(values: np.ndarray) -> str:
    return ",".join("" if np.isnan(v) else f"{v:.4f}" for v in values)


def _standard_error(mine: np.ndarray, theirs: np.ndarray, axis: int = -1) -> np.ndarray:
    """Welch's standard error of a difference of means (runs along ``axis``)."""
    return np.sqrt(mine.var(axis=axis, ddof=1) / mine.shape[axis] + theirs.var(axis=axis, ddof=1) / theirs.shape[axis])


def studentized_interval(
    mine: np.ndarray, theirs: np.ndarray, drawn_mine: np.ndarray, drawn_theirs: np.ndarray
) -> tuple[float, float]:
    """95% bootstrap-t interval of mean(mine) − mean(theirs): each resample's difference less the observed one over
    its own Welch standard error, that t's 2.5th and 97.5th percentiles scaled back by the observed error (reversed).
    ``drawn_*``: resamples × runs, the drawn runs' values. A resample with no spread on either side has no t and
    is left out. Unlike the percentile interval it widens with the spread's own uncertainty, which at 5 runs a side
    the percentile interval misses (it covers about 89% instead of 95%: docs/tools.md)."""
    estimate, error = mine.mean() - theirs.mean(), _standard_error(mine, theirs)
    errors = _standard_error(drawn_mine, drawn_theirs)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(errors > 0, (drawn_mine.mean(axis=1) - drawn_theirs.mean(axis=1) - estimate) / errors, np.nan)
    low, high = np.nanpercentile(t, [2.5, 97.5])
    return float(estimate - high * error), float(estimate - low * error)


def equivalence_test(mine: np.ndarray, theirs: np.ndarray, margin: float, alpha: float = 0.05) -> dict:
    """Two one-sided Welch t-tests of |mean(mine) − mean(theirs)| < ``margin``: the larger one-sided p-value (below
    ``alpha``: equivalent within the margin), and the (1 − 2α) t interval, which lies within ±margin exactly then."""
    t_dist = scipy_module("stats").t
    n1, n2 = len(mine), len(theirs)
    v1, v2 = mine.var(ddof=1) / n1, theirs.var(ddof=1) / n2
    error = math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1**2 / (n1 - 1) + v2**2 / (n2 - 1)) if error > 0 else n1 + n2 - 2
    estimate = mine.mean() - theirs.mean()
    if error == 0:
        p = 0.0 if abs(estimate) < margin else 1.0
    else:
        p = max(t_dist.sf((estimate + margin) / error, df), t_dist.cdf((estimate - margin) / error, df))
    half = t_dist.ppf(1 - alpha, df) * error
    return {"tost_p": float(p), "tost_low": estimate - half, "tost_high": estimate + half}


def _difference(
    mine, theirs, drawn_mine, drawn_theirs, interval: str, margin: float | None, alpha: float, seed: int
) -> dict:
    """Δ at one budget from the values of the runs that got that far, the resampled runs' values beside them."""
    if interval == "studentized":
        low, high = studentized_interval(mine, theirs, drawn_mine, drawn_theirs)
    else:
        low, high = _percentile_interval(drawn_mine.mean(axis=1) - drawn_theirs.mean(axis=1))
    row = {
        "estimate": mine.mean() - theirs.mean(),
        "low": low,
        "high": high,
        "p_value": permutation_p(mine, theirs, seed),
    }
    if margin is not None:
        row |= equivalence_test(mine, theirs, margin, alpha)
    return row


_INTERVAL_COLUMNS = ["configuration", "measure", "rollouts", "value", "baseline_value", "estimate", "low", "high"]
_INTERVAL_COLUMNS += ["p_value", "runs", "values", "baseline_runs", "baseline_values", "left_out", "unread_share"]
_EQUIVALENCE_COLUMNS = ["tost_p", "tost_low", "tost_high", "margin"]


class _Draws:
    """Each configuration's resamples of its runs: all its runs drawn with replacement first (in ``groups``' order,
    one draw serving every statistic that reads all of them), then for a subset of its runs (those that got to a
    budget, or that a crossing is read from) a draw of those alone, made the first time it is asked for."""

    def __init__(self, groups: dict[str, list[str]], resamples: int, seed: int):
        self.rng, self.resamples = np.random.default_rng(seed), resamples
        self.all = {
            config: self.rng.integers(len(labels), size=(resamples, len(labels))) for config, labels in groups.items()
        }
        self.sizes = {config: len(labels) for config, labels in groups.items()}
        self.subsets: dict[tuple, np.ndarray] = {}

    def of(self, config: str, used) -> np.ndarray:
        used = tuple(int(i) for i in used)
        if len(used) == self.sizes[config]:
            return self.all[config]
        if (config, used) not in self.subsets:
            picks = self.rng.integers(len(used), size=(self.resamples, len(used)))
            self.subsets[(config, used)] = np.array(used)[picks]
        return self.subsets[(config, used)]


def _ratio_bounds(config: tuple, baseline: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Per resample, the least and the most the ratio can be given its crossings' bounds (``drawn_crossings``):
    equal (``crossing_ratio``) where both crossings are read; NaN for both where the baseline's mean curve never
    reaches the target (no ratio to read)."""
    (low, high), (base_low, base_high) = config, baseline
    read = (low == high) & (base_low == base_high)
    with np.errstate(invalid="ignore", divide="ignore"):
        least = np.where(np.isinf(base_high), 0.0, low / base_high)
        most = np.where(np.isinf(high) | (base_low <= 0), np.inf, high / base_low)
    exact = crossing_ratio(low, base_low)
    never = np.isposinf(base_low)
    return np.where(read | never, exact, least), np.where(read | never, exact, most)


def _censored_interval(least: np.ndarray, most: np.ndarray) -> tuple[float, float]:
    """The percentile interval's ends over the resamples with a ratio (those whose baseline never reaches the target
    are not read), where every such resample between its bounds gives the same end; NaN (not read) for an end that
    depends on where the unread crossings lie, or with no resample to read."""
    kept = ~(np.isnan(least) & np.isnan(most))
    if not kept.any():
        return np.nan, np.nan
    ends = zip(_percentile_interval(least[kept]), _percentile_interval(most[kept]), strict=True)
    return tuple(a if a == b or (np.isnan(a) and np.isnan(b)) else np.nan for a, b in ends)


def intervals_table(
    curves: dict[str, pd.DataFrame],
    groups: dict[str, list[str]],
    baseline: str,
    budgets: list[float],
    target: float | None = None,
    resamples: int = CI_RESAMPLES,
    seed: int = 0,
    *,
    target_at: float | None = None,
    kind: str = "linear",
    interval: str = "percentile",
    margin: float | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Per configuration other than ``baseline``: at each budget (``measure`` "difference"), the difference of the
    means of the runs that got that far (the others left out, named) with its 95% bootstrap interval (``interval``:
    percentile or studentized), exact permutation p-value and, with a ``margin``, the equivalence test; not read
    where fewer than 2 runs of either got there. Then per target (``targets``; ``measure`` "ratio") its crossing
    over the baseline's, each read from the runs that cover the range up to it (``read_crossing``), with the
    bootstrap interval of those runs (an end not read where it depends on resamples whose crossing lies past a
    stopped run's end). A resample draws each configuration's runs with replacement, independently of the others'
    (``_Draws``, from ``numpy.random.default_rng(seed)``)."""
    runs = {config: [curves[label] for label in labels] for config, labels in groups.items()}
    draws = _Draws(groups, resamples, seed)
    values = {config: values_at(runs[config], budgets, kind) for config in groups}
    goals = [(goal, _target_value(runs[baseline], goal, kind)) for goal in targets(target, target_at)]
    rows = []
    for config, labels in groups.items():
        if config == baseline:
            continue
        common = {"configuration": config, "runs": ",".join(labels), "baseline_runs": ",".join(groups[baseline])}
        for i, budget in enumerate(budgets):
            mine, theirs = values[config][:, i], values[baseline][:, i]
            there, base_there = np.flatnonzero(~np.isnan(mine)), np.flatnonzero(~np.isnan(theirs))
            row = {**common, "measure": "difference", "rollouts": budget, "values": _joined(mine)}
            row |= {"baseline_values": _joined(theirs), "value": np.nanmean(mine) if there.size else np.nan}
            row |= {"baseline_value": np.nanmean(theirs) if base_there.size else np.nan}
            row["left_out"] = "; ".join(
                text
                for text in (
                    left_out_runs(labels, there, runs[config]),
                    left_out_runs(groups[baseline], base_there, runs[baseline]),
                )
                if text
            )
            if there.size >= 2 and base_there.size >= 2:
                drawn = values[config][draws.of(config, there), i], values[baseline][draws.of(baseline, base_there), i]
                row |= _difference(mine[there], theirs[base_there], *drawn, interval, margin, alpha, seed)
            rows.append(row)
        for goal, value in goals:
            rows.append({**common, **_ratio_row(runs, config, baseline, goal, value, draws, kind, labels, groups)})
    columns = _INTERVAL_COLUMNS + (_EQUIVALENCE_COLUMNS if margin is not None else [])
    table = pd.DataFrame(rows, columns=columns + ["target", "target_source"])
    # A difference row carries the first target.
    table["target"] = table["target"].fillna(goals[0][1])
    table["target_source"] = table["target_source"].fillna(goals[0][0].source(baseline))
    # Ratios get percentile intervals whatever --interval says: their resamples may be censored or infinite.
    table["resamples"], table["seed"] = resamples, seed
    table["interval"] = np.where(table["measure"] == "ratio", "percentile", interval)
    table["curve"] = kind
    if margin is not None:
        table["margin"] = margin
    table.attrs["targets"] = goals
    return table


def _ratio_row(runs, config, baseline, goal: Target, value: float, draws: _Draws, kind, labels, groups) -> dict:
    """One ``measure`` "ratio" row: the crossings of ``value`` by ``config`` and the baseline, their ratio and its
    bootstrap interval, the runs left out of either."""
    own, base = read_crossing(runs[config], value, kind), read_crossing(runs[baseline], value, kind)
    estimate = crossing_ratio(np.array([own.rollouts]), np.array([base.rollouts]))[0]
    left_out = "; ".join(
        text
        for text in (
            left_out_runs(labels, own.used, runs[config]),
            left_out_runs(groups[baseline], base.used, runs[baseline]),
        )
        if text
    )
    row = {"measure": "ratio", "value": own.rollouts, "baseline_value": base.rollouts, "estimate": estimate}
    row |= {
        "low": np.nan,
        "high": np.nan,
        "left_out": left_out,
        "target": value,
        "target_source": goal.source(baseline),
    }
    if own.used and base.used and not np.isnan(own.rollouts) and not np.isnan(base.rollouts):
        base_draws = draws.of(baseline, base.used)
        drawn_targets = _drawn_targets(runs[baseline], base_draws, goal, kind)
        crossings = drawn_crossings(runs[config], draws.of(config, own.used), drawn_targets, kind)
        base_crossings = drawn_crossings(runs[baseline], base_draws, drawn_targets, kind)
        row["low"], row["high"] = _censored_interval(*_ratio_bounds(crossings, base_crossings))
        # Resamples whose crossing lies past a stopped run's end, or whose baseline never reaches the target: their
        # ratio is not read, not infinite or 0.
        read = (crossings[0] == crossings[1]) & (base_crossings[0] == base_crossings[1])
        read &= np.isfinite(base_crossings[0])
        row["unread_share"] = float(np.mean(~read))
    return row


def _end(value: float, fmt: str, suffix: str = "") -> str:
    if np.isnan(value):
        return "not read"
    return "∞" if value == np.inf else f"{value:{fmt}}{suffix}"


def _per_seed(labels: str, values) -> str:
    """'s4 0.412, s5 0.431': each run's value, named by its seed (by its label without one); — past a run's end."""
    cells = []
    for label, value in zip(labels.split(","), values.split(","), strict=True):
        match = SEED_SUFFIX.match(label)
        cells.append(f"{'s' + match['seed'] if match else label} " + (f"{float(value):.3f}" if value else "—"))
    return ", ".join(cells)


def _equivalence_cell(row: dict, alpha: float) -> str:
    if pd.isna(row["tost_p"]):
        return "—"
    verdict = " equivalent" if row["tost_p"] < alpha else ""
    return f"{row['tost_p']:.4f} [{row['tost_low']:+.3f}, {row['tost_high']:+.3f}]{verdict}"


def _interval_cells(row: dict, goals: list, baseline: str, alpha: float) -> list[str]:
    """The cells after the configuration of one ``intervals_table`` row."""
    margin = row.get("margin")
    equivalence = [] if margin is None or pd.isna(margin) else [_equivalence_cell(row, alpha)]
    if row["measure"] == "ratio":
        interval = (
            "—"
            if pd.isna(row["low"]) and pd.isna(row["high"]) and pd.isna(row["estimate"])
            else (f"[{_end(row['low'], '.2f', '×')}, {_end(row['high'], '.2f', '×')}]")
        )
        if row.get("unread_share", 0) > 0:
            interval += f" ({row['unread_share']:.0%} of resamples not read)"
        name = "rollouts to target"
        if len(goals) > 1:
            name = f"rollouts to {row['target']:.4f} ({row['target_source']})"
        cells = [name, reached_cell(row["value"], ",.0f"), reached_cell(row["baseline_value"], ",.0f")]
        cells += [reached_cell(row["estimate"], ".2f", "×"), interval, "—"]
        cells += ["—"] * len(equivalence) + ["", "", row["left_out"] or ""]
        return cells
    splits = _splits(row)
    if splits > _MAX_SPLITS:  # random splits, the observed one counted once
        splits, kind = PERMUTATION_DRAWS + 1, " random"
    else:
        kind = ""
    p = (
        "—"
        if pd.isna(row["p_value"])
        else f"{row['p_value']:.4f} ({round(row['p_value'] * splits):,} of {splits:,}{kind})"
    )
    cells = [f"acc. at {row['rollouts']:,.0f} rollouts", format_cell(row["value"], ".3f", "not read")]
    cells += [
        format_cell(row["baseline_value"], ".3f", "not read"),
        format_cell(row["estimate"], "+.3f", "not read"),
    ]
    cells += ["—" if pd.isna(row["low"]) else f"[{row['low']:+.3f}, {row['high']:+.3f}]", p, *equivalence]
    cells += [_per_seed(row["runs"], row["values"]), _per_seed(row["baseline_runs"], row["baseline_values"])]
    return [*cells, row["left_out"] or ""]


def _splits(row: dict) -> int:
    """How many ways a difference row's runs split into groups of its two sizes (0 for a ratio row)."""
    if row["measure"] != "difference":
        return 0
    there = sum(1 for v in row["values"].split(",") if v)
    base_there = sum(1 for v in row["baseline_values"].split(",") if v)
    return math.comb(there + base_there, there)


def intervals_markdown(table: pd.DataFrame, baseline: str, source: str, method: str, alpha: float = 0.05) -> str:
    first = table.iloc[0]
    goals = table.attrs.get("targets", [(Target(), first["target"])])
    studentized = (table["interval"] == "studentized").any()
    target_text = (
        f"the target {first['target']:.4f} ({source})"
        if len(goals) == 1
        else "each target (" + "; ".join(f"{v:.4f}: {g.source(baseline)}" for g, v in goals) + ")"
    )
    # Where a budget's runs have too many splits to enumerate, the test samples them (permutation_p).
    sampled = ""
    if any(_splits(row) > _MAX_SPLITS for row in table.to_dict("records")):
        sampled = f"; above {_MAX_SPLITS:,} splits, {PERMUTATION_DRAWS:,} random ones and the observed one"
    caption = (
        f"Each configuration against {baseline}, on interpolated mean curves (each run {first['curve']} between its "
        "validation points in cumulative generated rollouts, a configuration the pointwise mean of its runs). "
        f"Difference: mean of the runs that got to the budget minus {baseline}'s at equal rollouts; a run that ended "
        "before it is not read there and is left out (named), and the budget is not read where fewer than 2 runs of "
        "either got there. p: two-sided exact permutation test of the difference of the runs' means (every split of "
        f"the pooled runs into groups of the original sizes{sampled}). Ratio: rollouts at which the mean curve first "
        f"reaches {target_text}, linear between points, over {baseline}'s, each read from the runs that cover the "
        "range up to it (a run that stopped early and ended before is left out; not reached: the runs read end below "
        "the target; not read: a crossing that a left-out run's range would hold, or a target the baseline never "
        "reaches). 95% intervals: "
        + (
            "studentized bootstrap (bootstrap-t, Welch's standard error) for differences, percentile bootstrap for "
            "ratios"
            if studentized
            else "percentile bootstrap"
        )
        + f", {first['resamples']:,} resamples of each configuration's runs with replacement, independently, numpy "
        f"default_rng({first['seed']}); target and crossings are recomputed in each resample, ∞ where the mean curve "
        "does not reach it before a finished run's end, an end not read where it depends on resamples whose crossing "
        "lies past a stopped run's end, and resamples whose baseline never reaches it left out of a ratio's interval "
        f"and counted as not read. Accuracy: {method}."
    )
    has_margin = "margin" in table.columns
    if has_margin:
        caption += (
            f" Equivalence: two one-sided Welch t-tests of |difference| < {first['margin']:g} at α = {alpha:g} each, "
            f"the larger p and the {1 - 2 * alpha:.0%} t interval (equivalent: p < {alpha:g}, the interval within "
            "the margin)."
        )
    header = ["configuration", "measure", "value", baseline, "difference or ratio", "95% interval"]
    header += ["p (two-sided, exact)"] + (
        [f"equivalence ±{first['margin']:g}: p, {1 - 2 * alpha:.0%} interval"] if has_margin else []
    )
    header += ["runs", f"{baseline} runs", "left out (ended before)"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        lines.append(f"| {row['configuration']} | " + " | ".join(_interval_cells(row, goals, baseline, alpha)) + " |")
    return "\n".join(lines) + "\n"
