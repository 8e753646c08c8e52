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
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass

from math_common import (
    ProcessResult,
    SourceProblem,
    check_paths,
    clean_problems,
    default_out_dir,
    is_missing,
    load_rows,
    make_record,
    run_processor,
    setup_logging,
    write_split,
)

ABILITY = "MATH"


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

    @property
    def file_name(self) -> str:
        return f"{self.name.replace('_', '-')}-nosystem-boxed.parquet"


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
    kept, dropped = clean_problems(problems, spec.name)
    # Copy-major order: a validation batch cut short still covers every problem.
    records = [
        make_record(spec.name, ABILITY, problem, index, "test", extra={"repeat": copy})
        for copy in range(copies)
        for index, problem in enumerate(kept)
    ]
    path = os.path.join(out_dir, spec.file_name)
    return write_split(records, path, "test", dropped)


AIME_2024 = EvalSet("aime_2024", "zwhe99/aime90", None, "2024", "problem", "expected_answer", "id", 32)
AIME_2025 = EvalSet("aime_2025", "yentinglin/aime_2025", "default", "train", "problem", "answer", "id", 32)
AMC_2023 = EvalSet("amc_2023", "zwhe99/amc23", None, "test", "question", "answer", "id", 32)
MATH_500 = EvalSet("math_500", "zwhe99/MATH", None, "math500", "problem", "expected_answer", None, 1)
MINERVA_MATH = EvalSet("minerva_math", "math-ai/minervamath", None, "test", "question", "answer", None, 1)
OLYMPIAD_BENCH = EvalSet(
    "olympiad_bench", "Hothan/OlympiadBench", "OE_TO_maths_en_COMP", "train", "question", "final_answer", "id", 1
)


def process_aime_2024(out_dir: str, local_path: str | None = None, repeat: int | None = None) -> ProcessResult:
    return process_eval_set(AIME_2024, out_dir, local_path, repeat)


def process_aime_2025(out_dir: str, local_path: str | None = None, repeat: int | None = None) -> ProcessResult:
    return process_eval_set(AIME_2025, out_dir, local_path, repeat)


def process_amc_2023(out_dir: str, local_path: str | None = None, repeat: int | None = None) -> ProcessResult:
    return process_eval_set(AMC_2023, out_dir, local_path, repeat)


def process_math_500(out_dir: str, local_path: str | None = None, repeat: int | None = None) -> ProcessResult:
    return process_eval_set(MATH_500, out_dir, local_path, repeat)


def process_minerva_math(out_dir: str, local_path: str | None = None, repeat: int | None = None) -> ProcessResult:
    return process_eval_set(MINERVA_MATH, out_dir, local_path, repeat)


def process_olympiad_bench(out_dir: str, local_path: str | None = None, repeat: int | None = None) -> ProcessResult:
    return process_eval_set(OLYMPIAD_BENCH, out_dir, local_path, repeat, answer_of=first_list_element)


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
    ap.add_argument("--out_dir", default=default_out_dir("math_test"))
    ap.add_argument("--repeat", type=int, help="copies of every problem (default: 32 for AIME/AMC, else 1)")
    args = ap.parse_args()
    if args.local_path and args.dataset == "all":
        ap.error("--local_path holds one dataset: name it with --dataset")
    if args.repeat is not None and args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    check_paths(ap, args.local_path, args.out_dir)
    setup_logging()
    names = list(PROCESSORS) if args.dataset == "all" else [args.dataset]
    for name in names:
        result = run_processor(ap, PROCESSORS[name], args.out_dir, args.local_path, args.repeat)
        print(f"{name}: {result.summary()}")


if __name__ == "__main__":
    main()
