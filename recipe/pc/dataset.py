"""verl's RLHFDataset with prompt ids and eviction, loaded through ``data.custom_cls``.

Evicted prompts disappear from the dataset's length and indexing. Dataloader workers are re-forked
for every epoch (non-persistent), and the sampler re-reads ``len(dataset)`` at each epoch, so an
eviction applied between epochs reaches both.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from verl.utils.dataset.rl_dataset import RLHFDataset

logger = logging.getLogger(__name__)


class PilotCommitDataset(RLHFDataset):
    """Rows keyed by ``extra_info.index`` (their prompt id), with ``evict(ids)`` for later epochs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.prompt_ids = self._read_prompt_ids()
        self._check_ground_truths()
        self._active_rows = np.arange(len(self.prompt_ids))
        self.evicted_ids: set[int] = set()

    def _read_prompt_ids(self) -> np.ndarray:
        frame = self.dataframe
        if "extra_info" in frame.column_names:
            extra = frame.with_format("arrow")["extra_info"]  # respects any row selection, no decoding
            if pa.types.is_struct(extra.type) and extra.type.get_field_index("index") >= 0:
                ids = pc.struct_field(extra, "index")
                if ids.null_count:
                    missing = np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))
                    raise ValueError(
                        f"{self.data_files}: rows {missing[:10].tolist()} have no extra_info.index "
                        f"({len(missing)} in all); every row needs an integer prompt id"
                    )
                return ids.to_numpy().astype(np.int64)
        logger.warning("%s has no extra_info.index column: using row positions as prompt ids", self.data_files)
        return np.arange(len(frame), dtype=np.int64)

    def _check_ground_truths(self) -> None:
        """verl's reward loop reads ``reward_model["ground_truth"]`` from every row: a file whose reward_model has no
        such field would crash it mid-run, so it is refused here. A row whose ground truth is empty, null or not a
        string, or whose whole entry is null (``__getitem__``), is graded as wrong (``rewards/math_reward.py``,
        ``rewards/last_integer.py``); the start-up checks count those rows."""
        frame = self.dataframe
        if "reward_model" not in frame.column_names:
            return
        reward_model = frame.with_format("arrow")["reward_model"]
        if not pa.types.is_struct(reward_model.type) or reward_model.type.get_field_index("ground_truth") < 0:
            raise ValueError(f"{self.data_files}: reward_model has no ground_truth field (type {reward_model.type})")

    def __len__(self) -> int:
        active = getattr(self, "_active_rows", None)  # RLHFDataset.__init__ may ask before ids are read
        return super().__len__() if active is None else len(active)

    def __getitem__(self, item):
        row = int(self._active_rows[item])
        row_dict = super().__getitem__(row)
        row_dict["index"] = int(self.prompt_ids[row])
        if "reward_model" in row_dict and row_dict["reward_model"] is None:
            # A null entry has no ground truth to grade against: verl's reward managers and _validate index it, so
            # it becomes one with a null ground truth, which the reward functions grade as wrong.
            row_dict["reward_model"] = {"ground_truth": None}
        return row_dict

    @property
    def num_rows_total(self) -> int:
        return int(len(self.prompt_ids))

    def state_dict(self) -> dict:
        """Eviction state, saved with Pilot-Commit's checkpoint so a resumed run sees the same rows."""
        return {"active_rows": self._active_rows.copy(), "evicted_ids": sorted(self.evicted_ids)}

    def load_state_dict(self, state: dict) -> None:
        active = np.asarray(state["active_rows"], dtype=np.int64)
        if active.size and active.max() >= len(self.prompt_ids):
            raise ValueError(
                f"checkpointed dataset state refers to row {int(active.max())}, but {self.data_files} has only "
                f"{len(self.prompt_ids)} rows: resume with the same train files"
            )
        self._active_rows = active
        self.evicted_ids = set(int(i) for i in state["evicted_ids"])

    def evict(self, prompt_ids: Iterable[int]) -> int:
        """Remove these prompts from later epochs; returns how many rows left the dataset."""
        ids = np.fromiter((int(i) for i in prompt_ids), dtype=np.int64)
        if ids.size == 0:
            return 0
        keep = ~np.isin(self.prompt_ids[self._active_rows], ids)
        removed = int((~keep).sum())
        self._active_rows = self._active_rows[keep]
        self.evicted_ids.update(ids.tolist())
        return removed
