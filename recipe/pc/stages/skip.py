"""GRESO-style skipping: leave out, before generation, prompts whose recent groups all agreed.

Per prompt the history keeps the streak of its most recent consecutive zero-variance groups of one kind,
"easy" (all rollouts agree on a value above 0) or "hard" (at or below 0), counting the groups the
allocator reports: PC's pilots (and screens that agreed), every generated GRPO/DAPO group; not PC's
commits. A prompt with a streak of ``z`` is skipped with probability ``1 - max(p ** z, explore_floor)``,
``p`` being the easy or hard exploration probability: unseen prompts are always kept and the floor makes
every prompt come back now and then. After each step past the first epoch, ``p_easy`` and ``p_hard``
move by ``p_step`` towards keeping the share of all-correct groups at ``target / 3`` and of all-wrong
ones at ``2 * target / 3``, within [p_min, p_max].
Plain numpy and Python: no Ray, no GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from verl import DataProto

from recipe.pc import checkpoint as ckpt
from recipe.pc import metric_names as m
from recipe.pc.allocation import GroupStats
from recipe.pc.allocators.base import RoundResult, concat_rows
from recipe.pc.errors import PCConfigError
from recipe.pc.registry import KeyGroup, in_unit_interval, key
from recipe.pc.stages.prompt_filter import PromptFilter, register_prompt_filter


@dataclass(frozen=True)
class SkipSettings(KeyGroup):
    """The skip filter's keys, ``algorithm.skip.*``; ``enable=true`` picks this filter (``algorithm.prompt_filter``
    left null)."""

    name = "skip"
    enable: bool = key("algorithm.skip.enable", False)
    explore_floor: float = key("algorithm.skip.explore_floor", 0.01)  # least probability of trying a prompt again
    # Exploration probabilities (easy, hard) at the start: a prompt with a streak of z is skipped with
    # probability 1 - p ** z.
    p_init: float = key("algorithm.skip.p_init", 0.5)
    p_step: float = key("algorithm.skip.p_step", 0.01)  # their change after each step past the first epoch
    p_min: float = key("algorithm.skip.p_min", 0.05)
    p_max: float = key("algorithm.skip.p_max", 0.95)
    # Share of all-agreeing groups aimed for (a third all-correct, two thirds all-wrong).
    target_zero_variance: float = key("algorithm.skip.target_zero_variance", 0.25)

    def validate(self) -> None:
        if not 0.0 < self.explore_floor <= 1.0:
            raise PCConfigError(
                f"algorithm.skip.explore_floor={self.explore_floor} must lie in (0, 1]: it is the least "
                "probability that a skippable prompt is tried again"
            )
        if not 0.0 < self.p_min <= self.p_init <= self.p_max <= 1.0:
            raise PCConfigError(
                f"algorithm.skip.p_min={self.p_min}, algorithm.skip.p_init={self.p_init} and "
                f"algorithm.skip.p_max={self.p_max} must satisfy 0 < p_min <= p_init <= p_max <= 1"
            )
        in_unit_interval("algorithm.skip.p_step", self.p_step)
        in_unit_interval("algorithm.skip.target_zero_variance", self.target_zero_variance)

    def prompt_filter(self) -> str | None:
        return "skip" if self.enable else None

    def check(self, pc) -> None:
        if self.enable and pc.prompt_filter not in (None, "skip"):
            raise PCConfigError(
                f"algorithm.skip.enable=true picks the skip prompt filter and algorithm.prompt_filter="
                f"{pc.prompt_filter} another: set one of them"
            )


def skip_probability(streak: np.ndarray, p_easy: float, p_hard: float, floor: float) -> np.ndarray:
    """Per prompt: 1 - max(p ** |streak|, floor); a positive streak is easy, a negative one hard, 0 unseen."""
    streak = np.asarray(streak, dtype=np.int64)
    p = np.where(streak > 0, p_easy, p_hard)
    keep = np.maximum(p ** np.abs(streak), floor)
    return np.where(streak == 0, 0.0, 1.0 - keep)


def update_streaks(streaks: dict[int, int], stats: GroupStats) -> tuple[int, int]:
    """Fold one round's groups into ``streaks`` (in place); the counts of all-correct and all-wrong groups."""
    flat = (stats.std == 0) & (stats.count > 1)
    kind = np.where(stats.mean > 0, 1, -1)
    for pid, is_flat, k in zip(stats.prompt_ids.tolist(), flat.tolist(), kind.tolist(), strict=True):
        if not is_flat:
            streaks.pop(pid, None)
            continue
        old = streaks.get(pid, 0)
        streaks[pid] = old + k if old * k > 0 else k  # a streak of the other kind starts again at 1
    return int((flat & (kind > 0)).sum()), int((flat & (kind < 0)).sum())


def adapt(p: float, observed_ratio: float, target_ratio: float, rule: SkipSettings) -> float:
    """One step of an exploration probability: lower (skip more) when too many such groups were seen."""
    p = p - rule.p_step if observed_ratio > target_ratio else p + rule.p_step
    return float(min(max(p, rule.p_min), rule.p_max))


def admit(waiting: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Positions of ``kept`` (one dataloader batch's kept prompt ids) to add to the pool of prompts waiting for a
    round: all but those already waiting. The pool outlives an epoch, so a prompt can be drawn again before its
    round comes; generating it twice in one round would give it two groups."""
    return np.flatnonzero(~np.isin(np.asarray(kept, dtype=np.int64), np.asarray(waiting, dtype=np.int64)))


class PromptSkipper:
    """The skip history of a run, and the counts of one step; its state goes into the checkpoint."""

    def __init__(self, rule: SkipSettings):
        self.rule = rule
        self.streaks: dict[int, int] = {}
        self.p_easy = self.p_hard = rule.p_init
        self._step_counts = np.zeros(4, dtype=np.int64)  # skipped, observed groups, all-correct, all-wrong
        self.total_skipped = 0

    def keep_mask(self, prompt_ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Which of these prompts to generate; the others are skipped (and counted)."""
        streak = np.array([self.streaks.get(int(i), 0) for i in prompt_ids], dtype=np.int64)
        p_skip = skip_probability(streak, self.p_easy, self.p_hard, self.rule.explore_floor)
        keep = rng.random(len(streak)) >= p_skip
        skipped = int((~keep).sum())
        self._step_counts[0] += skipped
        self.total_skipped += skipped
        return keep

    @property
    def skipped_this_step(self) -> int:
        return int(self._step_counts[0])

    def observe(self, stats: list[GroupStats]) -> None:
        for s in stats:
            easy, hard = update_streaks(self.streaks, s)
            self._step_counts[1:] += (s.prompt_ids.shape[0], easy, hard)

    def end_step(self, epoch: int) -> dict:
        skipped, groups, easy, hard = self._step_counts.tolist()
        if epoch > 0 and groups:  # the first epoch only gathers history, as GRESO does
            alpha = self.rule.target_zero_variance
            self.p_easy = adapt(self.p_easy, easy / groups, alpha / 3, self.rule)
            self.p_hard = adapt(self.p_hard, hard / groups, 2 * alpha / 3, self.rule)
        self._step_counts[:] = 0
        return {
            m.SKIPPED: skipped,
            m.SKIP_TOTAL: self.total_skipped,
            m.SKIP_P_EASY: self.p_easy,
            m.SKIP_P_HARD: self.p_hard,
            m.SKIP_HISTORY_PROMPTS: len(self.streaks),
        }

    def state_dict(self) -> dict:
        ids = sorted(self.streaks)
        return {
            "prompt_id": ids,
            "streak": [self.streaks[i] for i in ids],
            "p_easy": self.p_easy,
            "p_hard": self.p_hard,
            "total_skipped": self.total_skipped,
            "step_counts": self._step_counts.tolist(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.streaks = {int(i): int(z) for i, z in zip(state["prompt_id"], state["streak"], strict=True)}
        self.p_easy, self.p_hard = float(state["p_easy"]), float(state["p_hard"])
        self.total_skipped = int(state["total_skipped"])
        self._step_counts = np.asarray(state["step_counts"], dtype=np.int64)

    def summary(self) -> str:
        return f"skip_history={len(self.streaks)} p_easy={self.p_easy:.4f} p_hard={self.p_hard:.4f}"


@register_prompt_filter
class SkippingFilter(PromptFilter):
    """GRESO skipping as the trainer's prompt filter: the kept prompts of each dataloader batch wait in a pool and
    go into rounds of ``data.gen_batch_size``.

    Kept prompts short of a round at an epoch's end wait for the next epoch's: given as a round of their own, they
    made a step of many small rounds once most prompts were skipped.
    """

    name = "skip"
    state_key = "skip"
    keys = SkipSettings

    @classmethod
    def from_settings(cls, pc) -> SkippingFilter:
        return cls(pc.group(SkipSettings), pc.gen_batch_size)

    def __init__(self, rule: SkipSettings, gen_batch_size: int):
        self.skipper = PromptSkipper(rule)
        self.gen_batch_size = gen_batch_size
        self.pool: DataProto | None = None  # kept prompts not yet in a round

    def rounds(self, batches: Iterator[DataProto], rng: np.random.Generator) -> Iterator[DataProto]:
        for prompts in batches:
            keep = np.flatnonzero(self.skipper.keep_mask(prompts.non_tensor_batch["index"], rng))
            if self.pool is not None:
                keep = keep[admit(self.pool.non_tensor_batch["index"], prompts.non_tensor_batch["index"][keep])]
            if keep.size:
                kept = prompts.select_idxs(keep)
                self.pool = kept if self.pool is None else concat_rows([self.pool, kept], what="kept prompts")
            # The pool lives here: a checkpoint taken at a yield saves what is left of it.
            while self.pool is not None and len(self.pool) >= self.gen_batch_size:
                pool, size = self.pool, self.gen_batch_size
                self.pool = pool.select_idxs(np.arange(size, len(pool))) if len(pool) > size else None
                yield pool.select_idxs(np.arange(size))

    def observe(self, result: RoundResult) -> None:
        self.skipper.observe(result.group_stats)

    def end_step(self, epoch: int) -> dict:
        return self.skipper.end_step(epoch)

    def end_epoch(self, evicted_ids) -> None:
        """Kept prompts waiting for a round that the epoch's end just evicted are not generated."""
        if self.pool is None or not evicted_ids:
            return
        waiting = np.flatnonzero(~np.isin(self.pool.non_tensor_batch["index"], list(evicted_ids)))
        self.pool = self.pool.select_idxs(waiting) if waiting.size else None

    def state_dict(self) -> dict:
        pool = None if self.pool is None else ckpt.proto_to_plain(self.pool)
        return {**self.skipper.state_dict(), "pool": pool}

    def load_state_dict(self, state: dict) -> None:
        self.skipper.load_state_dict(state)
        self.pool = None if state["pool"] is None else ckpt.proto_from_plain(state["pool"])

    def summary(self) -> str:
        return self.skipper.summary()

    def exhaustion_hint(self, prompts: int, step: int, epochs: int) -> str:
        """Why skipping can end a run early: a pass that skips most prompts costs no generation but still counts
        as an epoch."""
        return (
            f"; with algorithm.skip.enable every pass over the {prompts} prompts is an epoch however many it skips: "
            f"step {step} was unfinished after {epochs} epochs and {self.skipper.skipped_this_step} skipped prompt "
            "draws; raise trainer.total_epochs"
        )
