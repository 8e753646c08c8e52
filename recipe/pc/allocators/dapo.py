"""DAPO dynamic sampling: rounds of ``gen_batch_size`` prompts x ``rollout.n``; groups whose
``algorithm.agg_metric`` does not vary are dropped, kept groups accumulate until ``train_batch_size``
prompts, and the surplus of the last round is discarded (as verl's DAPO recipe does).

Its filter's metric and round limit are every allocator's, ``algorithm.agg_metric`` and
``algorithm.max_num_gen_batches`` (verl's DAPO recipe reads ``algorithm.filter_groups.*``, refused here). Its partial
batch and round count survive an epoch end, as the authors' DAPO trainer's did. With ``algorithm.dapo_step_unit=round``
(the reference preset) ``total_training_steps`` counts generation rounds, as the authors' DAPO trainer did: the run
ends with the first optimizer step completed in or after round ``total_training_steps``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recipe.pc.allocation import GroupVerdict, classify_by_spread
from recipe.pc.allocators.base import register
from recipe.pc.allocators.grpo import GRPOAllocator
from recipe.pc.errors import PCConfigError
from recipe.pc.registry import KeyGroup, key

STEP_UNITS = ("update", "round")


@dataclass(frozen=True)
class DAPOSettings(KeyGroup):
    """DAPO's own key: what ``trainer.total_training_steps`` counts, optimizer steps (update) or generation rounds
    (round, the reference preset's)."""

    name = "dapo"
    step_unit: str = key("algorithm.dapo_step_unit", "update")

    def validate(self) -> None:
        if self.step_unit not in STEP_UNITS:
            raise PCConfigError(f"algorithm.dapo_step_unit={self.step_unit!r}; choose one of {STEP_UNITS}")


@register
class DAPOAllocator(GRPOAllocator):
    name = "dapo"
    keys = DAPOSettings
    keeps_partial_batch_at_epoch_end = True
    one_round_a_step = False  # it filters, so a step may take several rounds of any size

    def verdict(self, prompt_ids: np.ndarray, values: np.ndarray) -> GroupVerdict:
        return classify_by_spread(prompt_ids, values)

    def is_last_step(self, global_steps: int, sampling_rounds: int, total_training_steps: int) -> bool:
        if self.pc.group(DAPOSettings).step_unit == "round":
            return sampling_rounds >= total_training_steps
        return super().is_last_step(global_steps, sampling_rounds, total_training_steps)
