"""DAPO-Math-17k, deduplicated and re-prompted for boxed answers, as verl parquet.

Source: ``BytedTsinghua-SIA/DAPO-Math-17k`` (split ``train``), already in verl format: its user turn wraps
each problem as ``ORIGINAL_PREFIX + problem + ORIGINAL_SUFFIX`` (answers on an "Answer:" line) and the
file holds about 100 identical copies of every problem. This script

1. recovers the bare problem by removing that prefix and suffix; a row whose user turn lacks either is
   dropped and counted as ``unrecognised_prompt`` rather than trained on with the old instruction;
2. keeps the first copy of every original ``extra_info.index`` (counted as ``duplicate_id``), and drops
   rows with an empty problem or ground truth;
3. writes the boxed-answer prompt of spec §11. ``extra_info.original_id`` is the original (UUID)
   ``extra_info.index``; the new ``index`` runs 0..n-1.

    python data/process_dapo17k.py --out_dir $DATA_DIR/dapo_formatted

Output: ``dapo_formatted/dapo-math-17k-nosystem-boxed-dedup.parquet``, data_source ``math_dapo``, ability ``MATH``.
"""

from __future__ import annotations

import argparse
import logging
import os

from math_common import (
    ProcessResult,
    SourceProblem,
    check_paths,
    clean_problems,
    default_out_dir,
    is_missing,
    load_rows,
    log_drops,
    make_record,
    run_processor,
    setup_logging,
    write_split,
)

logger = logging.getLogger(__name__)

HUB_ID = "BytedTsinghua-SIA/DAPO-Math-17k"
DATA_SOURCE = "math_dapo"
ABILITY = "MATH"
OUTPUT_NAME = "dapo-math-17k-nosystem-boxed-dedup.parquet"
ORIGINAL_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem."
)
ORIGINAL_SUFFIX = 'Remember to put your answer on its own line after "Answer:".'


def user_content(prompt: object, position: int) -> str:
    turns = [turn for turn in (prompt if prompt is not None else []) if turn.get("role") == "user"]
    if len(turns) != 1:
        raise ValueError(f"DAPO source row {position}: prompt has {len(turns)} user turns, expected exactly one")
    return turns[0].get("content") or ""


def bare_problem(content: str) -> str | None:
    """The problem inside the original instruction wrapper, or None when the wrapper is not there."""
    text = content.strip()
    if not (text.startswith(ORIGINAL_PREFIX) and text.endswith(ORIGINAL_SUFFIX)):
        return None
    return text[len(ORIGINAL_PREFIX) : len(text) - len(ORIGINAL_SUFFIX)].strip()


def process_dapo(out_dir: str, local_path: str | None = None) -> ProcessResult:
    rows = load_rows(HUB_ID, "train", ["prompt", "reward_model", "extra_info"], local_path=local_path)
    problems, unrecognised = [], []
    for position, row in enumerate(rows):
        problem = bare_problem(user_content(row["prompt"], position))
        if problem is None:
            unrecognised.append(position)
            continue
        original_index = (row["extra_info"] or {}).get("index")
        problems.append(
            SourceProblem(
                position,
                problem,
                (row["reward_model"] or {}).get("ground_truth"),
                source_id=None if is_missing(original_index) else str(original_index),
            )
        )
    log_drops(
        "DAPO-Math-17k prompt format",
        len(rows),
        {"unrecognised_prompt": len(unrecognised)},
        {"unrecognised_prompt": unrecognised},
    )
    kept, dropped = clean_problems(problems, "DAPO-Math-17k")
    dropped["unrecognised_prompt"] = len(unrecognised)
    logger.info("DAPO-Math-17k: %d unique problems from %d rows", len(kept), len(rows))
    records = [make_record(DATA_SOURCE, ABILITY, p, index, "train") for index, p in enumerate(kept)]
    path = os.path.join(out_dir, OUTPUT_NAME)
    return write_split(records, path, "train", dropped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--local_path", help=f"local .parquet/.json/.jsonl file or folder instead of {HUB_ID}")
    ap.add_argument("--out_dir", default=default_out_dir("dapo_formatted"))
    args = ap.parse_args()
    check_paths(ap, args.local_path, args.out_dir)
    setup_logging()
    result = run_processor(ap, process_dapo, args.out_dir, args.local_path)
    print(f"math_dapo: {result.summary()}")


if __name__ == "__main__":
    main()
