"""Will a step's rows split over verl 0.9.1's data-parallel ranks, PPO mini-batches and micro-batches?

The trained batch goes to the actor as one ``update_actor`` call. verl sizes a PPO mini-batch as
``ppo_mini_batch_size * rollout.n`` rows and asserts that it divides each rank's rows (``make_iterator``); with
dynamic batch sizes off its engine also asserts that each rank's rows of a log-prob call and of a mini-batch split
into whole micro-batches (``verl/workers/engine/utils.py``, ``prepare_micro_batches``). These checks run before any
GPU work, and an unfilled batch is cut to ``trainable_unit`` prompts so that it splits too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from omegaconf import OmegaConf

from recipe.pc.allocation import DownsampleSettings
from recipe.pc.registry import strict
from recipe.pc.settings import PCConfigError, PCSettings


@dataclass(frozen=True)
class MicroBatch:
    """A per-GPU micro-batch size (``key``) splitting the rows that each of ``dp_size`` ranks gets; None: unset."""

    key: str
    size: int | None
    dp_size: int

    def check_divides(self, rows_per_rank: int, arithmetic: str) -> None:
        if rows_per_rank % self.size:
            works = max(d for d in range(1, min(self.size, rows_per_rank) + 1) if rows_per_rank % d == 0)
            raise PCConfigError(
                f"{self.key}={self.size} does not divide {arithmetic}: verl asserts each rank's rows split into "
                f"whole micro-batches when dynamic batch sizes are off; set {self.key}={works} (a divisor of "
                f"{rows_per_rank}) or turn dynamic batch sizes on"
            )


@dataclass(frozen=True)
class MicroBatches:
    """The micro-batch sizes verl 0.9.1's engine splits by count (those with dynamic batch sizes on are left out).

    ``step``: calls on a step's whole batch (old log-probs; reference log-probs with a separate reference model);
    ``update``: each PPO mini-batch of the actor update.
    """

    step: tuple[MicroBatch, ...] = ()
    update: MicroBatch | None = None

    def set_step(self) -> list[MicroBatch]:
        return [m for m in self.step if m.size is not None]


def micro_batches(config, actor_dp: int, ref_dp: int | None) -> MicroBatches:
    """The micro-batch sizes of ``config``; ``ref_dp``: the reference model's ranks, or None without a separate
    reference model (none, or a LoRA actor run without its adapter, which uses the log-prob size)."""
    prefix = "actor_rollout_ref"
    actor_dynamic = OmegaConf.select(config, f"{prefix}.actor.use_dynamic_bsz", default=False)
    log_prob_dynamic = OmegaConf.select(config, f"{prefix}.rollout.log_prob_use_dynamic_bsz", default=actor_dynamic)
    if bool(actor_dynamic) != bool(log_prob_dynamic):
        # verl asserts this when the actor worker starts; say so before the cluster does.
        raise PCConfigError(
            f"{prefix}.actor.use_dynamic_bsz={actor_dynamic} and {prefix}.rollout.log_prob_use_dynamic_bsz="
            f"{log_prob_dynamic} must agree: verl's actor worker runs both with one engine setting"
        )

    def entry(key: str, dp_size: int) -> MicroBatch:
        return MicroBatch(key, strict(key, OmegaConf.select(config, key, default=None), int | None), dp_size)

    step = []
    update = None
    if not actor_dynamic:
        update = entry(f"{prefix}.actor.ppo_micro_batch_size_per_gpu", actor_dp)
        step.append(entry(f"{prefix}.rollout.log_prob_micro_batch_size_per_gpu", actor_dp))
    if ref_dp is not None and not OmegaConf.select(config, f"{prefix}.ref.log_prob_use_dynamic_bsz", default=False):
        step.append(entry(f"{prefix}.ref.log_prob_micro_batch_size_per_gpu", ref_dp))
    for m in (*step, update):
        if m is not None and m.size is not None and m.size < 1:
            raise PCConfigError(f"{m.key}={m.size} must be at least 1")
    return MicroBatches(tuple(step), update)


def trainable_unit(pc: PCSettings, dp_size: int, ppo_mini_batch_size: int, micro: MicroBatches | None = None) -> int:
    """Smallest prompt count whose rows split over the ranks, into whole PPO mini-batches and, per rank, into whole
    log-prob micro-batches: an unfilled batch is cut to a multiple of it, so it always splits.

    A large micro size makes this unit larger (up to the whole batch, when no unfilled batch trains) rather than
    being refused: the full batch is what ``check_parallel_sizes`` requires to split.
    """
    rows_unit = math.lcm(ppo_mini_batch_size * pc.mini_batch_multiplier, dp_size)
    if pc.reference.partial_mini_batch:  # a partial last mini-batch is allowed: only the ranks constrain the rows
        rows_unit = dp_size
    for m in (micro or MicroBatches()).set_step():
        rows_unit = math.lcm(rows_unit, m.dp_size * m.size)
    return rows_unit // math.gcd(rows_unit, pc.group_size)


def _downsample_note(pc: PCSettings) -> str:
    """With down-sampling the trained group counts the kept rollouts, not the generated ones: say so."""
    n = pc.group(DownsampleSettings).n
    if n is None:
        return ""
    return f" (a trained group keeps rollout.n={pc.n_commit} of the algorithm.downsample.n={n} generated rollouts)"


def _unequal_groups_note(pc: PCSettings) -> str:
    """With groups of different sizes the group size is their mean, and rows are what split: say so."""
    low, high = pc.allocator.group_size_range(pc)
    if low == high:
        return ""
    return (
        f" (groups of {low} to {high} rows, {pc.group_size} on average: mini-batches are counted in rows and may "
        "split a group)"
    )


def check_parallel_sizes(
    pc: PCSettings, dp_size: int, ppo_mini_batch_size: int, micro: MicroBatches | None = None
) -> None:
    """The trained batch must split evenly over data-parallel ranks, PPO mini-batches and micro-batches.

    For Pilot-Commit rollout.n is the commit count, as in the reference; ``algorithm.mini_batch_unit=group`` counts
    whole training groups instead. Unfilled batches are cut to ``trainable_unit``, so only the full batch is checked.
    Groups of different sizes (the knapsack) are split by rows, never by groups: a full step has
    ``train_batch_size x group_size`` rows whatever its groups' sizes (the trainer refuses a step that has not), a
    mini-batch is ``ppo_mini_batch_size x mini_batch_multiplier`` rows with the mean group size, and verl's advantages
    are computed per uid over the whole step before the split, so a group cut across mini-batches is still one group.
    """
    if ppo_mini_batch_size < 1:
        raise PCConfigError(f"actor_rollout_ref.actor.ppo_mini_batch_size={ppo_mini_batch_size} must be at least 1")
    rows, mult = pc.train_rows, pc.mini_batch_multiplier
    note = _downsample_note(pc) + _unequal_groups_note(pc)
    mini_rows = ppo_mini_batch_size * mult
    if rows % dp_size:
        raise PCConfigError(
            f"a step trains data.train_batch_size * group size = {rows} rows{note}, "
            f"which does not split over {dp_size} data-parallel ranks"
        )
    if mini_rows % dp_size:
        raise PCConfigError(
            f"actor_rollout_ref.actor.ppo_mini_batch_size={ppo_mini_batch_size} gives mini-batches of "
            f"{ppo_mini_batch_size} * {mult} = {mini_rows} rows, which do not split over {dp_size} ranks"
        )
    if not pc.reference.partial_mini_batch and (rows // dp_size) % (mini_rows // dp_size):
        # Only suggest the other unit when it is not already the one in use.
        other = "" if pc.reference.mini_batch_unit == "group" else "set algorithm.mini_batch_unit=group, or "
        raise PCConfigError(
            f"actor_rollout_ref.actor.ppo_mini_batch_size={ppo_mini_batch_size} gives mini-batches of "
            f"{ppo_mini_batch_size} * {mult} = {mini_rows} rows "
            f"(algorithm.mini_batch_unit={pc.reference.mini_batch_unit}), which must divide the {rows} trained rows"
            f"{note} per step evenly across {dp_size} ranks; pick ppo_mini_batch_size so that {rows} is a "
            f"multiple of ppo_mini_batch_size * {mult}, or {other}set algorithm.partial_mini_batch=true for the "
            "reference's partial last mini-batch"
        )
    micro = micro or MicroBatches()
    whole = f"data.train_batch_size * group size = {pc.train_batch_size} * {pc.group_size} = {rows} rows a step{note}"
    for m in micro.set_step():
        if rows % m.dp_size:
            raise PCConfigError(f"{whole} do not split over {m.dp_size} data-parallel ranks ({m.key})")
        m.check_divides(rows // m.dp_size, f"{whole} / {m.dp_size} ranks = {rows // m.dp_size} rows per rank")
    if micro.update is not None and micro.update.size is not None:
        per_rank = mini_rows // dp_size
        # The reference preset pads each rank's partial mini-batch to a whole one, so this covers it too.
        micro.update.check_divides(
            per_rank,
            f"PPO mini-batches of actor_rollout_ref.actor.ppo_mini_batch_size * {mult} = "
            f"{ppo_mini_batch_size} * {mult} = {mini_rows} rows / {dp_size} ranks = {per_rank} rows per rank",
        )
