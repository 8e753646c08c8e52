"""What an allocator is, seen from the trainer's round loop, and the registry that picks one.

The trainer (``RayPCTrainer``) owns the loop: it turns each dataloader batch into prompts, asks the
allocator which requests to generate, runs them in ONE generation call with rewards, hands the rows
back, and trains once enough groups are ready. The allocator decides what is generated and what is
trained on, and owns whatever state that takes (a buffer, eviction marks), for checkpoints too.
Allocators are plain Python and numpy over DataProto rows: no Ray, no GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from verl import DataProto

from recipe.pc.compact import Segment
from recipe.pc.metrics import StepTally
from recipe.pc.replay_buffer import BufferCounters
from recipe.pc.settings import PCConfigError, PCSettings

# Request kinds: "pilot" rows are counted as exploration and tagged as pilots; the others are trained.
PILOT, COMMIT, GROUP = "pilot", "commit", "group"


@dataclass(frozen=True)
class Request:
    """``n`` rollouts for each row of ``prompts``; ``kind`` labels them in the counters and the dump."""

    prompts: DataProto
    n: int
    kind: str


class Allocator:
    """Base class: subclasses implement ``plan`` and ``absorb``; the rest defaults to "no state"."""

    name: ClassVar[str] = ""
    filter_timer: ClassVar[str] = "group_filter"  # the marked_timer name of ``absorb``

    def __init__(self, pc: PCSettings, rng: np.random.Generator):
        self.pc = pc
        self.rng = rng
        self._counters = BufferCounters()  # stays zero for allocators without a buffer

    @property
    def counters(self) -> BufferCounters:
        """The buffer counters reported each step (reset by the trainer after logging)."""
        return self._counters

    def plan(self, prompts: DataProto, tally: StepTally, step: int) -> list[Request]:
        """The requests of this round; ``prompts`` are the dataloader's new prompts (with ``uid``)."""
        raise NotImplementedError

    def absorb(self, generated: list[DataProto], tally: StepTally, step: int) -> list[Segment] | None:
        """Take back the rows of ``plan``'s requests (same order, rewards attached); return the training
        rows this round adds, whole groups sharing a ``uid``, or None."""
        raise NotImplementedError

    def is_last_step(self, global_steps: int, sampling_rounds: int, total_training_steps: int) -> bool:
        return global_steps >= total_training_steps

    def pending(self) -> int:
        """Prompts waiting for a later round (buffered groups)."""
        return 0

    def end_step(self, step: int) -> dict:
        """After the step's batch is assembled: drop what went stale; metrics that override the step's."""
        return {}

    def end_epoch(self, dataset) -> int:
        """At an epoch end: apply evictions to ``dataset``; the number of rows it removed."""
        return 0

    def drop_pending(self) -> int:
        """Forget everything waiting (``carry_over_epoch=false``); how many entries were dropped."""
        return 0

    def state_dict(self) -> dict:
        """Plain data merged into the checkpoint's top level (keys other than the trainer's)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore from the whole checkpoint state (read the keys ``state_dict`` wrote)."""

    def summary(self) -> str:
        return ""


ALLOCATORS: dict[str, type[Allocator]] = {}


def register(cls: type[Allocator]) -> type[Allocator]:
    if not cls.name or cls.name in ALLOCATORS:
        raise ValueError(f"allocator {cls.__name__} needs a unique name, got {cls.name!r}")
    ALLOCATORS[cls.name] = cls
    return cls


def make_allocator(pc: PCSettings, rng: np.random.Generator) -> Allocator:
    if pc.method not in ALLOCATORS:
        raise PCConfigError(f"algorithm.rollout_allocation={pc.method!r}; choose one of {sorted(ALLOCATORS)}")
    return ALLOCATORS[pc.method](pc, rng)


def metric_values(rows: DataProto, name: str) -> np.ndarray:
    """The per-rollout filter metric: a reward extra of that name, or the summed token-level score."""
    if name in rows.non_tensor_batch:
        return np.asarray(rows.non_tensor_batch[name], dtype=np.float64)
    if name == "seq_reward":
        return rows.batch["token_level_scores"].sum(dim=-1).double().numpy()
    raise PCConfigError(
        f"algorithm.agg_metric={name!r} is not in the reward's extra info "
        f"(have {sorted(k for k in rows.non_tensor_batch)}); return it from the reward function "
        "or use 'seq_reward' (the summed token-level score)"
    )


def concat_rows(parts: list[DataProto | None], what: str) -> DataProto:
    """Concatenate row sets that carry the same fields; the error names the fields that differ."""
    parts = [p for p in parts if p is not None]
    keys = [set(p.non_tensor_batch) for p in parts]
    tensor_keys = [set(p.batch.keys()) if p.batch is not None else set() for p in parts]
    for i in range(1, len(parts)):
        if keys[i] != keys[0] or tensor_keys[i] != tensor_keys[0]:
            diff = sorted((keys[i] ^ keys[0]) | (tensor_keys[i] ^ tensor_keys[0]))
            raise RuntimeError(f"cannot concatenate {what}: fields {diff} are present in only some of them")
    if len(parts) == 1:
        return parts[0]
    merged = DataProto.concat([DataProto(batch=p.batch, non_tensor_batch=p.non_tensor_batch) for p in parts])
    merged.meta_info = dict(parts[0].meta_info)
    return merged
