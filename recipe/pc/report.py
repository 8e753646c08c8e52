"""Rollouts-to-target table and accuracy plot from training-run logs.

Usage::

    python -m recipe.pc.report [--baseline LABEL] [--compare LABEL] [--target ACC] [--smooth K]
                               [--benchmarks A,B] [--seeds [--interpolate [--ci]]] [--at-rollouts R1,R2]
                               [--out DIR] [--no-plot] RUN [RUN ...]

A RUN is ``LABEL=PATH``, ``LABEL=tb:DIR`` or ``LABEL=wandb:ENTITY/PROJECT/RUN_ID``; without ``LABEL=`` the
label is the file name without its extension, the folder name or the W&B run id.

Input formats (detected from the file extension and content):

* verl ``file`` logger (``trainer.logger=[file]``): JSON Lines, one line per ``Tracking.log`` call,
  ``{"step": <int>, "data": {"<metric>": <number>, ...}}``. Several lines may share a step (validation
  before training at step 0; a final validation logged on its own; epoch-end ``exclusion_stats/*`` lines):
  they are merged, the later line winning for a metric logged twice at the same step.
* W&B CSV (``*.csv``, the run-history "Export CSV"): one column per metric plus a step column named
  ``_step``, ``Step`` or ``step``; an empty cell means "not logged at that step". Chart exports are also
  read: their ``<metric>__MIN``/``__MAX`` columns are dropped and a ``<run name> - `` prefix shared by every
  metric column is removed.
* W&B JSON (any other extension): a JSON list of row objects, or JSON Lines of row objects, each with
  ``_step`` (as ``run.history()``/``run.scan_history()`` dumps give). Keys starting with ``_`` (``_runtime``,
  ``_timestamp``, ...) and non-numeric values are ignored. File-logger lines are accepted here too.
* JSON Lines whose LAST line is cut off (a run still writing, or killed) are read without it, with a warning
  naming the file and line; an unparseable line anywhere else is an error.
* TensorBoard (``tb:DIR``, or any folder given as PATH): the scalars of the ``events.out.tfevents.*`` files
  directly in DIR, as verl's ``tensorboard`` logger writes them (tag = metric name, step = training step).
* W&B run (``wandb:ENTITY/PROJECT/RUN_ID``): every row of ``wandb.Api().run(...).scan_history()``, read like
  the W&B JSON rows above; needs network access and a W&B login.

Metrics used (logged by this project's trainer):

* ``val-core/<data_source>/acc/mean@<N>``: validation accuracy per benchmark (N may differ per benchmark).
* ``rollout_stats/cumulative_rollouts_sample``: running total of generated rollouts, the x-axis. A
  validation at step s is placed at the total logged at step s; a step without a training line (validation
  before training, step 0) takes the last total before it, 0 before any training.
* ``timing_s/step``, ``training/num_gen_batches`` (optional: reported as missing when absent) and
  ``training/zero_variance_group_frac`` (optional, second plot panel).

Method:

* Accuracy at a validation point is the unweighted mean of the chosen benchmarks' values (``--benchmarks``;
  by default every benchmark present in all runs). Only validation points where every chosen benchmark was
  logged count.
* ``--smooth K`` replaces each point by the trailing moving average of the last K validation points (fewer at
  the start of the run: the first point is itself, the second the mean of two, ...). K=1 (default) is no
  smoothing.
* The target defaults to the peak smoothed accuracy of the baseline run (``--baseline``, by default the only
  run whose label contains "grpo"); ``--target`` sets it explicitly.
* A run reaches the target at the FIRST validation point whose smoothed accuracy is >= target (1e-9 float
  tolerance). No interpolation between validation points: the reported rollouts are that step's cumulative
  generated rollouts, so they are an upper bound at the validation frequency's resolution.
* Speed-up vs a reference run = reference's rollouts-to-target / this run's rollouts-to-target. The second
  ratio column compares with ``--compare`` (by default the only other run whose label contains "dapo").
* Wall-clock to target sums ``timing_s/step`` over the steps up to and including the reach step (this
  trainer times validation separately, as ``timing_s/testing``, so it is not included); generation calls to
  target sum ``training/num_gen_batches`` likewise. Mean s/step is over all logged steps.

Seeds (``--seeds``): a label ending in ``_s<N>``, ``-s<N>``, ``_seed<N>`` or ``-seed<N>`` is seed N of the
configuration named by the rest (``grpo_s1``, ``grpo_s2`` -> ``grpo``); other labels are configurations of one
run. ``--baseline``/``--compare`` then name configurations. A configuration's mean curve averages its seeds'
accuracy and cumulative rollouts at the validation steps every seed logged; the target defaults to the peak
of the baseline's smoothed mean curve. Per configuration: how many seeds reach the target, and the mean,
min-max and sample std (ddof=1) of rollouts-to-target over the seeds that do; speed-up = reference mean /
this mean, only when every seed of both reached it. The mean curve's own crossing (its mean rollouts at the first
validation step where its accuracy reaches the target) and the mean-curve speed-up (reference crossing / this one)
exist even where some seed never reaches the target.

``--at-steps S1,S2``: each run's validation accuracy (averaged and smoothed as for the table) and cumulative
generated rollouts at those validation steps, as ``at_steps.md`` and after the table on stdout.

``--at-rollouts R1,R2``: each run's validation accuracy at those cumulative generated rollouts, linear between its
validation points and left empty past its last one (no extrapolation), as ``at_rollouts.md``/``.csv`` and after the
table on stdout; with ``--seeds``, per configuration the mean of its seeds and their min-max, given only where every
seed got that far. This is the comparison at equal budget, where rollouts-to-target compares speed to one accuracy.

``--interpolate`` (with ``--seeds``): a read-off that treats every configuration alike. Each run's accuracy is linear
between its validation points in cumulative generated rollouts; a configuration's mean curve is the pointwise mean of
its seeds' (at every seed's points, within the range all of them reached: seeds are paired at equal rollouts, not at
equal steps). Its accuracy at each ``--at-rollouts`` budget is that curve there ("not reached" where a seed stopped
before); the target is the peak of the baseline's mean curve over its points (or ``--target``); a mean curve reaches
it at the first rollouts where it is at or above it, linear between points, the baseline too; ratio = that over the
baseline's (rollouts × baseline, below 1 is fewer). As ``interpolated.md``/``.csv`` and after the table on stdout.

``--ci`` (with ``--seeds --interpolate --at-rollouts R1,R2``, every configuration of 2 seeds or more): each other
configuration against the baseline, as ``intervals.md``/``.csv`` and on stdout: at each budget the difference of the
mean curves, every run's value there, its 95% percentile-bootstrap interval and the two-sided p-value of the exact
permutation test of the difference of the runs' means (every split of the pooled runs into groups of the original
sizes: 252 for 5 + 5); then the ratio of crossings with its bootstrap interval. The bootstrap draws each
configuration's runs with replacement, independently, ``--ci-resamples`` times (default 10,000) from numpy's
``default_rng(--ci-seed)`` (default 0); target and crossings are recomputed in each resample, and one in which the
configuration never reaches the target is an infinite ratio (an interval's end "∞").

``--means M1,M2``: each metric's mean over the steps that logged it, per run (with ``--seeds``: per configuration,
the mean of its seeds' means and their min–max), as ``means_table.md``/``.csv`` and after the table on stdout.

``--values M1,M2 --value-steps S1,S2``: each metric's logged value at each of those training steps, per run (the
rounds of step 1, the step a counter first moves), as ``values_table.md``/``.csv`` and after the table on stdout.

``--sums M1,M2`` (with ``--sum-steps A:B,C:D``, inclusive windows of training steps; default every logged step):
each metric's sum over each window, per run (seeds one row each: these are counts quoted per seed, such as the
generation rounds ``training/num_gen_batches`` or the skipped prompts ``filtering_stats/skipped_count``), as
``sums_table.md``/``.csv`` and after the table on stdout. A window step at which a run did not log the metric is
warned about and, in the table, marked with the steps it covers ("5,632 (11 of 12 steps)"; in the CSV a
``: steps logged`` column), so that a short run's sum is not read as the whole window's.

Outputs: the Markdown table on stdout, ``--out DIR`` (default ``report/``) gets ``table.md``, ``table.csv`` and
``accuracy_vs_rollouts.png`` (with ``--seeds``: ``seeds_table.md``, ``seeds_table.csv`` and
``seeds_accuracy_vs_rollouts.png``), and a ``wrote <path>`` line per file goes to stderr. Without matplotlib
the plot is skipped with a one-line warning. Warnings and per-run problems go to stderr; a run that cannot
be used is skipped. The exit status is non-zero only when no table can be produced.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

ROLLOUTS = "rollout_stats/cumulative_rollouts_sample"
STEP_TIME = "timing_s/step"
GEN_CALLS = "training/num_gen_batches"
ZERO_VAR = "training/zero_variance_group_frac"
_VAL_CORE_ACC = re.compile(r"^val-core/(?P<source>.+)/acc/mean@(?P<n>\d+)$")
_CSV_STEP_COLUMNS = ("_step", "Step", "step")
_SEED_SUFFIX = re.compile(r"^(?P<config>.+?)[_-]s(?:eed)?(?P<seed>\d+)$")
DEFAULT_OUT = Path("report")
INSTALL_PLOT = 'pip install -e ".[report]"'
_TOLERANCE = 1e-9
CI_RESAMPLES = 10_000


class ReportError(Exception):
    """A problem that stops the report (or, raised for one run, that run's part of it)."""


@dataclass(frozen=True)
class Reach:
    """The first validation point at or above the target."""

    step: int
    rollouts: float
    accuracy: float


# ------------------------------------------------------------------ loading
@dataclass(frozen=True)
class RunSource:
    """Where a run's metrics are: a log ``file``, a ``tensorboard`` event folder or a ``wandb`` run path."""

    kind: str
    location: str


def parse_run_arg(arg: str) -> tuple[str, RunSource]:
    """``[LABEL=]PATH``, ``[LABEL=]tb:DIR`` or ``[LABEL=]wandb:ENTITY/PROJECT/RUN_ID`` -> (label, source).

    Without a label: a file's name without extension, a folder's name, a W&B run's id. An existing file
    named with '=' stays a path. A malformed W&B path raises ReportError.
    """
    label, sep, location = arg.partition("=")
    if not (sep and label and "/" not in label and not Path(arg).exists()):
        label, location = "", arg
    if location.startswith("wandb:"):
        run_path = location.removeprefix("wandb:").strip("/")
        parts = run_path.split("/")
        if not all(parts) or not (len(parts) == 3 or (len(parts) == 4 and parts[2] == "runs")):
            raise ReportError(f"{arg}: expected wandb:ENTITY/PROJECT/RUN_ID, got {location!r}")
        return label or parts[-1], RunSource("wandb", run_path)
    if location.startswith("tb:"):
        folder = Path(location.removeprefix("tb:"))
        return label or folder.resolve().name, RunSource("tensorboard", str(folder))
    path = Path(location)
    if path.is_dir():  # a folder can only be a TensorBoard log; load_run says so if it holds no event file
        return label or path.resolve().name, RunSource("tensorboard", str(path))
    return label or path.stem, RunSource("file", str(path))


def _numeric_items(row: dict) -> dict[str, float]:
    # bool is an int subclass but never a metric value worth plotting; None is orjson's NaN.
    return {
        k: float(v)
        for k, v in row.items()
        if not k.startswith("_") and isinstance(v, int | float) and not isinstance(v, bool)
    }


def _json_record(obj, where: str) -> tuple[int, dict[str, float]]:
    if not isinstance(obj, dict):
        raise ReportError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if isinstance(obj.get("data"), dict) and "step" in obj:  # verl file logger
        step, data = obj["step"], obj["data"]
    elif "_step" in obj or "step" in obj:  # W&B history row
        step, data = obj.get("_step", obj.get("step")), obj
    else:
        raise ReportError(f"{where}: no step: expected {{'step', 'data'}} (verl file logger) or a '_step' key (W&B)")
    if isinstance(step, bool) or not isinstance(step, int | float) or step != int(step):
        raise ReportError(f"{where}: step {step!r} is not an integer")
    return int(step), _numeric_items(data)


def _frame_from_records(records: list[tuple[int, dict[str, float]]], where: Path | str) -> pd.DataFrame:
    if not records:
        raise ReportError(f"{where}: no log lines")
    steps = [step for step, _ in records]
    frame = pd.DataFrame([data for _, data in records], index=pd.Index(steps, name="step"))
    return _merge_steps(frame)


def _merge_steps(frame: pd.DataFrame) -> pd.DataFrame:
    # groupby().last() takes each column's last non-null value, so lines sharing a step combine.
    frame = frame.groupby(level=0, sort=True).last()
    frame.index = frame.index.astype(int).rename("step")
    return frame.dropna(axis=1, how="all")


def _load_json(path: Path) -> pd.DataFrame:
    text = path.read_text()
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ReportError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
        records = [_json_record(row, f"{path}: row {i}") for i, row in enumerate(rows)]
    else:
        lines = text.splitlines()
        last = max((i for i, line in enumerate(lines, start=1) if line.strip()), default=0)
        records = []
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                # A run still writing, or killed mid-write, leaves its last line cut off: the rest is good data.
                if lineno == last and records:
                    logger.warning("%s: line %d is cut off (%s); it is left out", path, lineno, exc.msg)
                    continue
                raise ReportError(f"{path}: line {lineno}: invalid JSON: {exc.msg}") from None
            records.append(_json_record(obj, f"{path}: line {lineno}"))
    return _frame_from_records(records, path)


def _load_csv(path: Path) -> pd.DataFrame:
    try:
        raw = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot parse CSV: {exc}") from None
    step_col = next((c for c in _CSV_STEP_COLUMNS if c in raw.columns), None)
    if step_col is None:
        raise ReportError(f"{path}: no step column ({', '.join(_CSV_STEP_COLUMNS)}); columns: {list(raw.columns)[:8]}")
    steps = pd.to_numeric(raw.pop(step_col), errors="coerce")
    bad = steps.isna() | (steps != steps.round())
    if bad.any():
        line = int(bad.to_numpy().nonzero()[0][0]) + 2  # +1 for the header, +1 for 1-based lines
        raise ReportError(f"{path}: line {line}: step column '{step_col}' is not an integer")
    metrics = [c for c in raw.columns if not c.startswith("_") and not c.endswith(("__MIN", "__MAX"))]
    frame = raw[metrics].apply(pd.to_numeric, errors="coerce")
    frame.index = pd.Index(steps.astype(int), name="step")
    prefixes = {c.split(" - ", 1)[0] for c in metrics if " - " in c}
    if len(prefixes) == 1 and all(" - " in c for c in metrics):  # W&B chart export: "<run name> - <metric>"
        frame.columns = [c.split(" - ", 1)[1] for c in metrics]
    return _merge_steps(frame)


def _load_tensorboard(folder: Path) -> pd.DataFrame:
    """Scalars of the event files in ``folder`` (verl's ``tensorboard`` logger: tag = metric name, step = step)."""
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such folder")
    if not any(folder.glob("events.out.tfevents.*")):
        raise ReportError(f"{folder}: no events.out.tfevents.* file in this folder (give the folder that holds them)")
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    # Size 0 keeps every point: the default keeps a reservoir sample of 10,000 per tag.
    accumulator = EventAccumulator(str(folder), size_guidance={SCALARS: 0})
    accumulator.Reload()
    records = [
        (int(event.step), {tag: float(event.value)})
        for tag in accumulator.Tags()[SCALARS]
        for event in accumulator.Scalars(tag)
    ]
    if not records:
        raise ReportError(f"{folder}: the event files hold no scalars")
    return _frame_from_records(records, folder)


def _load_wandb(run_path: str) -> pd.DataFrame:
    """Every history row of a W&B run through the public API (``scan_history``: unsampled, unlike ``history``)."""
    where = f"wandb:{run_path}"
    try:
        import wandb
    except ImportError:
        raise ReportError(f"{where}: wandb is not installed (pip install wandb)") from None
    try:
        rows = list(wandb.Api().run(run_path).scan_history())
    except Exception as exc:  # the API raises its own errors, requests' and ValueError: all mean "cannot read"
        raise ReportError(f"{where}: cannot read the run's history: {type(exc).__name__}: {exc}") from None
    return _frame_from_records([_json_record(row, f"{where}: row {i}") for i, row in enumerate(rows)], where)


def load_run(source: RunSource | str | Path) -> pd.DataFrame:
    """One run's metrics -> DataFrame indexed by step (sorted ints), one float column per metric.

    A plain path is a log file, or a TensorBoard folder when it is a directory.
    """
    if not isinstance(source, RunSource):
        source = RunSource("tensorboard" if Path(source).is_dir() else "file", str(source))
    if source.kind == "wandb":
        return _load_wandb(source.location)
    path = Path(source.location)
    if source.kind == "tensorboard":
        return _load_tensorboard(path)
    if not path.is_file():
        raise ReportError(f"{path}: no such file")
    return _load_csv(path) if path.suffix.lower() == ".csv" else _load_json(path)


def describe_metrics(frame: pd.DataFrame) -> str:
    """Brief summary of what a run logged: metric families with counts."""
    families: dict[str, int] = {}
    for column in frame.columns:
        family = column.split("/", 1)[0] + "/*" if "/" in column else column
        families[family] = families.get(family, 0) + 1
    return ", ".join(f"{name} ({count})" for name, count in sorted(families.items())) or "no metrics"


# ------------------------------------------------------------------ validation curves
def benchmark_columns(frame: pd.DataFrame) -> dict[str, str]:
    """data_source -> its ``val-core/<data_source>/acc/mean@N`` column (largest N if several)."""
    found: dict[str, list[tuple[int, str]]] = {}
    for column in frame.columns:
        match = _VAL_CORE_ACC.match(column)
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
    hit = curve[curve["smoothed"] >= target - _TOLERANCE]
    if hit.empty:
        return None
    step = int(hit.index[0])
    return Reach(step=step, rollouts=float(hit["rollouts"].iloc[0]), accuracy=float(hit["smoothed"].iloc[0]))


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
    if reference is None or run is None or run.rollouts <= 0:
        return None
    return reference.rollouts / run.rollouts


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
    for label, curve in curves.items():
        frame, reach = frames[label], reaches[label]
        if reach is not None and reach.rollouts <= 0:
            logger.warning("run %s reaches the target before any rollout (step %d): no speed-up", label, reach.step)
        if reach is None:
            logger.warning("run %s never reaches the target %.4f (peak %.4f)", label, target, curve["smoothed"].max())
        step_times = frame[STEP_TIME].dropna() if STEP_TIME in frame.columns else pd.Series(dtype=float)
        row = {
            "run": label,
            "reached": reach is not None,
            "step": reach.step if reach else None,
            "rollouts_to_target": reach.rollouts if reach else None,
        }
        row.update({f"speedup_vs_{ref}": _ratio(reaches[ref], reach) for ref in references})
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


def _cell(value, fmt: str, empty: str = "—", suffix: str = "") -> str:
    return empty if pd.isna(value) else format(value, fmt) + suffix


def to_markdown(table: pd.DataFrame, caption: str) -> str:
    """The table as Markdown, numbers formatted for reading (the CSV keeps them raw)."""
    ratio_columns = [c for c in table.columns if c.startswith("speedup_vs_")]
    header = ["run", "step", "rollouts to target"]
    header += [f"speed-up vs {c.removeprefix('speedup_vs_')}" for c in ratio_columns]
    header += ["wall-clock to target (s)", "gen calls to target", "mean s/step", "peak acc", "total rollouts"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        reached = row["reached"]
        rollouts = (
            _cell(row["rollouts_to_target"], ",.0f") if reached else f"not reached (peak {row['peak_accuracy']:.4f})"
        )
        cells = [row["run"], _cell(row["step"], ".0f"), rollouts]
        cells += [_cell(row[c], ".2f", suffix="×") for c in ratio_columns]
        cells += [
            _cell(row["wallclock_s_to_target"], ",.1f", "missing" if reached else "—"),
            _cell(row["gen_calls_to_target"], ",.0f", "missing" if reached else "—"),
            _cell(row["mean_s_per_step"], ",.1f", "missing"),
            _cell(row["peak_accuracy"], ".4f"),
            _cell(row["total_rollouts"], ",.0f"),
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ seeds
def seed_groups(labels: list[str]) -> dict[str, list[str]]:
    """Configuration -> its runs' labels, a configuration being a label less its seed suffix
    (``_s<N>``, ``-s<N>``, ``_seed<N>``, ``-seed<N>``); a label without one is a configuration of one run."""
    groups: dict[str, list[str]] = {}
    for label in labels:
        match = _SEED_SUFFIX.match(label)
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


def build_seed_table(
    curves: dict[str, pd.DataFrame],
    groups: dict[str, list[str]],
    means: dict[str, pd.DataFrame],
    target: float,
    references: tuple[str, ...] = (),
) -> pd.DataFrame:
    """One row per configuration: rollouts-to-target over its seeds (those that reached it) and the count; where its
    mean curve first reaches the target; the speed-ups against ``references``, of the seeds' means (only when every
    seed of both got there) and of the mean curves' crossings."""
    rows = []
    for config, labels in groups.items():
        reached = [r.rollouts for r in (rollouts_to_target(curves[label], target) for label in labels) if r]
        values = pd.Series(reached, dtype=float)
        rows.append(
            {
                "configuration": config,
                "runs": ",".join(labels),
                "seeds": len(labels),
                "seeds_reached": len(reached),
                "rollouts_to_target_mean": values.mean() if reached else None,
                "rollouts_to_target_min": values.min() if reached else None,
                "rollouts_to_target_max": values.max() if reached else None,
                "rollouts_to_target_std": values.std(ddof=1) if len(reached) > 1 else None,
                "mean_curve_rollouts_to_target": getattr(rollouts_to_target(means[config], target), "rollouts", None),
                "peak_mean_accuracy": float(means[config]["smoothed"].max()),
                "target": target,
            }
        )
    table = pd.DataFrame(rows)
    by_config = table.set_index("configuration")
    # A speed-up of means is only fair when every seed of both configurations got there.
    complete = by_config.eval("seeds == seeds_reached")
    # A mean curve's crossing exists even where one of its seeds never gets there (with the default target the
    # baseline's mean curve reaches its own peak), so its ratio exists where the fair speed-up of means does not.
    # It averages rollouts at equal steps, so it can lie below every seed's own crossing.
    curve = by_config["mean_curve_rollouts_to_target"]
    for ref in references:
        table[f"speedup_vs_{ref}"] = _speed_ups(by_config["rollouts_to_target_mean"], ref, complete)
    for ref in references:
        table[f"mean_curve_speedup_vs_{ref}"] = _speed_ups(curve, ref, curve.notna())
    for column in (
        "rollouts_to_target_mean",
        "rollouts_to_target_min",
        "rollouts_to_target_max",
        "mean_curve_rollouts_to_target",
    ):
        table[column] = pd.to_numeric(table[column])
    return table


def _speed_ups(rollouts: pd.Series, ref: str, usable: pd.Series) -> list[float | None]:
    """Per configuration: ``ref``'s rollouts over its own, where both are usable and its own is above 0."""
    return [
        rollouts[ref] / rollouts[config] if usable[ref] and usable[config] and rollouts[config] > 0 else None
        for config in rollouts.index
    ]


def seed_table_markdown(table: pd.DataFrame, caption: str) -> str:
    ratio_columns = [c for c in table.columns if c.startswith("speedup_vs_")]
    curve_columns = [c for c in table.columns if c.startswith("mean_curve_speedup_vs_")]
    header = ["configuration", "seeds reaching target", "rollouts to target: mean", "min–max", "std"]
    header += [f"speed-up vs {c.removeprefix('speedup_vs_')}" for c in ratio_columns]
    header += ["mean curve reaches target at"]
    header += [f"mean-curve speed-up vs {c.removeprefix('mean_curve_speedup_vs_')}" for c in curve_columns]
    header += ["peak of mean acc"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        spread = "—"
        if not pd.isna(row["rollouts_to_target_min"]):
            spread = f"{row['rollouts_to_target_min']:,.0f}–{row['rollouts_to_target_max']:,.0f}"
        cells = [
            row["configuration"],
            f"{row['seeds_reached']} of {row['seeds']}",
            _cell(row["rollouts_to_target_mean"], ",.0f"),
            spread,
            _cell(row["rollouts_to_target_std"], ",.0f"),
        ]
        cells += [_cell(row[c], ".2f", suffix="×") for c in ratio_columns]
        cells += [_cell(row["mean_curve_rollouts_to_target"], ",.0f")]
        cells += [_cell(row[c], ".2f", suffix="×") for c in curve_columns]
        cells += [_cell(row["peak_mean_accuracy"], ".4f")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _interpolate_reach(curve: pd.DataFrame, accuracy: float) -> tuple[float, float] | None:
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
        reaches = [_interpolate_reach(means[baseline], float(a)) for a in curve["smoothed"]]
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
        f"Each configuration's mean curve against {baseline}'s at equal accuracy: where {baseline}'s mean curve first "
        "reached the same accuracy (linear between its validation points; — where it never did). The last two "
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
            _cell(row["baseline_step"], ".1f"),
            _cell(row["baseline_rollouts"], ",.0f"),
            _cell(row["steps_worth"], ".2f"),
            _cell(row["rollouts_ratio"], ".2f", suffix="×"),
            _cell(row["window_steps_worth"], ".2f"),
            _cell(row["window_rollouts_ratio"], ".2f", suffix="×"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ interpolated read-off and intervals
def _values_at(curves: list[pd.DataFrame], rollouts) -> np.ndarray:
    """Each run's accuracy at each of ``rollouts`` (runs × rollouts), linear between its validation points; NaN
    outside them (``accuracy_at_rollouts``), so that a mean over runs is NaN where one of them has no value."""
    return np.array([accuracy_at_rollouts(curve, rollouts) for curve in curves], dtype=float)


def _drawn_means(curves: list[pd.DataFrame], draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every run's validation points, and per row of ``draws`` (indices into ``curves``) the pointwise mean of the
    drawn runs' curves there, NaN outside the range all of them cover. A mean of linear pieces is linear between
    its runs' points, so the points of runs not drawn lie on it: peak and crossings are those of the drawn mean."""
    points = np.unique(np.concatenate([curve["rollouts"].to_numpy() for curve in curves]))
    return points, _values_at(curves, points)[draws].mean(axis=1)


def interpolated_mean_curve(curves: list[pd.DataFrame]) -> pd.DataFrame:
    """The seeds' curves, each linear between its validation points in cumulative generated rollouts, averaged
    pointwise: ``rollouts`` every seed's points within the range all of them cover, ``smoothed`` the mean there.
    Unlike ``mean_curve`` it pairs seeds at equal rollouts, not at equal steps (a PC seed's rollouts at a step vary)."""
    points, (mean,) = _drawn_means(curves, np.arange(len(curves))[None, :])
    return pd.DataFrame({"rollouts": points, "smoothed": mean}).dropna().reset_index(drop=True)


def _crossings(points: np.ndarray, means: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per row of ``means`` (mean curves on ``points``, NaN outside their range): the rollouts where it first reaches
    its target, linear from its point before (``_interpolate_reach``'s rule, on arrays: the bootstrap asks 10,000
    times); its first point where that one reaches it already; inf where it never does."""
    reached = means >= targets[:, None] - _TOLERANCE  # NaN compares False
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


def _crossing_ratio(crossing: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Crossing over the baseline's: inf where only the configuration never gets there, NaN where neither does or
    the baseline's crossing is at 0 rollouts."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(baseline > 0, crossing / baseline, np.nan)


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
        at = _values_at(runs[config], budgets).mean(axis=0)
        row = {"configuration": config, "runs": len(labels)}
        row.update({f"accuracy_at_{b:.0f}": float(value) for b, value in zip(budgets, at, strict=True)})
        row["peak_mean_accuracy"] = float(interpolated_mean_curve(runs[config])["smoothed"].max())
        row["rollouts_to_target"] = float(crossings[config][0])
        row[f"rollouts_ratio_vs_{baseline}"] = float(_crossing_ratio(crossings[config], crossings[baseline])[0])
        row["target"] = float(target)
        rows.append(row)
    return pd.DataFrame(rows)


def _reached_cell(value: float, fmt: str, suffix: str = "") -> str:
    return "not reached" if value == np.inf else _cell(value, fmt, suffix=suffix)


def interpolated_markdown(table: pd.DataFrame, budgets: list[float], baseline: str, caption: str) -> str:
    header = ["configuration", "runs", *(f"acc. at {b:,.0f} rollouts" for b in budgets)]
    header += ["peak of mean curve", "mean curve reaches target at", f"rollouts to target × {baseline}"]
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        cells = [row["configuration"], str(row["runs"])]
        cells += [_cell(row[f"accuracy_at_{b:.0f}"], ".3f", "not reached") for b in budgets]
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
    return float(np.mean(np.abs(differences) >= abs(values.mean() - baseline.mean()) - _TOLERANCE))


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
    values = {config: _values_at(runs[config], budgets) for config in groups}
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
        low, high = _percentile_interval(_crossing_ratio(resampled_crossings[config], resampled_crossings[baseline]))
        ratio = {"value": crossings[config][0], "baseline_value": crossings[baseline][0], "low": low, "high": high}
        ratio["estimate"] = _crossing_ratio(crossings[config], crossings[baseline])[0]
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
        match = _SEED_SUFFIX.match(label)
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
    cells = [f"acc. at {row['rollouts']:,.0f} rollouts", _cell(row["value"], ".3f", "not reached")]
    cells += [_cell(row["baseline_value"], ".3f", "not reached"), _cell(row["estimate"], "+.3f", "not reached")]
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


# ------------------------------------------------------------------ plot
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
_LINESTYLES = ("-", "--", "-.", ":")


def _style(i: int) -> dict:
    """Run i's line style. Each later line is thinner with a smaller marker, and every line has its own
    marker and dash, so lines lying on top of each other (e.g. two runs at 0) all stay visible."""
    return {
        "marker": _MARKERS[i % len(_MARKERS)],
        "linestyle": _LINESTYLES[i % len(_LINESTYLES)],
        "linewidth": max(3.0 - 0.6 * i, 1.0),
        "markersize": max(8.0 - 1.5 * i, 3.0),
        "alpha": 0.85,
    }


def _figure(panels: int):
    # Figure + the Agg canvas directly: no pyplot global state, no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6 * panels, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, panels, squeeze=False)[0]


def _rollouts_axis(ax) -> None:
    from matplotlib.ticker import EngFormatter

    ax.xaxis.set_major_formatter(EngFormatter())
    ax.grid(alpha=0.3)


def plot(frames: dict[str, pd.DataFrame], curves: dict[str, pd.DataFrame], target: float, path: Path, ylabel: str):
    """Smoothed accuracy and zero-variance group share, both against cumulative generated rollouts.

    Writes ``path`` and returns the matplotlib Figure."""
    fig, (acc_ax, zv_ax) = _figure(2)
    for i, (label, curve) in enumerate(curves.items()):
        style = _style(i)
        (line,) = acc_ax.plot(curve["rollouts"], curve["smoothed"], label=label, zorder=2 + i, **style)
        frame = frames[label]
        if ZERO_VAR in frame.columns:
            points = frame[[ROLLOUTS, ZERO_VAR]].dropna()
            # Markers at every 8th point or so: a long run's marks would otherwise merge into a thick band.
            every = max(len(points) // 12, 1)
            zv_ax.plot(
                points[ROLLOUTS],
                points[ZERO_VAR],
                color=line.get_color(),
                label=label,
                zorder=2 + i,
                markevery=every,
                **style,
            )
        else:
            logger.warning("run %s: no %s logged; left out of the second panel", label, ZERO_VAR)
    acc_ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.4f}")
    acc_ax.set(title="Validation accuracy", xlabel="cumulative generated rollouts", ylabel=ylabel)
    zv_ax.set(
        title="Zero-variance groups in the trained batch",
        xlabel="cumulative generated rollouts",
        ylabel="share of trained groups with equal rewards",
        ylim=(-0.03, 1.03),  # a margin, so a run lying on 0 or 1 is not drawn over the frame
    )
    for ax in (acc_ax, zv_ax):
        _rollouts_axis(ax)
    acc_ax.legend()
    if zv_ax.has_data():
        zv_ax.legend()
    else:
        zv_ax.text(0.5, 0.5, f"{ZERO_VAR} not logged", ha="center", transform=zv_ax.transAxes)
    fig.savefig(path, dpi=150)
    return fig


def plot_seeds(
    curves: dict[str, pd.DataFrame],
    groups: dict[str, list[str]],
    means: dict[str, pd.DataFrame],
    target: float,
    path: Path,
    ylabel: str,
):
    """Per configuration: each seed's smoothed accuracy as a thin line, the mean curve as a thick one.

    Writes ``path`` and returns the matplotlib Figure."""
    fig, (ax,) = _figure(1)
    for i, (config, labels) in enumerate(groups.items()):
        style = _style(i)
        mean = means[config]
        (line,) = ax.plot(
            mean["rollouts"], mean["smoothed"], label=f"{config} (mean of {len(labels)})", zorder=3 + i, **style
        )
        for label in labels:
            curve = curves[label]
            ax.plot(
                curve["rollouts"],
                curve["smoothed"],
                color=line.get_color(),
                linestyle=style["linestyle"],
                linewidth=0.8,
                alpha=0.4,
                zorder=2,
            )
    ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.4f}")
    ax.set(title="Validation accuracy: seeds (thin) and their mean (thick)", xlabel="cumulative generated rollouts")
    ax.set(ylabel=ylabel)
    _rollouts_axis(ax)
    ax.legend()
    fig.savefig(path, dpi=150)
    return fig


# ------------------------------------------------------------------ CLI
def _pick_baseline(labels: list[str], requested: str | None, have_target: bool) -> str | None:
    if requested is not None:
        if requested not in labels:
            raise ReportError(f"--baseline {requested}: no such run (runs: {', '.join(labels)})")
        return requested
    candidates = [label for label in labels if "grpo" in label.lower()]
    if len(candidates) == 1:
        return candidates[0]
    problem = f"{len(candidates)} runs have 'grpo' in their label ({', '.join(candidates) or 'none'})"
    if not have_target:
        raise ReportError(f"cannot pick the GRPO baseline: {problem}; pass --baseline LABEL or --target ACC")
    logger.warning("no baseline speed-up column: %s; pass --baseline LABEL", problem)
    return None


def _pick_compare(labels: list[str], requested: str | None, baseline: str | None) -> str | None:
    if requested is not None:
        if requested not in labels:
            raise ReportError(f"--compare {requested}: no such run (runs: {', '.join(labels)})")
        return requested
    candidates = [label for label in labels if "dapo" in label.lower() and label != baseline]
    return candidates[0] if len(candidates) == 1 else None


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m recipe.pc.report",
        description="Rollouts to reach a target validation accuracy, per run, as a table and a plot.",
        epilog=(
            "RUN forms: LABEL=log.jsonl (verl file logger), LABEL=export.csv / history.json (W&B exports), "
            "LABEL=tb:DIR or a DIR holding events.out.tfevents.* (verl tensorboard logger), "
            "LABEL=wandb:ENTITY/PROJECT/RUN_ID (read through the W&B API; needs a login). "
            "--seeds: runs labelled CONFIG_s1, CONFIG_s2, ... (also -s<N>, _seed<N>, -seed<N>) are seeds of "
            "CONFIG; the target is the peak of the baseline configuration's mean curve (its seeds averaged at "
            "the validation steps they all logged); each configuration gets the mean, min-max and sample std of "
            "its seeds' rollouts-to-target, over the seeds that reached it, and how many did. Outputs then are "
            f"seeds_table.md, seeds_table.csv and seeds_accuracy_vs_rollouts.png. The plot needs matplotlib "
            f"({INSTALL_PLOT}); without it the tables are still written."
        ),
    )
    parser.add_argument(
        "runs", nargs="+", metavar="RUN", help="[LABEL=]PATH, [LABEL=]tb:DIR or [LABEL=]wandb:ENTITY/PROJECT/RUN_ID"
    )
    parser.add_argument(
        "--baseline",
        metavar="LABEL",
        help="the GRPO baseline run, or configuration with --seeds (default: the one labelled *grpo*)",
    )
    parser.add_argument(
        "--compare", metavar="LABEL", help="a second reference run or configuration (default: the one labelled *dapo*)"
    )
    parser.add_argument(
        "--target", metavar="ACC", type=float, help="target accuracy (default: the baseline's peak smoothed accuracy)"
    )
    parser.add_argument("--smooth", type=int, default=1, metavar="K", help="trailing average over K validation points")
    parser.add_argument(
        "--benchmarks", metavar="A,B", help="comma-separated data sources to average (default: all runs' common ones)"
    )
    parser.add_argument(
        "--seeds", action="store_true", help="aggregate runs that differ only by a seed suffix (see below)"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder for the tables and the plot (default: {DEFAULT_OUT}/, created if missing)",
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the plot (matplotlib not needed)")
    parser.add_argument(
        "--at-steps",
        metavar="S1,S2",
        type=lambda text: [int(x) for x in text.split(",") if x.strip()],
        help="also a table of each run's validation accuracy and cumulative rollouts at these steps (at_steps.md)",
    )
    parser.add_argument(
        "--at-rollouts",
        metavar="R1,R2",
        type=_budgets,
        help="also a table of each run's (or, with --seeds, configuration's) validation accuracy at these cumulative "
        "generated rollouts, linear between validation points (at_rollouts.md)",
    )
    parser.add_argument(
        "--equal-accuracy",
        action="store_true",
        help="with --seeds: each configuration's mean curve against the baseline's at equal accuracy, step by step "
        "(equal_accuracy.md): the baseline steps one step was worth, and the rollouts ratio",
    )
    parser.add_argument(
        "--interpolate",
        action="store_true",
        help="with --seeds: each configuration's pointwise mean of its seeds' curves, linear between validation points "
        "in cumulative rollouts; its accuracy at the --at-rollouts budgets, where it first reaches the target (linear "
        "between points) and that over the baseline's (interpolated.md)",
    )
    parser.add_argument(
        "--ci",
        action="store_true",
        help="with --seeds, --interpolate and --at-rollouts: each configuration against the baseline, the accuracy "
        "difference at each budget and the rollouts-to-target ratio with 95%% percentile-bootstrap intervals, the "
        "difference also with an exact permutation p-value (intervals.md)",
    )
    parser.add_argument(
        "--ci-resamples", metavar="N", type=int, help=f"bootstrap resamples for --ci (default {CI_RESAMPLES})"
    )
    parser.add_argument(
        "--ci-seed", metavar="S", type=int, help="seed of numpy's default_rng for --ci's resamples (default 0)"
    )
    parser.add_argument(
        "--means",
        metavar="M1,M2",
        type=_names,
        help="also a table of these metrics' means over the training steps (means_table.md), per run or configuration",
    )
    parser.add_argument(
        "--sums",
        metavar="M1,M2",
        type=_names,
        help="also a table of these metrics' sums over windows of training steps (sums_table.md), per run",
    )
    parser.add_argument(
        "--sum-steps",
        metavar="A:B,C:D",
        type=_windows,
        help="the inclusive windows of training steps for --sums (default: every logged step)",
    )
    parser.add_argument(
        "--values",
        metavar="M1,M2",
        type=_names,
        help="also a table of these metrics' values at the --value-steps (values_table.md), per run",
    )
    parser.add_argument(
        "--value-steps",
        metavar="S1,S2",
        type=_steps,
        help="the training steps for --values",
    )
    args = parser.parse_args(argv)
    if args.smooth < 1:
        parser.error(f"--smooth must be >= 1, got {args.smooth}")
    if args.equal_accuracy and not args.seeds:
        parser.error("--equal-accuracy compares configurations' mean curves: it needs --seeds")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: exists and is not a folder")
    if args.sum_steps and not args.sums:
        parser.error("--sum-steps sets the windows of --sums: name the metrics with --sums")
    if bool(args.values) != bool(args.value_steps):
        parser.error("--values and --value-steps go together: the metrics, and the steps to read them at")
    ci_needs = (("--seeds", args.seeds), ("--interpolate", args.interpolate), ("--at-rollouts R1,R2", args.at_rollouts))
    missing = [name for name, given in ci_needs if not given]
    if args.ci and missing:
        parser.error(f"--ci compares configurations' interpolated mean curves at budgets: add {', '.join(missing)}")
    if args.interpolate and not args.seeds:
        parser.error("--interpolate reads configurations' mean curves: it needs --seeds")
    if not args.ci and (args.ci_resamples is not None or args.ci_seed is not None):
        parser.error("--ci-resamples and --ci-seed set the bootstrap of --ci: add --ci")
    if args.ci_resamples is not None and args.ci_resamples < 1:
        parser.error(f"--ci-resamples must be >= 1, got {args.ci_resamples}")
    args.ci_resamples = CI_RESAMPLES if args.ci_resamples is None else args.ci_resamples
    args.ci_seed = args.ci_seed or 0
    return args


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _steps(text: str) -> list[int]:
    try:
        steps = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        steps = []
    if not steps or min(steps) < 0:
        raise argparse.ArgumentTypeError(f"expected steps S1,S2 (integers >= 0), got {text!r}")
    return steps


def _windows(text: str) -> list[tuple[int, int]]:
    windows = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        first, sep, last = part.partition(":")
        try:
            window = (int(first), int(last))
        except ValueError:
            window = None
        if not sep or window is None or not 0 <= window[0] <= window[1]:
            raise argparse.ArgumentTypeError(f"expected windows A:B with 0 <= A <= B, got {part!r} in {text!r}")
        windows.append(window)
    if not windows:
        raise argparse.ArgumentTypeError(f"no window in {text!r}")
    return windows


def _budgets(text: str) -> list[float]:
    try:
        budgets = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated rollout counts, got {text!r}") from None
    if not budgets or any(b <= 0 for b in budgets):
        raise argparse.ArgumentTypeError(f"rollout counts must be positive, got {text!r}")
    return budgets


def _parse_runs(specs: list[str]) -> dict[str, RunSource]:
    """Every RUN argument checked before any is loaded (a W&B read can take minutes)."""
    sources: dict[str, RunSource] = {}
    for spec in specs:
        label, source = parse_run_arg(spec)
        if label in sources:
            raise ReportError(f"two runs are labelled {label}; name them with LABEL=PATH")
        sources[label] = source
    return sources


def _load_runs(sources: dict[str, RunSource]) -> dict[str, pd.DataFrame]:
    frames: dict[str, pd.DataFrame] = {}
    for label, source in sources.items():
        try:
            frames[label] = load_run(source)
        except ReportError as exc:
            logger.error("run %s skipped: %s", label, exc)
    return frames


def _plot_possible(args: argparse.Namespace) -> bool:
    if args.no_plot:
        return False
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        logger.warning("matplotlib is not installed, so no plot (%s); the tables are written", INSTALL_PLOT)
        return False
    return True


def _curves(args: argparse.Namespace, frames: dict[str, pd.DataFrame]):
    """Validation curves of the usable runs, the benchmarks averaged and each run's columns for them."""
    requested = [b.strip() for b in args.benchmarks.split(",") if b.strip()] if args.benchmarks else None
    usable, all_columns = {}, {}
    for label, frame in frames.items():
        try:
            all_columns[label] = check_run(label, frame, requested or ())
        except ReportError as exc:
            logger.error("%s; run skipped", exc)
            continue
        usable[label] = frame
    if not usable:
        raise ReportError("no usable run")
    benchmarks = choose_benchmarks(all_columns, requested)
    curves, columns = {}, {}
    for label, frame in usable.items():
        columns[label] = {b: all_columns[label][b] for b in benchmarks}
        curve = validation_curve(frame, columns[label], args.smooth)
        if curve.empty:
            logger.error("run %s: no validation step logs all of %s; run skipped", label, ", ".join(benchmarks))
            continue
        curves[label] = curve
    if not curves:
        raise ReportError("no usable run")
    for b in benchmarks:
        logged_as = {label: columns[label][b] for label in curves}
        if len(set(logged_as.values())) > 1:
            logger.warning("benchmark %s is averaged over different sample counts: %s", b, logged_as)
    return usable, curves, benchmarks, columns


def _describe(args: argparse.Namespace, benchmarks: list[str], columns: dict[str, str]) -> tuple[str, str]:
    """Caption text for the averaged benchmarks and smoothing, and the plot's y label."""
    bench_text = ", ".join(f"{b} ({columns[b].rsplit('/', 1)[1]})" for b in benchmarks)
    smoothing = f"trailing average of {args.smooth} validation points" if args.smooth > 1 else "unsmoothed"
    # Many benchmark names do not fit beside the axis; the caption lists them.
    names = ", ".join(benchmarks) if len(", ".join(benchmarks)) <= 40 else f"{len(benchmarks)} benchmarks"
    ylabel = f"mean accuracy ({names})" + (f", smoothed K={args.smooth}" if args.smooth > 1 else "")
    return f"mean of {bench_text}, {smoothing}", ylabel


def _write(path: Path, text: str, written: list[Path]) -> None:
    path.write_text(text)
    written.append(path)


def _write_table(out: Path, stem: str, markdown: str, table: pd.DataFrame, written: list[Path]) -> None:
    """``<stem>.md`` and ``<stem>.csv`` under ``out``."""
    _write(out / f"{stem}.md", markdown, written)
    _write(out / f"{stem}.csv", table.to_csv(index=False), written)


def _per_run_report(args, frames, curves, benchmarks, columns, written: list[Path]) -> str:
    labels = list(curves)
    baseline = _pick_baseline(labels, args.baseline, args.target is not None)
    compare = _pick_compare(labels, args.compare, baseline)
    target = args.target if args.target is not None else float(curves[baseline]["smoothed"].max())
    table = build_table(frames, curves, target, baseline, compare)
    method, ylabel = _describe(args, benchmarks, columns[labels[0]])
    source = "given" if args.target is not None else f"peak of {baseline}"
    caption = (
        f"Target accuracy {target:.4f} ({source}): {method}; "
        "rollouts = cumulative generated rollouts at the first validation point at or above the target."
    )
    markdown = to_markdown(table, caption)
    _write_table(args.out, "table", markdown, table, written)
    if _plot_possible(args):
        plot(frames, curves, target, args.out / "accuracy_vs_rollouts.png", ylabel)
        written.append(args.out / "accuracy_vs_rollouts.png")
    return markdown


def _seed_report(args, curves, benchmarks, columns, written: list[Path]) -> tuple[str, list[str]]:
    """The seed table and plot; also the labels of the runs in the configurations it kept."""
    groups = seed_groups(list(curves))
    means = {}
    for config, labels in list(groups.items()):
        means[config] = mean_curve([curves[label] for label in labels], args.smooth)
        if means[config].empty:
            logger.error("configuration %s: its seeds %s share no validation step; skipped", config, labels)
            del groups[config], means[config]
            continue
        left_out = sorted({s for label in labels for s in curves[label].index} - set(means[config].index))
        if left_out:
            logger.warning(
                "configuration %s: steps %s are not logged by every seed; left out of the mean", config, left_out
            )
    if not groups:
        raise ReportError("no usable configuration")
    configs = list(groups)
    baseline = _pick_baseline(configs, args.baseline, args.target is not None)
    compare = _pick_compare(configs, args.compare, baseline)
    if args.interpolate:
        _check_interpolate(args, groups, baseline)
    target = args.target if args.target is not None else float(means[baseline]["smoothed"].max())
    references = tuple(ref for ref in (baseline, compare) if ref is not None)
    table = build_seed_table(curves, groups, means, target, references)
    method, ylabel = _describe(args, benchmarks, columns[next(iter(curves))])
    source = "given" if args.target is not None else f"peak of {baseline}'s mean curve over its seeds"
    caption = (
        f"Target accuracy {target:.4f} ({source}): {method}; rollouts-to-target per seed as in the per-run table, "
        "then mean, min–max and sample std over the seeds that reached the target."
    )
    markdown = seed_table_markdown(table, caption)
    _write_table(args.out, "seeds_table", markdown, table, written)
    if args.equal_accuracy:
        equal = equal_accuracy_table(means, baseline)
        _write_table(args.out, "equal_accuracy", equal_accuracy_markdown(equal, baseline), equal, written)
    if _plot_possible(args):
        plot_seeds(curves, groups, means, target, args.out / "seeds_accuracy_vs_rollouts.png", ylabel)
        written.append(args.out / "seeds_accuracy_vs_rollouts.png")
    if args.interpolate:
        markdown += _interpolated_report(args, curves, groups, baseline, method, written)
    return markdown, [label for labels in groups.values() for label in labels]


def _check_interpolate(args, groups: dict[str, list[str]], baseline: str | None) -> None:
    """Refuse, before any table is written, what --interpolate and --ci cannot read."""
    if baseline is None:
        raise ReportError("--interpolate reads each configuration against a baseline: pass --baseline LABEL")
    few = [f"{config} ({len(labels)})" for config, labels in groups.items() if len(labels) < 2]
    if args.ci and few:
        raise ReportError(f"--ci resamples and permutes runs: every configuration needs 2 or more; {', '.join(few)}")


def _interpolated_report(args, curves, groups, baseline: str, method: str, written: list[Path]) -> str:
    """interpolated.md/.csv and, with --ci, intervals.md/.csv; returns their Markdown, each after a blank line."""
    budgets = args.at_rollouts or []
    table = interpolated_table(curves, groups, baseline, budgets, args.target)
    source = "given" if args.target is not None else f"peak of {baseline}'s interpolated mean curve over its points"
    caption = (
        "Interpolated mean curves: each run's accuracy linear between its validation points in cumulative generated "
        "rollouts, a configuration's curve the pointwise mean of its runs' over the rollouts all of them reached "
        f"(not reached: a run stopped before). Target accuracy {table['target'].iloc[0]:.4f} ({source}); a mean "
        f"curve reaches it at the first rollouts where it is at or above it, linear between points. Accuracy: {method}."
    )
    markdown = interpolated_markdown(table, budgets, baseline, caption)
    _write_table(args.out, "interpolated", markdown, table, written)
    text = "\n" + markdown
    if args.ci:
        intervals = intervals_table(curves, groups, baseline, budgets, args.target, args.ci_resamples, args.ci_seed)
        markdown = intervals_markdown(intervals, baseline, source, method)
        _write_table(args.out, "intervals", markdown, intervals, written)
        text += "\n" + markdown
    return text


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


def accuracy_at_rollouts(curve: pd.DataFrame, budgets: list[float]) -> list[float | None]:
    """The curve's smoothed accuracy at each budget of cumulative generated rollouts, linear between the validation
    points on either side; None before its first point or past its last (a run that stopped has no value there)."""
    rollouts, accuracy = curve["rollouts"].to_numpy(), curve["smoothed"].to_numpy()
    first, last = rollouts[0] - _TOLERANCE, rollouts[-1] + _TOLERANCE
    return [float(np.interp(b, rollouts, accuracy)) if first <= b <= last else None for b in budgets]


def at_rollouts_table(curves: dict[str, pd.DataFrame], groups: dict[str, list[str]], budgets: list[float]):
    """Per configuration (its runs in ``groups``) and budget: how many runs got that far, and the mean, min and max
    of their accuracy there, the mean only where all of them did (a mean over the seeds that ran longer would
    favour them)."""
    rows = []
    for config, labels in groups.items():
        per_run = {label: accuracy_at_rollouts(curves[label], budgets) for label in labels}
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


def at_rollouts_markdown(table: pd.DataFrame, budgets: list[float]) -> str:
    lines = [
        "Validation accuracy (as averaged for the table) at equal cumulative generated rollouts: each run's curve "
        "linear between its validation points, nothing past its last one; for a configuration of several seeds the "
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


def report(args: argparse.Namespace) -> tuple[str, list[Path]]:
    """Run the whole report; returns the Markdown table and the files written.

    Raises ReportError when no table can be made.
    """
    sources = _parse_runs(args.runs)
    frames, curves, benchmarks, columns = _curves(args, _load_runs(sources))
    args.out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if args.seeds:
        markdown, kept = _seed_report(args, curves, benchmarks, columns, written)
    else:
        markdown = _per_run_report(args, frames, curves, benchmarks, columns, written)
        kept = list(curves)
    # The extra tables cover the runs the main table used, no others.
    kept_frames = {label: frames[label] for label in kept}
    if args.at_steps:
        extra = at_steps_markdown({label: curves[label] for label in kept}, args.at_steps)
        _write(args.out / "at_steps.md", extra, written)
        markdown += "\n" + extra
    if args.at_rollouts:
        groups = seed_groups(kept) if args.seeds else {label: [label] for label in kept}
        table = at_rollouts_table(curves, groups, args.at_rollouts)
        extra = at_rollouts_markdown(table, args.at_rollouts)
        _write_table(args.out, "at_rollouts", extra, table, written)
        markdown += "\n" + extra
    if args.means:
        table = means_table(kept_frames, args.means, args.seeds)
        extra = means_markdown(table, args.means)
        _write_table(args.out, "means_table", extra, table, written)
        markdown += "\n" + extra
    if args.sums:
        table = sums_table(kept_frames, args.sums, args.sum_steps or [None])
        extra = sums_markdown(table, args.sum_steps or [None])
        _write_table(args.out, "sums_table", extra, table, written)
        markdown += "\n" + extra
    if args.values:
        table = values_table(kept_frames, args.values, args.value_steps)
        extra = values_markdown(table)
        _write_table(args.out, "values_table", extra, table, written)
        markdown += "\n" + extra
    return markdown, written


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(format="%(levelname)s: %(message)s", stream=sys.stderr)
    args = _parse_args(argv)
    try:
        markdown, written = report(args)
    except ReportError as exc:
        logger.error("%s", exc)
        return 2
    sys.stdout.write(markdown)
    # stderr, so that stdout stays exactly the Markdown table for piping.
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
