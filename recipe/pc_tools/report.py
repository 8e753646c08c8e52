"""Rollouts-to-target table and accuracy plot from training-run logs.

Usage::

    python -m recipe.pc_tools.report [--baseline LABEL] [--compare LABEL] [--target ACC] [--smooth K]
                               [--benchmarks A,B] [--seeds [--interpolate [--ci]]] [--at-rollouts R1,R2]
                               [--out DIR] [--no-plot] RUN [RUN ...]

A RUN is ``LABEL=PATH``, ``LABEL=tb:DIR`` or ``LABEL=wandb:ENTITY/PROJECT/RUN_ID``; without ``LABEL=`` the
label is the file name without its extension, the folder name or the W&B run id.

Input formats: see ``recipe.pc_tools.logs`` (verl file-logger JSONL, W&B CSV/JSON exports, TensorBoard event
folders, W&B runs through the API).

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
* Rollouts to target × a reference run = this run's rollouts-to-target / the reference's (below 1: fewer
  rollouts); empty where either never reaches the target. The second ratio column compares with ``--compare`` (by
  default the only other run whose label contains "dapo").
* Wall-clock to target sums ``timing_s/step`` over the steps up to and including the reach step (this
  trainer times validation separately, as ``timing_s/testing``, so it is not included); generation calls to
  target sum ``training/num_gen_batches`` likewise. Mean s/step is over all logged steps.

Seeds (``--seeds``): a label ending in ``_s<N>``, ``-s<N>``, ``_seed<N>`` or ``-seed<N>`` is seed N of the
configuration named by the rest (``grpo_s1``, ``grpo_s2`` -> ``grpo``); other labels are configurations of one
run. ``--baseline``/``--compare`` then name configurations. A configuration's mean curve is the one
``--interpolate`` reads (below): its seeds' curves, each linear (or PCHIP, ``--curve``) between its validation points in
cumulative generated rollouts, averaged pointwise at equal rollouts; the target defaults to the peak of the
baseline's mean curve. Per configuration: how many seeds reach the target, and the mean, min-max and sample std
(ddof=1) of rollouts-to-target over the seeds that do (each seed at its own first validation point at or above the
target, as for one run); rollouts × a reference = this mean / the reference's, only when every seed of both reached
it. The mean curve's peak and its crossing of the target (``--interpolate``'s rule: linear between points, "not
reached" or "not read", runs that stopped early left out and named) and its ratio (this crossing / the reference's;
not read where the reference's mean curve never reaches the target) exist even where some seed never reaches it.
``--equal-accuracy`` alone compares mean curves step by step, its seeds averaged at the validation steps every seed
logged.

``--at-steps S1,S2``: each run's validation accuracy (averaged and smoothed as for the table) and cumulative
generated rollouts at those validation steps, as ``at_steps.md`` and after the table on stdout.

``--at-rollouts R1,R2``: each run's validation accuracy at those cumulative generated rollouts, linear between its
validation points and left empty past its last one (no extrapolation), as ``at_rollouts.md``/``.csv`` and after the
table on stdout; with ``--seeds``, per configuration the mean of its seeds and their min-max, given only where every
seed got that far. This is the comparison at equal budget, where rollouts-to-target compares speed to one accuracy.

``--interpolate`` (with ``--seeds``): a read-off that treats every configuration alike. Each run's accuracy is linear
(``--curve pchip``: PCHIP, a monotone cubic) between its validation points in cumulative generated rollouts; a
configuration's mean curve is the pointwise mean of its seeds' (at every seed's points, within the range all of them
reached: seeds are paired at equal rollouts, not at equal steps). Its accuracy at each ``--at-rollouts`` budget is that
curve there ("not read" where a run ended before). Targets: the peak of the baseline's mean curve over its points, and
where given one fixed in advance, ``--target ACC`` or the baseline's mean curve at ``--target-at R`` rollouts (then
read first). A mean curve reaches a target at the first rollouts where it is at or above it, linear between points,
the baseline too, read from the runs that cover the range up to there: a run that stopped early (its last validation
step before its configuration's last) and ended below the target is left out and named; "not reached" means the runs
read end below it, "not read" that the crossing falls within a left-out run's range. Ratio = that over the baseline's
(rollouts × baseline, below 1 is fewer). As ``interpolated.md``/``.csv`` and after the table on stdout.

``--ci`` (with ``--seeds --interpolate --at-rollouts R1,R2``, every configuration of 2 seeds or more): each other
configuration against the baseline, as ``intervals.md``/``.csv`` and on stdout: at each budget the difference of the
means of the runs of each that got there (those that ended before are left out and named; not read below 2 a side),
every run's value there, its 95% bootstrap interval (``--interval``: percentile, or studentized bootstrap-t, which
keeps its coverage at 5 runs a side) and the two-sided p-value of the exact permutation test of the difference of the
runs' means (every split of the pooled runs into groups of the original sizes: 252 for 5 + 5; above 1,000,000
splits, 13 + 13 runs for one, 200,000 random splits from ``--ci-seed`` and the observed one); with
``--equivalence-margin M`` also two one-sided Welch t-tests of |difference| < M at ``--alpha`` each and the
(1 − 2α) t interval. Then per target the ratio of crossings with its bootstrap interval. The bootstrap draws each
configuration's runs with replacement, independently, ``--ci-resamples`` times (default 10,000) from numpy's
``default_rng(--ci-seed)`` (default 0), from the runs a reading uses; target and crossings are recomputed in each
resample. A resample in which the mean curve never reaches the target before a finished run's end is an infinite
ratio (an interval's end "∞"); one whose drawn range a stopped run cuts short is not read, and an interval's end that
depends on where such resamples lie is "not read".

``--max-gap SHARE`` (with ``--at-rollouts``): a warning and a note under ``at_rollouts.md`` and ``intervals.md`` for
each run and budget that falls between two validation points more than SHARE × the budget apart.

``--power DELTA`` (with ``--seeds --interpolate --at-rollouts``): from the pooled spread of the runs at each budget, the
power the design had to detect DELTA (two-sided t-test at ``--alpha``) and the seeds a side it needs for
``--power-goal`` (default 0.8); with ``--equivalence-margin`` the same for the equivalence test. As
``power.md``/``.csv``. ``python -m recipe.pc_tools.power`` gives the same from an assumed SD.

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
be used (no validation metric, say) is skipped; a run whose log cannot be read stops the report (exit 2). With no
run, or with ``--ci`` and fewer than 2 runs in a configuration (a design whose runs have not finished), the report
prints one ``not read: ...`` line saying why, writes no table and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import pandas as pd

from recipe.pc_tools.curves import (
    CURVE_KINDS,
    SEED_SUFFIX,
    budget_gaps,
    check_run,
    choose_benchmarks,
    interpolated_mean_curve,
    mark_run_end,
    mean_band,
    mean_curve,
    seed_groups,
    validation_curve,
)
from recipe.pc_tools.intervals import (
    CI_RESAMPLES,
    INTERVALS,
    Target,
    interpolated_markdown,
    interpolated_table,
    intervals_markdown,
    intervals_table,
)
from recipe.pc_tools.logs import ReportError, RunSource, load_run, parse_run_arg
from recipe.pc_tools.plot import plot, plot_seeds
from recipe.pc_tools.power import OneLineParser, level, positive, power_markdown, power_table
from recipe.pc_tools.tables import (
    at_rollouts_markdown,
    at_rollouts_table,
    at_steps_markdown,
    budget_points_markdown,
    budget_points_table,
    build_seed_table,
    build_table,
    equal_accuracy_markdown,
    equal_accuracy_table,
    means_markdown,
    means_table,
    seed_table_markdown,
    sums_markdown,
    sums_table,
    to_markdown,
    values_markdown,
    values_table,
)

logger = logging.getLogger(__name__)

DEFAULT_OUT = Path("report")
INSTALL_PLOT = 'pip install -e ".[report]"'


class NotRead(Exception):
    """The runs given do not support the reading asked for yet (none, or too few a side): one line, exit 0."""


# ------------------------------------------------------------------ CLI
def _pick_baseline(labels: list[str], requested: str | None, have_target: bool, ci: bool = False) -> str | None:
    if requested is not None:
        if requested not in labels and ci:
            raise NotRead(f"--baseline {requested} has no run (runs: {', '.join(labels)}), and --ci needs 2 or more")
        if requested not in labels:
            raise ReportError(f"--baseline {requested}: no such run (runs: {', '.join(labels)})")
        return requested
    candidates = [label for label in labels if "grpo" in label.lower()]
    if len(candidates) == 1:
        return candidates[0]
    problem = f"{len(candidates)} runs have 'grpo' in their label ({', '.join(candidates) or 'none'})"
    if not have_target:
        raise ReportError(f"cannot pick the GRPO baseline: {problem}; pass --baseline LABEL or --target ACC")
    logger.warning("no ratio to a baseline: %s; pass --baseline LABEL", problem)
    return None


def _pick_compare(labels: list[str], requested: str | None, baseline: str | None) -> str | None:
    if requested is not None:
        if requested not in labels:
            raise ReportError(f"--compare {requested}: no such run (runs: {', '.join(labels)})")
        return requested
    candidates = [label for label in labels if "dapo" in label.lower() and label != baseline]
    return candidates[0] if len(candidates) == 1 else None


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="python -m recipe.pc_tools.report",
        description="Rollouts to reach a target validation accuracy, per run, as a table and a plot.",
        epilog=(
            "RUN forms: LABEL=log.jsonl (verl file logger), LABEL=export.csv / history.json (W&B exports), "
            "LABEL=tb:DIR or a DIR holding events.out.tfevents.* (verl tensorboard logger), "
            "LABEL=wandb:ENTITY/PROJECT/RUN_ID (read through the W&B API; needs a login). "
            "--seeds: runs labelled CONFIG_s1, CONFIG_s2, ... (also -s<N>, _seed<N>, -seed<N>) are seeds of "
            "CONFIG; the target is the peak of the baseline configuration's mean curve (its seeds' curves averaged "
            "at equal cumulative rollouts, --curve between validation points); each configuration gets the mean, "
            "min-max and sample std of its seeds' rollouts-to-target, over the seeds that reached it, how many did, "
            "and where its mean curve reaches the target. Outputs then are "
            f"seeds_table.md, seeds_table.csv and seeds_accuracy_vs_rollouts.png. The plot needs matplotlib "
            f"({INSTALL_PLOT}); without it the tables are still written."
        ),
    )
    parser.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="[LABEL=]PATH, [LABEL=]tb:DIR or [LABEL=]wandb:ENTITY/PROJECT/RUN_ID (none: nothing is read, exit 0)",
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
        "difference at each budget and the rollouts-to-target ratio with 95%% bootstrap intervals (--interval), the "
        "difference also with a permutation p-value, exact up to 1,000,000 splits (intervals.md)",
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
    _add_reading_options(parser)
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
    _check_reading_options(parser, args)
    return args


def _add_reading_options(parser: argparse.ArgumentParser) -> None:
    """The options a pre-registered reading states: how curves are read between points, the target, the tests."""
    parser.add_argument(
        "--curve",
        choices=CURVE_KINDS,
        default="linear",
        help="how a run's accuracy is read between its validation points for --at-rollouts, --seeds' mean curves, "
        "--interpolate and --ci: straight lines (default) or PCHIP, a monotone cubic that does not overshoot its "
        "points",
    )
    parser.add_argument(
        "--target-at",
        metavar="R",
        type=positive,
        help="with --interpolate: also read the crossings of the baseline's mean curve at R rollouts (a target fixed "
        "in advance; --target ACC fixes an accuracy), beside the baseline's peak",
    )
    parser.add_argument(
        "--max-gap",
        metavar="SHARE",
        type=positive,
        help="with --at-rollouts: warn, and note under the tables, where a budget falls between two validation points "
        "of a run more than SHARE x the budget apart (e.g. 0.1)",
    )
    parser.add_argument(
        "--interval",
        choices=INTERVALS,
        default="percentile",
        help="--ci's 95%% interval of a difference: percentile bootstrap (default) or studentized (bootstrap-t), "
        "which keeps its coverage at 5 runs a side",
    )
    parser.add_argument(
        "--equivalence-margin",
        metavar="M",
        type=positive,
        help="with --ci: also an equivalence test at each budget, two one-sided Welch t-tests of |difference| < M; "
        "with --power: its power and seeds a side",
    )
    parser.add_argument(
        "--alpha",
        metavar="A",
        type=level,
        default=0.05,
        help="level of each one-sided test of --equivalence-margin and of --power's t-test (default 0.05)",
    )
    parser.add_argument(
        "--power",
        metavar="DELTA",
        type=positive,
        help="with --seeds, --interpolate and --at-rollouts: from the spread of the runs at each budget, the power "
        "this design had to detect a difference DELTA and the seeds a side it needs (power.md); with "
        "--equivalence-margin also for the equivalence test",
    )
    parser.add_argument(
        "--last-step",
        metavar="LABEL=STEPS",
        type=last_step,
        action="append",
        default=[],
        help="the configured last step of a run, or of every seed of a configuration, whose log does not name it "
        "(logs before training/total_training_steps); a run that ends before it stopped early. Without it such a "
        "run stopped if it ends before its configuration's longest run",
    )
    parser.add_argument(
        "--power-goal",
        metavar="P",
        type=level,
        help="the power --power asks for (default 0.8)",
    )


def _check_reading_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.target_at is not None and not args.interpolate:
        parser.error("--target-at reads interpolated mean curves: add --seeds --interpolate")
    if args.max_gap is not None and not args.at_rollouts:
        parser.error("--max-gap checks the budgets of --at-rollouts: add --at-rollouts R1,R2")
    if not args.ci and args.interval != "percentile":
        parser.error("--interval sets --ci's intervals: add --ci")
    if args.equivalence_margin is not None and not args.ci and args.power is None:
        parser.error("--equivalence-margin tests --ci's budgets or powers --power's design: add --ci or --power DELTA")
    power_needs = (("--seeds", args.seeds), ("--interpolate", args.interpolate), ("--at-rollouts", args.at_rollouts))
    missing = [name for name, given in power_needs if not given]
    if args.power is not None and missing:
        parser.error(f"--power reads the runs' spread at budgets: add {', '.join(missing)}")
    args.last_step = dict(args.last_step)
    if args.power_goal is not None and args.power is None:
        parser.error("--power-goal sets the power --power asks for: add --power DELTA")
    args.power_goal = 0.8 if args.power_goal is None else args.power_goal


def last_step(text: str) -> tuple[str, int]:
    """LABEL=STEPS of --last-step."""
    label, _, steps = text.rpartition("=")
    if not label or not steps.isdigit() or int(steps) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: write LABEL=STEPS, e.g. grpo64t36_calibrated=36")
    return label, int(steps)


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
    """Every run's log; one that cannot be read stops the report (a table without it would read as complete)."""
    frames: dict[str, pd.DataFrame] = {}
    for label, source in sources.items():
        try:
            frames[label] = load_run(source)
        except ReportError as exc:
            raise ReportError(f"run {label}: {exc}") from None
    return frames


def _given_last_step(given: dict[str, int], label: str) -> int | None:
    """--last-step's value for the run ``label``: named by its label, else by its configuration."""
    if label in given:
        return given[label]
    match = SEED_SUFFIX.match(label)
    return given.get(match["config"]) if match else None


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
        mark_run_end(curve, frame, _given_last_step(args.last_step, label))
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
        "rollouts = cumulative generated rollouts at the first validation point at or above the target; × a "
        "reference: rollouts to target over the reference's (below 1: fewer)."
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
        means[config] = interpolated_mean_curve([curves[label] for label in labels], args.curve)
        if means[config].empty:
            logger.error("configuration %s: its seeds %s share no range of rollouts; skipped", config, labels)
            del groups[config], means[config]
    if not groups:
        raise ReportError("no usable configuration")
    configs = list(groups)
    baseline = _pick_baseline(configs, args.baseline, args.target is not None, args.ci)
    compare = _pick_compare(configs, args.compare, baseline)
    if args.interpolate:
        _check_interpolate(args, groups, baseline)
    target = args.target if args.target is not None else float(means[baseline]["smoothed"].max())
    references = tuple(ref for ref in (baseline, compare) if ref is not None)
    table = build_seed_table(curves, groups, target, references, args.curve)
    method, ylabel = _describe(args, benchmarks, columns[next(iter(curves))])
    source = "given" if args.target is not None else f"peak of {baseline}'s mean curve over its seeds"
    caption = (
        f"Target accuracy {target:.4f} ({source}): {method}. Per seed, rollouts to target as in the per-run table (at "
        "its first validation point at or above the target: a run's own points are the data), then their mean, "
        "min–max and sample std over the seeds that reached the target. A configuration's mean curve is the "
        f"interpolated table's: each seed's accuracy {args.curve} between its validation points in cumulative "
        "generated rollouts, averaged pointwise over the rollouts all of them reached; it reaches the target at the "
        "first rollouts where it is at or above it, linear between points, read from the seeds that cover the range "
        "up to it (a seed that stopped early and ended before is left out, named; not reached: the seeds read end "
        "below it; not read: a crossing within a left-out seed's range). × a reference: rollouts to target over the "
        "reference's (below 1: fewer); of the means only where every seed of both reached the target."
    )
    if table["seeds_stopped"].any():
        caption += (
            " Stopped: a seed that ended before its configuration's last validation point, below the target: not read"
            " there, so counted apart from the finished seeds."
        )
    markdown = seed_table_markdown(table, caption)
    _write_table(args.out, "seeds_table", markdown, table, written)
    if args.equal_accuracy:
        step_means = _step_means(curves, groups, baseline, args.smooth)
        equal = equal_accuracy_table(step_means, baseline)
        _write_table(args.out, "equal_accuracy", equal_accuracy_markdown(equal, baseline), equal, written)
    if _plot_possible(args):
        try:
            bands = {c: mean_band([curves[label] for label in labels], args.curve) for c, labels in groups.items()}
        except ReportError as err:  # scipy missing: the means without their intervals
            logger.warning("the seed plot has no intervals: %s", err)
            bands = means
        plot_seeds(curves, groups, bands, target, args.out / "seeds_accuracy_vs_rollouts.png", ylabel)
        written.append(args.out / "seeds_accuracy_vs_rollouts.png")
    if args.interpolate:
        markdown += _interpolated_report(args, curves, groups, baseline, method, written)
    return markdown, [label for labels in groups.values() for label in labels]


def _step_means(curves, groups: dict[str, list[str]], baseline: str, k: int) -> dict[str, pd.DataFrame]:
    """The seeds' curves averaged at equal steps (``mean_curve``), which the equal-accuracy table compares step by
    step; a configuration whose seeds share no validation step is left out of it."""
    means = {}
    for config, labels in groups.items():
        mean = mean_curve([curves[label] for label in labels], k)
        if mean.empty:
            if config == baseline:
                raise ReportError(f"--equal-accuracy: the seeds of the baseline {config} share no validation step")
            logger.error(
                "configuration %s: its seeds %s share no validation step; no equal-accuracy row", config, labels
            )
            continue
        left_out = sorted({s for label in labels for s in curves[label].index} - set(mean.index))
        if left_out:
            logger.warning(
                "configuration %s: steps %s are not logged by every seed; left out of its equal-accuracy rows",
                config,
                left_out,
            )
        means[config] = mean
    return means


def _check_interpolate(args, groups: dict[str, list[str]], baseline: str | None) -> None:
    """Refuse, before any table is written, what --interpolate cannot read; with --ci, fewer than 2 runs a side is
    not read (a design whose runs have not finished yet), which is not an error."""
    if baseline is None:
        raise ReportError("--interpolate reads each configuration against a baseline: pass --baseline LABEL")
    few = [f"{config} ({len(labels)})" for config, labels in groups.items() if len(labels) < 2]
    if args.ci and few:
        raise NotRead(f"--ci resamples and permutes runs, 2 or more a configuration, and {', '.join(few)} has fewer")


def _interpolated_report(args, curves, groups, baseline: str, method: str, written: list[Path]) -> str:
    """interpolated.md/.csv and, with --ci, intervals.md/.csv, with --power power.md/.csv; returns their Markdown,
    each after a blank line."""
    budgets = args.at_rollouts or []
    table = interpolated_table(curves, groups, baseline, budgets, args.target, args.target_at, args.curve)
    goal = Target(accuracy=args.target, at=args.target_at if args.target is None else None)
    source = goal.source(baseline)
    caption = (
        f"Interpolated mean curves: each run's accuracy {args.curve} between its validation points in cumulative "
        "generated rollouts, a configuration's curve the pointwise mean of its runs' over the rollouts all of them "
        f"reached (not read: a run ended before). Target accuracy {table['target'].iloc[0]:.4f} ({source}); a mean "
        "curve reaches it at the first rollouts where it is at or above it, linear between points, read from the runs "
        "that cover the range up to it (a run that stopped early and ended before is left out, named; not reached: "
        f"the runs read end below it; not read: a crossing within a left-out run's range). Accuracy: {method}."
    )
    markdown = interpolated_markdown(table, budgets, baseline, caption)
    _write_table(args.out, "interpolated", markdown, table, written)
    text = "\n" + markdown
    if args.ci:
        intervals = intervals_table(
            curves,
            groups,
            baseline,
            budgets,
            args.target,
            args.ci_resamples,
            args.ci_seed,
            target_at=args.target_at,
            kind=args.curve,
            interval=args.interval,
            margin=args.equivalence_margin,
            alpha=args.alpha,
        )
        markdown = intervals_markdown(intervals, baseline, source, method, args.alpha) + args.gap_note
        _write_table(args.out, "intervals", markdown, intervals, written)
        text += "\n" + markdown
    if args.power is not None:
        power = power_table(
            curves,
            groups,
            baseline,
            budgets,
            args.power,
            args.equivalence_margin,
            args.alpha,
            args.power_goal,
            args.curve,
        )
        markdown = power_markdown(power, baseline)
        _write_table(args.out, "power", markdown, power, written)
        text += "\n" + markdown
    return text


def _gap_note(args, curves: dict[str, pd.DataFrame]) -> str:
    """With --max-gap: a note naming each run and budget read across a wide gap between validation points, each
    also logged as a warning; '' without it."""
    if args.max_gap is None:
        return ""
    gaps = budget_gaps(curves, args.at_rollouts, args.max_gap)
    for gap in gaps:
        logger.warning(
            "run %s: %s rollouts fall between validation points at %s and %s, %.0f%% of the budget apart "
            "(> --max-gap %g)",
            gap["run"],
            f"{gap['budget']:,.0f}",
            f"{gap['before']:,.0f}",
            f"{gap['after']:,.0f}",
            100 * gap["gap"] / gap["budget"],
            args.max_gap,
        )
    if not gaps:
        return f"\nNo budget falls between validation points more than {args.max_gap:g} × the budget apart.\n"
    items = "; ".join(
        f"{g['run']} at {g['budget']:,.0f} (points {g['before']:,.0f} and {g['after']:,.0f})" for g in gaps
    )
    return (
        f"\nRead across a gap between validation points wider than {args.max_gap:g} × the budget (the reading rests on "
        f"the curve's shape between them): {items}.\n"
    )


def _check_power_seeds(args, sources) -> None:
    """--power needs a spread on each side: refused before any run is loaded."""
    if args.power is None:
        return
    few = [f"{config} ({len(labels)})" for config, labels in seed_groups(list(sources)).items() if len(labels) < 2]
    if few:
        raise ReportError(f"--power estimates the spread from 2 or more runs a side; {', '.join(few)}")


def report(args: argparse.Namespace) -> tuple[str, list[Path]]:
    """Run the whole report; returns the Markdown table and the files written.

    Raises ReportError when no table can be made.
    """
    if not args.runs:
        raise NotRead("no run given")
    sources = _parse_runs(args.runs)
    _check_power_seeds(args, sources)
    frames, curves, benchmarks, columns = _curves(args, _load_runs(sources))
    args.gap_note = _gap_note(args, curves)
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
        table = at_rollouts_table(curves, groups, args.at_rollouts, args.curve)
        extra = at_rollouts_markdown(table, args.at_rollouts, args.curve) + args.gap_note
        _write_table(args.out, "at_rollouts", extra, table, written)
        markdown += "\n" + extra
    budgets = budget_points_table(kept_frames)
    if not budgets.empty:  # runs validated by rollout budget: where each budget's point lay
        extra = budget_points_markdown(budgets)
        _write_table(args.out, "budget_points", extra, budgets, written)
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
    except NotRead as why:
        print(f"not read: {why}; no table is written")
        return 0
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
