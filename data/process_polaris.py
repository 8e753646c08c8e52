"""Polaris-53K as verl parquet.

Source: ``POLARIS-Project/Polaris-Dataset-53K``, split ``train`` (``problem``, ``answer``, ``difficulty``).
Rows with an empty problem or answer and repeated problems (no id column, so repeats are found by
text) are dropped and counted. ``difficulty`` is copied as a string (the source writes it as "k/8");
``extra_info.original_id`` is the source row position and ``index`` runs 0..n-1.

With ``--as-authors`` every source row is written as the authors' processor writes it: problem, answer
and difficulty unchanged (not stripped, not dropped, repeats kept), ``original_id`` "", ``index`` the
source row position. Either way the run prints how many of the authors' rows our cleaning changes.

    python data/process_polaris.py --out_dir $DATA_DIR/polaris_53k
    python data/process_polaris.py --as-authors   # $DATA_DIR/polaris_53k_as_authors

Output: ``polaris_53k/train.parquet``, data_source ``polaris_53k``, ability ``math``.
"""

from __future__ import annotations

import os

from math_common import (
    Keyed,
    ProcessResult,
    SourceProblem,
    authors_record,
    authors_text,
    clean_problems,
    difficulty_to_str,
    load_rows,
    make_record,
    train_set_main,
    write_compared,
)

HUB_ID = "POLARIS-Project/Polaris-Dataset-53K"
DATA_SOURCE = "polaris_53k"
ABILITY = "math"
FOLDER = "polaris_53k"


def authors_rows(rows: list[dict]) -> list[Keyed]:
    """Every source row, in source order, as the authors' Polaris processor writes it."""
    return [
        (
            (position, 0),
            authors_record(
                DATA_SOURCE,
                ABILITY,
                authors_text(row["problem"], f"Polaris-53K source row {position}"),
                row["answer"],
                position,
                "",
                "train",
                row["difficulty"],
            ),
        )
        for position, row in enumerate(rows)
    ]


def process_polaris(out_dir: str, local_path: str | None = None, as_authors: bool = False) -> ProcessResult:
    rows = load_rows(HUB_ID, "train", ["problem", "answer", "difficulty"], local_path=local_path)
    result = ProcessResult()
    drop_reasons: dict[int, str] = {}

    def ours() -> list[Keyed]:
        problems = [
            SourceProblem(position, row["problem"], row["answer"], difficulty=difficulty_to_str(row["difficulty"]))
            for position, row in enumerate(rows)
        ]
        label = "Polaris-53K (our cleaning, compared only)" if as_authors else "Polaris-53K"
        kept, dropped = clean_problems(problems, label, drop_reasons)
        if not as_authors:
            result.dropped = dropped
        return [((p.position, 0), make_record(DATA_SOURCE, ABILITY, p, index, "train")) for index, p in enumerate(kept)]

    path = os.path.join(out_dir, "train.parquet")
    write_compared(result, "train", path, ours, lambda: authors_rows(rows), drop_reasons, as_authors)
    return result


def main() -> None:
    train_set_main(__doc__, HUB_ID, FOLDER, process_polaris, DATA_SOURCE)


if __name__ == "__main__":
    main()
