"""GRPO and DAPO baselines on the Pilot-Commit round loop, so all three log the same metrics.

``algorithm.rollout_allocation=grpo``: one round of ``train_batch_size`` prompts x ``rollout.n``
per step, every group trained. ``algorithm.rollout_allocation=dapo``: rounds of
``gen_batch_size`` prompts x ``rollout.n``; groups whose ``filter_groups.metric`` does not vary
are dropped, kept groups accumulate until ``train_batch_size`` prompts and the surplus of the
last round is discarded (as verl's DAPO recipe does). ``total_training_steps`` counts optimizer
steps, except for DAPO with ``algorithm.dapo_step_unit=round`` (the reference preset): then it counts
generation rounds, as the reference's DAPO trainer did, and the run ends with the first optimizer step
completed in or after round ``total_training_steps``. Every generated rollout counts in ``rollout_stats/*``.
"""

from __future__ import annotations

import numpy as np
from verl import DataProto
from verl.utils.debug import marked_timer

from recipe.pc.allocation import PilotVerdict, classify_by_spread, group_rows
from recipe.pc.metrics import StepTally
from recipe.pc.pc_ray_trainer import RayPCTrainer


class RayBaselineTrainer(RayPCTrainer):
    def _is_last_step(self) -> bool:
        if self.pc.method == "dapo" and self.pc.dapo_step_unit == "round":
            return self.total_sampling_rounds >= self.total_training_steps
        return super()._is_last_step()

    def _run_round(self, batch_dict: dict, tally: StepTally, parts: list, timing_raw: dict) -> DataProto | None:
        prompts = self._start_round(batch_dict, tally)
        with marked_timer("gen", timing_raw, color="red"):
            (rows,) = self._generate([(prompts, self.pc.n_commit, "group")], tally, timing_raw)
        self._tag_rollouts(rows, is_pilot=False)
        tally.commit_rollouts += len(rows)

        with marked_timer("group_filter", timing_raw):
            values = self._metric_values(rows)
            verdict = self._verdict(rows.non_tensor_batch["index"], values)
            tally.add_verdict(verdict, values)
            needed = self.pc.train_batch_size - tally.committed_prompts
            fresh = ~np.isin(verdict.stats.prompt_ids, list(tally.committed_ids))
            kept = np.flatnonzero(verdict.passed & fresh)[:needed]
        if kept.size == 0:
            return None
        tally.committed_prompts += int(kept.size)
        tally.committed_ids.update(verdict.stats.prompt_ids[kept].tolist())
        return rows.select_idxs(group_rows(verdict.stats.first_row[kept], self.pc.n_commit))

    def _verdict(self, prompt_ids: np.ndarray, values: np.ndarray) -> PilotVerdict:
        if self.pc.method == "dapo":
            return classify_by_spread(prompt_ids, values)
        # GRPO trains every group; the zero-spread ones are still reported.
        spread = classify_by_spread(prompt_ids, values)
        return PilotVerdict(
            stats=spread.stats,
            passed=np.ones_like(spread.passed),
            too_correct=spread.too_correct,
            too_incorrect=spread.too_incorrect,
            evict=spread.evict,
        )
