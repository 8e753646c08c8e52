"""The reference's PPO mini-batch arithmetic on verl 0.9.1: a step ending in a partial mini-batch.

The authors' verl 0.5 cut each rank's rows into mini-batches of ``ppo_mini_batch_size x rollout.n`` rows and ran
the remainder as one last, partial mini-batch whose loss counted by its share of rows (before gradient clipping).
verl 0.9.1 asserts whole mini-batches (``make_iterator``). Without forking it, each rank's remainder is padded up to
a whole mini-batch with copies whose ``response_mask`` is 0, and the reference loss (``recipe.pc.reference_loss``)
weights each micro-batch by its real rows against a whole mini-batch's, which gives the remainder its share. It
stays one ``update_actor`` call: verl steps the LR scheduler once per call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from verl import DataProto

from recipe.pc.settings import PCSettings


@dataclass(frozen=True)
class MiniBatchPlan:
    """How one rank's rows of a step split into PPO mini-batches."""

    rows_per_rank: int
    mini_rows_per_rank: int
    full: int  # whole mini-batches
    partial_rows: int  # rows of the last, partial mini-batch (0: none)

    @property
    def num_updates(self) -> int:
        return self.full + (1 if self.partial_rows else 0)

    @property
    def partial_weight(self) -> float:
        """The partial mini-batch's weight against a whole one: its share of rows."""
        return self.partial_rows / self.mini_rows_per_rank

    @property
    def padding_rows(self) -> int:
        return self.mini_rows_per_rank - self.partial_rows if self.partial_rows else 0


def mini_batch_plan(settings: PCSettings, dp_size: int, ppo_mini_batch_size: int, rows: int | None = None):
    """The plan for ``rows`` trained rows (default: a full step) over ``dp_size`` ranks."""
    rows = settings.train_rows if rows is None else rows
    mini_rows = ppo_mini_batch_size * settings.mini_batch_multiplier
    if rows % dp_size or mini_rows % dp_size:
        raise ValueError(f"{rows} rows or mini-batches of {mini_rows} rows do not split over {dp_size} ranks")
    per_rank, mini_per_rank = rows // dp_size, mini_rows // dp_size
    return MiniBatchPlan(per_rank, mini_per_rank, per_rank // mini_per_rank, per_rank % mini_per_rank)


def pad_partial_mini_batch(batch: DataProto, plan: MiniBatchPlan, dp_size: int) -> DataProto:
    """A copy of ``batch`` in which each rank's partial mini-batch is padded up to a whole one.

    verl hands rank r the r-th contiguous chunk and, without shuffling, cuts it into mini-batches in order, so rank
    r's remainder is the tail of its chunk (in batch order under ``algorithm.row_order=reference``); the padding rows
    go right after it. They are copies of the tail (real sequence lengths for the forward) whose ``response_mask``
    is 0: no loss tokens, no gradient, and the reference loss does not count them as rows.
    """
    if not plan.partial_rows:
        return batch
    per_rank, tail = plan.rows_per_rank, plan.partial_rows
    index, is_pad = [], []
    for rank in range(dp_size):
        own = rank * per_rank + np.arange(per_rank)
        index.append(np.concatenate([own, np.resize(own[-tail:], plan.padding_rows)]))
        is_pad.append(np.r_[np.zeros(per_rank, bool), np.ones(plan.padding_rows, bool)])
    padded = batch.select_idxs(np.concatenate(index))
    is_pad = torch.from_numpy(np.concatenate(is_pad))
    padded.batch["response_mask"][is_pad] = 0
    padded.batch["advantages"][is_pad] = 0.0
    return padded
