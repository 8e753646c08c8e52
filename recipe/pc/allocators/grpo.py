"""GRPO: every round generates ``rollout.n`` rollouts for each new prompt and trains every group.

With ``data.gen_batch_size == data.train_batch_size`` (its settings check enforces it) one round fills one step.
Groups whose rollouts all agree are still trained; they are reported as too correct or too incorrect, as DAPO would
have filtered them.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from verl import DataProto

from recipe.pc.allocation import (
    DownsampleSettings,
    GroupVerdict,
    classify_by_spread,
    downsample_rows,
    generated_per_group,
    group_rows,
)
from recipe.pc.allocators.base import (
    GROUP,
    Allocator,
    Request,
    RoundPlan,
    RoundResult,
    StepView,
    Verdict,
    metric_values,
    register,
)
from recipe.pc.compact import Segment
from recipe.pc.errors import PCConfigError
from recipe.pc.settings import PCSettings


@register
class GRPOAllocator(Allocator):
    name = "grpo"
    one_round_a_step: ClassVar[bool] = True  # every group of a round trains, so a round must be a whole step

    @classmethod
    def check_settings(cls, pc: PCSettings) -> None:
        super().check_settings(pc)
        if cls.one_round_a_step and pc.gen_batch_size != pc.train_batch_size:
            raise PCConfigError(
                f"GRPO trains every prompt of its one round: set data.gen_batch_size={pc.gen_batch_size} "
                f"equal to data.train_batch_size={pc.train_batch_size}"
            )

    def plan(self, prompts: DataProto, view: StepView) -> RoundPlan:
        return RoundPlan((Request(GROUP, prompts, generated_per_group(self.pc), GROUP),))

    def absorb(self, plan: RoundPlan, generated: dict[str, DataProto], view: StepView) -> RoundResult:
        rows = generated[GROUP]
        values = metric_values(rows, self.pc.agg_metric)
        verdict = self.verdict(rows.non_tensor_batch["index"], values)
        spread = ~(verdict.too_correct | verdict.too_incorrect)  # what DAPO's filter would keep
        result = RoundResult(verdicts=[Verdict(verdict, values, spread)])
        fresh = ~np.isin(verdict.stats.prompt_ids, list(view.committed_ids))
        kept = np.flatnonzero(verdict.passed & fresh)[: view.needed]
        if kept.size == 0:
            return result
        result.committed_ids = verdict.stats.prompt_ids[kept]
        first_rows = verdict.stats.first_row[kept]
        n, m = generated_per_group(self.pc), self.pc.n_commit
        if self.pc.group(DownsampleSettings).n is None:
            index = group_rows(first_rows, m)
        else:
            result.downsampled_rollouts = int(kept.size) * (n - m)
            index = downsample_rows(values, first_rows, n, m, self.rng)
        # A one-round step hands the trainer an index (one copy, into its batch); a step of many rounds (DAPO) copies
        # its kept rows now, so it does not hold every round's discarded rows until the batch is assembled.
        result.segments = [Segment(rows, index) if self.one_round_a_step else Segment(rows.select_idxs(index))]
        return result

    def verdict(self, prompt_ids: np.ndarray, values: np.ndarray) -> GroupVerdict:
        """Which groups train: all of them; the zero-spread ones are still reported."""
        spread = classify_by_spread(prompt_ids, values)
        return GroupVerdict(
            stats=spread.stats,
            passed=np.ones_like(spread.passed),
            too_correct=spread.too_correct,
            too_incorrect=spread.too_incorrect,
            evict=spread.evict,
        )
