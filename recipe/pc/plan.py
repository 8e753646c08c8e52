"""Plan a run: per-prompt pass rates from rollout dumps, fed to the cost model for GRPO, DAPO and PC splits.

    python -m recipe.pc.plan DUMP_DIR [--steps 10:20] [--group-size 16] [--pc 4+12,8+8] ...

DUMP_DIR holds ``<step>.jsonl`` (or gzipped ``<step>.jsonl.gz``) files written by this project's trainer with
``trainer.rollout_data_dir=DUMP_DIR``: one JSON object per generated rollout with at least
``prompt_id`` and the metric (``acc`` by default). A prompt seen k times with s successes gets
pass rate (s + a) / (k + a + b), with a Beta(a, b) prior from ``--prior a,b`` (default none: s/k).

Recommendation: the configuration with the fewest predicted generated rollouts per informative
trained group (a group whose metric is not constant, so GRPO gets a gradient from it); ties go to
fewer generation rounds per step. The default grid holds every method at one group size, so a
trained group costs the same to train on; the criterion does not weigh PC's reuse of pilots up to
``buffer_max_off_steps`` steps old.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
from collections import defaultdict

import numpy as np

from recipe.pc.costmodel import DAPO, GRPO, PilotCommit, Prediction, predict, simulate

DUMP_HINT = (
    "write rollout dumps with this project's trainer: add trainer.rollout_data_dir=DIR to the "
    "python -m recipe.pc.main_pc command (any of grpo, dapo or pilot_commit), then run plan on DIR"
)


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


def read_pass_counts(files: list[tuple[int, str]], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prompt ids, rollouts seen, successes) over the rows of ``files``."""
    seen: dict[int, float] = defaultdict(float)
    wins: dict[int, float] = defaultdict(float)
    for _, path in files:
        with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as handle:
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
    if not seen:
        raise DumpError(f"the dump files {[p for _, p in files]} hold no rollouts")
    ids = np.array(sorted(seen))
    return ids, np.array([seen[i] for i in ids]), np.array([wins[i] for i in ids])


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
    configs = [GRPO(N, B), DAPO(N, G, B, args.max_num_gen_batches)]
    configs += [
        PilotCommit(n_p, n_c, G, B, args.p_lower, args.p_upper, args.max_off_steps, args.max_num_gen_batches)
        for n_p, n_c in splits
    ]
    return configs


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
    parser.add_argument("--simulate", type=int, default=0, metavar="STEPS", help="also run the simulator this long")
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
    try:
        configs = configurations(args)
        files = step_files(args.dump_dir, parse_steps(args.steps))
        ids, seen, wins = read_pass_counts(files, args.metric)
        rates = pass_rates(seen, wins, prior)
        predictions = [predict(rates, c) for c in configs]
        # A configuration predicted never to fill a step is not simulated (it would only hit the round cap).
        simulated = [
            simulate(rates, c, steps=args.simulate)
            for c, p in zip(configs, predictions, strict=True)
            if args.simulate > 0 and math.isfinite(p.rounds_per_step)
        ]
    except ValueError as err:  # DumpError, PCConfigError and bad pass rates all name what to fix
        print(f"error: {err}", file=sys.stderr)
        return 2

    print(
        f"{len(ids)} prompts, {int(seen.sum())} rollouts from steps {files[0][0]}..{files[-1][0]} "
        f"({len(files)} files); metric {args.metric}, prior Beta{prior}"
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
    print()
    print(format_table(predictions))
    if simulated:
        print(f"\nsimulated ({args.simulate} steps):")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
