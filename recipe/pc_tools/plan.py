"""Plan a run: per-prompt pass rates from rollout dumps, fed to the cost model for GRPO, DAPO and PC splits.

    python -m recipe.pc_tools.plan predict DUMP_DIR [--steps 10:20] [--group-size 16] [--pc 4+12,8+8] ...
    python -m recipe.pc_tools.plan check DUMP_DIR --measured KIND=METRICS [--window K] [--per-step] ...
    python -m recipe.pc_tools.plan sources DUMP_DIR [--window K] [--table] [--histogram PNG]

DUMP_DIR holds ``<step>.jsonl`` (or gzipped ``<step>.jsonl.gz``) files written by this project's trainer with
``trainer.rollout_data_dir=DUMP_DIR``, or is the one Parquet file they were packed into (``recipe.pc_tools.dumps``).
A prompt seen k times with s successes gets pass rate (s + a) / (k + a + b), with a Beta(a, b) prior from
``--prior a,b`` (default none: s/k). The band, the staleness bound, the round limit and the metric default to the
trainer YAML's values (``recipe.pc_tools.defaults``).

``predict``: the cost model's prediction for each configuration, and a recommendation. ``--simulate STEPS --skip``
adds each configuration with GRESO skipping to the simulated table (the analytic model has no prompt history); with
fixed pass rates and no eviction its saving is optimistic. ``--screen-n K`` screens every PC split's pilots
(``algorithm.exploration.screen_n``); ``--downsample-n N`` generates N rollouts per GRPO/DAPO group and per PC commit
and trains the configured number (PODS, ``algorithm.downsample.n``). ``--sources A,B`` keeps only the prompts of those
data sources (predicting a mix made of some of a dump's sources). ``--allocator NAME`` adds any registered allocator
(``algorithm.rollout_allocation``; one of your own once its module is imported, e.g. through
``VERL_USE_EXTERNAL_MODULES``) at the grid's sizes, with ``--set KEY=VALUE`` overrides of the trainer's config; it has
no analytic model, so it is simulated (``--simulate STEPS``). ``--per-1000`` adds a column to each table: informative
groups per 1,000 generated rollouts, the non-zero-gradient groups a budget buys.

``check`` (``--measured KIND=METRICS``, KIND ``grpo``, ``dapo`` or ``pc:P+C``): the run's logged
``rollout_stats/num_rollouts_sample`` and ``training/num_gen_batches`` (a verl file-logger log, ``tb:DIR`` or
``wandb:ENTITY/PROJECT/RUN_ID``, as ``recipe.pc_tools.logs`` reads them), averaged over the steps it logged in the dump
window (their count is a column; a window it did not reach shows "—"), beside the prediction for that configuration,
with the relative error (``recipe.pc_tools.measured``). A log whose pilot rollouts contradict KIND is refused. Two
more columns give the model again at the run's own filter pass rate (PC: pilots in the band; DAPO: groups kept), so a
miss splits into the pass-rate input (GRPO's rates, not the run's) and the model's arithmetic (e.g. the first step's
empty buffer). ``--window K`` repeats it for consecutive windows of K dumped steps (pass rates drift as the policy
learns). ``--per-step`` predicts each dumped step from that step's pass rates and averages over the steps the run
logged: a step's rounds are convex in its filter pass rate, so pooling a window first predicts too few rounds while
the rates move fast (the first steps, before the answer format is learned). Feed it the dump of a different run (e.g.
the GRPO run of the same data and seed): a run's own dump is shaped by its own allocator.

``sources``: per window, each data source's pass-rate spread (how a data mix is calibrated) as a table, and with
``--histogram PNG`` drawn (matplotlib, the ``report`` extra).

Recommendation: only a configuration simulated in this call (``--simulate``): the fewest generated rollouts per
informative trained group (a group whose metric is not constant, so GRPO gets a gradient from it; ties: fewer rounds
per step), if fewer than GRPO's simulated row. Without the simulator none: the analytic model's rows are not
measurements and the regime study measured no split ahead of GRPO by a measured margin (``MEASURED_AGAINST_GRPO``);
the line names the closest measured split. A split measured to need more rollouts than GRPO is never recommended.
The criterion does not weigh PC's reuse of pilots up to ``buffer_max_off_steps`` steps old, nor how much a step
learns (``CRITERION_CAVEAT``).
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys

import numpy as np

from recipe.pc_tools import defaults
from recipe.pc_tools.costmodel import predict, simulate
from recipe.pc_tools.dumps import (
    PACKED_SUFFIX,
    parse_steps,
    pass_rates,
    per_step_rates,
    plot_histograms,
    rates_by_source,
    read_window,
    source_table,
    step_files,
    windows,
)
from recipe.pc_tools.measured import compare_with_runs, measured_arg, parse_measured
from recipe.pc_tools.predictions import (
    EVICTION_PASSES,
    configurations,
    eviction_notes,
    format_table,
    mean_over_steps,
    parse_splits,
    recommendation,
    registered_configurations,
)

PROG = "python -m recipe.pc_tools.plan"
# The simulator's defaults: --simulate-warmup and --simulate-runs other than these are "set" (and need --simulate).
SIMULATE_WARMUP, SIMULATE_RUNS = (inspect.signature(simulate).parameters[p].default for p in ("warmup", "runs"))


# ------------------------------------------------------------------ argument types (their errors are argparse's)
def _checked(parse, what: str | None = None):
    """An argparse type from ``parse``: its ValueError (or a value failing ``what``'s bound) as an argument error."""

    def convert(text: str):
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err) if what is None else f"expected {what}, got {text!r}") from None

    return convert


def _int_at_least(low: int, what: str):
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise ValueError(text)
        return value

    return _checked(parse, f"{what} >= {low}")


def _prior(text: str) -> tuple[float, float]:
    prior = tuple(float(x) for x in text.split(","))
    if len(prior) != 2 or min(prior) < 0:
        raise ValueError(text)
    return prior


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


# ------------------------------------------------------------------ options, grouped by the commands that take them
def _dump_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        parser.add_argument("dump_dir", help="folder of <step>.jsonl rollout dumps (trainer.rollout_data_dir)"),
        parser.add_argument(
            "--steps",
            type=_checked(parse_steps),
            default=(None, None),
            help="window FIRST:LAST of dumped steps, inclusive (default: all)",
        ),
        parser.add_argument(
            "--metric",
            default=defaults.AGG_METRIC,
            help="per-rollout 0/1 metric (default %(default)s, algorithm.agg_metric); 'score': score > 0",
        ),
        parser.add_argument(
            "--prior",
            type=_checked(_prior, "two non-negative numbers a,b"),
            default="0,0",
            help="Beta prior a,b added to each prompt's counts (default 0,0)",
        ),
    ]


def _model_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The configurations the cost model compares and the pass rates it is fed (predict and check)."""
    add = parser.add_argument
    return [
        add("--train-batch-size", type=int, default=32, help="B: prompts trained per step"),
        add("--gen-batch-size", type=int, default=None, help="G: prompts per round (default 3B)"),
        add("--group-size", type=int, default=16, help="rollouts per trained group (GRPO/DAPO n)"),
        add(
            "--pc",
            type=_checked(lambda text: parse_splits(text) if text else []),
            help="PC splits pilot+commit, e.g. 4+12,8+8 (default: a grid at --group-size)",
        ),
        add("--p-lower", type=float, default=defaults.P_LOWER, help="algorithm.diversity_threshold_lower"),
        add("--p-upper", type=float, default=defaults.P_UPPER, help="algorithm.diversity_threshold_upper"),
        add("--max-off-steps", type=int, default=defaults.MAX_OFF_STEPS, help="algorithm.buffer_max_off_steps"),
        add(
            "--max-num-gen-batches",
            type=int,
            default=defaults.MAX_ROUNDS,
            help="algorithm.max_num_gen_batches: rounds allowed per step (<= 0: no limit; default %(default)s)",
        ),
        add("--screen-n", type=int, default=None, help="algorithm.exploration.screen_n (PC splits)"),
        add(
            "--downsample-n",
            type=int,
            default=None,
            help="algorithm.downsample.n: generated per GRPO/DAPO group or PC commit",
        ),
        add(
            "--sources",
            type=_names,
            help="only prompts of these data sources, e.g. arith_l2,arith_l3 (a mix made of some of them)",
        ),
        add(
            "--per-step",
            action="store_true",
            help="predict each dumped step from its own pass rates, then average (a run's mean with its warm-up; "
            "with check, step by step beside the run)",
        ),
    ]


def _predict_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    add = parser.add_argument
    return [
        add("--simulate", type=int, default=0, metavar="STEPS", help="also run the simulator this long"),
        add(
            "--simulate-warmup",
            type=_int_at_least(0, "a number of steps"),
            default=SIMULATE_WARMUP,
            metavar="W",
            help=f"simulated steps left out first (default {SIMULATE_WARMUP})",
        ),
        add(
            "--simulate-runs",
            type=_int_at_least(1, "a number of runs"),
            default=SIMULATE_RUNS,
            metavar="R",
            help=f"simulated runs pooled, seeds 0..R-1 (default {SIMULATE_RUNS})",
        ),
        add(
            "--prompts",
            type=_int_at_least(1, "a number of prompts"),
            default=None,
            metavar="N",
            help="simulate N prompts, drawn with replacement from the dump's pass rates, a new draw each simulated "
            "run (default: the dump's prompts)",
        ),
        add(
            "--skip",
            action="store_true",
            help="with --simulate: each configuration also with GRESO skipping (algorithm.skip's defaults); "
            "optimistic, as a prompt's pass rate never changes in the simulator",
        ),
        add(
            "--allocator",
            action="append",
            default=[],
            metavar="NAME",
            help="also simulate this registered allocator (algorithm.rollout_allocation; one imported through "
            "VERL_USE_EXTERNAL_MODULES too) at the grid's sizes; it has no analytic model, so it needs --simulate "
            "(repeatable)",
        ),
        add(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a trainer config override for every --allocator, e.g. algorithm.max_num_gen_batches=5 (repeatable)",
        ),
        add(
            "--per-1000",
            action="store_true",
            help="add a column to each table: informative groups (trained groups whose metric varies, so GRPO's "
            "gradient is not zero) per 1,000 generated rollouts",
        ),
        add(
            "--train-prompts",
            type=_int_at_least(1, "a number of prompts"),
            default=None,
            metavar="N",
            help="the planned run's training prompts: a note for each PC split that would pass over them more than "
            f"{EVICTION_PASSES:g} times in the dumped steps' count, where eviction makes the prediction low",
        ),
    ]


def _window_option(parser: argparse.ArgumentParser) -> argparse.Action:
    return parser.add_argument(
        "--window",
        type=_int_at_least(1, "a number of steps"),
        default=None,
        metavar="K",
        help="split the steps into windows of K",
    )


def _measured_option(parser: argparse.ArgumentParser) -> argparse.Action:
    return parser.add_argument(
        "--measured",
        action="append",
        type=measured_arg,
        required=True,
        metavar="KIND=METRICS",
        help="compare with a run's log: KIND grpo, dapo or pc:P+C (repeatable)",
    )


def _sources_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        parser.add_argument(
            "--table",
            dest="table",
            action="store_true",
            help="per window: pass rates per data source (the default unless --histogram is given)",
        ),
        parser.add_argument("--histogram", metavar="PNG", help="per window: a histogram of per-prompt pass rates"),
    ]


def build_parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser with the commands, and each command's parser."""
    main = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = main.add_subparsers(dest="command", required=True, metavar="COMMAND")
    helps = {
        "predict": "the cost model's prediction for GRPO, DAPO and PC splits, and a recommendation",
        "check": "the prediction beside runs that happened (--measured KIND=METRICS)",
        "sources": "per-prompt pass rates per data source: a table, a histogram",
    }
    commands = {name: sub.add_parser(name, help=text, description=text) for name, text in helps.items()}
    for name in ("predict", "check"):
        _dump_options(commands[name])
        _model_options(commands[name])
    _predict_options(commands["predict"])
    _measured_option(commands["check"])
    _window_option(commands["check"])
    _dump_options(commands["sources"])
    _window_option(commands["sources"])
    _sources_options(commands["sources"])
    return main, commands


def _check_predict(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    simulator_only = [
        flag
        for flag, used in (
            ("--skip", args.skip),
            ("--prompts", args.prompts is not None),
            ("--simulate-warmup", args.simulate_warmup != SIMULATE_WARMUP),
            ("--simulate-runs", args.simulate_runs != SIMULATE_RUNS),
        )
        if used
    ]
    if simulator_only and args.simulate <= 0:
        parser.error(f"{', '.join(simulator_only)} set(s) the simulator: add --simulate STEPS")
    if args.allocator and args.simulate <= 0:
        parser.error(f"--allocator {args.allocator[0]} is simulated (it has no analytic model): add --simulate STEPS")
    if args.set and not args.allocator:
        parser.error("--set overrides the config of the --allocator configurations: name one with --allocator")
    if args.per_step and args.simulate > 0:
        parser.error("--per-step predicts step by step; the simulator runs on pooled rates: use one")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command and its options."""
    main, commands = build_parsers()
    args = main.parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.command == "predict":
        _check_predict(commands["predict"], args)
    if args.command == "sources" and not args.histogram:
        args.table = True
    return args


# ------------------------------------------------------------------ commands
def run_sources(args: argparse.Namespace) -> int:
    files = step_files(args.dump_dir, args.steps)
    windowed = [rates_by_source(chunk, args.metric, args.prior) for chunk in windows(files, args.window)]
    if args.table:
        print(source_table(windowed))
    if args.histogram:
        try:
            plot_histograms(
                windowed, args.histogram, args.dump_dir.removesuffix(PACKED_SUFFIX)
            )  # one title, either form
        except ImportError:
            print('error: --histogram needs matplotlib: pip install -e ".[report]"', file=sys.stderr)
            return 2
        print(f"wrote {args.histogram}", file=sys.stderr)
    return 0


def run_check(args: argparse.Namespace) -> int:
    measured = parse_measured(args.measured, configurations(args))
    files = step_files(args.dump_dir, args.steps)
    print(compare_with_runs(files, measured, args.metric, args.prior, args.window, args.sources, args.per_step))
    return 0


def run_predict(args: argparse.Namespace) -> int:
    configs, registered = configurations(args), registered_configurations(args)
    files = step_files(args.dump_dir, args.steps)
    metric, prior, sources = args.metric, args.prior, args.sources
    ids, seen, wins = read_window(files, metric, sources)
    rates = pass_rates(seen, wins, prior)
    never_fill = {}
    if args.per_step:  # a run's mean over these steps, warm-up included (rounds are convex in a step's rates)
        step_rates = list(per_step_rates(files, metric, prior, sources).values())
        per_config = [[predict(r, c) for r in step_rates] for c in configs]
        predictions = [mean_over_steps(preds) for preds in per_config]
        for c, preds in zip(configs, per_config, strict=True):
            if stuck := sum(not math.isfinite(p.rounds_per_step) for p in preds):
                never_fill[c.label] = (stuck, len(preds))
    else:
        predictions = [predict(rates, c) for c in configs]
    # A configuration predicted never to fill a step is not simulated (it would only hit the round cap).
    fills = [c for c, p in zip(configs, predictions, strict=True) if math.isfinite(p.rounds_per_step)] + registered
    skips = [None, defaults.SKIP] if args.skip else [None]
    how = {"warmup": args.simulate_warmup, "runs": args.simulate_runs, "prompts": args.prompts}
    runs = [(c, k) for c in fills for k in skips] if args.simulate else []
    simulated = [simulate(rates, c, steps=args.simulate, skip=k, **how) for c, k in runs]

    print(
        f"{len(ids)} prompts, {int(seen.sum())} rollouts from steps {files[0][0]}..{files[-1][0]} "
        f"({len(files)} dumped steps); metric {metric}, prior Beta{prior}"
        + (f"; data sources {','.join(sources)}" if sources else "")
    )
    print(
        f"pass rate: mean {rates.mean():.3f}, median {np.median(rates):.3f}; rollouts per prompt: "
        f"median {np.median(seen):.0f}; share at 0: {(rates == 0).mean():.2f}, at 1: {(rates == 1).mean():.2f}"
    )
    gen = configs[-1].gen_batch_size
    if len(ids) < 10 * gen:
        print(
            f"note: {len(ids)} prompts for rounds of {gen}: the analytic model assumes each round brings new prompts "
            "(the buffer keeps one entry per prompt); check it with --simulate"
        )
    if args.per_step:
        print("per step: each dumped step predicted from its own pass rates, then averaged over the steps")
    for label, (stuck, steps) in never_fill.items():
        print(
            f"note: {label}: {stuck} of {steps} steps never fill on their own rates (no prompt can land in the band "
            "or show spread), so its mean is infinite; with --max-num-gen-batches > 0 they end at that many rounds"
        )
    print()
    print(format_table(predictions, args.per_1000))
    if args.train_prompts is not None:
        for note in eviction_notes(predictions, configs, args.train_prompts, len(files)):
            print(note)
    if simulated:
        what = f"{args.simulate} steps after {args.simulate_warmup}, {args.simulate_runs} run(s)"
        print(f"\nsimulated ({what}" + (f", {args.prompts} prompts drawn from these" if args.prompts else "") + "):")
        print(format_table(simulated, args.per_1000))
    print()
    for line in recommendation(predictions, configs, simulated, [c for c, _ in runs]):
        print(line)
    return 0


RUN = {"predict": run_predict, "check": run_check, "sources": run_sources}


def main(argv: list[str] | None = None) -> int:
    """Run ``plan``; the exit status (2: an argument, a dump or a log that cannot be used, with a message)."""
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage error, or the help
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return RUN[args.command](args)
    except ValueError as err:  # DumpError, PCConfigError and bad pass rates all name what to fix
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
