"""Shared helpers of the math data processors: loading, row validation, verl records, parquet output.

Every processor turns its source rows into ``SourceProblem`` objects, drops bad ones with
``clean_problems`` (each drop counted per reason and logged), builds one record per kept problem with
``make_record`` and writes them with ``write_parquet``. Every record has this schema:

    data_source   str
    prompt        [{"role": "system", "content": ""}, {"role": "user", "content": problem + BOXED_SUFFIX}]
    ability       "math" (train sets) or "MATH" (eval sets, DAPO)
    reward_model  {"ground_truth": str, "style": "rule"}
    extra_info    {"index": int, "original_id": str, "raw_problem": str, "split": str, "difficulty": str, ...}

``extra_info.raw_problem`` is the problem exactly as it appears in the prompt, before the boxed suffix.

**As the authors.** Every processor also takes ``--as-authors``: it then writes the rows the authors'
own processors (``databricks/pilot-commit``, ``data/process_*.py``) write from the same source, with
none of the cleaning above: same rows, same order, same text (nothing stripped, nothing dropped but
what they drop), the same raw ground-truth values and the same ``extra_info`` (``index`` = the row's
position in their output, their ``original_id``, ``split`` and no extra keys). Those rows are built
with ``authors_record``; their default folder is ours plus ``AS_AUTHORS_SUFFIX``. PRESET=reference of
``train_scripts/common.sh`` reads these folders.

Whichever rows a run writes, it also builds the other kind from the rows it loaded and prints, per
reason, how many of the authors' rows our cleaning changes (``compare_with_authors``): dropped (by our
drop reason), added, problem text, answer text or type, ``index`` (re-indexed), order, and metadata.
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
AS_AUTHORS_SUFFIX = "_as_authors"
# How our rows can differ from the authors' (compare_with_authors). Row reasons change what is trained or
# graded, or the prompt id PC keys its buffer on; metadata reasons only change bookkeeping fields.
ROW_REASONS = ("dropped", "added", "problem_text", "answer_text", "answer_type", "index", "order")
METADATA_REASONS = ("data_source", "ability", "system_prompt", "original_id", "split", "difficulty", "extra_keys")
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
class Comparison:
    """How the rows of our default processing differ from the authors' rows of the same source.

    Rows are matched by (source row position, copy). ``counts`` holds, per reason, the number of the
    authors' rows it touches (``dropped:<our drop reason>``; ``added`` counts rows of ours they lack);
    one row can have several reasons. ``changed_rows`` counts the authors' rows that are dropped or
    differ in a row reason. ``error`` says why no comparison could be made (one side fails).
    """

    authors_rows: int = 0
    our_rows: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    changed_rows: int = 0
    error: str | None = None

    def count(self, reason: str) -> int:
        """The count of ``reason``; ``dropped`` sums every drop reason."""
        if reason == "dropped":
            return sum(n for key, n in self.counts.items() if key.startswith("dropped:"))
        return self.counts.get(reason, 0)

    def describe(self) -> str:
        if self.error is not None:
            return f"no comparison with the authors' processing: {self.error}"

        def listed(reasons: Iterable[str]) -> str:
            keys = [k for k in self.counts if any(k == r or k.startswith(f"{r}:") for r in reasons)]
            return ", ".join(f"{k}={self.counts[k]}" for k in keys if self.counts[k]) or "none"

        return (
            f"vs the authors' processing: {self.changed_rows} of their {self.authors_rows} rows change "
            f"({self.our_rows} rows ours); rows: {listed(ROW_REASONS)}; metadata only: {listed(METADATA_REASONS)}"
        )


@dataclass
class ProcessResult:
    """What a processor wrote: output path and row count per split, dropped rows per reason, and per split
    the comparison of our default rows with the authors' (``comparisons``)."""

    outputs: dict[str, str] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    comparisons: dict[str, Comparison] = field(default_factory=dict)

    def summary(self) -> str:
        written = ", ".join(f"{self.rows[split]} {split} rows to {path}" for split, path in self.outputs.items())
        dropped = ", ".join(f"{reason}={count}" for reason, count in self.dropped.items() if count) or "none"
        return f"wrote {written}; dropped: {dropped}"

    def comparison_lines(self, name: str) -> list[str]:
        return [f"{name} {split}: {c.describe()}" for split, c in self.comparisons.items()]

    def print_report(self, name: str) -> None:
        print(f"{name}: {self.summary()}")
        for line in self.comparison_lines(name):
            print(line)


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def default_out_dir(subdir: str) -> str:
    """``$DATA_DIR/<subdir>``, with DATA_DIR defaulting to ``~/data`` as the train scripts expect."""
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


# ------------------------------------------------------------------ as the authors
# A record with its source key, (source row position, copy): what compare_with_authors matches rows by.
Keyed = tuple[tuple[int, int], dict]


class AuthorsRowError(ValueError):
    """A source row on which the authors' processor stops with an exception, so it has no authors' row."""


def authors_text(value: object, where: str) -> str:
    """A problem text as the authors use it: unchanged; their code concatenates it, so it must be a string."""
    if not isinstance(value, str):
        raise AuthorsRowError(f"{where}: problem {value!r} is not a string; the authors' processor fails on it")
    return value


def authors_record(
    data_source: str,
    ability: str,
    problem: str,
    ground_truth: object,
    index: int,
    original_id: str,
    split: str | None,
    difficulty: object,
) -> dict:
    """One record as the authors' processors build it: ``problem`` and ``ground_truth`` exactly as given
    (no strip, no type change), message keys in their order, ``extra_info`` with their five keys only."""
    return {
        "data_source": data_source,
        "prompt": [{"content": "", "role": "system"}, {"content": problem + BOXED_SUFFIX, "role": "user"}],
        "ability": ability,
        "reward_model": {"ground_truth": ground_truth, "style": "rule"},
        "extra_info": {
            "index": int(index),
            "original_id": original_id,
            "raw_problem": problem,
            "split": split,
            "difficulty": difficulty,
        },
    }


def _user_text(record: dict) -> object:
    turns = [m for m in record["prompt"] if m.get("role") == "user"]
    return turns[0].get("content") if turns else None


def _system_text(record: dict) -> object:
    turns = [m for m in record["prompt"] if m.get("role") == "system"]
    return turns[0].get("content") if turns else None


def compare_with_authors(ours: list[Keyed], authors: list[Keyed], drop_reasons: dict[int, str]) -> Comparison:
    """Count, per reason, the authors' rows that our rows change. ``drop_reasons`` maps a source position
    we dropped to our reason (``dropped:<reason>``; ``dropped:other`` when it has none)."""
    counts = {reason: 0 for reason in ROW_REASONS if reason != "dropped"}
    counts.update(dict.fromkeys(METADATA_REASONS, 0))
    ours_by_key = {key: record for key, record in ours}
    authors_keys = {key for key, _ in authors}
    changed = 0
    for key, theirs in authors:
        mine = ours_by_key.get(key)
        if mine is None:
            reason = f"dropped:{drop_reasons.get(key[0], 'other')}"
            counts[reason] = counts.get(reason, 0) + 1
            changed += 1
            continue
        row_change = False
        raw_mine, raw_theirs = mine["extra_info"]["raw_problem"], theirs["extra_info"]["raw_problem"]
        if _user_text(mine) != _user_text(theirs) or raw_mine != raw_theirs:
            counts["problem_text"] += 1
            row_change = True
        gold_mine, gold_theirs = mine["reward_model"]["ground_truth"], theirs["reward_model"]["ground_truth"]
        if str(gold_mine) != str(gold_theirs):
            counts["answer_text"] += 1
            row_change = True
        elif type(gold_mine) is not type(gold_theirs):
            counts["answer_type"] += 1
            row_change = True
        if mine["extra_info"]["index"] != theirs["extra_info"]["index"]:
            counts["index"] += 1
            row_change = True
        changed += row_change
        for reason in ("data_source", "ability"):
            counts[reason] += mine[reason] != theirs[reason]
        counts["system_prompt"] += _system_text(mine) != _system_text(theirs)
        for reason in ("original_id", "split", "difficulty"):
            counts[reason] += mine["extra_info"].get(reason) != theirs["extra_info"].get(reason)
        counts["extra_keys"] += set(mine["extra_info"]) != set(theirs["extra_info"])
    counts["added"] = sum(key not in authors_keys for key in ours_by_key)
    # Order: rows both keep, ranked in each file; a row whose rank differs is out of the authors' order.
    shared_theirs = [key for key, _ in authors if key in ours_by_key]
    shared_mine = [key for key, _ in ours if key in authors_keys]
    counts["order"] = sum(a != b for a, b in zip(shared_theirs, shared_mine, strict=True))
    # ``changed`` counts the authors' rows only (added rows are counted apart) and not ``order``: a moved
    # row also has a new index, counted above.
    ordered = {k: counts[k] for k in sorted(counts, key=lambda k: (not k.startswith("dropped:"), k))}
    return Comparison(authors_rows=len(authors), our_rows=len(ours), counts=ordered, changed_rows=changed)


def build_both(
    ours: Callable[[], list[Keyed]], authors: Callable[[], list[Keyed]], as_authors: bool
) -> tuple[list[Keyed], list[Keyed] | None, list[Keyed] | None, str | None]:
    """Build the rows to write (ours, or the authors' with ``as_authors``) and the other kind for the
    comparison. A failure of the written kind propagates; one of the other kind becomes the comparison's
    error. Returns (rows to write, our rows, the authors' rows, error)."""
    first, second = (authors, ours) if as_authors else (ours, authors)
    written = first()
    try:
        other = second()
    except ValueError as exc:
        other, error = None, str(exc)
    else:
        error = None
    if as_authors:
        return written, other, written, error
    return written, written, other, error


def write_compared(
    result: ProcessResult,
    split: str,
    path: str,
    ours: Callable[[], list[Keyed]],
    authors: Callable[[], list[Keyed]],
    drop_reasons: dict[int, str],
    as_authors: bool,
) -> None:
    """Write one split (ours or, with ``as_authors``, the authors' rows) and record its comparison."""
    written, mine, theirs, error = build_both(ours, authors, as_authors)
    result.outputs[split] = path
    result.rows[split] = write_parquet([record for _, record in written], path)
    if error is not None:
        side = "our processing" if as_authors else "the authors' processing"
        result.comparisons[split] = Comparison(error=f"{side} fails on this source: {error}")
    else:
        result.comparisons[split] = compare_with_authors(mine, theirs, drop_reasons)
    logger.info("%s: %s", path, result.comparisons[split].describe())


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


def clean_problems(
    problems: Iterable[SourceProblem], dataset: str, reasons: dict[int, str] | None = None
) -> tuple[list[SourceProblem], dict[str, int]]:
    """Drop rows with an empty problem, a missing answer or a repeated id, and count each reason.

    Duplicates are found by ``source_id``, or by the problem text for rows without one; the first
    valid occurrence is kept. Kept problems come back with stripped string ``problem`` and ``answer``.
    ``reasons``, when given, receives the drop reason of every dropped source position.
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
            if reasons is not None:
                reasons[item.position] = reason
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


# ------------------------------------------------------------------ command lines
def add_output_arguments(parser: argparse.ArgumentParser, folder: str) -> None:
    """``--as-authors`` and an ``--out_dir`` whose default folder ``folder`` gets AS_AUTHORS_SUFFIX with it."""
    parser.add_argument(
        "--as-authors",
        "--as_authors",
        dest="as_authors",
        action="store_true",
        help="write the rows the authors' processor writes from this source: nothing stripped or dropped "
        "but what they drop, their index values (PRESET=reference reads these)",
    )
    parser.add_argument(
        "--out_dir",
        help=f"output folder (default: $DATA_DIR/{folder}, with --as-authors $DATA_DIR/{folder}{AS_AUTHORS_SUFFIX}; "
        "DATA_DIR defaults to ~/data)",
    )


def out_dir_of(args: argparse.Namespace, folder: str) -> str:
    if args.out_dir is not None:
        return args.out_dir
    return default_out_dir(folder + (AS_AUTHORS_SUFFIX if args.as_authors else ""))


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


def train_set_main(doc: str, hub_id: str, folder: str, process: Callable[..., ProcessResult], data_source: str) -> None:
    """The command line of a processor of one train set: ``process(out_dir, local_path, as_authors)``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--local_path", help=f"local .parquet/.json/.jsonl file or folder instead of {hub_id}")
    add_output_arguments(ap, folder)
    args = ap.parse_args()
    out_dir = out_dir_of(args, folder)
    check_paths(ap, args.local_path, out_dir)
    setup_logging()
    run_processor(ap, process, out_dir, args.local_path, args.as_authors).print_report(data_source)


def run_processor(parser: argparse.ArgumentParser, process: Callable[..., ProcessResult], *args) -> ProcessResult:
    """Run ``process``; a problem with the source data or a data-dependent argument (a bad row, a missing
    column, a test split larger than the data, an unreachable hub) ends the command with one line, exit 2."""
    try:
        return process(*args)
    except (ValueError, OSError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
