"""Plan a run: per-prompt pass rates from rollout dumps, fed to the cost model for GRPO, DAPO and PC splits.

    python -m recipe.pc.plan DUMP_DIR [--steps 10:20] [--group-size 16] [--pc 4+12,8+8] ...

DUMP_DIR holds ``<step>.jsonl`` (or gzipped ``<step>.jsonl.gz``) files written by this project's trainer with
``trainer.rollout_data_dir=DUMP_DIR``: one JSON object per generated rollout with at least
``prompt_id`` and the metric (``acc`` by default). A prompt seen k times with s successes gets
pass rate (s + a) / (k + a + b), with a Beta(a, b) prior from ``--prior a,b`` (default none: s/k).

Checking the model against a run (``--measured KIND=METRICS``, KIND ``grpo``, ``dapo`` or ``pc:P+C``): the
run's logged ``rollout_stats/num_rollouts_sample`` and ``training/num_gen_batches`` (a verl file-logger log,
``tb:DIR`` or ``wandb:ENTITY/PROJECT/RUN_ID``, as ``recipe.pc.report`` reads them), averaged over the steps it
logged in the dump window (their count is a column; a window it did not reach shows "—"), beside the
prediction for that configuration, with the relative error. A log whose pilot rollouts contradict KIND is
refused. Two more columns give the model again at the run's own filter pass rate (PC: pilots in the band;
DAPO: groups kept), so a miss splits into the pass-rate input (GRPO's rates, not the run's) and the model's
arithmetic (e.g. the first step's empty buffer). ``--window K`` repeats it for consecutive windows of K dumped
steps (pass rates drift as the policy learns). ``--per-step`` predicts each dumped step from that step's pass
rates and averages over the steps the run logged: a step's rounds are convex in its filter pass rate, so pooling a
window first predicts too few rounds while the rates move fast (the first steps, before the answer format is
learned). Feed it the dump of a different run (e.g. the GRPO run of the same data and seed): a run's own dump is
shaped by its own allocator.

``--simulate STEPS --skip`` adds each configuration with GRESO skipping to the simulated table (the analytic model
has no prompt history); with fixed pass rates and no eviction its saving is optimistic. ``--screen-n K`` screens
every PC split's pilots (``algorithm.exploration.screen_n``); ``--downsample-n N`` generates N rollouts per
GRPO/DAPO group and per PC commit and trains the configured number (PODS, ``algorithm.downsample.n``). ``--sources
A,B`` keeps only the prompts of those data sources (predicting a mix made of some of a dump's sources).
``--by-source`` prints, per window, each data source's pass-rate spread (how a data mix is calibrated);
``--histogram PNG`` draws it (matplotlib, the ``report`` extra).

Recommendation: the configuration with the fewest predicted generated rollouts per informative
trained group (a group whose metric is not constant, so GRPO gets a gradient from it); ties go to
fewer generation rounds per step. The default grid holds every method at one group size, so a
trained group costs the same to train on; the criterion does not weigh PC's reuse of pilots up to
``buffer_max_off_steps`` steps old, nor how much a step learns (``CRITERION_CAVEAT``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from recipe.pc.costmodel import DAPO, GRPO, PilotCommit, Prediction, predict, predict_at_filter_rate, simulate
from recipe.pc.stages.skip import SkipRule

if TYPE_CHECKING:
    import pandas as pd

DUMP_HINT = (
    "write rollout dumps with this project's trainer: add trainer.rollout_data_dir=DIR to the "
    "python -m recipe.pc.main_pc command (any of grpo, dapo or pilot_commit), then run plan on DIR"
)


# What the recommendation's criterion does not capture, as measured (docs/results/regimes/README.md).
CRITERION_CAVEAT = (
    "note: this ranks rollouts per informative group, not learning per rollout. In docs/results/regimes "
    "(arithmetic, SmolLM2-135M) PC 4+12 generated fewer per informative group than GRPO n=16 (33 against 40, "
    "measured) and still needed more rollouts to reach GRPO's accuracy (1.4x GRPO's by the seeds' mean curves, "
    "near the seed spread); against GRPO n=64 PC 16+48 needed 1.3x, and PC 4+60, at 80 per informative group "
    "against GRPO's 116, 1.0x (two seeds each); on a mix with pass rates spread over (0, 1) "
    "PC 4+12 paid the same per informative group as GRPO n=16 (30) and needed 1.9x, PC 16+48 needed 1.2x, and "
    "PC 8+56 paid less per informative group than GRPO n=64 (85 against 93) and still needed 1.1x; PC 4+60, the "
    "cheapest split there, reached parity (1.0x, three seeds each against a 35-step GRPO run); on 480 of the "
    "arithmetic prompts PC 4+12 evicted the prompts it solved, generated about 4x GRPO's rollouts a step and never "
    "reached GRPO's accuracy (--train-prompts warns of that regime). At the same "
    "group size a PC step costs at least (n_pilot*G/B + n_commit)/n GRPO steps. Check a recommendation with short "
    "runs."
)


# Passes over the training set past which PC's eviction (at each pass's end, of the prompts its pilots solved) leaves
# harder prompts than the dump's pass rates: on 480 arithmetic prompts (47 and 56 passes by step 29) the model was
# 44-49% low, on 3,000 (under 2 passes in 30 steps) within 15% (docs/results/regimes/README.md, "480 prompts").
EVICTION_PASSES = 2.0


def eviction_notes(predictions: list[Prediction], configs: list, train_prompts: int, steps: int) -> list[str]:
    """A note for each PC configuration predicted to pass over ``train_prompts`` more than EVICTION_PASSES times
    in ``steps`` steps, where the model, which never evicts, predicts too few rounds."""
    notes = []
    for pred, config in zip(predictions, configs, strict=True):
        if not isinstance(config, PilotCommit) or not math.isfinite(pred.rounds_per_step):
            continue
        passes = pred.rounds_per_step * config.gen_batch_size * steps / train_prompts
        if passes > EVICTION_PASSES:
            notes.append(
                f"note: {pred.label}: {pred.rounds_per_step:.2f} rounds a step of {config.gen_batch_size} prompts "
                f"pass over the {train_prompts} training prompts {passes:.1f} times in {steps} steps. PC evicts the "
                "prompts its pilots solve at each pass's end and this model does not, so once the prompts left are "
                "mostly too hard expect more rounds than predicted (on 480 arithmetic prompts, 47 and 56 passes by "
                "step 29, it was 44-49% low: docs/results/regimes/README.md)"
            )
    return notes


class DumpError(ValueError):
    """A dump this command cannot read; the message names the file and row and what to run instead."""


def parse_steps(text: str | None) -> tuple[int | None, int | None]:
    """``A:B`` (both inclusive), ``A:``, ``:B`` or ``A``; None: every step."""
    if not text:
        return None, None
    lo, sep, hi = text.partition(":")
    try:
        first = int(lo) if lo else None
        last = (int(hi) if hi else None) if sep else first
    except ValueError:
        raise DumpError(f"--steps {text!r}: expected FIRST:LAST (inclusive, either may be left out)") from None
    if first is not None and last is not None and first > last:
        raise DumpError(f"--steps {text!r}: the first step is after the last")
    return first, last


def step_files(dump_dir: str, steps: tuple[int | None, int | None]) -> list[tuple[int, str]]:
    if not os.path.isdir(dump_dir):
        raise DumpError(f"{dump_dir} is not a directory; {DUMP_HINT}")
    found = []
    for name in os.listdir(dump_dir):
        # <step>.jsonl as the trainer writes it, or gzipped for keeping (docs/results/regimes).
        stem = name.removesuffix(".gz").removesuffix(".jsonl")
        if name in (f"{stem}.jsonl", f"{stem}.jsonl.gz") and stem.isdigit():
            found.append((int(stem), os.path.join(dump_dir, name)))
    numbers = [s for s, _ in found]
    if len(set(numbers)) != len(numbers):
        raise DumpError(f"{dump_dir} holds both <step>.jsonl and <step>.jsonl.gz for a step; keep one")
    if not found:
        raise DumpError(f"{dump_dir} holds no <step>.jsonl files; {DUMP_HINT}")
    first, last = steps
    chosen = sorted((s, path) for s, path in found if (first is None or s >= first) and (last is None or s <= last))
    if not chosen:
        have = sorted(s for s, _ in found)
        raise DumpError(f"no dumped step in the window {first}:{last}; {dump_dir} has steps {have[0]}..{have[-1]}")
    return chosen


def _success(value, metric: str, where: str) -> float:
    """The metric as a success in [0, 1]: acc-like values as they are, ``score`` as score > 0."""
    if metric == "score":
        if not isinstance(value, (int, float)):
            raise DumpError(f"{where}: score={value!r} is not a number")
        return float(value > 0)
    if isinstance(value, bool) or (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
        return float(value)
    raise DumpError(
        f"{where}: {metric}={value!r} is not a success in [0, 1]; pick a 0/1 metric with --metric, "
        "or --metric score (success = score > 0)"
    )


def _open_dump(path: str):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def read_dump(files: list[tuple[int, str]], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(prompt ids, rollouts seen, successes, data source) over the rows of ``files``, in one pass; the source is
    ``"?"`` for a dump without ``data_source``."""
    seen: dict[int, float] = defaultdict(float)
    wins: dict[int, float] = defaultdict(float)
    sources: dict[int, str] = {}
    for _, path in files:
        with _open_dump(path) as handle:
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{path} line {line_no}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise DumpError(f"{where}: not JSON ({err})") from None
                if "prompt_id" not in row:
                    raise DumpError(f"{where} has no 'prompt_id' (keys {sorted(row)}); {DUMP_HINT}")
                if metric not in row:
                    hint = " (or --metric score for score > 0)" if metric != "score" and "score" in row else ""
                    raise DumpError(
                        f"{where} has no {metric!r} (keys {sorted(row)}); pass the metric the reward returns "
                        f"with --metric{hint}, or {DUMP_HINT}"
                    )
                pid = int(row["prompt_id"])
                seen[pid] += 1
                wins[pid] += _success(row[metric], metric, where)
                sources.setdefault(pid, str(row.get("data_source", "?")))
    if not seen:
        raise DumpError(f"the dump files {[p for _, p in files]} hold no rollouts")
    ids = np.array(sorted(seen))
    return (
        ids,
        np.array([seen[i] for i in ids]),
        np.array([wins[i] for i in ids]),
        np.array([sources[i] for i in ids]),
    )


def read_pass_counts(files: list[tuple[int, str]], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prompt ids, rollouts seen, successes) over the rows of ``files``."""
    return read_dump(files, metric)[:3]


def _check_sources(sources: list[str] | None, present: set[str], files: list[tuple[int, str]]) -> None:
    missing = sorted(set(sources or ()) - present)
    if missing:
        where = f"steps {files[0][0]}..{files[-1][0]}"
        raise DumpError(f"--sources: no prompt of {missing} in {where}; the dump has {sorted(present)}")


def read_window(files: list[tuple[int, str]], metric: str, sources: list[str] | None):
    """(prompt ids, rollouts seen, successes) of the prompts of these data sources (None: all), e.g. to predict a
    mix made of some of a dump's sources; a source with no prompt in ``files`` is an error."""
    ids, seen, wins, labels = read_dump(files, metric)
    if not sources:
        return ids, seen, wins
    _check_sources(sources, set(labels.tolist()), files)
    keep = np.isin(labels, sources)
    return ids[keep], seen[keep], wins[keep]


def per_step_rates(chunk: list[tuple[int, str]], metric: str, prior, sources: list[str] | None) -> dict:
    """Dumped step -> its prompts' pass rates (of these data sources), each file read once; a source must have a
    prompt somewhere in ``chunk``, not in every step, and a step with none of them is left out."""
    rates, present = {}, set()
    for step, path in chunk:
        _, seen, wins, labels = read_dump([(step, path)], metric)
        present.update(labels.tolist())
        keep = np.isin(labels, sources) if sources else np.ones(len(seen), dtype=bool)
        if keep.any():
            rates[step] = pass_rates(seen[keep], wins[keep], prior)
    _check_sources(sources, present, chunk)
    return rates


def rates_by_source(chunk: list[tuple[int, str]], metric: str, prior) -> tuple[str, np.ndarray, np.ndarray]:
    """One window: its step range ("A..B"), each prompt's pass rate, and each prompt's data source."""
    _, seen, wins, labels = read_dump(chunk, metric)
    return f"{chunk[0][0]}..{chunk[-1][0]}", pass_rates(seen, wins, prior), labels


def source_table(windowed: list[tuple[str, np.ndarray, np.ndarray]]) -> str:
    """Per window and data source: prompts seen, mean pass rate and the shares at 0, strictly between, and at 1."""
    lines = [
        "| steps | data source | prompts | mean pass rate | share at 0 | share in (0, 1) | share at 1 |",
        "|" + "---|" * 7,
    ]
    for steps, rates, labels in windowed:
        for source in [*sorted(set(labels)), "all"]:
            r = rates if source == "all" else rates[labels == source]
            lines.append(
                f"| {steps} | {source} | {len(r)} | {r.mean():.3f} | {(r == 0).mean():.2f} "
                f"| {((r > 0) & (r < 1)).mean():.2f} | {(r == 1).mean():.2f} |"
            )
    return "\n".join(lines)


def plot_histograms(windowed: list[tuple[str, np.ndarray, np.ndarray]], path: str, title: str) -> None:
    """One panel per window: per-prompt pass rates, stacked by data source."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(windowed), 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(windowed), sharey=True, squeeze=False)[0]
    for ax, (steps, rates, labels) in zip(axes, windowed, strict=True):
        names = sorted(set(labels))
        ax.hist([rates[labels == n] for n in names], bins=np.linspace(0, 1, 18), stacked=True, label=names)
        ax.set_title(f"steps {steps} ({len(rates)} prompts)")
        ax.set_xlabel("per-prompt pass rate")
    axes[0].set_ylabel("prompts")
    axes[-1].legend(fontsize=7)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)


def pass_rates(seen: np.ndarray, wins: np.ndarray, prior: tuple[float, float]) -> np.ndarray:
    a, b = prior
    return (wins + a) / (seen + a + b)


def default_splits(group_size: int) -> list[tuple[int, int]]:
    """Pilot sizes 2, 4, 8, ... below the group size (and a quarter of it), the rest committed."""
    pilots = {2**k for k in range(1, int(math.log2(group_size)) + 1) if 2**k < group_size}
    if group_size >= 8:
        pilots.add(group_size // 4)
    return [(n_p, group_size - n_p) for n_p in sorted(pilots)]


def parse_splits(text: str) -> list[tuple[int, int]]:
    splits = []
    for part in text.split(","):
        pilot, plus, commit = part.strip().partition("+")
        if not (plus and pilot.isdigit() and commit.isdigit()):
            raise DumpError(f"--pc {text!r}: expected splits like 4+12,8+8 (pilot+commit rollouts)")
        splits.append((int(pilot), int(commit)))
    return splits


def configurations(args) -> list:
    B, G, N = args.train_batch_size, args.gen_batch_size or 3 * args.train_batch_size, args.group_size
    splits = parse_splits(args.pc) if args.pc else default_splits(N)
    if args.screen_n is not None and not args.pc:
        # A screen must be shorter than the pilot: the default grid keeps the splits it fits.
        splits = [(n_p, n_c) for n_p, n_c in splits if n_p > args.screen_n]
        if not splits:
            raise DumpError(f"--screen-n {args.screen_n}: no default split has a longer pilot; give --pc")
    ds = args.downsample_n
    configs = [GRPO(N, B, ds), DAPO(N, G, B, args.max_num_gen_batches, ds)]
    configs += [
        PilotCommit(
            n_p, n_c, G, B, args.p_lower, args.p_upper, args.max_off_steps, args.max_num_gen_batches, args.screen_n, ds
        )
        for n_p, n_c in splits
    ]
    return configs


def parse_measured(specs: list[str], configs: list) -> list[tuple[object, str]]:
    """``KIND=PATH`` -> (the configuration in ``configs`` that KIND names, path)."""
    out = []
    for spec in specs:
        kind, eq, path = spec.partition("=")
        if not eq or not path:
            raise DumpError(f"--measured {spec!r}: expected KIND=METRICS with KIND grpo, dapo or pc:P+C")
        if kind in ("grpo", "dapo"):
            wanted = GRPO if kind == "grpo" else DAPO
            match = [c for c in configs if type(c) is wanted]
        elif kind.startswith("pc:"):
            split = parse_splits(kind[3:])
            match = [c for c in configs if isinstance(c, PilotCommit) and [(c.n_pilot, c.n_commit)] == split]
        else:
            match = []
        if len(match) != 1:
            labels = ", ".join(c.label for c in configs)
            raise DumpError(
                f"--measured {spec!r}: {kind!r} names none of the configurations ({labels}); add it with --pc"
            )
        out.append((match[0], path))
    return out


MEASURED_COLUMNS = ("rollout_stats/num_rollouts_sample", "training/num_gen_batches")


def load_measured(path: str, config) -> pd.DataFrame:
    """A run's log (a file, ``tb:DIR`` or ``wandb:ENTITY/PROJECT/RUN_ID``, as ``recipe.pc.report`` reads them),
    checked to hold the columns the comparison needs and to be a run of ``config``'s method."""
    from recipe.pc.report import ReportError, load_run, parse_run_arg

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
        ("rollout_stats/num_rollouts_sample_explore", isinstance(config, PilotCommit), "pilot rollouts"),
        ("filtering_stats/screened_out_count", getattr(config, "screen_n", None) is not None, "screened-out prompts"),
        ("rollout_stats/num_rollouts_downsampled", config.downsample_n is not None, "down-sampled rollouts"),
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

    def share(part: str, whole: str = "filtering_stats/num_candidates") -> float:
        if part not in frame.columns or whole not in frame.columns:
            return float("nan")
        window = frame.loc[rows.index, [part, whole]].fillna(0).sum()
        return float(window[part] / window[whole]) if window[whole] > 0 else float("nan")

    rate, mixed = share("filtering_stats/pass_count"), 1.0 - share("filtering_stats/screened_out_count")
    return float(rows[MEASURED_COLUMNS[0]].mean()), float(rows[MEASURED_COLUMNS[1]].mean()), rate, mixed, len(rows)


def windows(files: list[tuple[int, str]], size: int | None) -> list[list[tuple[int, str]]]:
    """Consecutive windows of ``size`` dumped steps (the last may be shorter); None: one window."""
    if not size:
        return [files]
    return [files[i : i + size] for i in range(0, len(files), size)]


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


def recommend(predictions: list[Prediction]) -> Prediction | None:
    finite = [p for p in predictions if math.isfinite(p.rollouts_per_informative_group)]
    if not finite:
        return None
    return min(finite, key=lambda p: (round(p.rollouts_per_informative_group, 6), p.rounds_per_step))


def format_table(predictions: list[Prediction]) -> str:
    head = (
        "| configuration | group | rounds/step | pilot rollouts | commit rollouts | rollouts/step | trained groups "
        "| informative groups | filter pass rate | rollouts per informative group |"
    )
    lines = [head, "|" + "---|" * 10]
    for p in predictions:
        lines.append(
            f"| {p.label} | {p.group_size} | {p.rounds_per_step:.2f} | {p.pilot_rollouts_per_step:.0f} "
            f"| {p.commit_rollouts_per_step:.0f} | {p.rollouts_per_step:.0f} | {p.trained_groups_per_step:.1f} "
            f"| {p.informative_groups_per_step:.1f} | {p.filter_pass_rate:.3f} "
            f"| {p.rollouts_per_informative_group:.1f} |"
        )
    return "\n".join(lines)


def _at_filter_rate(config, rate: float, mixed: float) -> float:
    """Rollouts per step the model gives ``config`` at a run's logged filter pass rate (and screen share); nan for
    GRPO, or where the run logged no such share."""
    mixed = mixed if getattr(config, "screen_n", None) is not None else None
    if isinstance(config, GRPO) or math.isnan(rate) or (mixed is not None and math.isnan(mixed)):
        return float("nan")
    return predict_at_filter_rate(rate, config, screen_mixed=mixed).rollouts_per_step


def mean_over_steps(preds: list[Prediction]) -> Prediction:
    """One configuration's predictions for several steps (or one pooled window) as one: the mean of each count a
    step, and the filter pass rate over all their candidates (a step's candidates grow with its rounds)."""
    rounds = np.array([p.rounds_per_step for p in preds])
    passed = np.array([p.filter_pass_rate for p in preds])
    rate = float((passed * rounds).sum() / rounds.sum()) if np.isfinite(rounds).all() else float(passed.mean())
    return Prediction(
        preds[0].label,
        preds[0].group_size,
        float(rounds.mean()),
        float(np.mean([p.pilot_rollouts_per_step for p in preds])),
        float(np.mean([p.commit_rollouts_per_step for p in preds])),
        float(np.mean([p.trained_groups_per_step for p in preds])),
        float(np.mean([p.informative_groups_per_step for p in preds])),
        rate,
    )


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m recipe.pc.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("dump_dir", help="folder of <step>.jsonl rollout dumps (trainer.rollout_data_dir)")
    parser.add_argument("--steps", help="window FIRST:LAST of dumped steps, inclusive (default: all)")
    parser.add_argument("--metric", default="acc", help="per-rollout 0/1 metric (default acc); 'score': score > 0")
    parser.add_argument("--prior", default="0,0", help="Beta prior a,b added to each prompt's counts (default 0,0)")
    parser.add_argument("--train-batch-size", type=int, default=32, help="B: prompts trained per step")
    parser.add_argument("--gen-batch-size", type=int, default=None, help="G: prompts per round (default 3B)")
    parser.add_argument("--group-size", type=int, default=16, help="rollouts per trained group (GRPO/DAPO n)")
    parser.add_argument("--pc", help="PC splits pilot+commit, e.g. 4+12,8+8 (default: a grid at --group-size)")
    parser.add_argument("--p-lower", type=float, default=0.125, help="algorithm.diversity_threshold_lower")
    parser.add_argument("--p-upper", type=float, default=0.25, help="algorithm.diversity_threshold_upper")
    parser.add_argument("--max-off-steps", type=int, default=4, help="algorithm.buffer_max_off_steps")
    parser.add_argument("--max-num-gen-batches", type=int, default=10, help="rounds allowed per step (<= 0: no limit)")
    parser.add_argument("--screen-n", type=int, default=None, help="algorithm.exploration.screen_n (PC splits)")
    parser.add_argument(
        "--downsample-n",
        type=int,
        default=None,
        help="algorithm.downsample.n: generated per GRPO/DAPO group or PC commit",
    )
    parser.add_argument("--simulate", type=int, default=0, metavar="STEPS", help="also run the simulator this long")
    parser.add_argument(
        "--simulate-warmup", type=int, default=20, metavar="W", help="simulated steps left out first (default 20)"
    )
    parser.add_argument(
        "--simulate-runs", type=int, default=1, metavar="R", help="simulated runs pooled, seeds 0..R-1 (default 1)"
    )
    parser.add_argument(
        "--prompts",
        type=int,
        default=None,
        metavar="N",
        help="simulate N prompts, drawn with replacement from the dump's pass rates, a new draw each simulated run "
        "(default: the dump's prompts)",
    )
    parser.add_argument(
        "--skip",
        action="store_true",
        help="with --simulate: each configuration also with GRESO skipping (algorithm.skip's defaults); optimistic, "
        "as a prompt's pass rate never changes in the simulator",
    )
    parser.add_argument(
        "--measured",
        action="append",
        default=[],
        metavar="KIND=METRICS",
        help="compare with a run's log: KIND grpo, dapo or pc:P+C (repeatable)",
    )
    parser.add_argument("--window", type=int, default=None, metavar="K", help="split the steps into windows of K")
    parser.add_argument(
        "--per-step",
        action="store_true",
        help="predict each dumped step from its own pass rates, then average (a run's mean with its warm-up; "
        "with --measured, step by step beside the run)",
    )
    parser.add_argument(
        "--train-prompts",
        type=int,
        default=None,
        metavar="N",
        help="the planned run's training prompts: a note for each PC split that would pass over them more than "
        f"{EVICTION_PASSES:g} times in the dumped steps' count, where eviction makes the prediction low",
    )
    parser.add_argument("--by-source", action="store_true", help="per window: pass rates per data source")
    parser.add_argument(
        "--sources", help="only prompts of these data sources, e.g. arith_l2,arith_l3 (a mix made of some of them)"
    )
    parser.add_argument("--histogram", metavar="PNG", help="per window: a histogram of per-prompt pass rates")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        prior = tuple(float(x) for x in args.prior.split(","))
        if len(prior) != 2 or min(prior) < 0:
            raise ValueError
    except ValueError:
        print(f"error: --prior {args.prior!r}: expected two non-negative numbers a,b", file=sys.stderr)
        return 2
    if args.window is not None and args.window < 1:
        print(f"error: --window {args.window}: expected a number of steps >= 1", file=sys.stderr)
        return 2
    if args.sources and (args.by_source or args.histogram):
        print("error: --sources selects prompts for the prediction; --by-source already splits them", file=sys.stderr)
        return 2
    sources = [name.strip() for name in args.sources.split(",") if name.strip()] if args.sources else None
    if args.measured and (args.by_source or args.histogram):
        print("error: --measured makes its own table; run --by-source/--histogram separately", file=sys.stderr)
        return 2
    simulator_only = [
        flag
        for flag, used in (
            ("--skip", args.skip),
            ("--prompts", args.prompts is not None),
            ("--simulate-warmup", args.simulate_warmup != 20),
            ("--simulate-runs", args.simulate_runs != 1),
        )
        if used
    ]
    if simulator_only and args.simulate <= 0:
        print(f"error: {', '.join(simulator_only)} set(s) the simulator: add --simulate STEPS", file=sys.stderr)
        return 2
    if args.simulate_warmup < 0 or args.simulate_runs < 1 or (args.prompts is not None and args.prompts < 1):
        print("error: --simulate-warmup must be >= 0, --simulate-runs and --prompts >= 1", file=sys.stderr)
        return 2
    if args.per_step and args.simulate > 0:
        print("error: --per-step predicts step by step; the simulator runs on pooled rates: use one", file=sys.stderr)
        return 2
    if args.per_step and (args.by_source or args.histogram):
        print("error: --per-step is for predictions; --by-source/--histogram show pass rates", file=sys.stderr)
        return 2
    if args.train_prompts is not None and (args.train_prompts < 1 or args.measured or args.by_source or args.histogram):
        print(
            f"error: --train-prompts {args.train_prompts}: a number of prompts >= 1, for predictions (not with "
            "--measured, --by-source or --histogram)",
            file=sys.stderr,
        )
        return 2
    if args.window is not None and not (args.measured or args.by_source or args.histogram):
        print("error: --window applies to --measured, --by-source and --histogram only", file=sys.stderr)
        return 2
    try:
        configs = configurations(args)
        measured = parse_measured(args.measured, configs)
        files = step_files(args.dump_dir, parse_steps(args.steps))
        if args.by_source or args.histogram:
            windowed = [rates_by_source(chunk, args.metric, prior) for chunk in windows(files, args.window)]
            if args.by_source:
                print(source_table(windowed))
            if args.histogram:
                try:
                    plot_histograms(windowed, args.histogram, args.dump_dir)
                except ImportError:
                    print('error: --histogram needs matplotlib: pip install -e ".[report]"', file=sys.stderr)
                    return 2
                print(f"wrote {args.histogram}", file=sys.stderr)
            return 0
        if measured:
            print(compare_with_runs(files, measured, args.metric, prior, args.window, sources, args.per_step))
            return 0
        ids, seen, wins = read_window(files, args.metric, sources)
        rates = pass_rates(seen, wins, prior)
        never_fill = {}
        if args.per_step:  # a run's mean over these steps, warm-up included (rounds are convex in a step's rates)
            step_rates = list(per_step_rates(files, args.metric, prior, sources).values())
            per_config = [[predict(r, c) for r in step_rates] for c in configs]
            predictions = [mean_over_steps(preds) for preds in per_config]
            for c, preds in zip(configs, per_config, strict=True):
                if stuck := sum(not math.isfinite(p.rounds_per_step) for p in preds):
                    never_fill[c.label] = (stuck, len(preds))
        else:
            predictions = [predict(rates, c) for c in configs]
        # A configuration predicted never to fill a step is not simulated (it would only hit the round cap).
        fills = [c for c, p in zip(configs, predictions, strict=True) if math.isfinite(p.rounds_per_step)]
        skips = [None, SkipRule()] if args.skip else [None]
        how = {"warmup": args.simulate_warmup, "runs": args.simulate_runs, "prompts": args.prompts}
        simulated = [
            simulate(rates, c, steps=args.simulate, skip=k, **how) for c in fills for k in skips if args.simulate
        ]
    except ValueError as err:  # DumpError, PCConfigError and bad pass rates all name what to fix
        print(f"error: {err}", file=sys.stderr)
        return 2

    print(
        f"{len(ids)} prompts, {int(seen.sum())} rollouts from steps {files[0][0]}..{files[-1][0]} "
        f"({len(files)} files); metric {args.metric}, prior Beta{prior}"
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
    print(format_table(predictions))
    if args.train_prompts is not None:
        for note in eviction_notes(predictions, configs, args.train_prompts, len(files)):
            print(note)
    if simulated:
        what = f"{args.simulate} steps after {args.simulate_warmup}, {args.simulate_runs} run(s)"
        print(f"\nsimulated ({what}" + (f", {args.prompts} prompts drawn from these" if args.prompts else "") + "):")
        print(format_table(simulated))
    best = recommend(predictions)
    print()
    if best is None:
        print("no configuration ever trains an informative group on these pass rates")
    else:
        print(
            f"recommended: {best.label} ({best.rollouts_per_informative_group:.1f} generated rollouts per "
            f"informative trained group of {best.group_size}, {best.rounds_per_step:.2f} rounds per step)"
        )
        print(CRITERION_CAVEAT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
