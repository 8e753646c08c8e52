"""The six math evaluation sets as verl parquet, each problem repeated for mean@k validation.

    python data/process_eval.py --dataset all --out_dir $DATA_DIR/math_test
    python data/process_eval.py --dataset amc_2023 --local_path amc23.parquet --repeat 8

| --dataset      | source, config, split                            | problem / answer / id           | repeat |
|----------------|--------------------------------------------------|---------------------------------|--------|
| aime_2024      | zwhe99/aime90, -, 2024                           | problem / expected_answer / id  | 32     |
| aime_2025      | yentinglin/aime_2025, default, train             | problem / answer / id           | 32     |
| amc_2023       | zwhe99/amc23, -, test                            | question / answer / id          | 32     |
| math_500       | zwhe99/MATH, -, math500                          | problem / expected_answer / -   | 1      |
| minerva_math   | math-ai/minervamath, -, test                     | question / answer / -           | 1      |
| olympiad_bench | Hothan/OlympiadBench, OE_TO_maths_en_COMP, train | question / final_answer[0] / id | 1      |

The dataset name is the ``data_source``; the output is ``<out_dir>/<name with dashes>-nosystem-boxed.parquet``
(e.g. ``aime-2024-nosystem-boxed.parquet``), ability ``MATH``. The reference spelled OlympiadBench's
data source and file ``oylmpiad_bench`` / ``oylmpiad-bench-...``; here both use the correct
``olympiad_bench`` spelling, so metric names (``val-core/olympiad_bench/...``) differ from the reference logs.

Rows with an empty problem or answer, or a repeated id (repeated problem text where the source has no
id), are dropped and counted. The kept set is written ``repeat`` times in a row (``--repeat`` overrides);
every copy of a problem keeps the same ``extra_info.index`` (0..n-1, validation groups by it) and
carries its copy number in ``extra_info.repeat``.

With ``--as-authors`` every source row is written as the authors' processors write it, repeated the same
way: nothing stripped or dropped, ``index`` the source row position, no ``extra_info.repeat``,
``split`` None, ``original_id`` ``str(id)`` (AIME, AMC, OlympiadBench) or "" (MATH-500, Minerva); the
answer as stored for AIME and MATH-500, ``str()`` of it for AMC and Minerva, ``str()`` of its first
element for OlympiadBench (so AMC's float answers read "27.0"); OlympiadBench keeps their spelling,
data source ``oylmpiad_bench`` in ``oylmpiad-bench-nosystem-boxed.parquet``. Default folder
``math_test_as_authors``. Either way the run prints how many of the authors' rows our cleaning changes.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass

from math_common import (
    AuthorsRowError,
    Keyed,
    ProcessResult,
    SourceProblem,
    add_output_arguments,
    authors_record,
    authors_text,
    check_paths,
    clean_problems,
    is_missing,
    load_rows,
    make_record,
    out_dir_of,
    run_processor,
    setup_logging,
    write_compared,
)

ABILITY = "MATH"
FOLDER = "math_test"
# How the authors' processor of each set turns the stored answer into the ground truth.
AS_STORED, STR, STR_OF_FIRST = "as_stored", "str", "str_of_first"


@dataclass(frozen=True)
class EvalSet:
    name: str
    hub_id: str
    config: str | None
    split: str
    problem_column: str
    answer_column: str
    id_column: str | None
    repeat: int
    authors_answer: str = AS_STORED
    authors_name: str | None = None  # the authors' data source name where it differs from ``name``

    @property
    def file_name(self) -> str:
        return f"{self.name.replace('_', '-')}-nosystem-boxed.parquet"

    @property
    def authors_data_source(self) -> str:
        return self.authors_name or self.name

    @property
    def authors_file_name(self) -> str:
        return f"{self.authors_data_source.replace('_', '-')}-nosystem-boxed.parquet"


def authors_ground_truth(spec: EvalSet, value: object, where: str) -> object:
    if spec.authors_answer == AS_STORED:
        return value
    if spec.authors_answer == STR:
        return str(value)
    try:
        return str(value[0])  # whatever the stored value is: their code indexes it
    except (TypeError, IndexError, KeyError) as err:
        raise AuthorsRowError(f"{where}: answer {value!r} has no first element; the authors' processor fails") from err


def authors_rows(spec: EvalSet, rows: list[dict], copies: int) -> list[Keyed]:
    """Every source row, in order, as the authors' processor of ``spec`` writes it, the set repeated ``copies``
    times in a row (each copy keeps the row's index)."""
    once = []
    for position, row in enumerate(rows):
        where = f"{spec.name} source row {position}"
        if spec.id_column is not None and spec.id_column not in row:
            raise AuthorsRowError(f"{where}: no {spec.id_column} column, which the authors' processor reads")
        record = authors_record(
            spec.authors_data_source,
            ABILITY,
            authors_text(row[spec.problem_column], where),
            authors_ground_truth(spec, row[spec.answer_column], f"{where}, column {spec.answer_column}"),
            position,
            str(row[spec.id_column]) if spec.id_column is not None else "",
            None,
            "",
        )
        once.append((position, record))
    # Deep copies are not needed: the records are only serialised.
    return [((position, copy), record) for copy in range(copies) for position, record in once]


def first_list_element(value: object, where: str) -> object:
    """OlympiadBench stores each answer as a list; its first element is the ground truth."""
    if is_missing(value):
        return None
    if not isinstance(value, list | tuple):
        raise ValueError(f"{where}: expected a list, got {type(value).__name__} {value!r}")
    return value[0] if value else None


def process_eval_set(
    spec: EvalSet,
    out_dir: str,
    local_path: str | None = None,
    repeat: int | None = None,
    answer_of: Callable[[object, str], object] | None = None,
    as_authors: bool = False,
) -> ProcessResult:
    copies = spec.repeat if repeat is None else repeat
    if copies < 1:
        raise ValueError(f"{spec.name}: --repeat must be at least 1, got {copies}")
    rows = load_rows(
        spec.hub_id,
        spec.split,
        [spec.problem_column, spec.answer_column],
        config=spec.config,
        local_path=local_path,
        optional_columns=[spec.id_column] if spec.id_column else [],
    )
    result = ProcessResult()
    drop_reasons: dict[int, str] = {}

    def ours() -> list[Keyed]:
        problems = []
        for position, row in enumerate(rows):
            answer = row[spec.answer_column]
            if answer_of is not None:
                answer = answer_of(answer, f"{spec.name} source row {position}, column {spec.answer_column}")
            source_id = row.get(spec.id_column) if spec.id_column else None
            problems.append(
                SourceProblem(
                    position,
                    row[spec.problem_column],
                    answer,
                    source_id=None if is_missing(source_id) else str(source_id),
                )
            )
        label = f"{spec.name} (our cleaning, compared only)" if as_authors else spec.name
        kept, dropped = clean_problems(problems, label, drop_reasons)
        if not as_authors:
            result.dropped = dropped
        # Copy-major order: a validation batch cut short still covers every problem.
        return [
            ((problem.position, copy), make_record(spec.name, ABILITY, problem, index, "test", extra={"repeat": copy}))
            for copy in range(copies)
            for index, problem in enumerate(kept)
        ]

    path = os.path.join(out_dir, spec.authors_file_name if as_authors else spec.file_name)
    write_compared(result, "test", path, ours, lambda: authors_rows(spec, rows, copies), drop_reasons, as_authors)
    return result


AIME_2024 = EvalSet("aime_2024", "zwhe99/aime90", None, "2024", "problem", "expected_answer", "id", 32)
AIME_2025 = EvalSet("aime_2025", "yentinglin/aime_2025", "default", "train", "problem", "answer", "id", 32)
AMC_2023 = EvalSet("amc_2023", "zwhe99/amc23", None, "test", "question", "answer", "id", 32, STR)
MATH_500 = EvalSet("math_500", "zwhe99/MATH", None, "math500", "problem", "expected_answer", None, 1)
MINERVA_MATH = EvalSet("minerva_math", "math-ai/minervamath", None, "test", "question", "answer", None, 1, STR)
OLYMPIAD_BENCH = EvalSet(
    "olympiad_bench",
    "Hothan/OlympiadBench",
    "OE_TO_maths_en_COMP",
    "train",
    "question",
    "final_answer",
    "id",
    1,
    STR_OF_FIRST,
    authors_name="oylmpiad_bench",  # sic, as in the authors' data and logs
)


def process_aime_2024(
    out_dir: str, local_path: str | None = None, repeat: int | None = None, as_authors: bool = False
) -> ProcessResult:
    return process_eval_set(AIME_2024, out_dir, local_path, repeat, as_authors=as_authors)


def process_aime_2025(
    out_dir: str, local_path: str | None = None, repeat: int | None = None, as_authors: bool = False
) -> ProcessResult:
    return process_eval_set(AIME_2025, out_dir, local_path, repeat, as_authors=as_authors)


def process_amc_2023(
    out_dir: str, local_path: str | None = None, repeat: int | None = None, as_authors: bool = False
) -> ProcessResult:
    return process_eval_set(AMC_2023, out_dir, local_path, repeat, as_authors=as_authors)


def process_math_500(
    out_dir: str, local_path: str | None = None, repeat: int | None = None, as_authors: bool = False
) -> ProcessResult:
    return process_eval_set(MATH_500, out_dir, local_path, repeat, as_authors=as_authors)


def process_minerva_math(
    out_dir: str, local_path: str | None = None, repeat: int | None = None, as_authors: bool = False
) -> ProcessResult:
    return process_eval_set(MINERVA_MATH, out_dir, local_path, repeat, as_authors=as_authors)


def process_olympiad_bench(
    out_dir: str, local_path: str | None = None, repeat: int | None = None, as_authors: bool = False
) -> ProcessResult:
    return process_eval_set(
        OLYMPIAD_BENCH, out_dir, local_path, repeat, answer_of=first_list_element, as_authors=as_authors
    )


PROCESSORS = {
    "aime_2024": process_aime_2024,
    "aime_2025": process_aime_2025,
    "amc_2023": process_amc_2023,
    "math_500": process_math_500,
    "minerva_math": process_minerva_math,
    "olympiad_bench": process_olympiad_bench,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=[*PROCESSORS, "all"], default="all")
    ap.add_argument("--local_path", help="local .parquet/.json/.jsonl file or folder (needs one --dataset)")
    add_output_arguments(ap, FOLDER)
    ap.add_argument("--repeat", type=int, help="copies of every problem (default: 32 for AIME/AMC, else 1)")
    args = ap.parse_args()
    if args.local_path and args.dataset == "all":
        ap.error("--local_path holds one dataset: name it with --dataset")
    if args.repeat is not None and args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    out_dir = out_dir_of(args, FOLDER)
    check_paths(ap, args.local_path, out_dir)
    setup_logging()
    names = list(PROCESSORS) if args.dataset == "all" else [args.dataset]
    for name in names:
        result = run_processor(ap, PROCESSORS[name], out_dir, args.local_path, args.repeat, args.as_authors)
        result.print_report(name)


if __name__ == "__main__":
    main()
