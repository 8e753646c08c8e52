"""Procedural arithmetic prompts as verl-format parquet (no download needed).

Nine difficulty levels, each its own ``data_source`` (``arith_l1`` ... ``arith_l9``) so validation
is logged per level:

  1: a + b, one digit          2: a + b, two digits        3: a - b, two digits (a >= b)
  4: a * b, two digits x one   5: a * b, three digits x three
  6: a + b, three digits       7: a - b, three digits      8: a * b, three digits x one
  9: a * b, two digits x two

The default mix (levels 1-5) is bimodal once the answer format is learned: levels 1-2 are solved and
level 5 never is. ``--mix spread`` (levels 2, 3, 4, 6, 7, 8, 9) was a first guess at a mix whose
per-prompt pass rates spread over (0, 1); the GRPO runs of docs/results/regimes/ showed levels 7-9 still
unsolved by 77-87% of their prompts at steps 21-30, so half the prompts stayed at 0. ``--mix calibrated``
(levels 2, 3, 4, 6) keeps the levels with fewer than half their prompts at 0 in those training-split
dumps (0.10, 0.49, 0.34 and 0.16 in seed 1's steps 21-30; ``python -m recipe.pc_tools.plan sources DUMP
--window 10``); validation accuracy was not used. It has not been trained on yet.

    python data/process_arithmetic.py --out_dir $DATA_DIR/arithmetic --levels 1 2 --train 160 --test 32

Each level gets an even share of the test and train prompts where it has enough distinct problems;
one-digit addition has only 100, so the other levels make up the rest. Every problem is unique across
train and test; ``extra_info.index`` is the prompt id (train ids start
at 0, test ids at 1,000,000). Prompts are one user turn: "What is 37 + 48? Reply with just the number."
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd

LEVELS = {
    1: ("+", (0, 9), (0, 9)),
    2: ("+", (10, 99), (10, 99)),
    3: ("-", (10, 99), (10, 99)),
    4: ("*", (10, 99), (2, 9)),
    5: ("*", (100, 999), (100, 999)),
    6: ("+", (100, 999), (100, 999)),
    7: ("-", (100, 999), (100, 999)),
    8: ("*", (100, 999), (2, 9)),
    9: ("*", (10, 99), (10, 99)),
}
MIXES = {"default": [1, 2, 3, 4, 5], "spread": [2, 3, 4, 6, 7, 8, 9], "calibrated": [2, 3, 4, 6]}
TEST_ID_OFFSET = 1_000_000


def _answer(op: str, a: int, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def capacity(level: int) -> int:
    """Distinct problems a level has (a - b keeps a >= b, so only the pairs on or below the diagonal)."""
    op, (lo_a, hi_a), (lo_b, hi_b) = LEVELS[level]
    if op == "-":
        n = hi_a - lo_a + 1
        return n * (n + 1) // 2
    return (hi_a - lo_a + 1) * (hi_b - lo_b + 1)


def split_evenly(total: int, levels: list[int], room: dict[int, int]) -> dict[int, int]:
    """Share ``total`` problems over the levels as evenly as each level's remaining ``room`` allows."""
    counts = {level: 0 for level in levels}
    remaining = total
    while remaining > 0:
        open_levels = [lv for lv in levels if counts[lv] < room[lv]]
        if not open_levels:
            raise ValueError(f"levels {levels} hold only {sum(room.values())} distinct problems; asked for {total}")
        share, extra = divmod(remaining, len(open_levels))
        for i, level in enumerate(open_levels):
            give = min(share + (i < extra), room[level] - counts[level])
            counts[level] += give
            remaining -= give
    return counts


def draw_problems(level: int, count: int, rng: np.random.Generator, taken: set) -> list[tuple[int, int, int]]:
    op, (lo_a, hi_a), (lo_b, hi_b) = LEVELS[level]
    if count + sum(1 for t in taken if t[0] == level) > capacity(level):
        raise ValueError(f"level {level} has only {capacity(level)} distinct problems; asked for {count} more")
    out = []
    while len(out) < count:
        a, b = int(rng.integers(lo_a, hi_a + 1)), int(rng.integers(lo_b, hi_b + 1))
        if op == "-" and a < b:
            a, b = b, a
        key = (level, a, b)
        if key not in taken:
            taken.add(key)
            out.append(key)
    return out


def to_rows(problems, first_id: int, split: str) -> list[dict]:
    rows = []
    for offset, (level, a, b) in enumerate(problems):
        op = LEVELS[level][0]
        question = f"What is {a} {op} {b}? Reply with just the number."
        rows.append(
            {
                "data_source": f"arith_l{level}",
                "prompt": [{"role": "user", "content": question}],
                "ability": "arithmetic",
                "reward_model": {"ground_truth": str(_answer(op, a, b)), "style": "rule"},
                "extra_info": {"index": first_id + offset, "split": split, "level": level, "question": question},
            }
        )
    return rows


def build(levels: list[int], n_train: int, n_test: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Test problems first (an even share per level), then train from what is left; no problem in both.

    Small levels (one-digit addition has 100 problems) give what they have and the rest goes to the others.
    """
    rng = np.random.default_rng(seed)
    taken: set = set()
    test_counts = split_evenly(n_test, levels, {lv: capacity(lv) for lv in levels})
    train_counts = split_evenly(n_train, levels, {lv: capacity(lv) - test_counts[lv] for lv in levels})
    train, test = [], []
    for level in levels:
        test += draw_problems(level, test_counts[level], rng, taken)
        train += draw_problems(level, train_counts[level], rng, taken)
    order = rng.permutation(len(train))
    train = [train[i] for i in order]
    return pd.DataFrame(to_rows(train, 0, "train")), pd.DataFrame(to_rows(test, TEST_ID_OFFSET, "test"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out_dir", required=True)
    ap.add_argument(
        "--levels", type=int, nargs="+", choices=sorted(LEVELS), help="levels to draw from (overrides --mix)"
    )
    ap.add_argument("--mix", choices=sorted(MIXES), default="default", help="a named set of levels")
    ap.add_argument("--train", type=int, default=3000, help="train prompts in all")
    ap.add_argument("--test", type=int, default=200, help="test prompts in all")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.train < 1 or args.test < 1:
        ap.error(f"--train and --test must be at least 1 (got --train {args.train} --test {args.test})")
    args.levels = args.levels or MIXES[args.mix]
    train, test = build(args.levels, args.train, args.test, args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    train.to_parquet(os.path.join(args.out_dir, "train.parquet"))
    test.to_parquet(os.path.join(args.out_dir, "test.parquet"))
    print(f"wrote {len(train)} train and {len(test)} test prompts (levels {args.levels}) to {args.out_dir}")


if __name__ == "__main__":
    main()
