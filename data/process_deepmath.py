r"""DeepMath-103K as verl parquet, with the binary-answer filter and test split the authors never shipped.

Source: ``zwhe99/DeepMath-103K`` (a single 103,110-row ``train`` split: ``question``, ``final_answer``,
``difficulty``, three R1 solutions). Steps:

1. Clean: drop rows with an empty question or answer, and repeated questions (the source has no id
   column, so repeats are found by question text). Questions not ending in ``. ? ! :`` get a period.
2. Binary filter: drop rows whose final answer is yes / no / true / false (any case), also when wrapped
   in any nesting of ``$...$``, ``\(...\)``, ``\text{}``, ``\textbf{}``, ``\mathrm{}`` or followed by a
   period. Such answers are guessed right half the time, so their pass rates say little.
3. Test split: ``--test_size`` rows (default 500) drawn without replacement by
   ``numpy.random.default_rng(--seed)`` (default seed 0) from the filtered rows; both splits keep source order.

With ``--prefiltered`` the already-filtered ``friendshipkim/DeepMath-103K-filtered`` is read instead and
its ``train`` and ``test`` splits are used as they are (step 1 only; a local copy must be a folder with
files named for both splits).

``extra_info.original_id`` is the source's ``original_index`` or ``id`` column when present, else the
source row position; ``difficulty`` is "<float>/9.0"; ``index`` runs 0..n-1 in each file.

    python data/process_deepmath.py --out_dir $DATA_DIR/deepmath_103k_filtered --test_size 500 --seed 0

Output: ``deepmath_103k_filtered/{train,test}.parquet``, data_source ``deepmath``, ability ``math``.
"""

from __future__ import annotations

import argparse
import logging
import os
import re

import numpy as np
from math_common import (
    ProcessResult,
    SourceProblem,
    check_paths,
    clean_problems,
    default_out_dir,
    difficulty_to_str,
    is_missing,
    load_rows,
    log_drops,
    make_record,
    run_processor,
    setup_logging,
    write_parquet,
)

logger = logging.getLogger(__name__)

HUB_ID = "zwhe99/DeepMath-103K"
PREFILTERED_HUB_ID = "friendshipkim/DeepMath-103K-filtered"
DATA_SOURCE = "deepmath"
ABILITY = "math"
ID_COLUMNS = ("original_index", "id")
BINARY_ANSWERS = {"yes", "no", "true", "false"}
_ANSWER_WRAPPERS = (
    re.compile(r"^\$+(.*?)\$+$", re.S),
    re.compile(r"^\\\((.*)\\\)$", re.S),
    re.compile(r"^\\(?:text|textbf|mathrm)\s*\{(.*)\}$", re.S),
)


def is_binary_answer(answer: str) -> bool:
    text = answer.strip()
    unwrapped = True
    while unwrapped:
        unwrapped = False
        text = text.strip().rstrip(".").strip()
        for wrapper in _ANSWER_WRAPPERS:
            match = wrapper.match(text)
            if match:
                text, unwrapped = match.group(1), True
                break
    return text.lower() in BINARY_ANSWERS


def with_final_punctuation(question: object) -> object:
    if not isinstance(question, str) or not question.strip():
        return question
    question = question.strip()
    return question if question[-1] in ".?!:" else question + "."


def difficulty_label(value: object, position: int) -> str:
    text = difficulty_to_str(value)
    if not text:
        return ""
    try:
        return f"{float(text)}/9.0"
    except (TypeError, ValueError) as err:
        raise ValueError(f"DeepMath source row {position}: difficulty {value!r} is not a number") from err


def to_source_problems(rows: list[dict]) -> list[SourceProblem]:
    id_column = next((c for c in ID_COLUMNS if rows and c in rows[0]), None)
    return [
        SourceProblem(
            position=position,
            problem=with_final_punctuation(row["question"]),
            answer=row["final_answer"],
            source_id=None if id_column is None or is_missing(row[id_column]) else str(row[id_column]),
            difficulty=difficulty_label(row["difficulty"], position),
        )
        for position, row in enumerate(rows)
    ]


def drop_binary_answers(problems: list[SourceProblem]) -> tuple[list[SourceProblem], int]:
    binary = [p.position for p in problems if is_binary_answer(p.answer)]
    binary_positions = set(binary)
    kept = [p for p in problems if p.position not in binary_positions]
    log_drops("DeepMath binary filter", len(problems), {"binary_answer": len(binary)}, {"binary_answer": binary})
    return kept, len(binary)


def split_held_out(problems: list[SourceProblem], test_size: int, seed: int) -> tuple[list, list]:
    if not 0 < test_size < len(problems):
        raise ValueError(f"--test_size {test_size} must be between 1 and {len(problems) - 1} (filtered rows - 1)")
    is_test = np.zeros(len(problems), dtype=bool)
    is_test[np.random.default_rng(seed).choice(len(problems), size=test_size, replace=False)] = True
    train = [p for p, test in zip(problems, is_test, strict=True) if not test]
    test = [p for p, test in zip(problems, is_test, strict=True) if test]
    return train, test


def _write_split(problems: list[SourceProblem], split: str, out_dir: str, result: ProcessResult) -> None:
    records = [make_record(DATA_SOURCE, ABILITY, p, index, split) for index, p in enumerate(problems)]
    path = os.path.join(out_dir, f"{split}.parquet")
    result.outputs[split] = path
    result.rows[split] = write_parquet(records, path)


def _load(hub_id: str, split: str, local_path: str | None, split_files_required: bool) -> list[dict]:
    return load_rows(
        hub_id,
        split,
        ["question", "final_answer", "difficulty"],
        local_path=local_path,
        optional_columns=ID_COLUMNS,
        split_files_required=split_files_required,
    )


def process_deepmath(
    out_dir: str,
    local_path: str | None = None,
    prefiltered: bool = False,
    test_size: int = 500,
    seed: int = 0,
) -> ProcessResult:
    result = ProcessResult()
    if prefiltered:
        for split in ("train", "test"):
            rows = _load(PREFILTERED_HUB_ID, split, local_path, split_files_required=True)
            kept, counts = clean_problems(to_source_problems(rows), f"DeepMath-filtered {split}")
            for reason, count in counts.items():
                result.dropped[reason] = result.dropped.get(reason, 0) + count
            _write_split(kept, split, out_dir, result)
        return result
    rows = _load(HUB_ID, "train", local_path, split_files_required=False)
    kept, result.dropped = clean_problems(to_source_problems(rows), "DeepMath")
    kept, result.dropped["binary_answer"] = drop_binary_answers(kept)
    train, test = split_held_out(kept, test_size, seed)
    _write_split(train, "train", out_dir, result)
    _write_split(test, "test", out_dir, result)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--local_path", help=f"local .parquet/.json/.jsonl file or folder instead of {HUB_ID}")
    ap.add_argument("--out_dir", default=default_out_dir("deepmath_103k_filtered"))
    ap.add_argument(
        "--prefiltered",
        "--filtered",
        action="store_true",
        help=f"read {PREFILTERED_HUB_ID} and keep its train/test splits (no binary filter, no re-split)",
    )
    # None defaults tell an explicit --test_size/--seed apart, which --prefiltered would silently ignore.
    ap.add_argument("--test_size", type=int, help="held-out test rows carved from the filtered set (default 500)")
    ap.add_argument("--seed", type=int, help="seed of the test-split draw (default 0)")
    args = ap.parse_args()
    if args.prefiltered:
        given = [flag for flag, value in (("--test_size", args.test_size), ("--seed", args.seed)) if value is not None]
        if given:
            ap.error(f"{' and '.join(given)} cannot be used with --prefiltered, which keeps the source's test split")
        if args.local_path is not None and os.path.isfile(os.path.expanduser(args.local_path)):
            ap.error(f"--local_path {args.local_path}: --prefiltered reads a folder with train and test files")
    test_size = 500 if args.test_size is None else args.test_size
    if test_size < 1:
        ap.error(f"--test_size must be at least 1, got {test_size}")
    seed = 0 if args.seed is None else args.seed
    if seed < 0:
        ap.error(f"--seed must be >= 0 (numpy's generator takes no negative seed), got {seed}")
    check_paths(ap, args.local_path, args.out_dir)
    setup_logging()
    result = run_processor(ap, process_deepmath, args.out_dir, args.local_path, args.prefiltered, test_size, seed)
    print(f"deepmath: {result.summary()}")


if __name__ == "__main__":
    main()
