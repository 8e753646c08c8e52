"""RayPCTrainer: rollout allocation on verl 0.9.1's legacy RayPPOTrainer.

One *round* pulls ``data.gen_batch_size`` prompts from the dataloader; the allocator picked by
``algorithm.rollout_allocation`` (``recipe/pc/allocators/``) says what to generate for them and for
what it holds, the trainer generates all of it in a single call with rewards, and the allocator
returns the groups that are ready to train. Rounds repeat until ``data.train_batch_size`` prompts are
ready; then the stock PPO update runs once (one *step*). The trainer makes no allocation decision.
"""

from __future__ import annotations

import logging
import os
import zlib
from pprint import pformat

import numpy as np
import torch
from omegaconf import OmegaConf, open_dict
from tqdm import tqdm
from verl import DataProto
from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto
from verl.trainer.ppo.core_algos import agg_loss
from verl.trainer.ppo.metric_utils import (
    compute_data_metrics,
    compute_throughout_metrics,
    compute_timing_metrics,
    compute_variance_proxy_metrics,
)
from verl.trainer.ppo.ray_trainer import (
    RayPPOTrainer,
    apply_kl_penalty,
    compute_advantage,
    compute_response_mask,
)
from verl.trainer.ppo.reward import extract_reward
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path
from verl.utils.debug import marked_timer
from verl.utils.metric import reduce_metrics
from verl.utils.skip.skip_manager import SkipManager
from verl.utils.tracking import Tracking

from recipe.pc import checkpoint as ckpt
from recipe.pc.allocation import generation_divisor, group_stats
from recipe.pc.allocators import Request, make_allocator
from recipe.pc.allocators.base import PILOT, concat_rows
from recipe.pc.compact import BatchBuffers, Segment, assemble
from recipe.pc.metrics import StepTally, step_metrics
from recipe.pc.minibatch import mini_batch_plan, pad_partial_mini_batch
from recipe.pc.rollout_dump import append_records, discard_after, rollout_records
from recipe.pc.settings import MicroBatches, PCConfigError, PCSettings, micro_batches
from recipe.pc.stages.skip import PromptSkipper, admit

# Its level comes from the "recipe.pc" package logger (PC_LOGGING_LEVEL, set in the TaskRunner).
logger = logging.getLogger(__name__)

# Per-row fields the trainer adds: the step a rollout was generated at, and whether it is a pilot.
ROLLOUT_STEP = "pc_rollout_step"
IS_PILOT = "pc_is_pilot"
# Saved next to verl's actor checkpoint and data.pt in each global_step_N folder.
PC_STATE_FILE = ckpt.STATE_FILE


class RoundTiming:
    """The agent loop's timing keys of a step's generation calls, aggregated over its rounds.

    Each call reports min/max/mean over its rows and the timings of its slowest row
    (AgentLoopManager._performance_metrics); summing those over rounds would be wrong. A step's
    values: min of mins, max of maxes, row-weighted mean of means, the slowest row of all rounds;
    any other key is a duration and is summed. State resets with each step's ``timing_raw`` dict.
    """

    def __init__(self):
        self._owner: dict | None = None
        self._rounds: list[tuple[dict, int]] = []

    def add(self, timing_raw: dict, timing: dict, rows: int) -> None:
        if self._owner is not timing_raw:
            self._owner, self._rounds = timing_raw, []
        self._rounds.append((timing, rows))
        timing_raw.update(aggregate_round_timing(self._rounds))


def aggregate_round_timing(rounds: list[tuple[dict, int]]) -> dict:
    """One step's agent-loop timing from per-round (timing, rows) pairs; see ``RoundTiming``."""
    merged: dict = {}
    total_rows = sum(rows for _, rows in rounds)
    for key in {k for timing, _ in rounds for k in timing if "/slowest/" not in k}:
        values = [(timing[key], rows) for timing, rows in rounds if key in timing]
        if key.endswith("/min"):
            merged[key] = min(v for v, _ in values)
        elif key.endswith("/max"):
            merged[key] = max(v for v, _ in values)
        elif key.endswith("/mean"):
            merged[key] = sum(v * rows for v, rows in values) / max(total_rows, 1)
        else:
            merged[key] = sum(v for v, _ in values)

    def slowest_total(timing: dict) -> float:
        # The agent loop picks its slowest row by generation + tool + scoring time.
        return sum(
            timing.get(f"agent_loop/slowest/{part}", 0.0)
            for part in ("generate_sequences", "tool_calls", "compute_score")
        )

    with_slowest = [timing for timing, _ in rounds if any("/slowest/" in k for k in timing)]
    if with_slowest:
        slowest = max(with_slowest, key=slowest_total)
        merged.update({k: v for k, v in slowest.items() if "/slowest/" in k})
    return merged


class RayPCTrainer(RayPPOTrainer):
    def __init__(self, config, *args, **kwargs):
        self.pc = PCSettings.from_config(config)
        train_dataset = kwargs.get("train_dataset")
        if train_dataset is not None and len(train_dataset) < self.pc.gen_batch_size:
            raise PCConfigError(
                f"the train data has {len(train_dataset)} prompts, fewer than one generation batch "
                f"(data.gen_batch_size={self.pc.gen_batch_size})"
            )
        super().__init__(config, *args, **kwargs)
        self._check_supported_features()
        self.rng = np.random.default_rng(self.pc.seed)
        self.allocator = make_allocator(self.pc, self.rng)
        rule = self.pc.skip_rule()
        self.skipper = PromptSkipper(rule) if rule is not None else None
        self._prompt_pool: DataProto | None = None  # kept prompts not yet in a round (skipping only)
        self.cumulative_rollouts = 0
        self.cumulative_trained_rollouts = 0
        self.total_consumed_prompts = 0
        self.total_sampling_rounds = 0
        self.gen_round = 0  # rounds since the start of training; part of each pilot uid
        self.epoch = 0
        self._last_saved_step = None
        self._batch_buffers = BatchBuffers()
        self._resumed_from: str | None = None
        self._weights_version = -1  # the step whose actor weights the rollout replicas hold
        self._round_timing = RoundTiming()

    # ------------------------------------------------------------------ set-up checks
    def _check_supported_features(self) -> None:
        corr = self.config.algorithm.get("rollout_correction", None)
        if corr is not None and (corr.get("bypass_mode") or corr.get("rollout_is") or corr.get("rollout_rs")):
            raise PCConfigError(
                "algorithm.rollout_correction is on, but reused pilot rollouts come from a policy up to "
                "buffer_max_off_steps + 1 steps old and carry no matching behaviour log-probs; turn it off"
            )
        if self.pc.evict_threshold is not None and not hasattr(self.train_dataset, "evict"):
            raise PCConfigError(
                f"algorithm.exclude_threshold_upper={self.pc.evict_threshold} needs a dataset that can evict "
                f"prompts, but {type(self.train_dataset).__name__} cannot; set data.custom_cls to "
                "recipe.pc.dataset.PilotCommitDataset (the pc_trainer.yaml default) or the threshold to null"
            )
        ids = getattr(self.train_dataset, "prompt_ids", None)
        if ids is not None:
            uniq, counts = np.unique(ids, return_counts=True)
            if (counts > 1).any():
                dup = uniq[counts > 1][:10].tolist()
                raise ValueError(
                    f"train data has duplicate extra_info.index values {dup} ({int((counts > 1).sum())} in all); "
                    "Pilot-Commit keys its buffer and eviction by this prompt id, so it must be unique"
                )

    def _generation_divisor(self) -> int:
        dp_size = self._get_dp_size(self.actor_rollout_wg, "actor")
        return generation_divisor(self.config.actor_rollout_ref.rollout.agent.num_workers, dp_size)

    # ------------------------------------------------------------------ the round loop
    def fit(self):
        self.tracking = Tracking(
            project_name=self.config.trainer.project_name,
            experiment_name=self.config.trainer.experiment_name,
            default_backend=self.config.trainer.logger,
            config=OmegaConf.to_container(self.config, resolve=True),
        )
        self.global_steps = 0
        self._load_checkpoint()
        dump_dir = self.config.trainer.get("rollout_data_dir", None)
        if dump_dir:
            stale = discard_after(dump_dir, self.global_steps)
            if stale:
                logger.warning(
                    "removed %d rollout dumps of steps after %d left by an earlier run in %s (they are regenerated)",
                    len(stale),
                    self.global_steps,
                    dump_dir,
                )
        self._sync_weights()
        self.pc.check_parallel_sizes(
            self._get_dp_size(self.actor_rollout_wg, "actor"),
            int(self.config.actor_rollout_ref.actor.ppo_mini_batch_size),
            self._micro_batches(),
        )
        SkipManager.init(self.config)

        if self.config.trainer.get("val_before_train", True):
            val_metrics = self._validate()
            self.tracking.log(data=val_metrics, step=self.global_steps)
            if self.config.trainer.get("val_only", False):
                return

        # As verl's fit: one tick per optimizer step; the postfix shows the rounds that step took.
        progress = tqdm(total=self.total_training_steps, initial=self.global_steps, desc="Training Progress")
        self.global_steps += 1
        SkipManager.set_step(self.global_steps)
        tally, parts, timing_raw = StepTally(), [], {}
        last_validated_step = None
        self._step_began_at_epoch = self.epoch

        while self.epoch < self.config.trainer.total_epochs:
            for prompts in self._generation_batches():
                with marked_timer("step", timing_raw):
                    contribution = self._run_round(prompts, tally, parts, timing_raw)
                if contribution is not None:
                    parts.append(contribution)
                if not self._batch_ready(tally):
                    continue

                is_last_step = self._is_last_step()
                with marked_timer("step", timing_raw):
                    # Replicas stay awake across the rounds of a step (a sleeping replica cannot
                    # generate); they sleep once, before the actor needs the GPU, and wake on update_weights.
                    self.checkpoint_manager.sleep_replicas()
                    batch = self._assemble_training_batch(parts, tally)
                    metrics = self._pc_step_metrics(tally, batch)
                    metrics.update(self.allocator.end_step(self.global_steps))
                    if self.skipper is not None:
                        metrics.update(self.skipper.end_step(self.epoch))
                    batch = self._update_policy(batch, metrics, timing_raw, is_last_step)

                if self.config.trainer.test_freq > 0 and (
                    is_last_step or self.global_steps % self.config.trainer.test_freq == 0
                ):
                    with marked_timer("testing", timing_raw):
                        metrics.update(self._validate())
                    last_validated_step = self.global_steps

                self._log_step(batch, metrics, timing_raw)
                progress.set_postfix(rounds=tally.rounds, refresh=False)
                progress.update(1)
                tally, parts, timing_raw = StepTally(), [], {}
                self.allocator.counters.reset()
                self._step_began_at_epoch = self.epoch
                if is_last_step:
                    progress.close()
                    self._finish()
                    return
                self.global_steps += 1
                SkipManager.set_step(self.global_steps)

            tally, parts = self._end_epoch(tally, parts)
            if len(self.train_dataset) < self.pc.gen_batch_size:
                logger.warning(
                    "eviction left %d prompts, fewer than data.gen_batch_size=%d: every other prompt is solved, "
                    "stopping",
                    len(self.train_dataset),
                    self.pc.gen_batch_size,
                )
                break

        progress.close()
        self._finish_after_last_epoch(last_validated_step)

    def _is_last_step(self) -> bool:
        """total_training_steps counts optimizer steps (DAPO may count rounds instead: its allocator says)."""
        return self.allocator.is_last_step(self.global_steps, self.total_sampling_rounds, self.total_training_steps)

    def _generation_batches(self):
        """This epoch's rounds of new prompts: the dataloader's batches, or with ``algorithm.skip.enable`` its
        kept prompts regrouped into batches of ``data.gen_batch_size``.

        Kept prompts short of a batch at the epoch's end wait in the pool for the next epoch's: given as a round
        of their own, they made a step of many small rounds once most prompts were skipped (a starvation the
        simulator showed, docs/results/regimes/README.md)."""
        for batch_dict in self.train_dataloader:
            prompts = self._to_prompts(batch_dict)
            if self.skipper is None:
                yield prompts
                continue
            keep = np.flatnonzero(self.skipper.keep_mask(prompts.non_tensor_batch["index"], self.rng))
            pool = self._prompt_pool
            if pool is not None:
                keep = keep[admit(pool.non_tensor_batch["index"], prompts.non_tensor_batch["index"][keep])]
            if keep.size:
                kept = prompts.select_idxs(keep)
                self._prompt_pool = kept if pool is None else concat_rows([pool, kept], what="kept prompts")
            # The pool lives on the trainer: a checkpoint taken at a yield saves what is left of it.
            while self._prompt_pool is not None and len(self._prompt_pool) >= self.pc.gen_batch_size:
                pool, size = self._prompt_pool, self.pc.gen_batch_size
                rest = pool.select_idxs(np.arange(size, len(pool))) if len(pool) > size else None
                self._prompt_pool = rest
                yield pool.select_idxs(np.arange(size))

    def _run_round(self, batch: dict | DataProto, tally: StepTally, parts: list, timing_raw: dict):
        """One round: the allocator's requests in one generation call; returns the round's training rows, or None."""
        prompts = self._start_round(batch, tally)
        requests = self.allocator.plan(prompts, tally, self.global_steps)
        with marked_timer("gen", timing_raw, color="red"):
            generated = self._generate(requests, tally, timing_raw)
        for request, rows in zip(requests, generated, strict=True):
            is_pilot = request.kind == PILOT
            self._tag_rollouts(rows, is_pilot=is_pilot)
            if is_pilot:
                tally.pilot_rollouts += len(rows)
            else:
                tally.commit_rollouts += len(rows)
        seen = len(tally.group_stats)
        with marked_timer(self.allocator.filter_timer, timing_raw):
            contribution = self.allocator.absorb(generated, tally, self.global_steps)
        if self.skipper is not None:
            self.skipper.observe(tally.group_stats[seen:])
        return contribution

    def _start_round(self, batch: dict | DataProto, tally: StepTally) -> DataProto:
        """Count a new round and give its prompts (a dataloader batch, or prompt rows) uids."""
        self.gen_round += 1
        tally.rounds += 1
        self.total_sampling_rounds += 1
        prompts = self._new_pilot_prompts(batch)
        self.total_consumed_prompts += len(prompts)
        return prompts

    def _new_pilot_prompts(self, batch: dict | DataProto) -> DataProto:
        prompts = batch if isinstance(batch, DataProto) else self._to_prompts(batch)
        prompts.non_tensor_batch["uid"] = np.array(
            [f"{self.gen_round}:{i}" for i in prompts.non_tensor_batch["index"]], dtype=object
        )
        prompts.meta_info["temperature"] = self.config.actor_rollout_ref.rollout.temperature
        return prompts

    @staticmethod
    def _to_prompts(batch_dict: dict) -> DataProto:
        """A dataloader batch as prompt rows with integer ids, refusing a batch that repeats an id."""
        prompts = DataProto.from_single_dict(batch_dict)
        ids = np.asarray(prompts.non_tensor_batch["index"]).astype(np.int64)
        uniq, counts = np.unique(ids, return_counts=True)
        if (counts > 1).any():
            raise ValueError(
                f"generation batch holds prompt ids {uniq[counts > 1][:10].tolist()} more than once; "
                "extra_info.index must be unique per prompt"
            )
        prompts.non_tensor_batch["index"] = ids
        return prompts

    def _generate(self, requests: list[Request], tally: StepTally, timing_raw: dict) -> list[DataProto]:
        """Generate every request in ONE call; rows with rewards per request.

        A request's ``kind`` (pilot, commit, group) labels its rows in the ``trainer.rollout_data_dir`` dump.
        """
        sides, gen_parts = [], []
        for request in requests:
            side, gen_inputs = self._split_for_generation(request.prompts)
            sides.append(side.repeat(request.n, interleave=True))
            gen_parts.append(gen_inputs.repeat(request.n, interleave=True))
        gen_batch = concat_rows(gen_parts, what="generation inputs")
        num_rows = len(gen_batch)

        gen_batch, pad = pad_dataproto_to_divisor(gen_batch, self._generation_divisor())
        gen_batch.meta_info["global_steps"] = self.global_steps
        try:
            output = self.async_rollout_manager.generate_sequences(gen_batch)
            if "rm_scores" not in output.batch.keys() and self.use_rm:
                output = self._score_colocated(output, timing_raw)
        except Exception as err:
            ids = np.unique(gen_batch.non_tensor_batch["index"])
            raise RuntimeError(
                f"generation or reward scoring failed in round {self.gen_round} (step {self.global_steps}) for "
                f"prompt ids {ids[:20].tolist()}{' ...' if len(ids) > 20 else ''}: {type(err).__name__}: {err}"
            ) from err
        extra_keys = list(output.meta_info.get("reward_extra_keys", []))
        self._round_timing.add(timing_raw, output.meta_info.pop("timing", {}), rows=len(output))
        output = unpad_dataproto(output, pad)
        if len(output) != num_rows:
            raise RuntimeError(f"generation returned {len(output)} rows for {num_rows} inputs")
        tally.padding_rollouts += pad
        self.cumulative_rollouts += num_rows

        rows, start = [], 0
        for side in sides:
            rows.append(self._with_rewards(side, output.slice(start, start + len(side))))
            start += len(side)
        dump_dir = self.config.trainer.get("rollout_data_dir", None)
        if dump_dir:
            with marked_timer("dump_rollout_generations", timing_raw, color="green"):
                for part, request in zip(rows, requests, strict=True):
                    records = rollout_records(
                        part,
                        self.tokenizer,
                        kind=request.kind,
                        step=self.global_steps,
                        round_index=self.gen_round,
                        extra_keys=extra_keys,
                    )
                    # verl's dump thread: written in order, drained at the end of the run.
                    self._dump_futures.append(
                        self._dump_executor.submit(append_records, dump_dir, self.global_steps, records)
                    )
        return rows

    def _score_colocated(self, output: DataProto, timing_raw: dict) -> DataProto:
        """Score a round with the reward model that shares the GPU with the rollout replicas.

        The replicas stay awake across a step's rounds, so each round puts them to sleep for the
        reward model and wakes them after, as verl's _validate does: with update_weights, because a
        level-2 sleep drops the rollout weights and a bare wake-up would not restore them.
        """
        with marked_timer("reward_colocated", timing_raw, color="yellow"):
            self.checkpoint_manager.sleep_replicas()
            scored = output.union(self._compute_reward_colocate(output))
            self.checkpoint_manager.update_weights(self._weights_version)
        return scored

    def _sync_weights(self) -> None:
        """Push the actor's weights to the (sleeping) replicas, which wakes them."""
        self.checkpoint_manager.update_weights(self.global_steps)
        self._weights_version = self.global_steps

    def _split_for_generation(self, prompts: DataProto) -> tuple[DataProto, DataProto]:
        """(reward-side rows, generation inputs) of a copy of ``prompts``, the way stock fit() splits them."""
        reward_side = prompts.select_idxs(np.arange(len(prompts)))
        gen_inputs = self._get_gen_batch(reward_side)
        # The agent loop does not echo inputs back when reward workers run, so keep the prompt id here.
        reward_side.non_tensor_batch["index"] = gen_inputs.non_tensor_batch["index"].copy()
        return reward_side, gen_inputs

    def _with_rewards(self, rows: DataProto, generated: DataProto) -> DataProto:
        rows = rows.union(generated)
        rows.meta_info = {}
        if "rm_scores" not in rows.batch.keys():
            raise RuntimeError(
                "the rollout returned no rm_scores: Pilot-Commit needs rewards from verl's reward loop "
                "(reward.reward_manager / reward.custom_reward_function) to run the pilot filter"
            )
        scores, _ = extract_reward(rows)
        rows.batch["token_level_scores"] = scores
        if "response_mask" not in rows.batch.keys():
            rows.batch["response_mask"] = compute_response_mask(rows)
        return rows

    def _tag_rollouts(self, rows: DataProto, is_pilot: bool) -> None:
        rows.non_tensor_batch[ROLLOUT_STEP] = np.full(len(rows), self.global_steps, dtype=np.int64)
        rows.non_tensor_batch[IS_PILOT] = np.full(len(rows), is_pilot, dtype=bool)

    def _batch_ready(self, tally: StepTally) -> bool:
        """True once the step has its prompts, or has used its rounds and may train on what it has."""
        if tally.committed_prompts >= self.pc.train_batch_size:
            return True
        limit = self.pc.max_num_gen_batches
        if limit <= 0 or tally.rounds < limit:
            return False
        message = (
            f"step {self.global_steps}: {tally.rounds} generation rounds (max_num_gen_batches={limit}) committed "
            f"{tally.committed_prompts} of {self.pc.train_batch_size} prompts; the data is too hard or too easy "
            "for the filter (widen algorithm.diversity_threshold_*, or raise the round limit; <= 0 is unlimited)"
        )
        if self.pc.raise_on_unfilled_batch:
            raise RuntimeError(message)
        if tally.committed_prompts >= self._min_train_prompts():
            logger.warning("%s: training on the %d collected", message, tally.committed_prompts)
            return True
        if tally.rounds == limit:
            logger.warning("%s: too few to train on, generating more rounds", message)
        return False

    def _min_train_prompts(self) -> int:
        unit = self._trainable_unit()
        return max(unit, self.pc.min_train_prompts or unit)

    def _trainable_unit(self) -> int:
        dp_size = self._get_dp_size(self.actor_rollout_wg, "actor")
        return self.pc.trainable_unit(
            dp_size, int(self.config.actor_rollout_ref.actor.ppo_mini_batch_size), self._micro_batches()
        )

    def _micro_batches(self) -> MicroBatches:
        separate_ref = self.use_reference_policy and not self.ref_in_actor
        ref_dp = self._get_dp_size(self.ref_policy_wg, "ref") if separate_ref else None
        return micro_batches(self.config, self._get_dp_size(self.actor_rollout_wg, "actor"), ref_dp)

    # ------------------------------------------------------------------ the training step
    def _assemble_training_batch(self, parts: list[list[Segment]], tally: StepTally) -> DataProto:
        """The step's groups (each part: one round's segments), written once into a batch reused across steps
        (see ``BatchBuffers`` for when that is safe); an unfilled batch is cut to whole mini-batches (the cut
        groups are counted)."""
        segments = [s for part in parts for s in part if len(s)]
        if not segments:
            raise RuntimeError(f"step {self.global_steps} has no training rows to assemble")
        uid_parts = [s.non_tensor["uid"] if s.index is None else s.non_tensor["uid"][s.index] for s in segments]
        all_uids = np.concatenate(uid_parts)
        uids, first, counts = np.unique(all_uids, return_index=True, return_counts=True)
        if (counts != self.pc.group_size).any() or len(uids) > self.pc.train_batch_size:
            raise RuntimeError(
                f"step {self.global_steps} assembled {len(uids)} groups of sizes {np.unique(counts).tolist()}; "
                f"expected at most {self.pc.train_batch_size} groups of {self.pc.group_size}"
            )
        if len(uids) < self.pc.train_batch_size:
            unit = self._trainable_unit()
            keep = np.sort(uids[np.argsort(first, kind="stable")][: len(uids) // unit * unit])
            tally.unfilled_dropped_prompts = len(uids) - len(keep)
            segments = self._keep_groups(segments, uid_parts, keep)
        batch = assemble(segments, self._batch_buffers, what="training contributions")
        # Not global_steps: the rollout server already returns a per-row "global_steps" field (its weight
        # version), and to_tensordict refuses a meta_info key that is also a row field.
        batch.meta_info["temperature"] = self.config.actor_rollout_ref.rollout.temperature
        return batch

    @staticmethod
    def _keep_groups(segments: list[Segment], uid_parts: list[np.ndarray], keep: np.ndarray) -> list[Segment]:
        """The segments cut to the rows of the kept groups, in the same order."""
        cut = []
        for segment, seg_uids in zip(segments, uid_parts, strict=True):
            rows = np.flatnonzero(np.isin(seg_uids, keep))
            index = rows if segment.index is None else np.asarray(segment.index)[rows]
            cut.append(Segment(segment.rows, index))
        return cut

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
            batch = batch.union(old_log_prob)

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

    def _update_actor(self, batch: DataProto) -> DataProto:
        dp_size = self._get_dp_size(self.actor_rollout_wg, "actor")
        plan = mini_batch_plan(
            self.pc, dp_size, int(self.config.actor_rollout_ref.actor.ppo_mini_batch_size), rows=len(batch)
        )
        if self.pc.partial_mini_batch:
            # The reference's partial last mini-batch (recipe/pc/minibatch.py), still one update_actor call.
            # Seeded by step, not drawn from self.rng: a resumed run permutes exactly as an uninterrupted one.
            step_rng = np.random.default_rng([self.pc.seed, self.global_steps])
            batch = pad_partial_mini_batch(batch, plan, dp_size, step_rng)
        output = self._update_actor_in_units(batch)
        metrics = output.meta_info["metrics"]
        metrics["training/ppo_mini_batches"] = plan.num_updates
        metrics["training/partial_mini_batch_weight"] = plan.partial_weight if plan.partial_rows else 1.0
        # verl appends one grad_norm per optimizer step: the updates the actor really ran.
        if isinstance(metrics.get("actor/grad_norm"), list):
            metrics["training/optimizer_steps"] = len(metrics["actor/grad_norm"])
        return output

    def _update_actor_in_units(self, batch: DataProto) -> DataProto:
        if self.pc.mini_batch_multiplier == self.pc.n_commit:
            return super()._update_actor(batch)
        # verl sizes PPO mini-batches as ppo_mini_batch_size * rollout.n rows; for the duration of
        # the call let rollout.n stand for the whole training group (mini_batch_unit=group).
        rollout = self.config.actor_rollout_ref.rollout
        with open_dict(rollout):
            rollout.n = self.pc.group_size
            try:
                return super()._update_actor(batch)
            finally:
                rollout.n = self.pc.n_commit

    def _pc_step_metrics(self, tally: StepTally, batch: DataProto) -> dict:
        self.cumulative_trained_rollouts += len(batch)
        metrics = step_metrics(
            tally,
            trained_rows=len(batch),
            trained_prompts=len(batch) // self.pc.group_size,
            target_prompts=self.pc.train_batch_size,
            buffer_counters=self.allocator.counters,
            buffer_size=self.allocator.pending(),
            p_lower=self.pc.p_lower,
            p_upper=self.pc.p_upper,
        )
        metrics.update(
            {
                "rollout_stats/cumulative_rollouts_sample": self.cumulative_rollouts,
                "rollout_stats/cumulative_rollouts_train": self.cumulative_trained_rollouts,
                "training/global_step": self.global_steps,
                "training/epoch": self.epoch,
                "training/total_consumed_prompts": self.total_consumed_prompts,
                "training/total_sampling_rounds": self.total_sampling_rounds,
                "training/num_evicted_prompts": len(getattr(self.train_dataset, "evicted_ids", ())),
            }
        )
        return metrics

    def _log_step(self, batch: DataProto, metrics: dict, timing_raw: dict) -> None:
        metrics.update(compute_data_metrics(batch=batch, use_critic=self.use_critic))
        metrics.update(compute_timing_metrics(batch=batch, timing_raw=timing_raw))
        n_gpus = self.resource_pool_manager.get_n_gpus()
        metrics.update(compute_throughout_metrics(batch=batch, timing_raw=timing_raw, n_gpus=n_gpus))
        metrics.update(compute_variance_proxy_metrics(batch=batch, gradient_norm=metrics.get("actor/grad_norm")))
        # Groups whose sequence rewards all agree give GRPO no gradient: the waste Pilot-Commit avoids.
        seq_reward = batch.batch["token_level_rewards"].sum(dim=-1).double().numpy()
        trained = group_stats(batch.non_tensor_batch["uid"], seq_reward)
        metrics["training/zero_variance_group_frac"] = float((trained.std == 0).mean())
        self.tracking.log(data=metrics, step=self.global_steps)

    # ------------------------------------------------------------------ epoch and run ends
    def _end_epoch(self, tally: StepTally, parts: list) -> tuple[StepTally, list]:
        """Evict solved prompts; carry the buffer and the partial batch into the next epoch, or drop them.

        With algorithm.carry_over_epoch=false (the reference) both are dropped; the dropped rollouts
        stay counted, carried into the next logged step's counters.
        """
        evicted_rows = self.allocator.end_epoch(self.train_dataset)
        self._drop_evicted_from_pool()
        dropped_prompts = flushed = 0
        if not self.pc.carry_over_epoch:
            dropped_prompts = tally.committed_prompts
            flushed = self.allocator.drop_pending()
            tally, parts = tally.carry_counts_only(), []
        epoch_metrics = {
            "exclusion_stats/epoch": self.epoch,
            "exclusion_stats/evicted_this_epoch": evicted_rows,
            "exclusion_stats/dataset_size": len(self.train_dataset),
            "exclusion_stats/original_size": getattr(self.train_dataset, "num_rows_total", len(self.train_dataset)),
            "exclusion_stats/carried_prompts": tally.committed_prompts,
            "exclusion_stats/carried_buffer_entries": self.allocator.pending(),
            "exclusion_stats/dropped_partial_prompts": dropped_prompts,
            "exclusion_stats/flushed_buffer_entries": flushed,
        }
        self.tracking.log(data=epoch_metrics, step=self.global_steps)
        logger.info("end of epoch %d: %s", self.epoch, pformat(epoch_metrics))
        self.epoch += 1
        return tally, parts

    def _drop_evicted_from_pool(self) -> None:
        """Kept prompts waiting for a round that the epoch's end just evicted are not generated."""
        evicted = getattr(self.train_dataset, "evicted_ids", None)
        if self._prompt_pool is None or not evicted:
            return
        waiting = np.flatnonzero(~np.isin(self._prompt_pool.non_tensor_batch["index"], list(evicted)))
        self._prompt_pool = self._prompt_pool.select_idxs(waiting) if waiting.size else None

    def _finish(self) -> None:
        if hasattr(self.actor_rollout_wg, "async_calls_finalize_fn_exec"):
            self.actor_rollout_wg.async_calls_finalize_fn_exec(blocking=True)
        self._shutdown_dump_executor()
        self.tracking.finish()

    def _finish_after_last_epoch(self, last_validated_step: int | None) -> None:
        """The data ran out before total_training_steps: validate and checkpoint the final policy, then finish."""
        final_step = self.global_steps - 1
        logger.warning(
            "training data ran out at step %d (trainer.total_epochs=%s, trainer.total_training_steps=%s)%s",
            final_step,
            self.config.trainer.total_epochs,
            self.total_training_steps,
            self._skip_exhaustion_hint(),
        )
        if final_step > 0:
            self.global_steps = final_step
            if self.config.trainer.test_freq > 0 and last_validated_step != final_step:
                self.tracking.log(data=self._validate(), step=final_step)
            if self.config.trainer.save_freq > 0 and self._last_saved_step != final_step:
                self._save_checkpoint()
        self._finish()

    def _skip_exhaustion_hint(self) -> str:
        """Why skipping can end a run early: a pass that skips most prompts costs no generation but still counts
        as an epoch (batch 18 ran 100 epochs by step 13 on 480 prompts, docs/results/regimes/README.md)."""
        if self.skipper is None:
            return ""
        return (
            f"; with algorithm.skip.enable every pass over the {len(self.train_dataset)} prompts is an epoch however "
            f"many it skips: step {self.global_steps} was unfinished after {self.epoch - self._step_began_at_epoch} "
            f"epochs and {self.skipper.skipped_this_step} skipped prompt draws; raise trainer.total_epochs"
        )

    # ------------------------------------------------------------------ checkpoints
    def _save_checkpoint(self):
        # The PC state goes first and atomically: verl's "latest" marker, written last by super(), then
        # never names a folder without a complete state.
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        ckpt.write_state(self._pc_state(), os.path.join(folder, PC_STATE_FILE))
        super()._save_checkpoint()
        self._last_saved_step = self.global_steps
        keep = {folder} | ({self._resumed_from} if self._resumed_from else set())
        ckpt.prune_states(self.config.trainer.default_local_dir, keep)
        logger.info("saved PC state at step %d: %s", self.global_steps, self._pc_state_summary())

    def _load_checkpoint(self):
        folder = self._resumed_folder()
        if folder is None:
            return super()._load_checkpoint()
        state_path = os.path.join(folder, PC_STATE_FILE)
        if not os.path.exists(state_path):
            folder = self._fall_back_from(folder)
            state_path = os.path.join(folder, PC_STATE_FILE)
        # Read and checked before verl loads the actor: a bad state fails fast, before any step.
        state = ckpt.read_state(state_path, self._state_config())
        trainer_cfg = self.config.trainer
        saved = (trainer_cfg.resume_mode, trainer_cfg.get("resume_from_path"))
        with open_dict(trainer_cfg):
            trainer_cfg.resume_mode, trainer_cfg.resume_from_path = "resume_path", folder
            try:
                super()._load_checkpoint()
            finally:
                trainer_cfg.resume_mode, trainer_cfg.resume_from_path = saved
        try:
            self._load_pc_state(state)
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise ckpt.CheckpointError(f"{state_path} is malformed: {type(err).__name__}: {err}") from err
        self._resumed_from = folder
        logger.info("resumed PC state at step %d: %s", self.global_steps, self._pc_state_summary())
        # verl skips the dataloader state when global_steps looks like an epoch end (one batch per step);
        # here a step spans several batches, so the saved position is always the one to resume from.
        data_path = os.path.join(folder, "data.pt")
        if os.path.exists(data_path):
            self.train_dataloader.load_state_dict(ckpt.load_plain_data(data_path))

    def _resumed_folder(self) -> str | None:
        """The global_step_N folder verl would resume from, or None for a fresh start."""
        trainer_cfg = self.config.trainer
        if trainer_cfg.resume_mode == "disable":
            return None
        if trainer_cfg.resume_mode == "resume_path":
            return os.path.abspath(trainer_cfg.resume_from_path)
        return find_latest_ckpt_path(os.path.abspath(trainer_cfg.default_local_dir))

    def _fall_back_from(self, folder: str) -> str:
        """The previous complete checkpoint when ``folder`` has no PC state (a save cut short by an older release)."""
        root = os.path.dirname(folder)
        step = int(os.path.basename(folder).removeprefix("global_step_"))
        previous = ckpt.previous_complete(root, step) if self.config.trainer.resume_mode == "auto" else None
        if previous is None:
            raise FileNotFoundError(
                f"{os.path.join(folder, PC_STATE_FILE)} is missing and no earlier checkpoint under {root} has a "
                "complete Pilot-Commit state, so the buffer, eviction and counters cannot be restored; resume from a "
                "Pilot-Commit checkpoint or set trainer.resume_mode=disable"
            )
        logger.warning(
            "%s has no Pilot-Commit state (its save did not finish); resuming from %s, the previous complete one",
            folder,
            previous,
        )
        return previous

    def _state_config(self) -> dict:
        """Settings a saved buffer must agree with: they shape its groups and rows."""
        return {
            "exploration.n": self.pc.n_pilot,
            "exploration.n_effective": self.pc.n_pilot_effective,
            "rollout.n": self.pc.n_commit,
        }

    def _pc_state(self) -> dict:
        dataset_state = self.train_dataset.state_dict() if hasattr(self.train_dataset, "state_dict") else None
        return {
            **self.allocator.state_dict(),
            "format": ckpt.FORMAT,
            "version": ckpt.VERSION,
            "config": self._state_config(),
            "rng": ckpt.to_plain(self.rng.bit_generator.state, "rng"),
            "dataset": ckpt.to_plain(dataset_state, "dataset"),
            **({} if self.skipper is None else {"skip": self._skip_state()}),
            "counters": {
                "epoch": self.epoch,
                "gen_round": self.gen_round,
                "cumulative_rollouts": self.cumulative_rollouts,
                "cumulative_trained_rollouts": self.cumulative_trained_rollouts,
                "total_consumed_prompts": self.total_consumed_prompts,
                "total_sampling_rounds": self.total_sampling_rounds,
            },
        }

    def _skip_state(self) -> dict:
        pool = None if self._prompt_pool is None else ckpt.proto_to_plain(self._prompt_pool)
        return {**self.skipper.state_dict(), "pool": pool}

    def _load_skip_state(self, state: dict) -> None:
        if "skip" not in state:  # saved with skipping off: the history starts empty here
            logger.warning("the resumed state has no skip history (algorithm.skip was off); starting one")
            return
        self.skipper.load_state_dict(state["skip"])
        pool = state["skip"]["pool"]
        self._prompt_pool = None if pool is None else ckpt.proto_from_plain(pool)

    def _pc_state_summary(self) -> str:
        """One line that a save and the resume from it must print identically (checked on the GPU)."""
        evicted = sorted(getattr(self.train_dataset, "evicted_ids", ()))
        return (
            f"{self.allocator.summary()} epoch={self.epoch} gen_round={self.gen_round} "
            f"cumulative_rollouts={self.cumulative_rollouts} cumulative_trained={self.cumulative_trained_rollouts} "
            f"consumed_prompts={self.total_consumed_prompts} evicted={len(evicted)} "
            f"evicted_crc={zlib.crc32(np.asarray(evicted, dtype=np.int64).tobytes()):08x}"
            + ("" if self.skipper is None else f" {self.skipper.summary()}")
        )

    def _load_pc_state(self, state: dict) -> None:
        self.allocator.load_state_dict(state)
        if self.skipper is not None:
            self._load_skip_state(state)
        self.rng.bit_generator.state = ckpt.from_plain(state["rng"])
        if state["dataset"] is not None:
            self.train_dataset.load_state_dict(ckpt.from_plain(state["dataset"]))
        for name, value in state["counters"].items():
            if not hasattr(self, name):
                raise KeyError(f"unknown counter {name!r}")
            setattr(self, name, int(value))
