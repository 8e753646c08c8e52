"""What an allocator is, seen from the trainer's round loop, and the registry that picks one.

A round goes: the trainer hands the allocator the dataloader's new prompts and a view of the step (``StepView``);
``plan`` answers with a ``RoundPlan``, named requests of rollouts plus a context only the allocator reads; the trainer
generates every request in ONE call with rewards and hands the rows back by name to ``absorb``, which returns a
``RoundResult``: the training rows the round adds (whole groups sharing a ``uid``), the prompts they belong to, the
statistics of every group it classified and its counts. Only the trainer folds results into its step state; the
stages (skipping) read the result. An allocator owns whatever state its decisions take (a buffer, eviction marks),
reports its own metrics once a step, and encodes its state for checkpoints under its own key.

Allocators are plain Python and numpy over DataProto rows: no Ray, no GPU. A new allocator is one module with a
``@register``-ed subclass; its class methods answer the settings questions that depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from verl import DataProto

from recipe.pc.allocation import GroupStats, GroupVerdict
from recipe.pc.compact import Segment
from recipe.pc.errors import PCConfigError
from recipe.pc.registry import ALLOCATORS, KeyGroup, register_keys
from recipe.pc.settings import PCSettings

# Request kinds: "pilot" rows count as exploration and are tagged as pilots; "commit" and "group" rows may train.
PILOT, COMMIT, GROUP = "pilot", "commit", "group"


@dataclass(frozen=True)
class Request:
    """``n`` rollouts for each row of ``prompts``; ``absorb`` gets them back under ``name``.

    A request with no rows (no prompts, or ``n == 0``) is not generated: ``absorb`` gets back zero rows that carry the
    prompts' fields only, no rollout fields.
    """

    name: str
    prompts: DataProto
    n: int
    kind: str

    @property
    def rows(self) -> int:
        return len(self.prompts) * self.n


@dataclass(frozen=True)
class RoundPlan:
    """A round's requests; a plan without rows (``RoundPlan(())`` included) skips the generation call."""

    requests: tuple[Request, ...]
    context: object = None  # the allocator's own, handed back to absorb untouched


@dataclass(frozen=True)
class StepView:
    """The step so far, as an allocator may see it: which step, how many prompts it still needs, which it has."""

    step: int
    needed: int
    committed_ids: frozenset


@dataclass(frozen=True)
class Verdict:
    """One classified set of groups (a pilot, a screen, a round of baseline groups) and its metric values.

    ``filter_passed``: the groups through the allocator's filter when that is not ``verdict.passed`` (GRPO trains
    every group and names those a spread filter would keep); the cost model's filter pass rate counts them.
    """

    verdict: GroupVerdict
    values: np.ndarray
    filter_passed: np.ndarray | None = None

    @property
    def passes(self) -> int:
        return int((self.verdict.passed if self.filter_passed is None else self.filter_passed).sum())


@dataclass
class RoundResult:
    segments: list[Segment] = field(default_factory=list)  # training rows this round adds, whole groups
    committed_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # their prompts
    verdicts: list[Verdict] = field(default_factory=list)
    screened_out: int = 0  # prompts whose screening pilot all agreed: no rest of the pilot
    downsampled_rollouts: int = 0  # generated for a trained group but left out of it
    commit_ages: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # steps since the pilot

    @property
    def group_stats(self) -> list[GroupStats]:
        """Every rolled-out group the allocator classified this round, in order."""
        return [v.verdict.stats for v in self.verdicts]


class Allocator:
    """Base class: subclasses implement ``plan`` and ``absorb``; the rest defaults to "no state"."""

    name: ClassVar[str] = ""
    filter_timer: ClassVar[str] = "group_filter"  # the marked_timer name of ``absorb``
    # Whether a partial batch and its round count survive an epoch end even with carry_over_epoch=false.
    keeps_partial_batch_at_epoch_end: ClassVar[bool] = False
    # Its own config keys (a ``KeyGroup`` with a default for each, under algorithm.<name>.*), read with
    # ``pc.group(cls.keys)``; None: none.
    keys: ClassVar[type[KeyGroup] | None] = None

    # ------------------------------------------------------------------ settings hooks
    @classmethod
    def group_size(cls, pc: PCSettings) -> int:
        """Rows a trained prompt's group has."""
        return pc.n_commit

    @classmethod
    def group_size_range(cls, pc: PCSettings) -> tuple[int, int]:
        """The fewest and the most rows a trained group may have; a full step has ``train_rows`` whatever they are."""
        size = cls.group_size(pc)
        return size, size

    @classmethod
    def idle_rounds(cls, pc: PCSettings) -> int:
        """Rounds a step may start with that train nothing (a pilot-only round when nothing is buffered)."""
        return 0

    @classmethod
    def state_settings(cls, pc: PCSettings) -> dict:
        """The settings its checkpointed state depends on, by name: a resume with other values is refused."""
        return {}

    @classmethod
    def check_settings(cls, pc: PCSettings) -> None:
        """Refuse settings this allocator cannot run; the message names the key."""
        if pc.pilot.screen_n is not None:
            raise PCConfigError(
                f"algorithm.exploration.screen_n={pc.pilot.screen_n} screens pilots, which only "
                f"algorithm.rollout_allocation=pilot_commit runs (not {cls.name!r}); set it to null"
            )

    # ------------------------------------------------------------------ a round
    def __init__(self, pc: PCSettings, rng: np.random.Generator):
        self.pc = pc
        self.rng = rng

    def plan(self, prompts: DataProto, view: StepView) -> RoundPlan:
        """The requests of this round; ``prompts`` are the dataloader's new prompts (with ``uid``)."""
        raise NotImplementedError

    def absorb(self, plan: RoundPlan, generated: dict[str, DataProto], view: StepView) -> RoundResult:
        """Take back the rows of ``plan``'s requests by name (rewards attached)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ step, epoch and run ends
    def is_last_step(self, global_steps: int, sampling_rounds: int, total_training_steps: int) -> bool:
        return global_steps >= total_training_steps

    def pending(self) -> int:
        """Prompts waiting for a later round (buffered groups)."""
        return 0

    def end_step(self, step: int) -> dict:
        """After the step's batch is assembled: drop what went stale; this step's metrics of the allocator."""
        return {}

    def end_epoch(self, dataset) -> int:
        """At an epoch end: apply evictions to ``dataset``; the number of rows it removed."""
        return 0

    def drop_pending(self) -> int:
        """Forget everything waiting (``carry_over_epoch=false``); how many entries were dropped."""
        return 0

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Plain data; saved under the checkpoint's ``allocator`` key."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` wrote."""

    def summary(self) -> str:
        return ""


def register(cls: type[Allocator]) -> type[Allocator]:
    """Add ``cls`` to the allocators ``algorithm.rollout_allocation`` names, and its key group to the config."""
    if not cls.name or cls.name in ALLOCATORS:
        raise ValueError(f"allocator {cls.__name__} needs a unique name, got {cls.name!r}")
    if cls.keys is not None:
        register_keys(cls.keys)
    ALLOCATORS[cls.name] = cls
    return cls


def make_allocator(pc: PCSettings, rng: np.random.Generator) -> Allocator:
    return pc.allocator(pc, rng)


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
