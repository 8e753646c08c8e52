"""The report's tables, each as raw numbers (a DataFrame, written as CSV) and as Markdown for reading: rollouts to a
target per run and per configuration of seeds, equal accuracy against a baseline, accuracy at given steps and
rollouts, and training metrics' means, sums and values."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from recipe.pc.metric_names import CUMULATIVE_SAMPLED as ROLLOUTS
from recipe.pc.metric_names import ROUNDS as GEN_CALLS
from recipe.pc.metric_names import STEP_TIME, VAL_BUDGET, VAL_BUDGET_INTERVAL, VAL_BUDGET_ROLLOUTS, VAL_BUDGETS_REACHED
from recipe.pc_tools.curves import (
    SEED_SUFFIX,
    Reach,
    accuracy_at_rollouts,
    crossing_ratio,
    interpolate_reach,
    interpolated_mean_curve,
    read_crossing,
    rollouts_to_target,
    run_ends,
    seed_groups,
    stopped_runs,
)

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------ table
def _sum_to(frame: pd.DataFrame, metric: str, step: int, label: str) -> float | None:
    if metric not in frame.columns:
        logger.warning("run %s: no %s logged; its to-target sum is reported as missing", label, metric)
        return None
    trained = frame.loc[frame.index <= step, [ROLLOUTS, metric]].dropna(subset=[ROLLOUTS])
    gaps = int(trained[metric].isna().sum())
    if gaps:
        logger.warning("run %s: %s missing at %d of %d steps up to step %d", label, metric, gaps, len(trained), step)
    return float(trained[metric].sum())


def _ratio(reference: Reach | None, run: Reach | None) -> float | None:
    """The run's rollouts to target over the reference's; None where either never gets there or the reference got
    there before any rollout."""
    if reference is None or run is None or reference.rollouts <= 0:
        return None
    return run.rollouts / reference.rollouts


def build_table(
    frames: dict[str, pd.DataFrame],
    curves: dict[str, pd.DataFrame],
    target: float,
    baseline: str | None = None,
    compare: str | None = None,
) -> pd.DataFrame:
    """One row per run with raw numbers (None/NaN where not reached or not logged); see the module doc."""
    reaches = {label: rollouts_to_target(curve, target) for label, curve in curves.items()}
    references = [ref for ref in (baseline, compare) if ref is not None]
    rows = []
    for ref in references:
        if reaches[ref] is not None and reaches[ref].rollouts <= 0:
            logger.warning(
                "run %s reaches the target before any rollout (step %d): no ratio to it", ref, reaches[ref].step
            )
    for label, curve in curves.items():
        frame, reach = frames[label], reaches[label]
        if reach is None:
            logger.warning("run %s never reaches the target %.4f (peak %.4f)", label, target, curve["smoothed"].max())
        step_times = frame[STEP_TIME].dropna() if STEP_TIME in frame.columns else pd.Series(dtype=float)
        row = {
            "run": label,
            "reached": reach is not None,
            "step": reach.step if reach else None,
            "rollouts_to_target": reach.rollouts if reach else None,
        }
        row.update({f"rollouts_ratio_vs_{ref}": _ratio(reaches[ref], reach) for ref in references})
        row.update(
            {
                "wallclock_s_to_target": _sum_to(frame, STEP_TIME, reach.step, label) if reach else None,
                "gen_calls_to_target": _sum_to(frame, GEN_CALLS, reach.step, label) if reach else None,
                "mean_s_per_step": float(step_times.mean()) if len(step_times) else None,
                "peak_accuracy": float(curve["smoothed"].max()),
                "total_rollouts": float(frame[ROLLOUTS].max()),
                "target": target,
            }
        )
        rows.append(row)
    table = pd.DataFrame(rows)
    # Counts stay integers in the CSV, with empty cells where a run has none.
    for column in ("step", "rollouts_to_target", "gen_calls_to_target", "total_rollouts"):
        table[column] = pd.to_numeric(table[column]).round().astype("Int64")
    return table


def format_cell(value, fmt: str, empty: str = "—", suffix: str = "") -> str:
    return empty if pd.isna(value) else format(value, fmt) + suffix


def to_markdown(table: pd.DataFrame, caption: str) -> str:
    """The table as Markdown, numbers formatted for reading (the CSV keeps them raw)."""
    ratio_columns = [c for c in table.columns if c.startswith("rollouts_ratio_vs_")]
    header = ["run", "step", "rollouts to target"]
    header += [f"rollouts to target × {c.removeprefix('rollouts_ratio_vs_')}" for c in ratio_columns]
    header += ["wall-clock to target (s)", "gen calls to target", "mean s/step", "peak acc", "total rollouts"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        reached = row["reached"]
        rollouts = (
            format_cell(row["rollouts_to_target"], ",.0f")
            if reached
            else f"not reached (peak {row['peak_accuracy']:.4f})"
        )
        cells = [row["run"], format_cell(row["step"], ".0f"), rollouts]
        cells += [format_cell(row[c], ".2f", suffix="×") for c in ratio_columns]
        cells += [
            format_cell(row["wallclock_s_to_target"], ",.1f", "missing" if reached else "—"),
            format_cell(row["gen_calls_to_target"], ",.0f", "missing" if reached else "—"),
            format_cell(row["mean_s_per_step"], ",.1f", "missing"),
            format_cell(row["peak_accuracy"], ".4f"),
            format_cell(row["total_rollouts"], ",.0f"),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def build_seed_table(
    curves: dict[str, pd.DataFrame],
    groups: dict[str, list[str]],
    target: float,
    references: tuple[str, ...] = (),
    kind: str = "linear",
) -> pd.DataFrame:
    """One row per configuration: rollouts-to-target over its seeds (each at its first validation point at or above
    the target; those that reached it) and the count; its mean curve's peak and crossing, read as the interpolated
    table reads them (``interpolated_mean_curve``, ``read_crossing``: inf never reached, NaN not read, the seeds left
    out named); then against each of ``references`` its rollouts over the reference's, of the seeds' means (only
    when every seed of both got there) and of the mean curves' crossings (``crossing_ratio``)."""
    rows = []
    for config, labels in groups.items():
        runs = [curves[label] for label in labels]
        reaches = [rollouts_to_target(curve, target) for curve in runs]
        reached = [r.rollouts for r in reaches if r]
        values = pd.Series(reached, dtype=float)
        # A run that ended before its configuration's last point without reaching the target is not read there.
        stopped = stopped_runs(runs) & np.array([r is None for r in reaches])
        crossing = read_crossing(runs, target, kind)
        rows.append(
            {
                "configuration": config,
                "runs": ",".join(labels),
                "seeds": len(labels),
                "seeds_reached": len(reached),
                "seeds_stopped": int(stopped.sum()),
                "rollouts_to_target_mean": values.mean() if reached else None,
                "rollouts_to_target_min": values.min() if reached else None,
                "rollouts_to_target_max": values.max() if reached else None,
                "rollouts_to_target_std": values.std(ddof=1) if len(reached) > 1 else None,
                "mean_curve_rollouts_to_target": crossing.rollouts,
                "mean_curve_left_out": left_out_runs(labels, crossing.used, runs, short=True),
                "peak_mean_accuracy": float(interpolated_mean_curve(runs, kind)["smoothed"].max()),
                "target": target,
            }
        )
    table = pd.DataFrame(rows)
    by_config = table.set_index("configuration")
    # A ratio of means is only fair when every seed of both configurations got there.
    complete = by_config.eval("seeds == seeds_reached")
    # A mean curve's crossing exists even where one of its seeds never gets there, so its ratio exists where the fair
    # ratio of means does not.
    crossings = by_config["mean_curve_rollouts_to_target"].to_numpy(float)
    for ref in references:
        table[f"rollouts_ratio_vs_{ref}"] = _ratios(by_config["rollouts_to_target_mean"], ref, complete)
    for ref in references:
        reference = np.full_like(crossings, by_config.loc[ref, "mean_curve_rollouts_to_target"])
        table[f"mean_curve_rollouts_ratio_vs_{ref}"] = crossing_ratio(crossings, reference)
    for column in ("rollouts_to_target_mean", "rollouts_to_target_min", "rollouts_to_target_max"):
        table[column] = pd.to_numeric(table[column])
    return table


def _ratios(rollouts: pd.Series, ref: str, usable: pd.Series) -> list[float | None]:
    """Per configuration: its rollouts over ``ref``'s, where both are usable and ``ref``'s is above 0."""
    return [
        rollouts[config] / rollouts[ref] if usable[ref] and usable[config] and rollouts[ref] > 0 else None
        for config in rollouts.index
    ]


def seed_table_markdown(table: pd.DataFrame, caption: str) -> str:
    ratio_columns = [c for c in table.columns if c.startswith("rollouts_ratio_vs_")]
    curve_columns = [c for c in table.columns if c.startswith("mean_curve_rollouts_ratio_vs_")]
    header = ["configuration", "seeds reaching target", "rollouts to target: mean", "min–max", "std"]
    header += [f"mean rollouts to target × {c.removeprefix('rollouts_ratio_vs_')}" for c in ratio_columns]
    header += ["mean curve reaches target at"]
    header += [
        f"mean curve: rollouts to target × {c.removeprefix('mean_curve_rollouts_ratio_vs_')}" for c in curve_columns
    ]
    header += ["peak of mean acc"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        spread = "—"
        if not pd.isna(row["rollouts_to_target_min"]):
            spread = f"{row['rollouts_to_target_min']:,.0f}–{row['rollouts_to_target_max']:,.0f}"
        cells = [
            row["configuration"],
            _seeds_reached_cell(row),
            format_cell(row["rollouts_to_target_mean"], ",.0f"),
            spread,
            format_cell(row["rollouts_to_target_std"], ",.0f"),
        ]
        cells += [format_cell(row[c], ".2f", suffix="×") for c in ratio_columns]
        cells += [crossing_cell(row["mean_curve_rollouts_to_target"], row["mean_curve_left_out"])]
        cells += [reached_cell(row[c], ".2f", "×") for c in curve_columns]
        cells += [format_cell(row["peak_mean_accuracy"], ".4f")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def left_out_runs(labels: list[str], used, curves: list[pd.DataFrame], short: bool = False) -> str:
    """The runs not in ``used``, each with where it ended ('s8 (ended at 17,424)' with ``short``, for a row of one
    configuration): '' when none."""
    ends = run_ends(curves)
    named = [(SEED_SUFFIX.match(label) if short else None, label) for label in labels]
    return ", ".join(
        f"{'s' + match['seed'] if match else label} (ended at {ends[i]:,.0f})"
        for i, (match, label) in enumerate(named)
        if i not in used
    )


def reached_cell(value: float, fmt: str, suffix: str = "") -> str:
    """A crossing or a ratio of crossings: NaN is not read, inf not reached."""
    if pd.isna(value):
        return "not read"
    return "not reached" if value == np.inf else format_cell(value, fmt, suffix=suffix)


def crossing_cell(rollouts: float, left_out: str) -> str:
    """A mean curve's crossing, with the runs it was not read from (``left_out_runs``) where there are any."""
    cell = reached_cell(rollouts, ",.0f")
    return f"{cell} (left out: {left_out})" if left_out else cell


def _seeds_reached_cell(row: dict) -> str:
    """'k of n', or 'k of m finished, s stopped" where s runs ended early below the target (not read, not failed)."""
    stopped = row["seeds_stopped"]
    if not stopped:
        return f"{row['seeds_reached']} of {row['seeds']}"
    return f"{row['seeds_reached']} of {row['seeds'] - stopped} finished, {stopped} stopped"


def equal_accuracy_table(means: dict[str, pd.DataFrame], baseline: str) -> pd.DataFrame:
    """Per configuration other than ``baseline`` and validation step k > 0 of its mean curve: the step and rollouts at
    which the baseline's mean curve first reached the same accuracy (linear between validation points), how many
    baseline steps one of its steps was worth (that step / k) and its rollouts over the baseline's; then the same
    two for the window since its previous validation step alone (a cumulative ratio hides where a method gains or
    loses: a costly start and cheap later steps average out). Empty where the baseline never got that far; the
    window's rollout ratio also where the baseline's equal point did not move forward (the accuracy fell)."""
    rows = []
    for config, curve in means.items():
        if config == baseline:
            continue
        reaches = [interpolate_reach(means[baseline], float(a)) for a in curve["smoothed"]]
        for i in [k for k, at in enumerate(curve.index) if at > 0]:
            step, point, reach = int(curve.index[i]), curve.iloc[i], reaches[i]
            before = reaches[i - 1] if i > 0 else None  # a curve without step 0 has no first window
            base_step, base_rollouts = reach if reach else (None, None)
            window_worth = window_ratio = None
            if reach and before:
                window_worth = (reach[0] - before[0]) / (step - curve.index[i - 1])
                if reach[1] > before[1]:
                    window_ratio = (point["rollouts"] - curve.iloc[i - 1]["rollouts"]) / (reach[1] - before[1])
            rows.append(
                {
                    "configuration": config,
                    "step": step,
                    "accuracy": float(point["smoothed"]),
                    "rollouts": float(point["rollouts"]),
                    "baseline_step": base_step,
                    "baseline_rollouts": base_rollouts,
                    "steps_worth": base_step / step if reach else None,
                    "rollouts_ratio": point["rollouts"] / base_rollouts if reach and base_rollouts else None,
                    "window_steps_worth": window_worth,
                    "window_rollouts_ratio": window_ratio,
                }
            )
    numeric = ["baseline_step", "baseline_rollouts", "steps_worth", "rollouts_ratio"]
    numeric += ["window_steps_worth", "window_rollouts_ratio"]
    table = pd.DataFrame(rows, columns=["configuration", "step", "accuracy", "rollouts", *numeric])
    for column in numeric:
        table[column] = pd.to_numeric(table[column])
    return table


def equal_accuracy_markdown(table: pd.DataFrame, baseline: str) -> str:
    header = [
        "configuration",
        "step",
        "mean acc.",
        "rollouts",
        f"{baseline} step with that acc.",
        f"{baseline} rollouts there",
        f"{baseline} steps per step",
        f"rollouts × {baseline}",
        f"since the previous step: {baseline} steps per step",
        f"since the previous step: rollouts × {baseline}",
    ]
    lines = [
        f"Each configuration's mean curve at equal steps (its seeds averaged at the validation steps all of them "
        f"logged, unlike the seeds table's) against {baseline}'s at equal accuracy: where {baseline}'s first reached "
        "the same accuracy (linear between its validation points; — where it never did). The last two "
        "columns are the same over the steps since the configuration's previous validation step alone.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in table.to_dict("records"):
        cells = [
            row["configuration"],
            str(row["step"]),
            f"{row['accuracy']:.3f}",
            f"{row['rollouts']:,.0f}",
            format_cell(row["baseline_step"], ".1f"),
            format_cell(row["baseline_rollouts"], ",.0f"),
            format_cell(row["steps_worth"], ".2f"),
            format_cell(row["rollouts_ratio"], ".2f", suffix="×"),
            format_cell(row["window_steps_worth"], ".2f"),
            format_cell(row["window_rollouts_ratio"], ".2f", suffix="×"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _logged(label: str, frame: pd.DataFrame, metric: str) -> pd.Series:
    """A run's values of ``metric`` by step; empty, with a warning, where the run never logged it."""
    if metric not in frame.columns:
        logger.warning("run %s: no %s logged", label, metric)
        return pd.Series(dtype=float)
    return frame[metric]


def means_table(frames: dict[str, pd.DataFrame], metrics: list[str], seeds: bool) -> pd.DataFrame:
    """Each metric's mean over the steps that logged it, per run; with ``seeds``, per configuration: the mean of
    its seeds' means and their min and max. A metric a run did not log is NaN (and warned about)."""
    per_run = {}
    for label, frame in frames.items():
        # An empty series' mean is NaN: a metric the run never logged.
        per_run[label] = {m: float(_logged(label, frame, m).mean()) for m in metrics}
    groups = seed_groups(list(frames)) if seeds else {label: [label] for label in frames}
    rows = []
    for config, labels in groups.items():
        row = {"configuration" if seeds else "run": config, "runs": len(labels)}
        for m in metrics:
            values = pd.Series([per_run[label][m] for label in labels], dtype=float)
            row[m] = values.mean(skipna=False)
            row[f"{m} min"], row[f"{m} max"] = values.min(skipna=False), values.max(skipna=False)
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_and_range(mean: float, low: float, high: float, runs: int, fmt: str) -> str:
    """A table cell: the mean, and the runs' min–max when there are several."""
    return f"{mean:{fmt}} ({low:{fmt}}–{high:{fmt}})" if runs > 1 else f"{mean:{fmt}}"


def means_markdown(table: pd.DataFrame, metrics: list[str]) -> str:
    key = table.columns[0]
    lines = [
        "Mean over the logged training steps"
        + (" (seeds: mean of their means, min–max)" if key != "run" else "")
        + ".",
        "",
        f"| {key} | runs | " + " | ".join(metrics) + " |",
        "|" + "---|" * (len(metrics) + 2),
    ]
    for _, row in table.iterrows():
        cells = []
        for m in metrics:
            if pd.isna(row[m]):
                cells.append("—")
            else:
                cells.append(_mean_and_range(row[m], row[f"{m} min"], row[f"{m} max"], row["runs"], ".4g"))
        lines.append(f"| {row[key]} | {row['runs']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _window_label(window: tuple[int, int] | None) -> str:
    return "all steps" if window is None else f"steps {window[0]}–{window[1]}"


def sums_table(
    frames: dict[str, pd.DataFrame], metrics: list[str], windows: list[tuple[int, int] | None]
) -> pd.DataFrame:
    """Per run, each metric's sum over each window of steps (inclusive; ``None``: every logged step), in columns
    ``"<metric>, <window>"``. NaN where the run never logged the metric or logged it at no step of the window. For a
    bounded window, ``"<metric>, <window>: steps logged"`` counts the steps the sum covers, so that a run that
    stopped inside the window keeps that fact in the CSV too."""

    def columns(label: str, metric: str, every: pd.Series) -> dict:
        cells = {}
        for window in windows:
            name = _window_label(window)
            logged = every
            if window is not None:
                logged = every.loc[window[0] : window[1]]
                steps = window[1] - window[0] + 1
                if not every.empty and logged.count() < steps:  # a metric never logged was warned about once
                    logger.warning(
                        "run %s: %s logged at %d of the %d steps %s", label, metric, logged.count(), steps, name
                    )
            cells[f"{metric}, {name}"] = float(logged.sum()) if logged.count() else float("nan")
            if window is not None:
                cells[f"{metric}, {name}: steps logged"] = int(logged.count())
        return cells

    return _per_run_table(frames, metrics, columns)


def _per_run_table(frames: dict[str, pd.DataFrame], metrics: list[str], columns) -> pd.DataFrame:
    """One row a run: ``columns(label, metric, logged)`` for each metric, ``logged`` its values by step."""
    rows = []
    for label, frame in frames.items():
        row: dict = {"run": label}
        for metric in metrics:
            row.update(columns(label, metric, _logged(label, frame, metric)))
        rows.append(row)
    return pd.DataFrame(rows)


def sums_markdown(table: pd.DataFrame, windows: list[tuple[int, int] | None]) -> str:
    """``sums_table`` as Markdown; a sum over part of its window (a run that stopped inside it) says so."""
    lengths = {_window_label(w): w[1] - w[0] + 1 for w in windows if w is not None}

    def cell(row: pd.Series, column: str) -> str:
        if pd.isna(row[column]):
            return "—"
        logged, length = row.get(f"{column}: steps logged"), lengths.get(column.rsplit(", ", 1)[-1])
        partial = f" ({logged:.0f} of {length} steps)" if length is not None and logged < length else ""
        return _count_or_fraction(row[column]) + partial

    columns = [c for c in table.columns if c != "run" and not c.endswith(": steps logged")]
    return _per_run_markdown("Sums over windows of training steps (inclusive), per run.", table, columns, cell)


def _per_run_markdown(title: str, table: pd.DataFrame, columns: list[str], cell) -> str:
    """One row a run of ``table``: ``cell(row, column)`` for each of ``columns``."""
    lines = [title, "", "| run | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 1)]
    for _, row in table.iterrows():
        lines.append(f"| {row['run']} | " + " | ".join(cell(row, c) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _count_or_fraction(value: float) -> str:
    """Counts in full (a 30-step rollout total is not 3.187e+04), anything else to 4 significant digits."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def values_table(frames: dict[str, pd.DataFrame], metrics: list[str], steps: list[int]) -> pd.DataFrame:
    """Per run, each metric's logged value at each of ``steps``, in columns ``"<metric>, step <s>"``; NaN where
    the run did not log it there (a run that stopped earlier, or a metric logged only at some steps)."""
    return _per_run_table(
        frames,
        metrics,
        lambda label, metric, logged: {f"{metric}, step {s}": float(logged.get(s, float("nan"))) for s in steps},
    )


def values_markdown(table: pd.DataFrame) -> str:
    title = "Training metrics at given steps, per run (— where the run did not log the metric at that step)."
    columns = [c for c in table.columns if c != "run"]
    return _per_run_markdown(
        title, table, columns, lambda row, c: "—" if pd.isna(row[c]) else _count_or_fraction(row[c])
    )


def at_steps_markdown(curves: dict[str, pd.DataFrame], steps: list[int]) -> str:
    """Per run: the (smoothed) validation accuracy and cumulative generated rollouts at each of ``steps``."""
    head = "| run | " + " | ".join(f"acc. at step {s} | rollouts at step {s}" for s in steps) + " |"
    lines = ["Validation accuracy (as averaged for the table) and cumulative generated rollouts at given steps.", ""]
    lines += [head, "|" + "---|" * (1 + 2 * len(steps))]
    for label, curve in curves.items():
        cells = []
        for step in steps:
            if step in curve.index:
                cells += [f"{curve.loc[step, 'smoothed']:.3f}", f"{curve.loc[step, 'rollouts']:,.0f}"]
            else:
                logger.warning("run %s: no validation at step %d", label, step)
                cells += ["—", "—"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def at_rollouts_table(
    curves: dict[str, pd.DataFrame], groups: dict[str, list[str]], budgets: list[float], kind: str = "linear"
):
    """Per configuration (its runs in ``groups``) and budget: how many runs got that far, and the mean, min and max
    of their accuracy there, the mean only where all of them did (a mean over the seeds that ran longer would
    favour them)."""
    rows = []
    for config, labels in groups.items():
        per_run = {label: accuracy_at_rollouts(curves[label], budgets, kind) for label in labels}
        for i, budget in enumerate(budgets):
            reached = [per_run[label][i] for label in labels if per_run[label][i] is not None]
            complete = len(reached) == len(labels)
            rows.append(
                {
                    "configuration": config,
                    "rollouts": budget,
                    "runs": len(labels),
                    "runs_there": len(reached),
                    "mean": sum(reached) / len(reached) if complete else None,
                    "min": min(reached) if complete else None,
                    "max": max(reached) if complete else None,
                    "values": ",".join(
                        "" if per_run[label][i] is None else f"{per_run[label][i]:.4f}" for label in labels
                    ),
                }
            )
    table = pd.DataFrame(
        rows, columns=["configuration", "rollouts", "runs", "runs_there", "mean", "min", "max", "values"]
    )
    for column in ("mean", "min", "max"):
        table[column] = pd.to_numeric(table[column])
    return table


def at_rollouts_markdown(table: pd.DataFrame, budgets: list[float], kind: str = "linear") -> str:
    lines = [
        "Validation accuracy (as averaged for the table) at equal cumulative generated rollouts: each run's curve "
        f"{'linear' if kind == 'linear' else 'PCHIP'} between its validation points, nothing past its last one; for a "
        "configuration of several seeds the "
        "mean of the seeds and their min–max, given only where every seed got that far (else how many did).",
        "",
        "| configuration | runs | " + " | ".join(f"acc. at {b:,.0f} rollouts" for b in budgets) + " |",
        "|" + "---|" * (2 + len(budgets)),
    ]
    for config, rows in table.groupby("configuration", sort=False):
        cells = []
        for row in rows.to_dict("records"):
            if pd.isna(row["mean"]):
                cells.append(f"— ({row['runs_there']} of {row['runs']})")
            else:
                cells.append(_mean_and_range(row["mean"], row["min"], row["max"], row["runs"], ".3f"))
        lines.append(f"| {config} | {rows['runs'].iloc[0]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def budget_points_table(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per run validated by rollout budget (``trainer.val_rollout_interval``): the budgets its validations stood for and
    how far past each budget its point lay (the rollouts generated at that validation minus the budget). A
    validation that stands for k budgets overshoots each of them; runs that logged no budget are left out."""
    rows = []
    for label, frame in frames.items():
        if VAL_BUDGET not in frame:
            continue
        points = frame.dropna(subset=[VAL_BUDGET])
        budgets, overshoots = [], []
        for _, point in points.iterrows():
            for k in range(int(point[VAL_BUDGETS_REACHED])):
                budget = point[VAL_BUDGET] - k * point[VAL_BUDGET_INTERVAL]
                budgets.append(budget)
                overshoots.append(point[VAL_BUDGET_ROLLOUTS] - budget)
        rows.append(
            {
                "run": label,
                "interval": float(points[VAL_BUDGET_INTERVAL].iloc[0]),
                "budgets": len(budgets),
                "last_budget": max(budgets),
                "validations": len(points),
                "overshoot_mean": float(np.mean(overshoots)),
                "overshoot_max": float(np.max(overshoots)),
            }
        )
    return pd.DataFrame(rows)


def budget_points_markdown(table: pd.DataFrame) -> str:
    caption = (
        "Validation at rollout budgets: per run, the budgets (multiples of its interval) its validations stood for, "
        "and how far past each budget the validation's point lay, in generated rollouts (0: on the budget)."
    )
    header = ["run", "interval", "budgets validated", "last budget", "validations", "overshoot: mean", "max"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        cells = [row["run"], f"{row['interval']:,.0f}", str(row["budgets"]), f"{row['last_budget']:,.0f}"]
        cells += [str(row["validations"]), f"{row['overshoot_mean']:,.0f}", f"{row['overshoot_max']:,.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
