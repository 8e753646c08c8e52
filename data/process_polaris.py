"""Polaris-53K as verl parquet.

Source: ``POLARIS-Project/Polaris-Dataset-53K``, split ``train`` (``problem``, ``answer``, ``difficulty``).
Rows with an empty problem or answer and repeated problems (no id column, so repeats are found by
text) are dropped and counted. ``difficulty`` is copied as a string (the source writes it as "k/8");
``extra_info.original_id`` is the source row position and ``index`` runs 0..n-1.

    python data/process_polaris.py --out_dir $DATA_DIR/polaris_53k

Output: ``polaris_53k/train.parquet``, data_source ``polaris_53k``, ability ``math``.
"""

from __future__ import annotations

import argparse
import os

from math_common import (
    ProcessResult,
    SourceProblem,
    check_paths,
    clean_problems,
    default_out_dir,
    difficulty_to_str,
    load_rows,
    make_record,
    run_processor,
    setup_logging,
    write_split,
)

HUB_ID = "POLARIS-Project/Polaris-Dataset-53K"
DATA_SOURCE = "polaris_53k"
ABILITY = "math"


def process_polaris(out_dir: str, local_path: str | None = None) -> ProcessResult:
    rows = load_rows(HUB_ID, "train", ["problem", "answer", "difficulty"], local_path=local_path)
    problems = [
        SourceProblem(position, row["problem"], row["answer"], difficulty=difficulty_to_str(row["difficulty"]))
        for position, row in enumerate(rows)
    ]
    kept, dropped = clean_problems(problems, "Polaris-53K")
    records = [make_record(DATA_SOURCE, ABILITY, p, index, "train") for index, p in enumerate(kept)]
    path = os.path.join(out_dir, "train.parquet")
    return write_split(records, path, "train", dropped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--local_path", help=f"local .parquet/.json/.jsonl file or folder instead of {HUB_ID}")
    ap.add_argument("--out_dir", default=default_out_dir("polaris_53k"))
    args = ap.parse_args()
    check_paths(ap, args.local_path, args.out_dir)
    setup_logging()
    result = run_processor(ap, process_polaris, args.out_dir, args.local_path)
    print(f"polaris_53k: {result.summary()}")


if __name__ == "__main__":
    main()
