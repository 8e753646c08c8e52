"""``plan check``: the cost model beside runs that happened, per window of dumped steps, from their logs (read by
``recipe.pc_tools.logs``: a verl file-logger log, ``tb:DIR`` or ``wandb:ENTITY/PROJECT/RUN_ID``)."""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from recipe.pc import metric_names as names
from recipe.pc_tools.costmodel import DAPO, GRPO, PilotCommit, predict, predict_at_filter_rate
from recipe.pc_tools.dumps import DumpError, pass_rates, per_step_rates, read_window, windows
from recipe.pc_tools.predictions import mean_over_steps, parse_splits

if TYPE_CHECKING:
    import pandas as pd

MEASURED_KINDS = "KIND=METRICS with KIND grpo, dapo or pc:P+C"


def measured_arg(text: str) -> tuple[str, str]:
    """``--measured KIND=PATH`` -> (KIND, PATH), KIND checked to be ``grpo``, ``dapo`` or ``pc:P+C`` (argparse type)."""
    kind, eq, path = text.partition("=")
    if not (eq and path and (kind in ("grpo", "dapo") or kind.startswith("pc:"))):
        raise argparse.ArgumentTypeError(f"expected {MEASURED_KINDS}, got {text!r}")
    if kind.startswith("pc:"):
        try:
            parse_splits(kind[3:])
        except DumpError as err:
            raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None
    return kind, path


def parse_measured(specs: list[tuple[str, str]], configs: list) -> list[tuple[object, str]]:
    """(KIND, PATH) pairs (``measured_arg``) -> (the configuration in ``configs`` that KIND names, path)."""
    out = []
    for kind, path in specs:
        if kind in ("grpo", "dapo"):
            wanted = GRPO if kind == "grpo" else DAPO
            match = [c for c in configs if type(c) is wanted]
        else:
            split = parse_splits(kind[3:])
            match = [c for c in configs if isinstance(c, PilotCommit) and [(c.n_pilot, c.n_commit)] == split]
        if len(match) != 1:
            labels, spec = ", ".join(c.label for c in configs), f"{kind}={path}"
            raise DumpError(
                f"--measured {spec!r}: {kind!r} names none of the configurations ({labels}); add it with --pc"
            )
        out.append((match[0], path))
    return out


MEASURED_COLUMNS = (names.ROLLOUTS_SAMPLED, names.ROUNDS)


def load_measured(path: str, config) -> pd.DataFrame:
    """A run's log (a file, ``tb:DIR`` or ``wandb:ENTITY/PROJECT/RUN_ID``, as ``recipe.pc_tools.logs`` reads them),
    checked to hold the columns the comparison needs and to be a run of ``config``'s method."""
    from recipe.pc_tools.logs import ReportError, load_run, parse_run_arg  # pandas: only when a log is read

    try:
        frame = load_run(parse_run_arg(path)[1])
    except ReportError as err:
        raise DumpError(f"--measured {path}: {err}") from None
    missing = [c for c in MEASURED_COLUMNS if c not in frame.columns]
    if missing:
        raise DumpError(f"--measured {path}: no {missing} in the log; it must come from this project's trainer")
    # The run must be one of the configuration: pilots for PC only, screened-out prompts only with --screen-n,
    # down-sampled rollouts only with --downsample-n (each checked where the log has the counter).
    checks = (
        (names.ROLLOUTS_PILOT, isinstance(config, PilotCommit), "pilot rollouts"),
        (names.SCREENED_OUT, getattr(config, "screen_n", None) is not None, "screened-out prompts"),
        (names.ROLLOUTS_DOWNSAMPLED, config.downsample_n is not None, "down-sampled rollouts"),
    )
    for column, expected, what in checks:
        logged = frame.get(column)
        if logged is not None and (logged.fillna(0) > 0).any() != expected:
            has = "has" if expected is False else "has no"
            raise DumpError(f"--measured {path}: the log {has} {what}, so it is not a run of {config.label}")
    return frame


def measured_per_step(frame, steps) -> tuple[float, float, float, float, int] | None:
    """Over these steps of a run's log (e.g. a ``range``): mean generated rollouts and generation rounds per step,
    the share of filtered candidates that passed (PC: pilots in the band), the share whose screen disagreed (PC
    with screening: not screened out), and the count of steps it logged; a share not logged is nan. None when
    the run logged none of them."""
    rows = frame.loc[frame.index.isin(list(steps)), list(MEASURED_COLUMNS)].dropna()
    if rows.empty:
        return None

    def share(part: str, whole: str = names.CANDIDATES) -> float:
        if part not in frame.columns or whole not in frame.columns:
            return float("nan")
        window = frame.loc[rows.index, [part, whole]].fillna(0).sum()
        return float(window[part] / window[whole]) if window[whole] > 0 else float("nan")

    rate, mixed = share(names.PASS_COUNT), 1.0 - share(names.SCREENED_OUT)
    return float(rows[MEASURED_COLUMNS[0]].mean()), float(rows[MEASURED_COLUMNS[1]].mean()), rate, mixed, len(rows)


def comparison_table(rows: list[tuple]) -> str:
    lines = [
        "| steps | configuration | run | logged steps | predicted rollouts/step | measured rollouts/step | error "
        "| predicted rounds/step | measured rounds/step | predicted filter pass rate | measured filter pass rate "
        "| rollouts/step at the measured filter pass rate | its error |",
        "|" + "---|" * 13,
    ]

    def cell(value: float, fmt: str) -> str:
        return "—" if math.isnan(value) else format(value, fmt)

    for window, label, path, n, pred, meas, pred_rounds, meas_rounds, pred_rate, meas_rate, at_rate in rows:
        error = (pred - meas) / meas if n else float("nan")
        at_rate_error = (at_rate - meas) / meas if n else float("nan")
        lines.append(
            f"| {window} | {label} | {path} | {n} | {pred:.0f} | {cell(meas, '.0f')} | {cell(error, '+.1%')} "
            f"| {cell(pred_rounds, '.2f')} | {cell(meas_rounds, '.2f')} | {cell(pred_rate, '.3f')} "
            f"| {cell(meas_rate, '.3f')} | {cell(at_rate, '.0f')} | {cell(at_rate_error, '+.1%')} |"
        )
    return "\n".join(lines)


def _at_filter_rate(config, rate: float, mixed: float) -> float:
    """Rollouts per step the model gives ``config`` at a run's logged filter pass rate (and screen share); nan for
    GRPO, or where the run logged no such share."""
    mixed = mixed if getattr(config, "screen_n", None) is not None else None
    if isinstance(config, GRPO) or math.isnan(rate) or (mixed is not None and math.isnan(mixed)):
        return float("nan")
    return predict_at_filter_rate(rate, config, screen_mixed=mixed).rollouts_per_step


def compare_with_runs(files, measured, metric: str, prior, window: int | None, sources=None, per_step=False) -> str:
    """The comparison table: per window of dumped steps, each measured run beside its configuration's prediction.

    ``per_step``: predict each dumped step from that step's pass rates and average over the steps both dumped and
    logged by the run, the measured side over the same steps (the rounds a step needs are convex in its filter pass
    rate, so pooling a window's rates first predicts too few rounds where the rates move, e.g. while the answer
    format is learned); the at-rate column likewise uses each step's own logged rate."""
    logs = {path: load_measured(path, config) for config, path in measured}
    nan = float("nan")
    rows, totals = [], defaultdict(lambda: [0.0, 0.0, 0, 0.0, 0])
    for chunk in windows(files, window):
        first, last = chunk[0][0], chunk[-1][0]
        if per_step:
            rate_sets = per_step_rates(chunk, metric, prior, sources)
        else:
            pooled = pass_rates(*read_window(chunk, metric, sources)[1:], prior)
        for config, path in measured:
            frame = logs[path]
            if per_step:
                logged = {s: measured_per_step(frame, [s]) for s in rate_sets}
                both = [s for s, got in logged.items() if got]
                got = measured_per_step(frame, both) if both else None
                prediction = mean_over_steps([predict(rate_sets[s], config) for s in both or rate_sets])
                per_step_at = [_at_filter_rate(config, *logged[s][2:4]) for s in both]
                finite = [v for v in per_step_at if not math.isnan(v)]
                at_rate = float(np.mean(finite)) if finite else nan
            else:
                got = measured_per_step(frame, range(first, last + 1))
                prediction = predict(pooled, config)
            pred, pred_rounds = prediction.rollouts_per_step, prediction.rounds_per_step
            pred_rate = prediction.filter_pass_rate
            meas, meas_rounds, meas_rate, meas_mixed, n = got if got else (nan, nan, nan, nan, 0)
            if not per_step:
                # The model again at the run's own filter pass rate (and screen share): what remains is the model's.
                at_rate = _at_filter_rate(config, meas_rate, meas_mixed)
            # GRPO filters nothing: neither its predicted "filter pass rate" (groups with spread) nor the 1.0 it
            # logs compares with anything.
            if isinstance(config, GRPO):
                pred_rate = meas_rate = nan
            rows.append(
                (f"{first}..{last}", config.label, path, n, pred, meas)
                + (pred_rounds, meas_rounds, pred_rate, meas_rate, at_rate)
            )
            total = totals[(config.label, path)]
            total[0] += pred * n
            total[1] += meas * n if n else 0.0
            total[2] += n
            if n and not math.isnan(at_rate):  # weighted by the steps that had one
                total[3] += at_rate * n
                total[4] += n
    for (_label, path), (_, _, n, _, _) in totals.items():
        if n == 0:
            raise DumpError(f"--measured {path}: no training step logged in steps {files[0][0]}..{files[-1][0]}")
    if len(rows) > len(measured):
        for (label, path), (pred_sum, meas_sum, n, at_sum, at_n) in totals.items():
            at_rate = at_sum / at_n if at_n else nan
            rows.append(("all", label, path, n, pred_sum / n, meas_sum / n, nan, nan, nan, nan, at_rate))
    return comparison_table(rows)
