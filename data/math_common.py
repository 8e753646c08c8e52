"""Shared helpers of the math data processors: loading, row validation, verl records, parquet output.

Every processor turns its source rows into ``SourceProblem`` objects, drops bad ones with
``clean_problems`` (each drop counted per reason and logged), builds one record per kept problem with
``make_record`` and writes them with ``write_parquet``. A record follows the schema of spec §11:

    data_source   str
    prompt        [{"role": "system", "content": ""}, {"role": "user", "content": problem + BOXED_SUFFIX}]
    ability       "math" (train sets) or "MATH" (eval sets, DAPO)
    reward_model  {"ground_truth": str, "style": "rule"}
    extra_info    {"index": int, "original_id": str, "raw_problem": str, "split": str, "difficulty": str, ...}

``extra_info.raw_problem`` is the problem exactly as it appears in the prompt, before the boxed suffix.
"""

from __future__ import annotations

import argparse
import glob
import logging
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

logger = logging.getLogger(__name__)

BOXED_SUFFIX = "\n\nLet's think step by step and output the final answer within \\boxed{}."
DROP_REASONS = ("empty_problem", "missing_answer", "duplicate_id", "duplicate_problem")
_LOCAL_FORMATS = {".parquet": "parquet", ".json": "json", ".jsonl": "json"}


@dataclass
class SourceProblem:
    """One source row reduced to what a record needs; ``source_id`` is None when the source has no id column."""

    position: int
    problem: object
    answer: object
    source_id: str | None = None
    difficulty: str = ""


@dataclass
class ProcessResult:
    """What a processor wrote: output path and row count per split, and dropped rows per reason."""

    outputs: dict[str, str] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        written = ", ".join(f"{self.rows[split]} {split} rows to {path}" for split, path in self.outputs.items())
        dropped = ", ".join(f"{reason}={count}" for reason, count in self.dropped.items() if count) or "none"
        return f"wrote {written}; dropped: {dropped}"


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def default_out_dir(subdir: str) -> str:
    """``$DATA_DIR/<subdir>``, with DATA_DIR defaulting to ``~/data`` as in spec §11."""
    return os.path.join(os.path.expanduser(os.environ.get("DATA_DIR", "~/data")), subdir)


def make_prompt(problem: str) -> list[dict]:
    # Empty system turn and the instruction in the user turn, as every run of the reference was trained on.
    return [{"role": "system", "content": ""}, {"role": "user", "content": problem + BOXED_SUFFIX}]


def make_record(
    data_source: str,
    ability: str,
    problem: SourceProblem,
    index: int,
    split: str,
    extra: dict | None = None,
) -> dict:
    """One verl record of a cleaned problem (its ``problem`` and ``answer`` already non-empty strings)."""
    original_id = problem.source_id if problem.source_id is not None else str(problem.position)
    extra_info = {
        "index": int(index),
        "original_id": original_id,
        "raw_problem": problem.problem,
        "split": split,
        "difficulty": problem.difficulty,
    }
    extra_info.update(extra or {})
    return {
        "data_source": data_source,
        "prompt": make_prompt(problem.problem),
        "ability": ability,
        "reward_model": {"ground_truth": problem.answer, "style": "rule"},
        "extra_info": extra_info,
    }


def is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def answer_to_str(value: object, where: str) -> str | None:
    """The answer as a ground-truth string, None when missing or blank.

    Integral floats become integers ("27.0" -> "27") because parquet/json readers turn integer answer
    columns with a null into floats, and the string grader would then never match "27".
    """
    if is_missing(value):
        return None
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    if isinstance(value, str):
        return value.strip() or None
    # ValueError, not TypeError: a bad value in the source data, which the command lines report in one line.
    raise ValueError(f"{where}: answer {value!r} has type {type(value).__name__}, expected a string or number")


def difficulty_to_str(value: object) -> str:
    return "" if is_missing(value) else str(value).strip()


def clean_problems(problems: Iterable[SourceProblem], dataset: str) -> tuple[list[SourceProblem], dict[str, int]]:
    """Drop rows with an empty problem, a missing answer or a repeated id, and count each reason.

    Duplicates are found by ``source_id``, or by the problem text for rows without one; the first
    valid occurrence is kept. Kept problems come back with stripped string ``problem`` and ``answer``.
    """
    counts = dict.fromkeys(DROP_REASONS, 0)
    examples: dict[str, list[int]] = {reason: [] for reason in DROP_REASONS}
    seen_ids: set[str] = set()
    seen_texts: set[str] = set()
    kept = []
    total = 0
    for item in problems:
        total += 1
        text = item.problem.strip() if isinstance(item.problem, str) else ""
        answer = answer_to_str(item.answer, f"{dataset} source row {item.position}")
        if not text:
            reason = "empty_problem"
        elif answer is None:
            reason = "missing_answer"
        elif item.source_id is not None:
            reason = "duplicate_id" if item.source_id in seen_ids else None
            seen_ids.add(item.source_id)
        else:
            reason = "duplicate_problem" if text in seen_texts else None
            seen_texts.add(text)
        if reason is None:
            kept.append(
                SourceProblem(item.position, text, answer, source_id=item.source_id, difficulty=item.difficulty)
            )
        else:
            counts[reason] += 1
            examples[reason].append(item.position)
    log_drops(dataset, total, counts, examples)
    return kept, counts


def log_drops(dataset: str, total: int, counts: dict[str, int], examples: dict[str, list[int]]) -> None:
    """One line per dataset with the count of every drop reason, plus the first offending row positions."""
    dropped = sum(counts.values())
    detail = ", ".join(f"{reason}={count}" for reason, count in counts.items())
    if not dropped:
        logger.info("%s: kept all %d rows (%s)", dataset, total, detail)
        return
    logger.warning("%s: dropped %d of %d rows (%s)", dataset, dropped, total, detail)
    for reason, positions in examples.items():
        if positions:
            logger.warning("%s: %s at source rows %s", dataset, reason, positions[:10])


def _local_data_files(path: str, split: str, split_files_required: bool) -> tuple[str, list[str]]:
    """The loader format and files of a local source: the file itself, or a folder's files of ``split``."""
    if os.path.isfile(path):
        fmt = _LOCAL_FORMATS.get(os.path.splitext(path)[1].lower())
        if fmt is None:
            raise ValueError(f"{path}: unsupported file type; expected one of {sorted(_LOCAL_FORMATS)}")
        return fmt, [path]
    if not os.path.isdir(path):
        raise FileNotFoundError(f"local source {path} does not exist")
    files = sorted(
        f
        for f in glob.glob(os.path.join(path, "**", "*"), recursive=True)
        if os.path.splitext(f)[1].lower() in _LOCAL_FORMATS
    )
    # Hub snapshots name their shards "<split>-00000-of-00001.parquet"; a hand-made folder "<split>.jsonl".
    split_files = [
        f for f in files if os.path.basename(f).split(".")[0] == split or os.path.basename(f).startswith(f"{split}-")
    ]
    if split_files:
        files = split_files
    elif split_files_required:
        raise FileNotFoundError(f"{path}: no data file for split {split!r} (expected {split}.parquet or {split}-*)")
    if not files:
        raise FileNotFoundError(f"{path}: no .parquet, .json or .jsonl files")
    formats = {_LOCAL_FORMATS[os.path.splitext(f)[1].lower()] for f in files}
    if len(formats) > 1:
        raise ValueError(f"{path}: mixes parquet and json files for split {split!r}: {files}")
    return formats.pop(), files


def load_rows(
    hub_id: str,
    split: str,
    columns: Sequence[str],
    *,
    config: str | None = None,
    local_path: str | None = None,
    optional_columns: Sequence[str] = (),
    split_files_required: bool = False,
) -> list[dict]:
    """Rows of ``columns`` (plus any ``optional_columns`` present) from the hub, or from ``local_path``.

    A local path is a .parquet/.json/.jsonl file, or a folder whose files named for ``split`` are read
    (all its data files when none is, unless ``split_files_required``).
    """
    import datasets

    if local_path is not None:
        local_path = os.path.expanduser(local_path)
        fmt, files = _local_data_files(local_path, split, split_files_required)
        logger.info("loading %s split %s from %d local %s file(s) under %s", hub_id, split, len(files), fmt, local_path)
        dataset = datasets.load_dataset(fmt, data_files=files, split="train")
        source = local_path
    else:
        logger.info("loading %s (config %s) split %s from the hub", hub_id, config, split)
        dataset = datasets.load_dataset(hub_id, config, split=split)
        source = hub_id
    missing = [c for c in columns if c not in dataset.column_names]
    if missing:
        raise ValueError(f"{source}: missing column(s) {missing}; it has {dataset.column_names}")
    wanted = list(columns) + [c for c in optional_columns if c in dataset.column_names and c not in columns]
    # Selecting first keeps large unused columns (DeepMath's three R1 solutions) out of Python objects.
    return dataset.select_columns(wanted).to_list()


def write_parquet(records: list[dict], path: str) -> int:
    if not records:
        raise ValueError(f"no rows left to write to {path}: every source row was dropped")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    # pyarrow straight from the dicts: plain string columns (pandas 3 would write large_string) and
    # one struct type for extra_info inferred over every row.
    pq.write_table(pa.Table.from_pylist(records), path)
    logger.info("wrote %d rows to %s", len(records), path)
    return len(records)


def write_split(records: list[dict], path: str, split: str, dropped: dict[str, int]) -> ProcessResult:
    """Write a processor's one output file and describe it as a ProcessResult."""
    return ProcessResult(outputs={split: path}, rows={split: write_parquet(records, path)}, dropped=dropped)


# ------------------------------------------------------------------ command lines
def check_paths(parser: argparse.ArgumentParser, local_path: str | None, out_dir: str) -> None:
    """Refuse a ``--local_path`` that is missing or of an unreadable type, and an ``--out_dir`` that is a file,
    before anything is imported or downloaded."""
    if local_path is not None:
        path = os.path.expanduser(local_path)
        if os.path.isfile(path):
            if os.path.splitext(path)[1].lower() not in _LOCAL_FORMATS:
                parser.error(f"--local_path {local_path}: unsupported file type; expected {sorted(_LOCAL_FORMATS)}")
        elif not os.path.isdir(path):
            parser.error(f"--local_path {local_path}: no such file or folder")
    out = os.path.expanduser(out_dir)
    if os.path.exists(out) and not os.path.isdir(out):
        parser.error(f"--out_dir {out_dir}: exists and is not a folder")


def run_processor(parser: argparse.ArgumentParser, process: Callable[..., ProcessResult], *args) -> ProcessResult:
    """Run ``process``; a problem with the source data or a data-dependent argument (a bad row, a missing
    column, a test split larger than the data, an unreachable hub) ends the command with one line, exit 2."""
    try:
        return process(*args)
    except (ValueError, OSError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
