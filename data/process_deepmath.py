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

With ``--as-authors`` (implies ``--prefiltered``, the copy the authors' runs used) both splits are written
as the authors' processor writes them: every row kept, in source order, ``index`` its position in the
split; a period appended when the question as stored does not end in ``. ? ! :`` (nothing stripped
first, so a question ending in a space gets " ." appended); ``final_answer`` unchanged; ``original_id``
``str(original_index)``. Default folder ``deepmath_103k_prefiltered_as_authors``. With ``--prefiltered``
or ``--as-authors`` the run also prints how many of the authors' rows our cleaning changes.

``extra_info.original_id`` is the source's ``original_index`` or ``id`` column when present, else the
source row position; ``difficulty`` is "<float>/9.0"; ``index`` runs 0..n-1 in each file.

    python data/process_deepmath.py --out_dir $DATA_DIR/deepmath_103k_filtered --test_size 500 --seed 0
    python data/process_deepmath.py --as-authors   # $DATA_DIR/deepmath_103k_prefiltered_as_authors

Output: ``deepmath_103k_filtered/{train,test}.parquet``, data_source ``deepmath``, ability ``math``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import re

import numpy as np
from math_common import (
    AS_AUTHORS_SUFFIX,
    AuthorsRowError,
    Comparison,
    Keyed,
    ProcessResult,
    SourceProblem,
    authors_record,
    authors_text,
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
    write_compared,
    write_parquet,
)

logger = logging.getLogger(__name__)

HUB_ID = "zwhe99/DeepMath-103K"
PREFILTERED_HUB_ID = "friendshipkim/DeepMath-103K-filtered"
DATA_SOURCE = "deepmath"
ABILITY = "math"
ID_COLUMNS = ("original_index", "id")
AUTHORS_ID_COLUMN = "original_index"
FINAL_PUNCTUATION = (".", "?", "!", ":")
FOLDER = "deepmath_103k_filtered"
PREFILTERED_FOLDER = "deepmath_103k_prefiltered"
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
    return question if question.endswith(FINAL_PUNCTUATION) else question + "."


def authors_rows(rows: list[dict], split: str) -> list[Keyed]:
    """Every row of a split of the pre-filtered copy, in order, as the authors' DeepMath processor writes it."""
    keyed = []
    for position, row in enumerate(rows):
        where = f"DeepMath-filtered {split} source row {position}"
        question = authors_text(row["question"], where)
        if not question.endswith(FINAL_PUNCTUATION):
            question += "."
        if AUTHORS_ID_COLUMN not in row:
            raise AuthorsRowError(f"{where}: no {AUTHORS_ID_COLUMN} column, which the authors' processor reads")
        try:
            difficulty = f"{float(row['difficulty'])}/9.0"
        except (TypeError, ValueError) as err:
            raise AuthorsRowError(f"{where}: difficulty {row['difficulty']!r} is not a number") from err
        record = authors_record(
            DATA_SOURCE,
            ABILITY,
            question,
            row["final_answer"],
            position,
            str(row[AUTHORS_ID_COLUMN]),
            split,
            difficulty,
        )
        keyed.append(((position, 0), record))
    return keyed


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
    path = os.path.join(out_dir, f"{split}.parquet")
    result.outputs[split] = path
    result.rows[split] = write_parquet([record for _, record in _our_rows(problems, split)], path)


def _our_rows(problems: list[SourceProblem], split: str) -> list[Keyed]:
    return [((p.position, 0), make_record(DATA_SOURCE, ABILITY, p, index, split)) for index, p in enumerate(problems)]


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
    as_authors: bool = False,
) -> ProcessResult:
    result = ProcessResult()
    if prefiltered or as_authors:
        for split in ("train", "test"):
            rows = _load(PREFILTERED_HUB_ID, split, local_path, split_files_required=True)
            drop_reasons: dict[int, str] = {}

            def ours(rows=rows, split=split, drop_reasons=drop_reasons) -> list[Keyed]:
                label = f"DeepMath-filtered {split}" + (" (our cleaning, compared only)" if as_authors else "")
                kept, counts = clean_problems(to_source_problems(rows), label, drop_reasons)
                if not as_authors:
                    for reason, count in counts.items():
                        result.dropped[reason] = result.dropped.get(reason, 0) + count
                return _our_rows(kept, split)

            path = os.path.join(out_dir, f"{split}.parquet")
            theirs = functools.partial(authors_rows, rows, split)
            write_compared(result, split, path, ours, theirs, drop_reasons, as_authors)
        return result
    rows = _load(HUB_ID, "train", local_path, split_files_required=False)
    kept, result.dropped = clean_problems(to_source_problems(rows), "DeepMath")
    kept, result.dropped["binary_answer"] = drop_binary_answers(kept)
    train, test = split_held_out(kept, test_size, seed)
    _write_split(train, "train", out_dir, result)
    _write_split(test, "test", out_dir, result)
    for split in ("train", "test"):
        result.comparisons[split] = Comparison(
            error=f"the authors' runs read {PREFILTERED_HUB_ID}, not this source: compare with --prefiltered"
        )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--local_path", help=f"local .parquet/.json/.jsonl file or folder instead of {HUB_ID}")
    ap.add_argument(
        "--out_dir",
        help=f"output folder (default: $DATA_DIR/{FOLDER}; with --prefiltered $DATA_DIR/{PREFILTERED_FOLDER}; "
        f"with --as-authors $DATA_DIR/{PREFILTERED_FOLDER}{AS_AUTHORS_SUFFIX})",
    )
    ap.add_argument(
        "--as-authors",
        "--as_authors",
        dest="as_authors",
        action="store_true",
        help=f"read {PREFILTERED_HUB_ID} and write its rows as the authors' processor does (implies --prefiltered; "
        "PRESET=reference reads these)",
    )
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
    if args.prefiltered or args.as_authors:
        mode = "--as-authors" if args.as_authors else "--prefiltered"
        given = [flag for flag, value in (("--test_size", args.test_size), ("--seed", args.seed)) if value is not None]
        if given:
            ap.error(f"{' and '.join(given)} cannot be used with {mode}, which keeps the source's test split")
        if args.local_path is not None and os.path.isfile(os.path.expanduser(args.local_path)):
            ap.error(f"--local_path {args.local_path}: {mode} reads a folder with train and test files")
    test_size = 500 if args.test_size is None else args.test_size
    if test_size < 1:
        ap.error(f"--test_size must be at least 1, got {test_size}")
    seed = 0 if args.seed is None else args.seed
    if seed < 0:
        ap.error(f"--seed must be >= 0 (numpy's generator takes no negative seed), got {seed}")
    if args.out_dir is not None:
        out_dir = args.out_dir
    elif args.as_authors:
        out_dir = default_out_dir(PREFILTERED_FOLDER + AS_AUTHORS_SUFFIX)
    else:
        out_dir = default_out_dir(PREFILTERED_FOLDER if args.prefiltered else FOLDER)
    check_paths(ap, args.local_path, out_dir)
    setup_logging()
    result = run_processor(
        ap, process_deepmath, out_dir, args.local_path, args.prefiltered, test_size, seed, args.as_authors
    )
    result.print_report(DATA_SOURCE)


if __name__ == "__main__":
    main()
