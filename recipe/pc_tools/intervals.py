"""The interpolated read-off of configurations' mean curves (``--interpolate``) and its bootstrap intervals and exact
permutation p-values against the baseline (``--ci``)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from recipe.pc_tools.curves import (
    SEED_SUFFIX,
    TOLERANCE,
    crossing_ratio,
    interpolated_mean_curve,
    interpolated_reading,
    values_at,
)
from recipe.pc_tools.logs import ReportError
from recipe.pc_tools.tables import format_cell

CI_RESAMPLES = 10_000


def interpolated_table(
    curves: dict[str, pd.DataFrame],
    groups: dict[str, list[str]],
    baseline: str,
    budgets: list[float],
    target: float | None = None,
) -> pd.DataFrame:
    """Per configuration: its interpolated mean curve's accuracy at each budget (NaN: not every seed got there), its
    peak, its crossing of the target (inf: never) and that crossing over the baseline's."""
    runs = {config: [curves[label] for label in labels] for config, labels in groups.items()}
    (target,), crossings = interpolated_reading(runs, baseline, target)
    rows = []
    for config, labels in groups.items():
        at = values_at(runs[config], budgets).mean(axis=0)
        row = {"configuration": config, "runs": len(labels)}
        row.update({f"accuracy_at_{b:.0f}": float(value) for b, value in zip(budgets, at, strict=True)})
        row["peak_mean_accuracy"] = float(interpolated_mean_curve(runs[config])["smoothed"].max())
        row["rollouts_to_target"] = float(crossings[config][0])
        row[f"rollouts_ratio_vs_{baseline}"] = float(crossing_ratio(crossings[config], crossings[baseline])[0])
        row["target"] = float(target)
        rows.append(row)
    return pd.DataFrame(rows)


def _reached_cell(value: float, fmt: str, suffix: str = "") -> str:
    return "not reached" if value == np.inf else format_cell(value, fmt, suffix=suffix)


def interpolated_markdown(table: pd.DataFrame, budgets: list[float], baseline: str, caption: str) -> str:
    header = ["configuration", "runs", *(f"acc. at {b:,.0f} rollouts" for b in budgets)]
    header += ["peak of mean curve", "mean curve reaches target at", f"rollouts to target × {baseline}"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        cells = [row["configuration"], str(row["runs"])]
        cells += [format_cell(row[f"accuracy_at_{b:.0f}"], ".3f", "not reached") for b in budgets]
        cells += [f"{row['peak_mean_accuracy']:.4f}", _reached_cell(row["rollouts_to_target"], ",.0f")]
        cells += [_reached_cell(row[f"rollouts_ratio_vs_{baseline}"], ".2f", "×")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_MAX_SPLITS = 1_000_000  # an exact permutation test enumerates every split; 10 + 10 runs are 184,756


def permutation_p(values: np.ndarray, baseline: np.ndarray) -> float:
    """Two-sided p-value of the exact permutation test of the difference of means: the share of all splits of the
    pooled runs into groups of the original sizes (the observed one included) whose difference is at least the
    observed one in absolute value."""
    pooled = np.concatenate([values, baseline])
    if math.comb(len(pooled), len(values)) > _MAX_SPLITS:
        raise ReportError(f"--ci: {len(values)} + {len(baseline)} runs are too many splits for an exact permutation")
    splits = np.array(list(itertools.combinations(range(len(pooled)), len(values))))
    sums = pooled[splits].sum(axis=1)
    differences = sums / len(values) - (pooled.sum() - sums) / len(baseline)
    return float(np.mean(np.abs(differences) >= abs(values.mean() - baseline.mean()) - TOLERANCE))


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


def _difference(mine: np.ndarray, theirs: np.ndarray, resampled_mine: np.ndarray, resampled_theirs: np.ndarray):
    """Δ at one budget from the runs' values there (NaN past a run's end: then not read) and the resampled means."""
    reached = not (np.isnan(mine).any() or np.isnan(theirs).any())
    low, high = _percentile_interval(resampled_mine - resampled_theirs) if reached else (np.nan, np.nan)
    return {
        "value": mine.mean(),
        "baseline_value": theirs.mean(),
        "estimate": mine.mean() - theirs.mean(),
        "low": low,
        "high": high,
        "p_value": permutation_p(mine, theirs) if reached else np.nan,
        "values": _joined(mine),
        "baseline_values": _joined(theirs),
    }


_INTERVAL_COLUMNS = ["configuration", "measure", "rollouts", "value", "baseline_value", "estimate", "low", "high"]
_INTERVAL_COLUMNS += ["p_value", "runs", "values", "baseline_runs", "baseline_values"]


def intervals_table(
    curves: dict[str, pd.DataFrame],
    groups: dict[str, list[str]],
    baseline: str,
    budgets: list[float],
    target: float | None = None,
    resamples: int = CI_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per configuration other than ``baseline``: at each budget (``measure`` "difference"), the difference of the
    interpolated mean curves with its 95% percentile-bootstrap interval and exact permutation p-value (NaN where a
    run of either did not get that far); then (``measure`` "ratio") its crossing of the target over the baseline's,
    with its bootstrap interval (inf: not reached). A resample draws each configuration's seeds with replacement
    from its own runs, independently of the others'; one draw serves every statistic, and
    ``numpy.random.default_rng(seed)`` draws the configurations in ``groups``' order."""
    runs = {config: [curves[label] for label in labels] for config, labels in groups.items()}
    rng = np.random.default_rng(seed)
    draws = {config: rng.integers(len(labels), size=(resamples, len(labels))) for config, labels in groups.items()}
    values = {config: values_at(runs[config], budgets) for config in groups}
    resampled = {config: values[config][draws[config]].mean(axis=1) for config in groups}  # resamples × budgets
    # Before ``target`` is set below: where it was not given, each resample takes its own baseline's peak.
    _, resampled_crossings = interpolated_reading(runs, baseline, target, draws)
    (target,), crossings = interpolated_reading(runs, baseline, target)
    rows = []
    for config, labels in groups.items():
        if config == baseline:
            continue
        common = {"configuration": config, "runs": ",".join(labels), "baseline_runs": ",".join(groups[baseline])}
        for i, budget in enumerate(budgets):
            pair = (values[config][:, i], values[baseline][:, i], resampled[config][:, i], resampled[baseline][:, i])
            rows.append({**common, "measure": "difference", "rollouts": budget, **_difference(*pair)})
        low, high = _percentile_interval(crossing_ratio(resampled_crossings[config], resampled_crossings[baseline]))
        ratio = {"value": crossings[config][0], "baseline_value": crossings[baseline][0], "low": low, "high": high}
        ratio["estimate"] = crossing_ratio(crossings[config], crossings[baseline])[0]
        rows.append({**common, "measure": "ratio", **ratio})
    table = pd.DataFrame(rows, columns=_INTERVAL_COLUMNS)
    table["target"], table["resamples"], table["seed"] = float(target), resamples, seed
    return table


def _end(value: float, fmt: str, suffix: str = "") -> str:
    return "∞" if value == np.inf else f"{value:{fmt}}{suffix}"


def _per_seed(labels: str, values) -> str:
    """'s4 0.412, s5 0.431': each run's value, named by its seed (by its label without one); — past a run's end."""
    cells = []
    for label, value in zip(labels.split(","), values.split(","), strict=True):
        match = SEED_SUFFIX.match(label)
        cells.append(f"{'s' + match['seed'] if match else label} " + (f"{float(value):.3f}" if value else "—"))
    return ", ".join(cells)


def _interval_cells(row: dict) -> list[str]:
    """The cells after the configuration of one ``intervals_table`` row."""
    if row["measure"] == "ratio":
        interval = "—" if pd.isna(row["low"]) else f"[{_end(row['low'], '.2f', '×')}, {_end(row['high'], '.2f', '×')}]"
        cells = [
            "rollouts to target",
            _reached_cell(row["value"], ",.0f"),
            _reached_cell(row["baseline_value"], ",.0f"),
        ]
        return [*cells, _reached_cell(row["estimate"], ".2f", "×"), interval, "—", "", ""]
    runs, baseline_runs = len(row["runs"].split(",")), len(row["baseline_runs"].split(","))
    splits = math.comb(runs + baseline_runs, runs)
    p = "—" if pd.isna(row["p_value"]) else f"{row['p_value']:.4f} ({round(row['p_value'] * splits)} of {splits})"
    cells = [f"acc. at {row['rollouts']:,.0f} rollouts", format_cell(row["value"], ".3f", "not reached")]
    cells += [
        format_cell(row["baseline_value"], ".3f", "not reached"),
        format_cell(row["estimate"], "+.3f", "not reached"),
    ]
    cells += ["—" if pd.isna(row["low"]) else f"[{row['low']:+.3f}, {row['high']:+.3f}]", p]
    return [*cells, _per_seed(row["runs"], row["values"]), _per_seed(row["baseline_runs"], row["baseline_values"])]


def intervals_markdown(table: pd.DataFrame, baseline: str, source: str, method: str) -> str:
    first = table.iloc[0]
    caption = (
        f"Each configuration against {baseline}, on interpolated mean curves (each run linear between its validation "
        "points in cumulative generated rollouts, a configuration the pointwise mean of its runs). Difference: mean "
        f"curve minus {baseline}'s at equal rollouts, not read where a run of either stopped before; p: two-sided "
        "exact permutation test of the difference of the runs' means (every split of the pooled runs into groups of "
        f"the original sizes). Ratio: rollouts at which the mean curve first reaches the target {first['target']:.4f} "
        f"({source}), linear between points, over {baseline}'s. 95% intervals: percentile bootstrap, "
        f"{first['resamples']:,} resamples of each configuration's runs with replacement, independently, numpy "
        f"default_rng({first['seed']}); target and crossings are recomputed in each resample, ∞ where the mean curve "
        f"does not reach it. Accuracy: {method}."
    )
    header = ["configuration", "measure", "value", baseline, "difference or ratio", "95% interval"]
    header += ["p (two-sided, exact)", "runs", f"{baseline} runs"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        lines.append(f"| {row['configuration']} | " + " | ".join(_interval_cells(row)) + " |")
    return "\n".join(lines) + "\n"
