"""Training-run logs read into one table a run: a DataFrame indexed by step, one float column per metric.

Input formats (detected from the file extension and content):

* verl ``file`` logger (``trainer.logger=[file]``): JSON Lines, one line per ``Tracking.log`` call,
  ``{"step": <int>, "data": {"<metric>": <number>, ...}}``. Several lines may share a step (validation
  before training at step 0; a final validation logged on its own; epoch-end ``exclusion_stats/*`` lines):
  they are merged, the later line winning for a metric logged twice at the same step.
* W&B CSV (``*.csv``, the run-history "Export CSV"): one column per metric plus a step column named
  ``_step``, ``Step`` or ``step``; an empty cell means "not logged at that step". Chart exports are also
  read: their ``<metric>__MIN``/``__MAX`` columns are dropped and a ``<run name> - `` prefix shared by every
  metric column is removed.
* W&B JSON (any other extension): a JSON list of row objects, or JSON Lines of row objects, each with
  ``_step`` (as ``run.history()``/``run.scan_history()`` dumps give). Keys starting with ``_`` (``_runtime``,
  ``_timestamp``, ...) and non-numeric values are ignored. File-logger lines are accepted here too.
* JSON Lines whose LAST line is cut off (a run still writing, or killed) are read without it, with a warning
  naming the file and line; an unparseable line anywhere else is an error.
* TensorBoard (``tb:DIR``, or any folder given as PATH): the scalars of the ``events.out.tfevents.*`` files
  directly in DIR, as verl's ``tensorboard`` logger writes them (tag = metric name, step = training step).
* W&B run (``wandb:ENTITY/PROJECT/RUN_ID``): every row of ``wandb.Api().run(...).scan_history()``, read like
  the W&B JSON rows above; needs network access and a W&B login.

Used by ``report`` for its tables and by ``plan check`` for the runs it compares with the cost model.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

logger = logging.getLogger(__name__)

_CSV_STEP_COLUMNS = ("_step", "Step", "step")


class ReportError(Exception):
    """A problem that stops the report (or, raised for one run, that run's part of it)."""


@dataclass(frozen=True)
class RunSource:
    """Where a run's metrics are: a log ``file``, a ``tensorboard`` event folder or a ``wandb`` run path."""

    kind: str
    location: str


def parse_run_arg(arg: str) -> tuple[str, RunSource]:
    """``[LABEL=]PATH``, ``[LABEL=]tb:DIR`` or ``[LABEL=]wandb:ENTITY/PROJECT/RUN_ID`` -> (label, source).

    Without a label: a file's name without extension, a folder's name, a W&B run's id. An existing file
    named with '=' stays a path. A malformed W&B path raises ReportError.
    """
    label, sep, location = arg.partition("=")
    if not (sep and label and "/" not in label and not Path(arg).exists()):
        label, location = "", arg
    if location.startswith("wandb:"):
        run_path = location.removeprefix("wandb:").strip("/")
        parts = run_path.split("/")
        if not all(parts) or not (len(parts) == 3 or (len(parts) == 4 and parts[2] == "runs")):
            raise ReportError(f"{arg}: expected wandb:ENTITY/PROJECT/RUN_ID, got {location!r}")
        return label or parts[-1], RunSource("wandb", run_path)
    if location.startswith("tb:"):
        folder = Path(location.removeprefix("tb:"))
        return label or folder.resolve().name, RunSource("tensorboard", str(folder))
    path = Path(location)
    if path.is_dir():  # a folder can only be a TensorBoard log; load_run says so if it holds no event file
        return label or path.resolve().name, RunSource("tensorboard", str(path))
    return label or path.stem, RunSource("file", str(path))


def _numeric_items(row: dict) -> dict[str, float]:
    # bool is an int subclass but never a metric value worth plotting; None is orjson's NaN.
    return {
        k: float(v)
        for k, v in row.items()
        if not k.startswith("_") and isinstance(v, int | float) and not isinstance(v, bool)
    }


def _json_record(obj, where: str) -> tuple[int, dict[str, float]]:
    if not isinstance(obj, dict):
        raise ReportError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if isinstance(obj.get("data"), dict) and "step" in obj:  # verl file logger
        step, data = obj["step"], obj["data"]
    elif "_step" in obj or "step" in obj:  # W&B history row
        step, data = obj.get("_step", obj.get("step")), obj
    else:
        raise ReportError(f"{where}: no step: expected {{'step', 'data'}} (verl file logger) or a '_step' key (W&B)")
    if isinstance(step, bool) or not isinstance(step, int | float) or step != int(step):
        raise ReportError(f"{where}: step {step!r} is not an integer")
    return int(step), _numeric_items(data)


def _frame_from_records(records: list[tuple[int, dict[str, float]]], where: Path | str) -> pd.DataFrame:
    if not records:
        raise ReportError(f"{where}: no log lines")
    steps = [step for step, _ in records]
    frame = pd.DataFrame([data for _, data in records], index=pd.Index(steps, name="step"))
    return merge_steps(frame)


def merge_steps(frame: pd.DataFrame) -> pd.DataFrame:
    # groupby().last() takes each column's last non-null value, so lines sharing a step combine.
    frame = frame.groupby(level=0, sort=True).last()
    frame.index = frame.index.astype(int).rename("step")
    return frame.dropna(axis=1, how="all")


def _load_json(path: Path) -> pd.DataFrame:
    text = path.read_text()
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ReportError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
        records = [_json_record(row, f"{path}: row {i}") for i, row in enumerate(rows)]
    else:
        lines = text.splitlines()
        last = max((i for i, line in enumerate(lines, start=1) if line.strip()), default=0)
        records = []
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                # A run still writing, or killed mid-write, leaves its last line cut off: the rest is good data.
                if lineno == last and records:
                    logger.warning("%s: line %d is cut off (%s); it is left out", path, lineno, exc.msg)
                    continue
                raise ReportError(f"{path}: line {lineno}: invalid JSON: {exc.msg}") from None
            records.append(_json_record(obj, f"{path}: line {lineno}"))
    return _frame_from_records(records, path)


def _load_csv(path: Path) -> pd.DataFrame:
    try:
        raw = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot parse CSV: {exc}") from None
    step_col = next((c for c in _CSV_STEP_COLUMNS if c in raw.columns), None)
    if step_col is None:
        raise ReportError(f"{path}: no step column ({', '.join(_CSV_STEP_COLUMNS)}); columns: {list(raw.columns)[:8]}")
    steps = pd.to_numeric(raw.pop(step_col), errors="coerce")
    bad = steps.isna() | (steps != steps.round())
    if bad.any():
        line = int(bad.to_numpy().nonzero()[0][0]) + 2  # +1 for the header, +1 for 1-based lines
        raise ReportError(f"{path}: line {line}: step column '{step_col}' is not an integer")
    metrics = [c for c in raw.columns if not c.startswith("_") and not c.endswith(("__MIN", "__MAX"))]
    frame = raw[metrics].apply(pd.to_numeric, errors="coerce")
    frame.index = pd.Index(steps.astype(int), name="step")
    prefixes = {c.split(" - ", 1)[0] for c in metrics if " - " in c}
    if len(prefixes) == 1 and all(" - " in c for c in metrics):  # W&B chart export: "<run name> - <metric>"
        frame.columns = [c.split(" - ", 1)[1] for c in metrics]
    return merge_steps(frame)


def _load_tensorboard(folder: Path) -> pd.DataFrame:
    """Scalars of the event files in ``folder`` (verl's ``tensorboard`` logger: tag = metric name, step = step)."""
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such folder")
    if not any(folder.glob("events.out.tfevents.*")):
        raise ReportError(f"{folder}: no events.out.tfevents.* file in this folder (give the folder that holds them)")
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    # Size 0 keeps every point: the default keeps a reservoir sample of 10,000 per tag.
    accumulator = EventAccumulator(str(folder), size_guidance={SCALARS: 0})
    accumulator.Reload()
    records = [
        (int(event.step), {tag: float(event.value)})
        for tag in accumulator.Tags()[SCALARS]
        for event in accumulator.Scalars(tag)
    ]
    if not records:
        raise ReportError(f"{folder}: the event files hold no scalars")
    return _frame_from_records(records, folder)


def _load_wandb(run_path: str) -> pd.DataFrame:
    """Every history row of a W&B run through the public API (``scan_history``: unsampled, unlike ``history``)."""
    where = f"wandb:{run_path}"
    try:
        import wandb
    except ImportError:
        raise ReportError(f"{where}: wandb is not installed (pip install wandb)") from None
    try:
        rows = list(wandb.Api().run(run_path).scan_history())
    except Exception as exc:  # the API raises its own errors, requests' and ValueError: all mean "cannot read"
        raise ReportError(f"{where}: cannot read the run's history: {type(exc).__name__}: {exc}") from None
    return _frame_from_records([_json_record(row, f"{where}: row {i}") for i, row in enumerate(rows)], where)


def load_run(source: RunSource | str | Path) -> pd.DataFrame:
    """One run's metrics -> DataFrame indexed by step (sorted ints), one float column per metric.

    A plain path is a log file, or a TensorBoard folder when it is a directory.
    """
    if not isinstance(source, RunSource):
        source = RunSource("tensorboard" if Path(source).is_dir() else "file", str(source))
    if source.kind == "wandb":
        return _load_wandb(source.location)
    path = Path(source.location)
    if source.kind == "tensorboard":
        return _load_tensorboard(path)
    if not path.is_file():
        raise ReportError(f"{path}: no such file")
    return _load_csv(path) if path.suffix.lower() == ".csv" else _load_json(path)


def describe_metrics(frame: pd.DataFrame) -> str:
    """Brief summary of what a run logged: metric families with counts."""
    families: dict[str, int] = {}
    for column in frame.columns:
        family = column.split("/", 1)[0] + "/*" if "/" in column else column
        families[family] = families.get(family, 0) + 1
    return ", ".join(f"{name} ({count})" for name, count in sorted(families.items())) or "no metrics"
