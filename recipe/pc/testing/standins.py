"""CPU stand-ins for the parts of a verl 0.9.1 run that need a GPU, and the fixtures they run on; the test kit
(``recipe.pc.testing``) and the project's own tests train on them.

Each stand-in keeps the contract of the real object, so that a trainer bug that would break a GPU
run breaks a test here; every rule names the verl 0.9.1 code it mirrors:
- ``StandInAgentLoopManager`` chunks its input by ``agent.num_workers`` with ``DataProto.chunk``
  (which needs an exact multiple), reads the fields the real agent and reward loops read, and builds
  its output with verl's own ``AgentLoopWorker._postprocess`` and ``AgentLoopManager._performance_metrics``
  (experimental/agent_loop/agent_loop.py), so its per-row fields and timing keys are the real ones.
  With ``colocated_rm=True`` it plays a run whose reward model shares the GPU: no ``rm_scores``, the
  input fields echoed back, and ``StandInRewardLoopManager`` scoring later.
- The rollout replicas share the GPU with the actor (hybrid engine). They must be awake, with
  weights, to generate; asleep while the actor or a colocated reward model computes; and asleep when
  ``update_weights`` syncs and wakes them (workers/engine_workers.py ``update_weights``: "before
  update_weights: rollout should be in sleep mode"). A level-2 sleep discards the weights, so a bare
  ``wake_up_replicas`` leaves replicas that cannot generate.
- ``StandInActorWorkerGroup`` splits the no-padding TensorDicts of ``_compute_old_log_prob`` and
  ``_update_actor`` over data-parallel ranks with verl's dispatch code, each rank's rows into
  mini-batches with ``make_iterator`` and into micro-batches with ``prepare_micro_batches``, so
  their asserts fire as on the GPU; it returns nested log-probs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch
from tensordict import TensorDict
from tokenizers import Regex, Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopManager,
    AgentLoopMetrics,
    AgentLoopWorker,
    _InternalAgentLoopOutput,
)
from verl.single_controller.base.decorator import _split_args_kwargs_data_proto
from verl.utils import tensordict_utils as tu
from verl.workers.engine.utils import prepare_micro_batches

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
_CHARS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;?!+-*/=()\n'\"")


def make_tokenizer() -> PreTrainedTokenizerFast:
    """A character-level tokenizer with a chat template: no hub access needed."""
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    vocab.update({c: i + 3 for i, c in enumerate(_CHARS)})
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def write_prompt_parquet(path: str, success_probs: list[float], first_id: int = 0) -> str:
    """verl-format rows; each prompt carries the success probability the stand-in rollout uses."""
    rows = []
    for i, p in enumerate(success_probs):
        pid = first_id + i
        rows.append(
            {
                "data_source": "toy_arithmetic",
                "prompt": [{"role": "system", "content": ""}, {"role": "user", "content": f"What is {pid} + 1?"}],
                "ability": "math",
                "reward_model": {"ground_truth": str(pid + 1), "style": "rule"},
                "extra_info": {"index": pid, "success_prob": float(p)},
            }
        )
    pd.DataFrame(rows).to_parquet(path)
    return path


# The stand-in rollout ends each response with one of these tokens ('b' / 'c' in make_tokenizer's
# vocabulary), so a reward model scoring after generation can tell right from wrong.
CORRECT_TOKEN, WRONG_TOKEN = 4, 5


# The stand-in policy's log-prob of a token: fixed by the token id, shifted by POLICY_DRIFT per weight version, so a
# row generated under older weights than the actor's differs in verl's rollout/actor probability difference.
POLICY_DRIFT = 0.001


def policy_log_probs(token_ids: torch.Tensor, version: int) -> torch.Tensor:
    return -0.01 * (token_ids % 7).float() - POLICY_DRIFT * version


@dataclass
class ReplicaState:
    awake: bool = False  # replicas start asleep after init_workers (ray_trainer.py init_workers)
    has_weights: bool = False  # a level-2 sleep discards them; only update_weights restores them
    weight_version: int = -1


@dataclass
class GenerationCall:
    num_rows: int
    prompt_ids: np.ndarray
    global_steps: int
    validate: bool = False
    timing: dict = field(default_factory=dict)
    correct: list = field(default_factory=list)  # per row, in input order: the stand-in's ground truth


class StandInAgentLoopManager:
    """Plays verl 0.9.1's AgentLoopManager + reward loop; correctness ~ Bernoulli(extra_info.success_prob).

    ``colocated_rm=True`` plays a reward model without its own resource pool: the agent loop then runs
    no reward workers, returns no ``rm_scores`` and echoes its input fields (``_postprocess`` with
    ``reward_loop_worker_handles=None``); ``StandInRewardLoopManager`` scores the rows afterwards.
    """

    REQUIRED_INPUTS = ("raw_prompt", "data_source", "reward_model", "extra_info", "index", "uid")

    def __init__(self, config, tokenizer, replicas: ReplicaState, seed: int = 0, reward_fn=None, colocated_rm=False):
        self.replicas = replicas
        self.seed = seed
        # Optional real reward function, called per row like verl's reward loop calls compute_score;
        # its whole result becomes the row's reward extra info.
        self.reward_fn = reward_fn
        self.colocated_rm = colocated_rm
        self.num_workers = int(config.actor_rollout_ref.rollout.agent.num_workers)
        self.prompt_length = int(config.actor_rollout_ref.rollout.prompt_length)
        self.response_length = int(config.actor_rollout_ref.rollout.response_length)
        # agent_loop.py: the vLLM server returns each token's log-prob when calculate_log_probs (true in
        # verl/trainer/config/rollout/rollout.yaml).
        self.calculate_log_probs = bool(config.actor_rollout_ref.rollout.get("calculate_log_probs", True))
        self.default_agent_loop = config.actor_rollout_ref.rollout.agent.default_agent_loop
        self.tokenizer = tokenizer
        self.calls: list[GenerationCall] = []

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        assert self.replicas.awake, "generate_sequences on sleeping replicas (the real vLLM server hangs)"
        assert self.replicas.has_weights, "replicas woken without update_weights after a sleep that dropped weights"
        missing = [k for k in self.REQUIRED_INPUTS if k not in prompts.non_tensor_batch]
        assert not missing, f"agent loop input lacks {missing}"
        assert prompts.batch is None or "input_ids" not in prompts.batch.keys(), "0.9.1 tokenizes in the agent loop"
        call_no = len(self.calls)
        call = GenerationCall(
            len(prompts),
            np.asarray(prompts.non_tensor_batch["index"]),
            prompts.meta_info["global_steps"],
            validate=bool(prompts.meta_info.get("validate", False)),
        )
        self.calls.append(call)
        # AgentLoopManager.generate_sequences: priority before chunking, one chunk per worker.
        if "priority" not in prompts.non_tensor_batch:
            prompts.non_tensor_batch["priority"] = np.arange(len(prompts), dtype=np.int64)
        chunks = prompts.chunk(self.num_workers)
        step = int(prompts.meta_info["global_steps"])
        outputs = [self._generate_chunk(c, step, i * len(c), call_no) for i, c in enumerate(chunks)]
        output = DataProto.concat(outputs)
        metrics = [o.meta_info.pop("metrics") for o in outputs]
        call.timing = AgentLoopManager._performance_metrics(self, metrics, output)
        output.meta_info = {"timing": dict(call.timing), **outputs[0].meta_info}
        return output

    def _generate_chunk(self, chunk: DataProto, step: int, offset: int, call_no: int) -> DataProto:
        """Rows are drawn from (seed, prompt id, step, position): a resumed run sees the same rollouts."""
        # AgentLoopWorker.generate_sequences names the agent loop of every row.
        if "agent_name" not in chunk.non_tensor_batch:
            chunk.non_tensor_batch["agent_name"] = np.array([self.default_agent_loop] * len(chunk), dtype=object)
        p_len, r_len = self.prompt_length, self.response_length
        # Per-row timings differ from call to call, so that aggregating them over rounds is tested.
        timing_rng = np.random.default_rng([self.seed, call_no, offset])
        inputs = []
        for i in range(len(chunk)):
            text = self.tokenizer.apply_chat_template(
                list(chunk.non_tensor_batch["raw_prompt"][i]), add_generation_prompt=True, tokenize=False
            )
            ids = self.tokenizer.encode(text, add_special_tokens=False)[-p_len:]
            prompt_ids = torch.zeros(1, p_len, dtype=torch.long)
            prompt_mask = torch.zeros(1, p_len, dtype=torch.long)
            prompt_ids[0, p_len - len(ids) :] = torch.tensor(ids)
            prompt_mask[0, p_len - len(ids) :] = 1
            rng = np.random.default_rng([self.seed, int(chunk.non_tensor_batch["index"][i]), step, offset + i])
            length = int(rng.integers(1, r_len + 1))
            responses = torch.zeros(1, r_len, dtype=torch.long)
            response_attn = torch.zeros(1, r_len, dtype=torch.long)
            responses[0, :length] = torch.from_numpy(rng.integers(3, 40, size=length))
            response_attn[0, :length] = 1
            truth = chunk.non_tensor_batch["reward_model"][i]["ground_truth"]
            correct = bool(rng.random() < float(chunk.non_tensor_batch["extra_info"][i]["success_prob"]))
            responses[0, length - 1] = CORRECT_TOKEN if correct else WRONG_TOKEN
            self.calls[-1].correct.append(correct)
            if self.reward_fn is not None:
                text = self.tokenizer.decode(responses[0, :length].tolist(), skip_special_tokens=True)
                info = dict(
                    self.reward_fn(
                        data_source=chunk.non_tensor_batch["data_source"][i],
                        solution_str=text,
                        ground_truth=truth,
                        extra_info=chunk.non_tensor_batch["extra_info"][i],
                    )
                )
            else:
                info = {"score": 1.0 if correct else -1.0, "acc": correct, "pred": truth if correct else "wrong"}
            attention_mask = torch.cat([prompt_mask, response_attn], dim=1)
            # Padded with 0.0 past the response, as AgentLoopWorker pads response_logprobs.
            logprobs = None
            if self.calculate_log_probs:
                logprobs = policy_log_probs(responses, self.replicas.weight_version) * response_attn
            extra_fields = {
                # single_turn_agent_loop.py keeps the tool loop's schema; llm_server.py tags the weight version.
                "turn_scores": [],
                "tool_rewards": [],
                "global_steps": self.replicas.weight_version,
                "min_global_steps": self.replicas.weight_version,
                "max_global_steps": self.replicas.weight_version,
                "raw_prompt": chunk.non_tensor_batch["raw_prompt"][i],
            }
            if not self.colocated_rm:
                extra_fields["reward_extra_info"] = info
            inputs.append(
                _InternalAgentLoopOutput(
                    prompt_ids=prompt_ids,
                    response_ids=responses,
                    input_ids=torch.cat([prompt_ids, responses], dim=1),
                    position_ids=torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0),
                    response_mask=response_attn.clone(),
                    attention_mask=attention_mask,
                    multi_modal_inputs={},  # _compute_multi_modal_inputs without a processor
                    reward_score=None if self.colocated_rm else float(info["score"]),
                    num_turns=2,
                    response_logprobs=logprobs,
                    metrics=AgentLoopMetrics(
                        generate_sequences=float(timing_rng.uniform(0.1, 2.0)),
                        compute_score=float(timing_rng.uniform(0.0, 0.1)),
                        num_preempted=int(timing_rng.integers(0, 3)),
                    ),
                    extra_fields=extra_fields,
                )
            )
        # Reward workers stream inside the agent loop unless the reward model is colocated.
        worker = SimpleNamespace(reward_loop_worker_handles=None if self.colocated_rm else ["reward worker"])
        return AgentLoopWorker._postprocess(
            worker, inputs, input_non_tensor_batch=chunk.non_tensor_batch, validate=chunk.meta_info.get("validate")
        )


class StandInRewardLoopManager:
    """Plays RewardLoopManager.compute_rm_score for a colocated reward model: scores the stand-in's marker token."""

    def __init__(self, replicas: ReplicaState):
        self.replicas = replicas
        self.scored_rows: list[int] = []

    def compute_rm_score(self, data: DataProto) -> DataProto:
        # ray_trainer.py _validate sleeps the rollout replicas first "to spare GPU memory for reward model".
        assert not self.replicas.awake, "colocated reward model scoring while the rollout replicas hold the GPU"
        self.scored_rows.append(len(data))
        prompt_len = data.batch["prompts"].shape[1]
        last = data.batch["attention_mask"][:, prompt_len:].sum(dim=1) - 1
        correct = data.batch["responses"][torch.arange(len(data)), last] == CORRECT_TOKEN
        scores = torch.where(correct, 1.0, -1.0)
        rm_scores = torch.zeros(data.batch["responses"].shape, dtype=torch.float32)
        rm_scores[torch.arange(len(data)), last] = scores
        truth = [rm["ground_truth"] for rm in data.non_tensor_batch["reward_model"]]
        return DataProto(
            batch=TensorDict({"rm_scores": rm_scores}, batch_size=len(data)),
            non_tensor_batch={
                "score": scores.double().numpy(),
                "acc": correct.numpy(),
                "pred": np.array([t if c else "wrong" for t, c in zip(truth, correct.tolist(), strict=True)]),
            },
            meta_info={"reward_extra_keys": ["score", "acc", "pred"]},
        )


@dataclass
class ActorCall:
    kind: str
    num_rows: int
    uids: list = field(default_factory=list)
    prompt_ids: list = field(default_factory=list)
    rollout_steps: list = field(default_factory=list)
    is_pilot: list = field(default_factory=list)
    acc: list = field(default_factory=list)
    mini_batch_rows: int | None = None
    advantages: torch.Tensor | None = None  # update_actor: per-row, as received (padded layout)
    loss_tokens: torch.Tensor | None = None  # update_actor: loss_mask tokens per row
    scores: torch.Tensor | None = None  # update_actor: summed token_level_scores per row
    micro_batches_per_rank: list = field(default_factory=list)


class StandInActorWorkerGroup:
    """Plays the FSDP actor worker group's compute_log_prob / update_actor over ``dp_size`` ranks.

    ``config`` is ``actor_rollout_ref``: its micro-batch sizes are what the real engine splits by.
    """

    def __init__(self, dp_size: int, replicas: ReplicaState, config=None):
        self.dp_size = dp_size
        self.replicas = replicas
        self._dispatch_info: dict = {}
        self.calls: list[ActorCall] = []
        actor = config.actor if config is not None else {}
        rollout = config.rollout if config is not None else {}
        self.use_dynamic_bsz = bool(actor.get("use_dynamic_bsz", False))
        self.micro = actor.get("ppo_micro_batch_size_per_gpu") or 1
        self.infer_micro = rollout.get("log_prob_micro_batch_size_per_gpu") or 1
        if config is not None and not self.use_dynamic_bsz:
            # engine_workers.py (ActorRolloutRefWorker.init_model) asserts both are set without dynamic bsz.
            assert actor.ppo_micro_batch_size_per_gpu is not None and rollout.log_prob_micro_batch_size_per_gpu
        self.max_token_len = actor.get("ppo_max_token_len_per_gpu", None)
        self.infer_max_token_len = rollout.get("log_prob_max_token_len_per_gpu", None)

    def _query_dispatch_info(self, role: str) -> list[int]:
        return list(range(self.dp_size))

    def _split_over_ranks(self, data: TensorDict) -> list[TensorDict]:
        assert not self.replicas.awake, "actor compute while rollout replicas still hold the GPU"
        assert data["input_ids"].is_nested, "the trainer must send no-padding (nested) input_ids"
        # decorator.py dispatch_nd_compute_dataproto: verl's own split (chunk_tensordict asserts it divides).
        (chunks,), _ = _split_args_kwargs_data_proto(self.dp_size, data)
        return list(chunks)

    def _micro_batches(self, data: TensorDict, micro: int, max_token_len) -> int:
        """workers/engine/utils.py prepare_micro_batches, as the engine calls it per rank (or per mini-batch)."""
        data = data.copy()  # chunks arrive locked; each real rank gets its own deserialized copy
        tu.assign_non_tensor(data, use_dynamic_bsz=self.use_dynamic_bsz, micro_batch_size_per_gpu=micro)
        if self.use_dynamic_bsz:
            tu.assign_non_tensor(data, max_token_len_per_gpu=max_token_len)
        micro_batches, _ = prepare_micro_batches(data)
        return len(micro_batches)

    def _record(self, kind: str, data: TensorDict, **extra) -> ActorCall:
        call = ActorCall(
            kind,
            data.batch_size[0],
            uids=tu.get(data, "uid"),
            prompt_ids=tu.get(data, "index"),
            rollout_steps=tu.get(data, "pc_rollout_step"),
            is_pilot=tu.get(data, "pc_is_pilot"),
            acc=tu.get(data, "acc"),
            **extra,
        )
        self.calls.append(call)
        return call

    @staticmethod
    def _per_token(data: TensorDict, values_of) -> torch.Tensor:
        ids = data["input_ids"]
        return torch.nested.nested_tensor_from_jagged(values_of(ids.values()), offsets=ids.offsets())

    @property
    def weight_version(self) -> int:
        """The step whose update produced the actor's weights: the loaded checkpoint's, plus one a step since."""
        # loaded_step is set only by load_checkpoint (tests read its absence as "nothing was loaded").
        return getattr(self, "loaded_step", 0) + sum(c.kind == "update_actor" for c in self.calls)

    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None) -> None:
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "weights.txt"), "w") as f:
            f.write(str(global_step))

    def load_checkpoint(self, local_path, del_local_after_load=False) -> None:
        with open(os.path.join(local_path, "weights.txt")) as f:
            self.loaded_step = int(f.read())

    def compute_log_prob(self, data: TensorDict) -> TensorDict:
        assert "old_log_probs" not in data.keys(), "stale old_log_probs rode along into the log-prob recompute"
        # TrainingWorker.infer_batch: each rank's rows in micro-batches of log_prob_micro_batch_size_per_gpu.
        micro = [
            self._micro_batches(rank, self.infer_micro, self.infer_max_token_len)
            for rank in self._split_over_ranks(data)
        ]
        self._record("compute_log_prob", data, micro_batches_per_rank=micro)
        return tu.get_tensordict(
            {
                # Position i holds the log-prob of token i + 1: the engine scores the ids rolled by one over the
                # packed batch (verl/workers/engine/fsdp/transformer_impl.py, input_ids_rmpad_rolled).
                "log_probs": self._per_token(
                    data, lambda ids: policy_log_probs(torch.roll(ids, shifts=-1, dims=0), self.weight_version)
                ),
                "entropy": self._per_token(data, lambda ids: 0.1 * (ids % 7).float()),
            },
            non_tensor_dict={"metrics": {"mfu": 0.0}},
        )

    def update_actor(self, data: TensorDict) -> TensorDict:
        for key in ("advantages", "old_log_probs", "response_mask", "loss_mask"):
            assert key in data.keys(), f"update_actor input lacks {key}"
        mini = tu.get_non_tensor_data(data, "mini_batch_size", None)
        epochs = tu.get_non_tensor_data(data, "epochs", 1)
        ranks = self._split_over_ranks(data)
        # TrainingWorker.train_mini_batch: mini-batches of mini_batch_size / dp rows per rank (make_iterator
        # asserts they divide), each split into micro-batches of ppo_micro_batch_size_per_gpu by train_batch.
        assert mini % self.dp_size == 0, f"Got {mini=} and dp size {self.dp_size}"
        mini_per_rank = mini // self.dp_size
        micro, optimizer_steps = [], 0
        for rank in ranks:
            batches = list(tu.make_iterator(rank, mini_batch_size=mini_per_rank, epochs=epochs, seed=0))
            micro.append([self._micro_batches(b, self.micro, self.max_token_len) for b in batches])
            optimizer_steps = len(batches)
        assert torch.isfinite(data["advantages"]).all()
        loss_tokens = data["loss_mask"].sum(dim=-1)  # left_right_2_no_padding makes it the response_mask
        self._record(
            "update_actor",
            data,
            mini_batch_rows=mini,
            advantages=data["advantages"].clone(),
            loss_tokens=loss_tokens,
            scores=data["token_level_scores"].sum(dim=-1).clone(),
            micro_batches_per_rank=micro,
        )
        # verl's metrics hold one grad_norm per optimizer step (one per mini-batch of a rank).
        grad_norms = [1.0] * optimizer_steps
        return tu.get_tensordict(
            {}, non_tensor_dict={"metrics": {"mfu": 0.0, "pg_loss": [0.0], "grad_norm": grad_norms}}
        )


class StandInCheckpointManager:
    """Plays CheckpointEngineManager (naive backend): update_weights syncs and wakes sleeping replicas,
    sleep_replicas frees the GPU, wake_up_replicas wakes them without weights."""

    def __init__(self, replicas: ReplicaState):
        self.replicas = replicas
        self.weight_updates: list[int] = []
        self.sleeps = 0

    def update_weights(self, global_steps: int) -> None:
        # engine_workers.py ActorRolloutRefWorker.update_weights: "before update_weights: rollout should be
        # in sleep mode. after update_weights: rollout should be in wake_up mode."
        assert not self.replicas.awake, "update_weights on awake replicas (verl expects them asleep)"
        self.weight_updates.append(global_steps)
        self.replicas.awake = self.replicas.has_weights = True
        self.replicas.weight_version = global_steps

    def sleep_replicas(self) -> None:
        self.sleeps += 1
        self.replicas.awake = self.replicas.has_weights = False

    def wake_up_replicas(self) -> None:
        self.replicas.awake = True
