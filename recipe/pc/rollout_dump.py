"""Per-rollout dumps for ``trainer.rollout_data_dir``: every generated row, with its prompt id.

verl's own dump (``RayPPOTrainer._log_rollout_data``) writes only the trained batch, overwrites its
file on each call and carries no prompt id, so a step of several rounds would keep only the last
round and pass rates could not be tied to prompts. Here each generation call appends to
``<dir>/<global step>.jsonl`` one JSON object per generated rollout (padding rows never):
``step``, ``round``, ``prompt_id``, ``uid``, ``kind`` (``pilot``, ``commit`` or ``group`` for the
baselines), ``score`` (the summed token-level score), each scalar reward extra (e.g. ``acc``,
``pred``), ``data_source``, ``gts``, ``input`` and ``output``. ``python -m recipe.pc_tools.plan`` reads them.
"""

from __future__ import annotations

import json
import os

import numpy as np
from verl import DataProto

KINDS = ("pilot", "commit", "group")


def rollout_records(
    rows: DataProto, tokenizer, *, kind: str, step: int, round_index: int, extra_keys: list[str]
) -> list[dict]:
    """One JSON-ready dict per row of ``rows`` (rows with rewards); ``extra_keys``: the reward's extra fields."""
    if kind not in KINDS:
        raise ValueError(f"unknown rollout kind {kind!r}; expected one of {KINDS}")
    n = len(rows)
    inputs = tokenizer.batch_decode(rows.batch["prompts"], skip_special_tokens=True)
    outputs = tokenizer.batch_decode(rows.batch["responses"], skip_special_tokens=True)
    scores = rows.batch["token_level_scores"].sum(-1).double().tolist()
    columns: dict[str, list] = {}
    for key in extra_keys:
        values = rows.non_tensor_batch.get(key)
        if values is not None and len(values) == n and key != "score":
            columns[key] = [_plain(v) for v in values]
    reward_models = rows.non_tensor_batch.get("reward_model")
    gts = (
        [None if rm is None else rm.get("ground_truth") for rm in reward_models]
        if reward_models is not None
        else [None] * n
    )
    sources = rows.non_tensor_batch.get("data_source", np.full(n, None, dtype=object))
    prompt_ids = np.asarray(rows.non_tensor_batch["index"]).astype(np.int64).tolist()
    uids = rows.non_tensor_batch["uid"]
    records = []
    for i in range(n):
        record = {
            "step": int(step),
            "round": int(round_index),
            "prompt_id": prompt_ids[i],
            "uid": str(uids[i]),
            "kind": kind,
            "score": scores[i],
        }
        record.update({key: values[i] for key, values in columns.items()})
        record.update(
            {"data_source": _plain(sources[i]), "gts": _plain(gts[i]), "input": inputs[i], "output": outputs[i]}
        )
        records.append(record)
    return records


def append_records(dump_dir: str, step: int, records: list[dict]) -> str:
    """Append ``records`` to ``<dump_dir>/<step>.jsonl`` (several rounds of a step share one file)."""
    os.makedirs(dump_dir, exist_ok=True)
    path = os.path.join(dump_dir, f"{step}.jsonl")
    with open(path, "a", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def discard_after(dump_dir: str, step: int) -> list[str]:
    """Delete ``<dump_dir>/<s>.jsonl`` for every s > ``step``; the deleted paths.

    A run resumed from step ``step`` regenerates the later steps, and a new run (step 0) all of them:
    appending to files an earlier, interrupted run left would count those steps' prompts twice.
    """
    if not os.path.isdir(dump_dir):
        return []
    stale = []
    for name in os.listdir(dump_dir):
        stem, ext = os.path.splitext(name)
        if ext == ".jsonl" and stem.isdigit() and int(stem) > step:
            stale.append(os.path.join(dump_dir, name))
    for path in stale:
        os.remove(path)
    return sorted(stale)


def _plain(value):
    """numpy scalars and bytes to JSON values; anything else non-scalar to its string form."""
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
