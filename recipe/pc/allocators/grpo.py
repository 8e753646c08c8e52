"""GRPO: every round generates ``rollout.n`` rollouts for each new prompt and trains every group.

With ``data.gen_batch_size == data.train_batch_size`` (the settings check enforces it) one round
fills one step. Groups whose rollouts all agree are still trained; they are reported as too correct
or too incorrect, as DAPO would have filtered them.
"""

from __future__ import annotations

import numpy as np
from verl import DataProto

from recipe.pc.allocation import PilotVerdict, classify_by_spread, group_rows
from recipe.pc.allocators.base import GROUP, Allocator, Request, metric_values, register
from recipe.pc.compact import Segment
from recipe.pc.metrics import StepTally
from recipe.pc.stages.downsample import downsample_rows


@register
class GRPOAllocator(Allocator):
    name = "grpo"

    def plan(self, prompts: DataProto, tally: StepTally, step: int) -> list[Request]:
        return [Request(prompts, self.pc.n_generated, GROUP)]

    def absorb(self, generated: list[DataProto], tally: StepTally, step: int) -> list[Segment] | None:
        (rows,) = generated
        values = metric_values(rows, self.pc.agg_metric)
        verdict = self.verdict(rows.non_tensor_batch["index"], values)
        tally.add_verdict(verdict, values)
        needed = self.pc.train_batch_size - tally.committed_prompts
        fresh = ~np.isin(verdict.stats.prompt_ids, list(tally.committed_ids))
        kept = np.flatnonzero(verdict.passed & fresh)[:needed]
        if kept.size == 0:
            return None
        tally.committed_prompts += int(kept.size)
        tally.committed_ids.update(verdict.stats.prompt_ids[kept].tolist())
        first_rows = verdict.stats.first_row[kept]
        if self.pc.downsample_n is None:
            return [Segment(rows.select_idxs(group_rows(first_rows, self.pc.n_commit)))]
        tally.downsampled_rollouts += int(kept.size) * (self.pc.downsample_n - self.pc.n_commit)
        return [Segment(rows, downsample_rows(values, first_rows, self.pc.downsample_n, self.pc.n_commit, self.rng))]

    def verdict(self, prompt_ids: np.ndarray, values: np.ndarray) -> PilotVerdict:
        """Which groups train: all of them; the zero-spread ones are still reported."""
        spread = classify_by_spread(prompt_ids, values)
        return PilotVerdict(
            stats=spread.stats,
            passed=np.ones_like(spread.passed),
            too_correct=spread.too_correct,
            too_incorrect=spread.too_incorrect,
            evict=spread.evict,
        )
