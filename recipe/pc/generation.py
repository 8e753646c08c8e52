"""A round's one generation call: every request of an allocator's plan, with rewards, in a single batch.

Part of ``RayPCTrainer`` (``recipe.pc.pc_ray_trainer``); the step loop (``recipe.pc.step``) counts what it returns.
"""

from __future__ import annotations

import numpy as np
from verl import DataProto
from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto
from verl.trainer.ppo.ray_trainer import compute_response_mask
from verl.trainer.ppo.reward import extract_reward
from verl.utils.debug import marked_timer

from recipe.pc.allocation import generation_divisor
from recipe.pc.allocators.base import PILOT, Request, concat_rows
from recipe.pc.rollout_dump import append_records, rollout_records
from recipe.pc.step import Generation

# Per-row fields the trainer adds: the step a rollout was generated at, and whether it is a pilot.
ROLLOUT_STEP = "pc_rollout_step"
IS_PILOT = "pc_is_pilot"


class GenerationMixin:
    """The generation side of ``RayPCTrainer``: its attributes are declared in ``RayPCTrainer.__init__``."""

    def _generate(self, requests: tuple[Request, ...], step) -> Generation:
        """Generate every request in ONE call: rows with rewards, tagged, by request name, with the call's padding
        and agent-loop timing (the step loop counts them). ``step``'s timing gets the colocated reward model's and
        the dump's timers.

        A request's ``kind`` (pilot, commit, group) labels its rows in the ``trainer.rollout_data_dir`` dump.
        """
        sides, gen_parts = [], []
        for request in requests:
            side, gen_inputs = self._split_for_generation(request.prompts)
            sides.append(side.repeat(request.n, interleave=True))
            gen_parts.append(gen_inputs.repeat(request.n, interleave=True))
        gen_batch = concat_rows(gen_parts, what="generation inputs")
        num_rows = len(gen_batch)

        divisor = generation_divisor(
            self.config.actor_rollout_ref.rollout.agent.num_workers, self._get_dp_size(self.actor_rollout_wg, "actor")
        )
        gen_batch, pad = pad_dataproto_to_divisor(gen_batch, divisor)
        gen_batch.meta_info["global_steps"] = self.global_steps
        gen_batch.meta_info["temperature"] = self.config.actor_rollout_ref.rollout.temperature
        try:
            output = self.async_rollout_manager.generate_sequences(gen_batch)
            if "rm_scores" not in output.batch.keys() and self.use_rm:
                output = self._score_colocated(output, step.timing)
        except Exception as err:
            ids = np.unique(gen_batch.non_tensor_batch["index"])
            raise RuntimeError(
                f"generation or reward scoring failed in round {self.counters.gen_round} (step {self.global_steps}) "
                f"for prompt ids {ids[:20].tolist()}{' ...' if len(ids) > 20 else ''}: {type(err).__name__}: {err}"
            ) from err
        extra_keys = list(output.meta_info.get("reward_extra_keys", []))
        timing = output.meta_info.pop("timing", {})
        output = unpad_dataproto(output, pad)
        if len(output) != num_rows:
            raise RuntimeError(f"generation returned {len(output)} rows for {num_rows} inputs")

        generated, start = {}, 0
        for side, request in zip(sides, requests, strict=True):
            rows = self._with_rewards(side, output.slice(start, start + len(side)))
            start += len(side)
            self._tag_rollouts(rows, is_pilot=request.kind == PILOT)
            generated[request.name] = rows
        self._dump_rollouts(requests, generated, extra_keys, step.timing)
        return Generation(generated, pad, timing)

    def _dump_rollouts(self, requests, generated: dict[str, DataProto], extra_keys: list[str], timing: dict) -> None:
        dump_dir = self.config.trainer.get("rollout_data_dir", None)
        if not dump_dir:
            return
        with marked_timer("dump_rollout_generations", timing, color="green"):
            for request in requests:
                records = rollout_records(
                    generated[request.name],
                    self.tokenizer,
                    kind=request.kind,
                    step=self.global_steps,
                    round_index=self.counters.gen_round,
                    extra_keys=extra_keys,
                )
                # verl's dump thread: written in order, drained at the end of the run.
                self._dump_futures.append(
                    self._dump_executor.submit(append_records, dump_dir, self.global_steps, records)
                )

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
