"""RayPCTrainer: rollout allocation on verl 0.9.1's legacy RayPPOTrainer.

One *round* takes ``data.gen_batch_size`` new prompts (the dataloader's, through the prompt filter); the allocator
picked by ``algorithm.rollout_allocation`` (``recipe/pc/allocators/``) plans what to generate for them and for what
it holds, the trainer generates all of it in a single call with rewards, and the allocator returns the groups that
are ready to train. Rounds repeat until ``data.train_batch_size`` prompts are ready; then the stock PPO update runs
once (one *step*). The trainer makes no allocation decision.

    fit:  start the run (resume, sync weights, checks, validation)
          per epoch, per round: plan -> generate -> absorb -> fold into the step
                                once the step is full: assemble -> update -> validate -> log
          at each epoch's end: evict solved prompts; carry or drop the partial step and the buffer

The rounds of a step and its end-of-step hooks are ``recipe.pc.step.StepLoop`` (shared with the cost model's
simulator), the generation call ``recipe.pc.generation``, the update ``recipe.pc.update``, checkpoints
``recipe.pc.checkpointing``.
"""

from __future__ import annotations

import logging
import time
from pprint import pformat

import numpy as np
from omegaconf import OmegaConf
from tqdm import tqdm
from verl import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.utils.debug import marked_timer
from verl.utils.skip.skip_manager import SkipManager
from verl.utils.tracking import Tracking

from recipe.pc import metric_names as m
from recipe.pc.allocators import make_allocator
from recipe.pc.checkpointing import CheckpointMixin
from recipe.pc.compact import BatchBuffers, Segment, assemble
from recipe.pc.generation import GenerationMixin
from recipe.pc.metrics import step_metrics
from recipe.pc.minibatch import mini_batch_plan
from recipe.pc.parallel import MicroBatches, check_parallel_sizes, micro_batches, trainable_unit
from recipe.pc.rollout_dump import discard_after
from recipe.pc.settings import PCConfigError, PCSettings
from recipe.pc.stages.prompt_filter import make_prompt_filter
from recipe.pc.step import RunCounters, StepLoop, StepState, with_hook_metrics
from recipe.pc.update import UpdateMixin
from recipe.pc.val_budget import BudgetSchedule
from recipe.pc.val_metrics import mean_validation_metrics, sectioned, turn_metrics

# Its level comes from the "recipe.pc" package logger (PC_LOGGING_LEVEL, set in the TaskRunner).
logger = logging.getLogger(__name__)


def stop_dataloader_workers(*loaders) -> None:
    """Shut down the worker processes of each loader's current iterator, which torchdata's StatefulDataLoader keeps
    (for its state_dict) after the loop over it has stopped."""
    for loader in loaders:
        shutdown = getattr(getattr(loader, "_iterator", None), "_shutdown_workers", None)
        if shutdown is not None:  # a single-process iterator has no workers
            shutdown()


class RayPCTrainer(CheckpointMixin, UpdateMixin, GenerationMixin, RayPPOTrainer):
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
        self.prompt_filter = make_prompt_filter(self.pc)
        self.counters = RunCounters()
        self.loop = StepLoop(self.pc, self.allocator, self.prompt_filter, self.counters)
        self.global_steps = 0  # verl sets it in fit() and _load_checkpoint; set here so every attribute is declared
        self.tracking: Tracking | None = None  # created when fit starts
        self._last_saved_step: int | None = None
        self._last_validated_step: int | None = None
        self._val_budgets = BudgetSchedule(self.pc.val_rollout_interval)
        self._resumed_from: str | None = None
        self._weights_version = -1  # the step whose actor weights the rollout replicas hold
        self._batch_buffers = BatchBuffers()

    def _check_supported_features(self) -> None:
        if self.pc.pilot.evict_threshold is not None and not hasattr(self.train_dataset, "evict"):
            raise PCConfigError(
                f"algorithm.exclude_threshold_upper={self.pc.pilot.evict_threshold} needs a dataset that can evict "
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

    # ------------------------------------------------------------------ the run
    def fit(self):
        try:
            self._fit()
        finally:
            # A run that stops at total_training_steps stops mid-epoch, its train loader's workers alive, and Ray
            # SIGKILLs an actor's child processes as it exits: torch then printed "DataLoader worker (pid ...) is
            # killed by signal: Killed" after a run that succeeded.
            stop_dataloader_workers(self.train_dataloader, self.val_dataloader)

    def _fit(self):
        if not self._start_run():
            return
        progress = tqdm(total=self.total_training_steps, initial=self.global_steps, desc="Training Progress")
        step = self._next_step()
        while self.counters.epoch < self.config.trainer.total_epochs:
            epoch_start = (self.counters.gen_round, self.counters.cumulative_rollouts)
            rounds = self.prompt_filter.rounds(self._dataloader_prompts(), self.rng)
            while self.loop.fill(step, rounds, self.global_steps, **self._round_hooks(step)):
                finished = self._train_step(step)
                progress.set_postfix(rounds=step.rounds, refresh=False)
                progress.update(1)
                if finished:
                    progress.close()
                    return self._finish()
                step = self._next_step()
            step = self._end_epoch(step)
            if self._data_exhausted() or self._generated_nothing(*epoch_start):
                break
        progress.close()
        self._finish_after_last_epoch(step)

    def _start_run(self) -> bool:
        """Logger, resume, weight sync and the checks that need the workers; False after a validation-only run."""
        self.tracking = Tracking(
            project_name=self.config.trainer.project_name,
            experiment_name=self.config.trainer.experiment_name,
            default_backend=self.config.trainer.logger,
            config=OmegaConf.to_container(self.config, resolve=True),
        )
        self.global_steps = 0
        self._load_checkpoint()
        self._val_budgets.resume(self.counters.cumulative_rollouts)
        dump_dir = self.config.trainer.get("rollout_data_dir", None)
        if dump_dir and (stale := discard_after(dump_dir, self.global_steps)):
            logger.warning(
                "removed %d rollout dumps of steps after %d left by an earlier run in %s (they are regenerated)",
                len(stale),
                self.global_steps,
                dump_dir,
            )
        self._sync_weights()
        check_parallel_sizes(self.pc, self._dp_size(), self._ppo_mini_batch_size(), self._micro_batches())
        self.loop.min_train_prompts = self._min_train_prompts()
        logger.info("update: %s", self._update_summary())
        SkipManager.init(self.config)
        # Budgets the checkpoint's own step reached: it saved before validating them.
        pending = self._val_budgets.due(self.counters.cumulative_rollouts)
        if self.config.trainer.get("val_before_train", True) or pending:
            metrics = self._validate()
            metrics.update(self._val_budgets.record(pending, self.counters.cumulative_rollouts))
            self.tracking.log(data=metrics, step=self.global_steps)
            if self.config.trainer.get("val_only", False):
                return False
        return True

    def _next_step(self) -> StepState:
        self.global_steps += 1
        SkipManager.set_step(self.global_steps)
        return StepState(began_at_epoch=self.counters.epoch)

    def _dataloader_prompts(self):
        for batch_dict in self.train_dataloader:
            yield self._to_prompts(batch_dict)

    # ------------------------------------------------------------------ a round
    def _round_hooks(self, step: StepState) -> dict:
        """What the step loop calls to generate a round's requests and to time its parts, for ``step``."""
        return {
            "generate": lambda requests: self._generate(requests, step),
            "timer": lambda name: marked_timer(name, step.timing),
        }

    def _run_round(self, prompts: DataProto, step: StepState) -> None:
        """One round of ``prompts``, folded into ``step`` (the step loop's round, timed as part of the step)."""
        with marked_timer("step", step.timing):
            self.loop.run_round(step, prompts, self.global_steps, **self._round_hooks(step))

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

    def _min_train_prompts(self) -> int:
        unit = self._trainable_unit()
        return max(unit, self.pc.min_train_prompts or unit)

    def _trainable_unit(self) -> int:
        return trainable_unit(self.pc, self._dp_size(), self._ppo_mini_batch_size(), self._micro_batches())

    def _update_summary(self) -> str:
        """How the step's rows become optimizer steps, in one line: the start of a log shows which rules ran."""
        actor, ref = self.config.actor_rollout_ref.actor, self.pc.reference
        mini = self._ppo_mini_batch_size() * self.pc.mini_batch_multiplier
        plan = mini_batch_plan(self.pc, self._dp_size(), self._ppo_mini_batch_size())
        partial = f", a partial last mini-batch of {plan.partial_rows} rows a rank" if plan.partial_rows else ""
        return (
            f"{self.pc.method}, policy loss {actor.policy_loss.loss_mode} ({actor.loss_agg_mode}), "
            f"{self.pc.train_rows} rows a step in {ref.row_order} row order over {self._dp_size()} ranks, "
            f"mini-batches of {mini} rows ({ref.mini_batch_unit}), {plan.mini_rows_per_rank} a rank{partial}"
        )

    def _dp_size(self) -> int:
        return self._get_dp_size(self.actor_rollout_wg, "actor")

    def _ppo_mini_batch_size(self) -> int:
        return int(self.config.actor_rollout_ref.actor.ppo_mini_batch_size)

    def _micro_batches(self) -> MicroBatches:
        separate_ref = self.use_reference_policy and not self.ref_in_actor
        ref_dp = self._get_dp_size(self.ref_policy_wg, "ref") if separate_ref else None
        return micro_batches(self.config, self._dp_size(), ref_dp)

    # ------------------------------------------------------------------ the training step
    def _train_step(self, step: StepState) -> bool:
        """Assemble, update, validate and log one step; True when it was the last."""
        is_last_step = self.allocator.is_last_step(
            self.global_steps, self.counters.gen_round, self.total_training_steps
        )
        with marked_timer("step", step.timing):
            # Replicas stay awake across the rounds of a step (a sleeping replica cannot generate); they
            # sleep once, before the actor needs the GPU, and wake on update_weights.
            self.checkpoint_manager.sleep_replicas()
            batch = self._assemble_training_batch(step)
            metrics = self._pc_step_metrics(step, batch)
            hook_metrics = self.loop.end_step(self.global_steps, self.counters.epoch)
            batch = self._update_policy(batch, metrics, step.timing, is_last_step)
        budgets = self._val_budgets.due(self.counters.cumulative_rollouts)
        if self._validation_due(is_last_step, budgets):
            with marked_timer("testing", step.timing):
                metrics.update(self._validate())
            metrics.update(self._val_budgets.record(budgets, self.counters.cumulative_rollouts))
            if budgets:
                logger.info(
                    "step %d validated for rollout budgets %s (%d rollouts generated)",
                    self.global_steps,
                    ", ".join(map(str, budgets)),
                    self.counters.cumulative_rollouts,
                )
            self._last_validated_step = self.global_steps
        logged = with_hook_metrics(self._step_log_metrics(batch, metrics, step.timing), hook_metrics, self.pc.method)
        logged[m.UNIX_TIME] = time.time()  # the step's end, its validation included
        self.tracking.log(data=logged, step=self.global_steps)
        if not is_last_step and hasattr(self.train_dataset, "on_batch_end"):
            self.train_dataset.on_batch_end(batch=batch)  # as verl's fit: the dataset may change after a batch
        return is_last_step

    def _val_metrics_update(self, data_sources, sample_uids, reward_extra_infos_dict, sample_turns):
        """verl's validation metrics, by default without its bootstraps (``trainer.val_metrics``,
        ``recipe.pc.val_metrics``); verl's ``_validate`` calls it with the validation's scores."""
        if self.pc.val_metrics == "full":
            return super()._val_metrics_update(data_sources, sample_uids, reward_extra_infos_dict, sample_turns)
        nested = mean_validation_metrics(data_sources, sample_uids, reward_extra_infos_dict)
        return {**sectioned(nested), **turn_metrics(sample_turns)}

    def _validation_due(self, is_last_step: bool, budgets: list[int]) -> bool:
        """verl's rule (every trainer.test_freq steps and the last) or a rollout budget reached; either rule alone
        also validates the last step."""
        test_freq = self.config.trainer.test_freq
        if test_freq > 0 and (is_last_step or self.global_steps % test_freq == 0):
            return True
        return bool(budgets) or (is_last_step and self._val_budgets.on)

    def _assemble_training_batch(self, step: StepState) -> DataProto:
        """The step's groups, written once into a batch reused across steps (see ``BatchBuffers`` for when that is
        safe); an unfilled batch is cut to whole mini-batches (the cut groups are counted)."""
        segments = [s for s in step.segments if len(s)]
        if not segments:
            raise RuntimeError(f"step {self.global_steps} has no training rows to assemble")
        uid_parts = [s.column("uid") for s in segments]
        uids, first, counts = np.unique(np.concatenate(uid_parts), return_index=True, return_counts=True)
        low, high = self.allocator.group_size_range(self.pc)
        # A full step must have the rows whose split the start-up checks passed, whatever its groups' sizes.
        rows_off = len(uids) == self.pc.train_batch_size and counts.sum() != self.pc.train_rows
        if (counts < low).any() or (counts > high).any() or len(uids) > self.pc.train_batch_size or rows_off:
            sizes = f"{low}" if low == high else f"{low} to {high} rows"
            raise RuntimeError(
                f"step {self.global_steps} assembled {len(uids)} groups of sizes {np.unique(counts).tolist()} "
                f"({counts.sum()} rows); expected at most {self.pc.train_batch_size} groups of {sizes}, "
                f"{self.pc.train_rows} rows when full"
            )
        if len(uids) < self.pc.train_batch_size:
            unit = self._trainable_unit()
            keep = np.sort(uids[np.argsort(first, kind="stable")][: len(uids) // unit * unit])
            step.unfilled_dropped_prompts = len(uids) - len(keep)
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

    def _pc_step_metrics(self, step: StepState, batch: DataProto) -> dict:
        self.counters.cumulative_trained_rollouts += len(batch)
        c = self.counters
        metrics = step_metrics(
            step,
            trained_rows=len(batch),
            # Groups may differ in size (knapsack): count them, not rows over a group size.
            trained_prompts=len(np.unique(batch.non_tensor_batch["uid"])),
            target_prompts=self.pc.train_batch_size,
            p_lower=self.pc.pilot.p_lower,
            p_upper=self.pc.pilot.p_upper,
        )
        metrics.update(
            {
                m.CUMULATIVE_SAMPLED: c.cumulative_rollouts,
                m.CUMULATIVE_TRAINED: c.cumulative_trained_rollouts,
                m.GLOBAL_STEP: self.global_steps,
                m.TOTAL_TRAINING_STEPS: self.total_training_steps,
                m.EPOCH: c.epoch,
                m.TOTAL_CONSUMED_PROMPTS: c.total_consumed_prompts,
                m.TOTAL_SAMPLING_ROUNDS: c.gen_round,
                m.NUM_EVICTED_PROMPTS: len(getattr(self.train_dataset, "evicted_ids", ())),
            }
        )
        return metrics

    # ------------------------------------------------------------------ epoch and run ends
    def _end_epoch(self, step: StepState) -> StepState:
        """Evict solved prompts; carry the buffer and the partial step into the next epoch, or drop them.

        With algorithm.carry_over_epoch=false (the reference) Pilot-Commit drops both (the dropped rollouts stay
        counted, in the next logged step's counters; a step that committed nothing goes on); an allocator that keeps
        its partial batch (DAPO) keeps it.
        """
        evicted_rows = self.allocator.end_epoch(self.train_dataset)
        self.prompt_filter.end_epoch(getattr(self.train_dataset, "evicted_ids", None))
        dropped_prompts = flushed = 0
        if not (self.pc.reference.carry_over_epoch or self.allocator.keeps_partial_batch_at_epoch_end):
            dropped_prompts = step.committed_prompts
            flushed = self.allocator.drop_pending()
            # A step that has committed nothing has no batch to drop: it goes on, and its rounds before the epoch end
            # still count against max_num_gen_batches, as in the authors' runs.
            if step.committed_prompts:
                step = step.carry_counts_only(step.began_at_epoch)
        epoch_metrics = {
            m.EXCLUSION_EPOCH: self.counters.epoch,
            m.EVICTED_THIS_EPOCH: evicted_rows,
            m.DATASET_SIZE: len(self.train_dataset),
            m.ORIGINAL_SIZE: getattr(self.train_dataset, "num_rows_total", len(self.train_dataset)),
            m.CARRIED_PROMPTS: step.committed_prompts,
            m.CARRIED_BUFFER_ENTRIES: self.allocator.pending(),
            m.DROPPED_PARTIAL_PROMPTS: dropped_prompts,
            m.FLUSHED_BUFFER_ENTRIES: flushed,
        }
        self.tracking.log(data=epoch_metrics, step=self.global_steps)
        logger.info("end of epoch %d: %s", self.counters.epoch, pformat(epoch_metrics))
        self.counters.epoch += 1
        return step

    def _data_exhausted(self) -> bool:
        if len(self.train_dataset) >= self.pc.gen_batch_size:
            return False
        logger.warning(
            "eviction left %d prompts, fewer than data.gen_batch_size=%d: every other prompt is solved, stopping",
            len(self.train_dataset),
            self.pc.gen_batch_size,
        )
        return True

    def _generated_nothing(self, rounds_before: int, rollouts_before: int) -> bool:
        """True after an epoch whose rounds all left every prompt out: the allocator decided on what it had seen, and
        an epoch that generated nothing showed it nothing new, so the next would be the same."""
        c = self.counters
        if c.gen_round == rounds_before or c.cumulative_rollouts > rollouts_before:
            return False
        logger.warning(
            "epoch %d: the allocator left out every prompt of its %d rounds, so nothing was generated; stopping",
            c.epoch - 1,
            c.gen_round - rounds_before,
        )
        return True

    def _finish(self) -> None:
        if hasattr(self.actor_rollout_wg, "async_calls_finalize_fn_exec"):
            self.actor_rollout_wg.async_calls_finalize_fn_exec(blocking=True)
        self._shutdown_dump_executor()
        self.tracking.finish()

    def _finish_after_last_epoch(self, unfinished: StepState) -> None:
        """The data ran out before total_training_steps: validate and checkpoint the final policy, then finish."""
        final_step = self.global_steps - 1
        epochs = self.counters.epoch - unfinished.began_at_epoch
        logger.warning(
            "training data ran out at step %d (trainer.total_epochs=%s, trainer.total_training_steps=%s)%s",
            final_step,
            self.config.trainer.total_epochs,
            self.total_training_steps,
            self.prompt_filter.exhaustion_hint(len(self.train_dataset), self.global_steps, epochs),
        )
        if final_step > 0:
            self.global_steps = final_step
            validates = self.config.trainer.test_freq > 0 or self._val_budgets.on
            if validates and self._last_validated_step != final_step:
                # The rounds of the unfinished step trained nothing: the policy is the final step's.
                trained_on = self.counters.cumulative_rollouts - unfinished.sampled_rollouts
                metrics = self._validate()
                metrics.update(self._val_budgets.record([], trained_on))
                self.tracking.log(data=metrics, step=final_step)
            if self.config.trainer.save_freq > 0 and self._last_saved_step != final_step:
                self._save_checkpoint()
        self._finish()
