"""The Pilot-Commit state file: plain data only, versioned, written atomically.

The file is a ``torch.save`` of tensors, numbers, strings, lists and dicts, so it loads with
``torch.load(weights_only=True)``: reading it never runs code. Numpy arrays and the per-row objects
of the buffered rollouts (prompts, reward extras) are turned into that vocabulary by ``to_plain``.
States written before this format (full pickles) are refused; ``python -m recipe.pc.convert_state``
converts one that the user trusts.

Version 2 keeps the allocator's state under ``allocator`` (``{"name": ..., "state": ...}``); version 1 merged it
into the top level, and ``read_state`` moves it there when it reads one.
"""

from __future__ import annotations

import logging
import os
import pickle
import pickletools
import zipfile

import numpy as np
import torch
from verl import DataProto

logger = logging.getLogger(__name__)

STATE_FILE = "pilot_commit_state.pt"
FORMAT = "pilot-commit-state"
VERSION = 2
# The top-level keys the trainer writes; in a version-1 state every other key was the allocator's.
TRAINER_KEYS = ("format", "version", "config", "rng", "dataset", "skip", "counters")
_TAG = "__pc__"  # marks an encoded value that plain data cannot spell directly
CONVERT_HINT = "python -m recipe.pc.convert_state {path} --rollout-n <actor_rollout_ref.rollout.n>"


class CheckpointError(RuntimeError):
    """A state file that cannot be resumed from; the message names the file and the reason."""


# ------------------------------------------------------------------ plain-data encoding
def to_plain(obj, where: str = "state"):
    """``obj`` as tensors, numbers, strings, lists and dicts; numpy values and tuples are tagged."""
    if obj is None or isinstance(obj, (bool, int, float, str, torch.Tensor)):
        return obj
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            return {_TAG: "objects", "shape": list(obj.shape), "items": [to_plain(x, where) for x in obj.ravel()]}
        if obj.dtype.kind in "biuf":
            return {_TAG: "array", "data": torch.from_numpy(np.ascontiguousarray(obj).copy())}
        if obj.dtype.kind == "U":
            return {_TAG: "strings", "shape": list(obj.shape), "items": obj.ravel().tolist()}
        raise TypeError(f"{where}: numpy arrays of dtype {obj.dtype} cannot be stored")
    if isinstance(obj, np.generic):
        return {_TAG: "scalar", "dtype": obj.dtype.str, "value": obj.item()}
    if isinstance(obj, list):
        return [to_plain(x, where) for x in obj]
    if isinstance(obj, tuple):
        return {_TAG: "tuple", "items": [to_plain(x, where) for x in obj]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and _TAG not in obj:
            return {k: to_plain(v, f"{where}.{k}") for k, v in obj.items()}
        return {_TAG: "dict", "items": [[to_plain(k, where), to_plain(v, where)] for k, v in obj.items()]}
    raise TypeError(f"{where}: a {type(obj).__name__} cannot be stored as plain data")


def from_plain(obj):
    if isinstance(obj, list):
        return [from_plain(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    tag = obj.get(_TAG)
    if tag is None:
        return {k: from_plain(v) for k, v in obj.items()}
    if tag == "array":
        return obj["data"].numpy()
    if tag in ("objects", "strings"):
        items = [from_plain(x) for x in obj["items"]] if tag == "objects" else obj["items"]
        out = np.empty(len(items), dtype=object if tag == "objects" else None)
        if tag == "objects":
            out[:] = items if items else []
        else:
            out = np.array(items)
        return out.reshape(obj["shape"])
    if tag == "scalar":
        return np.dtype(obj["dtype"]).type(obj["value"])
    if tag == "tuple":
        return tuple(from_plain(x) for x in obj["items"])
    if tag == "dict":
        return {from_plain(k): from_plain(v) for k, v in obj["items"]}
    raise ValueError(f"unknown encoded value {tag!r}")


_PLAIN_KEYS = (str, int, float, bool)
PLAIN_HINT = (
    "return plain data from state_dict (numbers, strings, None, torch tensors, and lists, tuples and dicts of them): "
    "keep rows as recipe.pc.checkpoint.proto_to_plain(rows) and rebuild them with proto_from_plain in "
    "load_state_dict; numpy values go through recipe.pc.checkpoint.to_plain and from_plain"
)


def check_plain(obj, where: str) -> None:
    """Refuse, naming its key path, anything ``torch.load(weights_only=True)`` would not read back: a component's
    state is checked when it is saved, not when a resume fails on it."""
    if obj is None or isinstance(obj, (bool, int, float, str, torch.Tensor)):
        return
    if isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            check_plain(item, f"{where}[{i}]")
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, _PLAIN_KEYS):
                raise CheckpointError(
                    f"{where}: a key of type {type(k).__name__} ({k!r}) is not plain data; {PLAIN_HINT}"
                )
            check_plain(v, f"{where}.{k}")
        return
    what = "a DataProto" if isinstance(obj, DataProto) else f"a {type(obj).__module__}.{type(obj).__qualname__}"
    raise CheckpointError(f"{where}: {what} is not plain data and would not load on resume; {PLAIN_HINT}")


def proto_to_plain(proto: DataProto) -> dict:
    """A DataProto as plain data (its tensors, its per-row values and meta info encoded by ``to_plain``)."""
    tensors = None if proto.batch is None else {k: v for k, v in proto.batch.items()}
    return {
        "tensors": tensors,
        "non_tensor": {k: to_plain(v, k) for k, v in proto.non_tensor_batch.items()},
        "meta_info": to_plain(proto.meta_info, "meta_info"),
    }


def proto_from_plain(d: dict) -> DataProto:
    """The DataProto ``proto_to_plain`` encoded."""
    non_tensor = {k: from_plain(v) for k, v in d["non_tensor"].items()}
    tensors = d["tensors"]
    if tensors:
        return DataProto.from_dict(tensors=tensors, non_tensors=non_tensor, meta_info=from_plain(d["meta_info"]))
    return DataProto(batch=None, non_tensor_batch=non_tensor, meta_info=from_plain(d["meta_info"]))


# ------------------------------------------------------------------ files
def write_state(state: dict, path: str) -> None:
    """Write to a temporary name, flush to disk, then rename: a reader sees the old file or the whole new one."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def read_state(path: str, expected_config: dict) -> dict:
    """Load and check a state file without running code from it; CheckpointError says what is wrong."""
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as err:
        names = pickled_globals(path)
        if any(n.startswith(("recipe.pc.", "verl.")) for n in names):
            raise CheckpointError(
                f"{path} holds pickled objects ({', '.join(sorted(names))}), which are not loaded because unpickling "
                "can run code. Pilot-Commit releases before the plain-data format wrote their state this way; if "
                f"you trust this checkpoint, convert it with: {CONVERT_HINT.format(path=path)}"
            ) from None
        raise CheckpointError(
            f"{path} holds pickled objects beyond plain data ({', '.join(sorted(names)) or err}); it is not a "
            "Pilot-Commit state and is not loaded"
        ) from None
    except Exception as err:  # torch reports a cut or damaged zip archive in several ways
        raise CheckpointError(
            f"{path} is corrupted or truncated ({type(err).__name__}: {err}); remove it to resume from the previous "
            "complete checkpoint, or point trainer.resume_from_path at another one"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a Pilot-Commit state (no format={FORMAT!r} field)")
    version = state.get("version")
    if not isinstance(version, int) or version > VERSION or version < 1:
        raise CheckpointError(
            f"{path} has state version {version!r}; this release reads version {VERSION} (upgrade pilot-commit "
            "to resume from a newer one)"
        )
    if version == 1:
        state = upgrade_v1(state)
    saved = state.get("config", {})
    mismatch = [
        f"{k}: saved {saved.get(k)!r}, configured {v!r}" for k, v in expected_config.items() if saved.get(k) != v
    ]
    if mismatch:
        raise CheckpointError(
            f"{path} was written with another configuration ({'; '.join(mismatch)}); its buffered groups do not "
            "fit this run"
        )
    return state


def upgrade_v1(state: dict) -> dict:
    """A version-1 state in the version-2 layout. Version 1 did not name its allocator; a buffer means Pilot-Commit,
    whose keys were the only allocator keys it wrote (the baselines wrote none)."""
    own = {k: v for k, v in state.items() if k not in TRAINER_KEYS}
    upgraded = {k: v for k, v in state.items() if k in TRAINER_KEYS}
    upgraded["version"] = VERSION
    upgraded["allocator"] = {"name": "pilot_commit" if "buffer" in own else None, "state": own}
    return upgraded


def pickled_globals(path: str) -> set[str]:
    """Names of the classes/functions a torch.save pickle refers to, read without unpickling."""
    try:
        with zipfile.ZipFile(path) as zf:
            name = next(n for n in zf.namelist() if n.endswith("data.pkl"))
            data = zf.read(name)
    except (zipfile.BadZipFile, StopIteration, OSError):
        return set()
    found, strings = set(), []
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name == "GLOBAL":
                found.add(arg.replace(" ", "."))
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.add(f"{strings[-2]}.{strings[-1]}")
            elif isinstance(arg, str):
                strings.append(arg)
    except Exception:  # a damaged stream: report what was read so far
        pass
    return found


def has_state(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, STATE_FILE))


def step_folders(root: str) -> dict[int, str]:
    """``global_step_N`` folders under ``root``, by N."""
    out = {}
    if os.path.isdir(root):
        for name in os.listdir(root):
            step = name.removeprefix("global_step_")
            if name.startswith("global_step_") and step.isdigit():
                out[int(step)] = os.path.join(root, name)
    return out


def previous_complete(root: str, before: int) -> str | None:
    """The newest folder before step ``before`` holding both an actor checkpoint and a PC state."""
    for step, folder in sorted(step_folders(root).items(), reverse=True):
        if step < before and has_state(folder) and os.path.isdir(os.path.join(folder, "actor")):
            return folder
    return None


def prune_states(root: str, keep: set[str]) -> list[str]:
    """Delete the PC states of folders whose actor checkpoint verl's retention removed; never those in ``keep``."""
    removed = []
    keep = {os.path.abspath(k) for k in keep}
    for folder in step_folders(root).values():
        if os.path.abspath(folder) in keep or os.path.isdir(os.path.join(folder, "actor")) or not has_state(folder):
            continue
        os.remove(os.path.join(folder, STATE_FILE))
        removed.append(folder)
    if removed:
        logger.info("removed the Pilot-Commit states of %d checkpoints verl no longer keeps: %s", len(removed), removed)
    return removed


_NUMPY_DATA_GLOBALS = [
    np.zeros(1).__reduce__()[0],  # numpy's array reconstructor: builds an array from its dtype and bytes
    np.ndarray,
    np.dtype,
    *{type(np.dtype(t)) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.float32, np.float64)},
]


def load_plain_data(path: str):
    """A torch.save file of plain data and numeric numpy arrays (the dataloader state), without running code."""
    try:
        with torch.serialization.safe_globals(_NUMPY_DATA_GLOBALS):
            return torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as err:
        raise CheckpointError(f"{path} holds objects beyond plain data and is not loaded: {err}") from None
