"""Per-prompt pass rates from rollout dumps, for ``plan``; and packing a dump folder into one file.

A dump folder holds ``<step>.jsonl`` (or gzipped ``<step>.jsonl.gz``) files written by this project's trainer with
``trainer.rollout_data_dir=DUMP_DIR``: one JSON object per generated rollout with at least ``prompt_id`` and the
metric (``acc`` by default), and ``data_source`` where the dataset has one. A packed dump is one Parquet file of
the same rows, a ``step`` column added where a row lacks one, without the prompt and response text:

    python -m recipe.pc_tools.dumps pack RUN/dump [RUN2/dump ...]   # writes RUN/dump.parquet

Every reader here takes either form. A prompt seen k times with s successes gets pass rate (s + a) / (k + a + b),
with a Beta(a, b) prior (default none: s/k).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import sys
from collections import defaultdict

import numpy as np

DUMP_HINT = (
    "write rollout dumps with this project's trainer: add trainer.rollout_data_dir=DIR to the "
    "python -m recipe.pc.main_pc command (any of grpo, dapo or pilot_commit), then run plan on DIR"
)


PACKED_SUFFIX = ".parquet"
# The prompt and response text: large, and read by nothing here.
TEXT_FIELDS = ("input", "output")
PACK_COMMAND = "python -m recipe.pc_tools.dumps pack DUMP_DIR"

logger = logging.getLogger(__name__)


class DumpError(ValueError):
    """A dump this command cannot read; the message names the file and row and what to run instead."""


def parse_steps(text: str | None) -> tuple[int | None, int | None]:
    """``A:B`` (both inclusive), ``A:``, ``:B`` or ``A``; None: every step."""
    if not text:
        return None, None
    lo, sep, hi = text.partition(":")
    try:
        first = int(lo) if lo else None
        last = (int(hi) if hi else None) if sep else first
    except ValueError:
        raise DumpError(f"expected FIRST:LAST (inclusive, either may be left out), got {text!r}") from None
    if first is not None and last is not None and first > last:
        raise DumpError(f"the first step is after the last in {text!r}")
    return first, last


def step_files(dump_dir: str, steps: tuple[int | None, int | None]) -> list[tuple[int, str]]:
    """(step, file) for each dumped step in the window; a packed dump gives its own path for every step."""
    if dump_dir.endswith(PACKED_SUFFIX):
        return _choose(dump_dir, [(step, dump_dir) for step in _packed_steps(dump_dir)], steps)
    if not os.path.isdir(dump_dir):
        packed = dump_dir.rstrip("/") + PACKED_SUFFIX
        also = f"; its packed form {packed} is there: pass that" if os.path.isfile(packed) else ""
        raise DumpError(f"{dump_dir} is not a directory{also or '; ' + DUMP_HINT}")
    found = []
    for name in os.listdir(dump_dir):
        # <step>.jsonl as the trainer writes it, or gzipped for keeping (docs/results/regimes).
        stem = name.removesuffix(".gz").removesuffix(".jsonl")
        if name in (f"{stem}.jsonl", f"{stem}.jsonl.gz") and stem.isdigit():
            found.append((int(stem), os.path.join(dump_dir, name)))
    numbers = [s for s, _ in found]
    if len(set(numbers)) != len(numbers):
        raise DumpError(f"{dump_dir} holds both <step>.jsonl and <step>.jsonl.gz for a step; keep one")
    if not found:
        raise DumpError(f"{dump_dir} holds no <step>.jsonl files; {DUMP_HINT}")
    return _choose(dump_dir, found, steps)


def _choose(dump: str, found: list[tuple[int, str]], steps: tuple[int | None, int | None]) -> list[tuple[int, str]]:
    first, last = steps
    chosen = sorted((s, path) for s, path in found if (first is None or s >= first) and (last is None or s <= last))
    if not chosen:
        have = sorted(s for s, _ in found)
        raise DumpError(f"no dumped step in the window {first}:{last}; {dump} has steps {have[0]}..{have[-1]}")
    return chosen


def _packed_steps(path: str) -> list[int]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if not os.path.isfile(path):
        raise DumpError(f"no packed dump {path}; pack a dump folder with {PACK_COMMAND}")
    try:
        names = pq.read_schema(path).names
        column = pq.read_table(path, columns=["step"]).column("step") if "step" in names else None
    except (OSError, ValueError) as err:
        raise DumpError(
            f"{path}: not a readable Parquet file ({err}); pack the dump folder with {PACK_COMMAND}"
        ) from None
    if column is None:
        raise DumpError(
            f"{path} has no 'step' column (columns {sorted(names)}); pack the dump folder with {PACK_COMMAND}"
        )
    if column.null_count:
        raise DumpError(
            f"{path}: {column.null_count} rows have no step; pack the dump folder again with {PACK_COMMAND}"
        )
    steps = sorted(int(s) for s in pc.unique(column).to_pylist())
    if not steps:
        raise DumpError(f"{path} holds no rollouts; {DUMP_HINT}")
    return steps


def _success(value, metric: str, where: str) -> float:
    """The metric as a success in [0, 1]: acc-like values as they are, ``score`` as score > 0."""
    if metric == "score":
        if not isinstance(value, (int, float)):
            raise DumpError(f"{where}: score={value!r} is not a number")
        return float(value > 0)
    if isinstance(value, bool) or (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
        return float(value)
    raise DumpError(
        f"{where}: {metric}={value!r} is not a success in [0, 1]; pick a 0/1 metric with --metric, "
        "or --metric score (success = score > 0)"
    )


def _open_dump(path: str):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def _step_rows(path: str):
    """(where, row) for each line of one step file; a line that is not JSON is an error naming it."""
    with _open_dump(path) as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path} line {line_no}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as err:
                raise DumpError(f"{where}: not JSON ({err})") from None


def _packed_rows(path: str, steps: list[int], columns: list[str]):
    """(where, row) for the rows of these steps of a packed dump, with the named columns it has; a null cell is
    left out of its row, as a key a step file's row lacks."""
    import pyarrow.parquet as pq

    have = set(pq.read_schema(path).names)
    table = pq.read_table(path, columns=[c for c in columns if c in have], filters=[("step", "in", steps)])
    for index, row in enumerate(table.to_pylist()):
        yield f"{path} row {index} (step {row.get('step')})", {k: v for k, v in row.items() if v is not None}


def _rows(files: list[tuple[int, str]], columns: list[str]):
    """(where, row) over the dumped steps ``files``, step files and packed dumps alike; each packed file is read
    once for all its steps in ``files``."""
    packed: dict[str, list[int]] = {}
    for step, path in files:
        if path.endswith(PACKED_SUFFIX):
            packed.setdefault(path, []).append(step)
        else:
            yield from _step_rows(path)
    for path, steps in packed.items():
        yield from _packed_rows(path, steps, ["step", *columns])


def read_dump(files: list[tuple[int, str]], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(prompt ids, rollouts seen, successes, data source) over the rows of ``files``, in one pass; the source is
    ``"?"`` for a dump without ``data_source``."""
    seen: dict[int, float] = defaultdict(float)
    wins: dict[int, float] = defaultdict(float)
    sources: dict[int, str] = {}
    # Of a packed dump only these columns are read, plus score for the hint below.
    for where, row in _rows(files, ["prompt_id", metric, "score", "data_source"]):
        if "prompt_id" not in row:
            raise DumpError(f"{where} has no 'prompt_id' (keys {sorted(row)}); {DUMP_HINT}")
        if metric not in row:
            hint = " (or --metric score for score > 0)" if metric != "score" and "score" in row else ""
            raise DumpError(
                f"{where} has no {metric!r} (keys {sorted(row)}); pass the metric the reward returns "
                f"with --metric{hint}, or {DUMP_HINT}"
            )
        pid = int(row["prompt_id"])
        seen[pid] += 1
        wins[pid] += _success(row[metric], metric, where)
        sources.setdefault(pid, str(row.get("data_source", "?")))
    if not seen:
        raise DumpError(f"the dump files {[p for _, p in files]} hold no rollouts")
    ids = np.array(sorted(seen))
    return (
        ids,
        np.array([seen[i] for i in ids]),
        np.array([wins[i] for i in ids]),
        np.array([sources[i] for i in ids]),
    )


def read_pass_counts(files: list[tuple[int, str]], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prompt ids, rollouts seen, successes) over the rows of ``files``."""
    return read_dump(files, metric)[:3]


def _check_sources(sources: list[str] | None, present: set[str], files: list[tuple[int, str]]) -> None:
    missing = sorted(set(sources or ()) - present)
    if missing:
        where = f"steps {files[0][0]}..{files[-1][0]}"
        raise DumpError(f"--sources: no prompt of {missing} in {where}; the dump has {sorted(present)}")


def read_window(files: list[tuple[int, str]], metric: str, sources: list[str] | None):
    """(prompt ids, rollouts seen, successes) of the prompts of these data sources (None: all), e.g. to predict a
    mix made of some of a dump's sources; a source with no prompt in ``files`` is an error."""
    ids, seen, wins, labels = read_dump(files, metric)
    if not sources:
        return ids, seen, wins
    _check_sources(sources, set(labels.tolist()), files)
    keep = np.isin(labels, sources)
    return ids[keep], seen[keep], wins[keep]


def per_step_rates(chunk: list[tuple[int, str]], metric: str, prior, sources: list[str] | None) -> dict:
    """Dumped step -> its prompts' pass rates (of these data sources), each file read once; a source must have a
    prompt somewhere in ``chunk``, not in every step, and a step with none of them is left out."""
    rates, present = {}, set()
    for step, path in chunk:
        _, seen, wins, labels = read_dump([(step, path)], metric)
        present.update(labels.tolist())
        keep = np.isin(labels, sources) if sources else np.ones(len(seen), dtype=bool)
        if keep.any():
            rates[step] = pass_rates(seen[keep], wins[keep], prior)
    _check_sources(sources, present, chunk)
    return rates


def rates_by_source(chunk: list[tuple[int, str]], metric: str, prior) -> tuple[str, np.ndarray, np.ndarray]:
    """One window: its step range ("A..B"), each prompt's pass rate, and each prompt's data source."""
    _, seen, wins, labels = read_dump(chunk, metric)
    return f"{chunk[0][0]}..{chunk[-1][0]}", pass_rates(seen, wins, prior), labels


def source_table(windowed: list[tuple[str, np.ndarray, np.ndarray]]) -> str:
    """Per window and data source: prompts seen, mean pass rate and the shares at 0, strictly between, and at 1."""
    lines = [
        "| steps | data source | prompts | mean pass rate | share at 0 | share in (0, 1) | share at 1 |",
        "|" + "---|" * 7,
    ]
    for steps, rates, labels in windowed:
        for source in [*sorted(set(labels)), "all"]:
            r = rates if source == "all" else rates[labels == source]
            lines.append(
                f"| {steps} | {source} | {len(r)} | {r.mean():.3f} | {(r == 0).mean():.2f} "
                f"| {((r > 0) & (r < 1)).mean():.2f} | {(r == 1).mean():.2f} |"
            )
    return "\n".join(lines)


def plot_histograms(windowed: list[tuple[str, np.ndarray, np.ndarray]], path: str, title: str) -> None:
    """One panel per window: per-prompt pass rates, stacked by data source."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(windowed), 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(windowed), sharey=True, squeeze=False)[0]
    for ax, (steps, rates, labels) in zip(axes, windowed, strict=True):
        names = sorted(set(labels))
        ax.hist([rates[labels == n] for n in names], bins=np.linspace(0, 1, 18), stacked=True, label=names)
        ax.set_title(f"steps {steps} ({len(rates)} prompts)")
        ax.set_xlabel("per-prompt pass rate")
    axes[0].set_ylabel("prompts")
    axes[-1].legend(fontsize=7)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)


def pass_rates(seen: np.ndarray, wins: np.ndarray, prior: tuple[float, float]) -> np.ndarray:
    a, b = prior
    return (wins + a) / (seen + a + b)


def windows(files: list[tuple[int, str]], size: int | None) -> list[list[tuple[int, str]]]:
    """Consecutive windows of ``size`` dumped steps (the last may be shorter); None: one window."""
    if not size:
        return [files]
    return [files[i : i + size] for i in range(0, len(files), size)]


def pack(dump_dir: str, out: str | None = None) -> tuple[str, int, int]:
    """Write ``dump_dir``'s step files as one Parquet file (default ``<dump_dir>.parquet``) of their rows in step
    order, the prompt and response text left out; returns (file, rows, steps)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = step_files(dump_dir, (None, None))
    out = out or dump_dir.rstrip("/") + PACKED_SUFFIX
    rows, keys = [], {}
    for step, path in files:
        for where, row in _step_rows(path):
            if row.setdefault("step", step) != step:
                raise DumpError(f"{where}: step {row['step']!r} in a file of step {step}")
            for field in TEXT_FIELDS:
                row.pop(field, None)
            keys.update(dict.fromkeys(row))
            rows.append(row)
    columns = {}
    for key in keys:
        try:
            columns[key] = pa.array([row.get(key) for row in rows])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise DumpError(f"{dump_dir}: field {key!r} mixes value types across rows ({err}); not packed") from None
    # The answers' text dominates the size: zstd's level 19 makes the file about 25% smaller than its default.
    pq.write_table(pa.table(columns), out, compression="zstd", compression_level=19)
    return out, len(rows), len(files)


def main(argv: list[str] | None = None) -> int:
    """``pack``; the exit status (2: a dump that cannot be packed, with a message)."""
    parser = argparse.ArgumentParser(prog="python -m recipe.pc_tools.dumps", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="each DUMP_DIR's step files into DUMP_DIR.parquet")
    packing.add_argument("dump_dirs", nargs="+", metavar="DUMP_DIR")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for dump_dir in args.dump_dirs:
        try:
            out, rows, steps = pack(dump_dir)
        except DumpError as err:
            print(f"dumps pack: {err}", file=sys.stderr)
            return 2
        logger.info("%s: %d rows of %d steps -> %s (%d bytes)", dump_dir, rows, steps, out, os.path.getsize(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
