"""DAPO-Math-17k, deduplicated and re-prompted for boxed answers, as verl parquet.

Source: ``BytedTsinghua-SIA/DAPO-Math-17k`` (split ``train``), already in verl format: its user turn wraps
each problem as ``ORIGINAL_PREFIX + problem + ORIGINAL_SUFFIX`` (answers on an "Answer:" line) and the
file holds about 100 identical copies of every problem. This script

1. recovers the bare problem by removing that prefix and suffix; a row whose user turn lacks either is
   dropped and counted as ``unrecognised_prompt`` rather than trained on with the old instruction;
2. keeps the first copy of every original ``extra_info.index`` (counted as ``duplicate_id``), and drops
   rows with an empty problem or ground truth;
3. writes the boxed-answer prompt of ``math_common.make_prompt``. ``extra_info.original_id`` is the original (UUID)
   ``extra_info.index``; the new ``index`` runs 0..n-1.

With ``--as-authors`` the rows are those of the authors' processor: the first row of every original
``extra_info.index`` whatever it holds (no row dropped for its content), the problem recovered by
deleting every occurrence of the wrapper's prefix and suffix (each with its blank line) from the first
prompt turn and stripping the rest (or from ``extra_info.raw_problem`` where the source has that key),
the ground truth as stored, ``split`` None. Default folder ``dapo_formatted_as_authors``. Either way the
run prints how many of the authors' rows our cleaning changes.

    python data/process_dapo17k.py --out_dir $DATA_DIR/dapo_formatted
    python data/process_dapo17k.py --as-authors   # $DATA_DIR/dapo_formatted_as_authors

Output: ``dapo_formatted/dapo-math-17k-nosystem-boxed-dedup.parquet``, data_source ``math_dapo``, ability ``MATH``.
"""

from __future__ import annotations

import logging
import os

import numpy as np
from math_common import (
    AuthorsRowError,
    Keyed,
    ProcessResult,
    SourceProblem,
    authors_record,
    clean_problems,
    is_missing,
    load_rows,
    log_drops,
    make_record,
    train_set_main,
    write_compared,
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
FOLDER = "dapo_formatted"


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


def authors_problem(row: dict, where: str) -> str:
    """The bare problem as the authors' processor recovers it."""
    extra = row["extra_info"]
    if "raw_problem" in extra:
        raw = extra["raw_problem"]
    else:
        # Their wrapper strings carry the blank lines; every occurrence is deleted, wherever it is.
        raw = row["prompt"][0]["content"]
        if isinstance(raw, str):
            raw = raw.replace(ORIGINAL_PREFIX + "\n\n", "").replace("\n\n" + ORIGINAL_SUFFIX, "")
    if not isinstance(raw, str):
        raise AuthorsRowError(f"{where}: problem {raw!r} is not a string; the authors' processor fails on it")
    return raw.strip()


def authors_rows(rows: list[dict]) -> tuple[list[Keyed], int]:
    """The authors' rows (first row of every original index, in source order) and the number of repeats dropped."""
    try:
        originals = [row["extra_info"]["index"] for row in rows]
        # numpy's own first-occurrence rule, as theirs: ties in the stable sort keep the earliest row.
        _, first = np.unique(originals, return_index=True)
    except (TypeError, KeyError) as err:
        raise AuthorsRowError(f"DAPO source: the authors' dedup fails on its extra_info.index values ({err})") from err
    keyed = []
    for index, position in enumerate(sorted(int(p) for p in first)):
        row = rows[position]
        where = f"DAPO source row {position}"
        try:
            problem, ground_truth = authors_problem(row, where), row["reward_model"]["ground_truth"]
        except (TypeError, IndexError, KeyError, AttributeError) as err:
            raise AuthorsRowError(f"{where}: the authors' processor fails on it ({type(err).__name__}: {err})") from err
        record = authors_record(
            DATA_SOURCE, ABILITY, problem, ground_truth, index, str(row["extra_info"]["index"]), None, ""
        )
        keyed.append(((position, 0), record))
    return keyed, len(rows) - len(keyed)


def process_dapo(out_dir: str, local_path: str | None = None, as_authors: bool = False) -> ProcessResult:
    rows = load_rows(HUB_ID, "train", ["prompt", "reward_model", "extra_info"], local_path=local_path)
    result = ProcessResult()
    drop_reasons: dict[int, str] = {}

    def ours() -> list[Keyed]:
        problems, unrecognised = [], []
        for position, row in enumerate(rows):
            problem = bare_problem(user_content(row["prompt"], position))
            if problem is None:
                unrecognised.append(position)
                drop_reasons[position] = "unrecognised_prompt"
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
        label = "DAPO-Math-17k" + (" (our cleaning, compared only)" if as_authors else "")
        log_drops(
            f"{label} prompt format",
            len(rows),
            {"unrecognised_prompt": len(unrecognised)},
            {"unrecognised_prompt": unrecognised},
        )
        kept, dropped = clean_problems(problems, label, drop_reasons)
        dropped["unrecognised_prompt"] = len(unrecognised)
        logger.info("%s: %d unique problems from %d rows", label, len(kept), len(rows))
        if not as_authors:
            result.dropped = dropped
        return [((p.position, 0), make_record(DATA_SOURCE, ABILITY, p, index, "train")) for index, p in enumerate(kept)]

    def authors() -> list[Keyed]:
        keyed, repeats = authors_rows(rows)
        if as_authors:
            result.dropped = {"duplicate_id": repeats}
        return keyed

    path = os.path.join(out_dir, OUTPUT_NAME)
    write_compared(result, "train", path, ours, authors, drop_reasons, as_authors)
    return result


def main() -> None:
    train_set_main(__doc__, HUB_ID, FOLDER, process_dapo, DATA_SOURCE)


if __name__ == "__main__":
    main()
