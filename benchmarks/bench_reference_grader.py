"""Throughput of the reference grader (``GRADER=reference``) on the labelled grader corpus, in one process.

Grades every (response, ground truth) pair of ``tests/data/grader/corpus.jsonl`` through
``reference_grader.compute_score``, as the reward function calls it, ``--repeats`` times after one untimed pass
(which starts the sympy helper and imports pylatexenc). ``--threads`` grades from that many threads at once, as
verl's reward loop calls the reward function from its executor threads.

    python benchmarks/bench_reference_grader.py [--repeats 5] [--threads 1]

Prints pairs per second (the median pass, the fastest pass, and per second of this process's CPU time, which the
load of a shared machine moves least), the median and 99th-percentile time of one pair, and the slowest pair.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from recipe.pc.rewards import reference_grader  # noqa: E402

CORPUS = os.path.join(ROOT, "tests", "data", "grader", "corpus.jsonl")


def load_pairs(path: str = CORPUS, limit: int | None = None) -> list[tuple[str, str, str]]:
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [(row["id"], row["response"], row["ground_truth"]) for row in rows[:limit]]


def _timed(pair: tuple[str, str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    reference_grader.compute_score(pair[1], pair[2])
    return time.perf_counter() - start, pair[0]


def grade_all(pairs, threads: int) -> tuple[float, float, list[tuple[float, str]]]:
    """Wall time and this process's CPU time of one pass over ``pairs``, and each pair's own wall time."""
    start, cpu = time.perf_counter(), time.process_time()
    if threads == 1:
        times = [_timed(pair) for pair in pairs]
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            times = list(pool.map(_timed, pairs))
    return time.perf_counter() - start, time.process_time() - cpu, times


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="timed passes over the corpus")
    ap.add_argument("--threads", type=int, default=1, help="threads grading at once")
    ap.add_argument("--limit", type=int, default=None, help="grade only the first LIMIT pairs")
    args = ap.parse_args(argv)

    pairs = load_pairs(limit=args.limit)
    grade_all(pairs, args.threads)  # untimed: helper start-up and imports
    passes = [grade_all(pairs, args.threads) for _ in range(args.repeats)]
    wall = statistics.median(p[0] for p in passes)
    per_pair = sorted(t for *_, times in passes for t in times)
    slowest = max((t for *_, times in passes for t in times), key=lambda t: t[0])
    result = {
        "pairs": len(pairs),
        "threads": args.threads,
        "repeats": args.repeats,
        "pairs_per_s": len(pairs) / wall,
        # On a shared machine the wall time moves with the load; the fastest pass and the CPU time move less.
        "best_pairs_per_s": len(pairs) / min(p[0] for p in passes),
        "pairs_per_cpu_s": len(pairs) / statistics.median(p[1] for p in passes),
        "median_ms": 1000 * statistics.median(t for t, _ in per_pair),
        "p99_ms": 1000 * per_pair[min(len(per_pair) - 1, int(0.99 * len(per_pair)))][0],
        "slowest_ms": 1000 * slowest[0],
        "slowest_pair": slowest[1],
    }
    print(
        f"{result['pairs']} pairs, {args.threads} thread(s), {args.repeats} passes: "
        f"{result['pairs_per_s']:.0f} pairs/s (fastest pass {result['best_pairs_per_s']:.0f}, "
        f"{result['pairs_per_cpu_s']:.0f} per CPU second); one pair: median {result['median_ms']:.3f} ms, "
        f"p99 {result['p99_ms']:.2f} ms, slowest {result['slowest_ms']:.1f} ms ({result['slowest_pair']})"
    )
    return result


if __name__ == "__main__":
    main()
