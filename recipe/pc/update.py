"""The training step on an assembled batch: verl 0.9.1's PPO/GRPO update, block by block, and the step's metrics.

``_update_policy`` follows the update half of ``RayPPOTrainer.fit`` (verl/trainer/ppo/ray_trainer.py): row balance,
old log-probs (every row, reused pilots included), reference log-probs, values, advantages, critic and actor
updates, checkpoint, weight sync. ``tests`` pin the source of verl's ``fit`` and list what is not run here, so a
verl upgrade forces a review. Left out on purpose, each refused at start-up or not reachable:

- ``algorithm.rollout_correction`` (bypass mode, importance weights): reused pilots carry no matching behaviour
  log-probs (refused at start-up by ``settings.check_supported_options``);
- the step profiler and the ESI checkpoint (refused by ``settings.STOCK_OPTIONS_NOT_RUN``);
- ``_start_profiling``'s per-step tracing and the distillation teacher, which the round loop does not drive.

Part of ``RayPCTrainer`` (``recipe.pc.pc_ray_trainer``).
"""

from __future__ import annotations

import numpy as np
import torch
from omegaconf import open_dict
from verl import DataProto
from verl.trainer.ppo.core_algos import agg_loss
from verl.trainer.ppo.metric_utils import (
    compute_data_metrics,
    compute_throughout_metrics,
    compute_timing_metrics,
    compute_variance_proxy_metrics,
)
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, apply_kl_penalty, compute_advantage, compute_spec_decode_metrics
from verl.utils.debug import marked_timer
from verl.utils.debug.metrics import calculate_debug_metrics
from verl.utils.metric import reduce_metrics
from verl.utils.seqlen_balancing import get_seqlen_balanced_partitions, log_seqlen_unbalance

from recipe.pc import metric_names as m
from recipe.pc.allocation import group_stats
from recipe.pc.generation import ROLLOUT_STEP
from recipe.pc.minibatch import mini_batch_plan, pad_partial_mini_batch

# What verl.utils.debug.metrics.calculate_debug_metrics reads of a batch.
DEBUG_METRIC_FIELDS = ["rollout_log_probs", "old_log_probs", "response_mask", "responses"]

GDPO_ESTIMATORS = ("gdpo",)


class UpdateMixin:
    """The update side of ``RayPCTrainer``: its attributes are declared in ``RayPCTrainer.__init__``."""

    def _update_policy(self, batch: DataProto, metrics: dict, timing_raw: dict, is_last_step: bool) -> DataProto:
        """The stock PPO/GRPO update on the assembled batch (old log-probs recomputed for every row)."""
        if self.config.trainer.balance_batch:
            self._balance_batch(batch, metrics=metrics)
        batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
        images_seqlens = []
        for mm_inputs in batch.non_tensor_batch.get("multi_modal_inputs", []):
            if mm_inputs is not None and "image_grid_thw" in mm_inputs:
                images_seqlens.extend(mm_inputs["images_seqlens"].tolist())
        batch.meta_info["images_seqlens"] = images_seqlens

        with marked_timer("old_log_prob", timing_raw, color="blue"):
            batch = self._old_log_probs(batch, metrics)
        if self.use_reference_policy:
            with marked_timer("ref", timing_raw, color="olive"):
                batch = batch.union(self._compute_ref_log_prob(batch))
        if self.use_critic:
            with marked_timer("values", timing_raw, color="cyan"):
                batch = batch.union(self._compute_values(batch))

        with marked_timer("adv", timing_raw, color="brown"):
            if self.config.algorithm.use_kl_in_reward:
                batch, kl_metrics = apply_kl_penalty(
                    batch, kl_ctrl=self.kl_ctrl_in_reward, kl_penalty=self.config.algorithm.kl_penalty
                )
                metrics.update(kl_metrics)
            else:
                batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
            batch = compute_advantage(
                batch,
                adv_estimator=self.config.algorithm.adv_estimator,
                gamma=self.config.algorithm.gamma,
                lam=self.config.algorithm.lam,
                num_repeat=self.pc.group_size,
                norm_adv_by_std_in_grpo=self.config.algorithm.get("norm_adv_by_std_in_grpo", True),
                config=self.config.algorithm,
            )

        if self.use_critic:
            with marked_timer("update_critic", timing_raw, color="pink"):
                metrics.update(reduce_metrics(self._update_critic(batch).meta_info["metrics"]))
        if self.config.trainer.critic_warmup > self.global_steps:
            self._sync_weights()
            return batch
        with marked_timer("update_actor", timing_raw, color="red"):
            actor_output = self._update_actor(batch)
        if self.config.trainer.save_freq > 0 and (
            is_last_step or self.global_steps % self.config.trainer.save_freq == 0
        ):
            with marked_timer("save_checkpoint", timing_raw, color="green"):
                self._save_checkpoint()
        with marked_timer("update_weights", timing_raw, color="red"):
            self._sync_weights()
        metrics.update(reduce_metrics(actor_output.meta_info["metrics"]))
        return batch

    def _old_log_probs(self, batch: DataProto, metrics: dict) -> DataProto:
        """The actor's log-probs of every row, its entropy metric and, with rollout log-probs, verl's debug metrics."""
        old_log_prob, mfu = self._compute_old_log_prob(batch)
        actor_cfg = self.config.actor_rollout_ref.actor
        entropy = agg_loss(
            loss_mat=old_log_prob.batch["entropys"],
            loss_mask=batch.batch["response_mask"],
            loss_agg_mode=actor_cfg.loss_agg_mode,
            loss_scale_factor=actor_cfg.loss_scale_factor,
        )
        metrics.update({"actor/entropy": entropy.detach().item(), "perf/mfu/actor_infer": mfu})
        old_log_prob.batch.pop("entropys")
        if "routed_experts" in batch.batch and "routed_experts" in old_log_prob.batch:
            raise ValueError(
                "router replay: router_replay.mode='R2' and enable_rollout_routing_replay=True cannot be on together "
                "(enable_rollout_routing_replay is for R3 mode only)"
            )
        batch = batch.union(old_log_prob)
        if "rollout_log_probs" in batch.batch.keys():
            # Reused pilots' rollout log-probs are from the policy that generated them, up to
            # buffer_max_off_steps + 1 steps old: verl's difference measures their staleness too. The
            # difference over this step's rows alone is the rollout engine's mismatch with the actor.
            debug = calculate_debug_metrics(batch)
            metrics.update(debug)
            fresh = np.flatnonzero(batch.non_tensor_batch[ROLLOUT_STEP] == self.global_steps)
            if len(fresh) == len(batch):  # GRPO, DAPO, and PC steps without reused pilots
                metrics[m.FRESH_PROBS_DIFF] = debug["training/rollout_probs_diff_mean"]
            elif len(fresh):
                # Only the fields verl's debug metrics read, not a copy of the whole batch.
                rows = batch.select(batch_keys=DEBUG_METRIC_FIELDS, non_tensor_batch_keys=[]).select_idxs(fresh)
                metrics[m.FRESH_PROBS_DIFF] = calculate_debug_metrics(rows)["training/rollout_probs_diff_mean"]
        return batch

    def _balance_batch(self, batch: DataProto, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
        """verl's spread of rows over ranks, or with ``algorithm.row_order=reference`` verl 0.5's: balanced by
        sequence length into equal parts, each rank's rows kept in batch order (so a partial last mini-batch is
        each rank's tail, as in the authors' runs)."""
        if self.pc.reference.row_order != "reference":
            return super()._balance_batch(batch, metrics, logging_prefix, keep_minibatch)
        seqlens = batch.batch["attention_mask"].view(len(batch), -1).sum(-1).tolist()
        dp_size = self._get_dp_size(self.actor_rollout_wg, "actor")
        partitions = [sorted(p) for p in get_seqlen_balanced_partitions(seqlens, k_partitions=dp_size, equal_size=True)]
        batch.reorder(torch.tensor([i for partition in partitions for i in partition]))
        metrics.update(log_seqlen_unbalance(seqlen_list=seqlens, partitions=partitions, prefix=logging_prefix))

    def _update_actor(self, batch: DataProto) -> DataProto:
        dp_size = self._get_dp_size(self.actor_rollout_wg, "actor")
        plan = mini_batch_plan(
            self.pc, dp_size, int(self.config.actor_rollout_ref.actor.ppo_mini_batch_size), rows=len(batch)
        )
        if self.pc.reference.partial_mini_batch:
            # Each rank's tail is its partial mini-batch, padded to a whole one; the reference loss weights it.
            batch = pad_partial_mini_batch(batch, plan, dp_size)
        output = self._update_actor_in_units(batch)
        metrics = output.meta_info["metrics"]
        metrics[m.PPO_MINI_BATCHES] = plan.num_updates
        metrics[m.PARTIAL_MINI_BATCH_WEIGHT] = plan.partial_weight if plan.partial_rows else 1.0
        # verl appends one grad_norm per optimizer step: the updates the actor really ran.
        if isinstance(metrics.get("actor/grad_norm"), list):
            metrics[m.OPTIMIZER_STEPS] = len(metrics["actor/grad_norm"])
        return output

    def _update_actor_in_units(self, batch: DataProto) -> DataProto:
        if self.pc.mini_batch_multiplier == self.pc.n_commit:
            return RayPPOTrainer._update_actor(self, batch)
        # verl sizes PPO mini-batches as ppo_mini_batch_size * rollout.n rows; for the duration of
        # the call let rollout.n stand for the whole training group (mini_batch_unit=group).
        rollout = self.config.actor_rollout_ref.rollout
        with open_dict(rollout):
            rollout.n = self.pc.group_size
            try:
                return RayPPOTrainer._update_actor(self, batch)
            finally:
                rollout.n = self.pc.n_commit

    def _step_log_metrics(self, batch: DataProto, metrics: dict, timing_raw: dict) -> dict:
        """The metrics verl's fit logs after a step, and the share of groups that gave GRPO no gradient."""
        metrics.update(compute_data_metrics(batch=batch, use_critic=self.use_critic))
        metrics.update(self._gdpo_metrics(batch))
        metrics.update(compute_timing_metrics(batch=batch, timing_raw=timing_raw))
        n_gpus = self.resource_pool_manager.get_n_gpus()
        metrics.update(compute_throughout_metrics(batch=batch, timing_raw=timing_raw, n_gpus=n_gpus))
        metrics.update(compute_variance_proxy_metrics(batch=batch, gradient_norm=metrics.get("actor/grad_norm")))
        spec = [batch.non_tensor_batch.get(f"spec_num_{k}", None) for k in ("draft_tokens", "accepted_tokens")]
        metrics.update(compute_spec_decode_metrics(*spec, batch.non_tensor_batch.get("spec_num_verify_steps", None)))
        # Groups whose sequence rewards all agree give GRPO no gradient: the waste Pilot-Commit avoids.
        seq_reward = batch.batch["token_level_rewards"].sum(dim=-1).double().numpy()
        trained = group_stats(batch.non_tensor_batch["uid"], seq_reward)
        metrics[m.ZERO_VARIANCE_GROUP_FRAC] = float((trained.std == 0).mean())
        return metrics

    def _gdpo_metrics(self, batch: DataProto) -> dict:
        """verl's per-component reward metrics of the GDPO estimator (its fit computes them inline)."""
        keys = self.config.algorithm.get("gdpo_reward_keys", None)
        if not keys or str(self.config.algorithm.adv_estimator).lower() not in GDPO_ESTIMATORS:
            return {}
        metrics = {}
        for key in keys:
            if key in batch.non_tensor_batch:
                values = np.asarray(batch.non_tensor_batch[key], dtype=np.float32)
                for name, fn in (("mean", np.mean), ("std", np.std), ("max", np.max), ("min", np.min)):
                    metrics[f"gdpo/{key}/{name}"] = float(fn(values))
        return metrics
