"""How often the report's 95% intervals of a difference of means cover the true difference, by simulation.

Each simulated experiment draws ``n`` runs a side from the same normal distribution (true difference 0), resamples
each side's runs with replacement as ``--ci`` does, and builds the percentile-bootstrap and the studentized
(bootstrap-t) interval with the report's own functions. A 95% interval should cover 95% of experiments; at 5 runs a
side the percentile one covers about 89% (docs/tools.md).

    python benchmarks/bench_interval_coverage.py [--runs 5 --experiments 2000 --resamples 2000 --seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np

from recipe.pc_tools.intervals import _percentile_interval, studentized_interval


def coverage(runs: int = 5, experiments: int = 2000, resamples: int = 2000, seed: int = 0) -> dict[str, float]:
    """The share of ``experiments`` whose interval holds 0, per method."""
    rng = np.random.default_rng(seed)
    covered = {"percentile": 0, "studentized": 0}
    for _ in range(experiments):
        mine, theirs = rng.normal(size=runs), rng.normal(size=runs)
        drawn_mine = mine[rng.integers(runs, size=(resamples, runs))]
        drawn_theirs = theirs[rng.integers(runs, size=(resamples, runs))]
        low, high = _percentile_interval(drawn_mine.mean(axis=1) - drawn_theirs.mean(axis=1))
        covered["percentile"] += low <= 0 <= high
        low, high = studentized_interval(mine, theirs, drawn_mine, drawn_theirs)
        covered["studentized"] += low <= 0 <= high
    return {method: count / experiments for method, count in covered.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs a side")
    parser.add_argument("--experiments", type=int, default=2000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    result = coverage(args.runs, args.experiments, args.resamples, args.seed)
    print(f"{args.runs} runs a side, {args.experiments:,} experiments of {args.resamples:,} resamples:")
    for method, share in result.items():
        print(f"  {method}: {share:.3f}")


if __name__ == "__main__":
    main()
