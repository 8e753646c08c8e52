"""CPU stand-ins for the parts of a verl 0.9.1 run that need a GPU, and the fixtures they run on.

Each stand-in keeps the contract of the real object, so that a trainer bug that would break a GPU
run breaks a test here:
- ``StandInAgentLoopManager`` chunks its input by ``agent.num_workers`` with ``DataProto.chunk``
  (which needs an exact multiple), reads the fields the real agent and reward loops read
  (``raw_prompt``, ``data_source``, ``reward_model.ground_truth``), returns the keys of
  ``AgentLoopWorker._postprocess`` with fixed prompt/response padding, and, as with reward
  workers on, does NOT echo the input's non-tensor fields back.
- The rollout replicas share the GPU with the actor (hybrid engine): they must be awake to
  generate (a sleeping vLLM replica hangs the run) and asleep while the actor computes; the
  stand-ins share a ``ReplicaState`` that ``StandInCheckpointManager`` flips like the real one.
- ``StandInActorWorkerGroup`` takes the no-padding TensorDicts of ``_compute_old_log_prob`` and
  ``_update_actor``, splits them over data-parallel ranks and PPO mini-batches with the same
  asserts as verl's dispatch and ``make_iterator``, and returns nested log-probs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from tensordict import TensorDict
from tokenizers import Regex, Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from verl import DataProto
from verl.utils import tensordict_utils as tu

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


@dataclass
class ReplicaState:
    awake: bool = False  # replicas start asleep after init_workers; update_weights wakes them
    weight_version: int = -1


@dataclass
class GenerationCall:
    num_rows: int
    prompt_ids: np.ndarray
    global_steps: int


class StandInAgentLoopManager:
    """Plays verl 0.9.1's AgentLoopManager + reward loop; correctness ~ Bernoulli(extra_info.success_prob)."""

    REQUIRED_INPUTS = ("raw_prompt", "data_source", "reward_model", "extra_info", "index", "uid")

    def __init__(self, config, tokenizer, replicas: ReplicaState, seed: int = 0, reward_fn=None):
        self.replicas = replicas
        self.seed = seed
        # Optional real reward function, called per row like verl's reward loop calls compute_score.
        self.reward_fn = reward_fn
        self.num_workers = int(config.actor_rollout_ref.rollout.agent.num_workers)
        self.prompt_length = int(config.actor_rollout_ref.rollout.prompt_length)
        self.response_length = int(config.actor_rollout_ref.rollout.response_length)
        self.tokenizer = tokenizer
        self.calls: list[GenerationCall] = []

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        assert self.replicas.awake, "generate_sequences on sleeping replicas (the real vLLM server hangs)"
        missing = [k for k in self.REQUIRED_INPUTS if k not in prompts.non_tensor_batch]
        assert not missing, f"agent loop input lacks {missing}"
        assert prompts.batch is None or "input_ids" not in prompts.batch.keys(), "0.9.1 tokenizes in the agent loop"
        self.calls.append(
            GenerationCall(
                len(prompts), np.asarray(prompts.non_tensor_batch["index"]), prompts.meta_info["global_steps"]
            )
        )
        prompts.non_tensor_batch["priority"] = np.arange(len(prompts), dtype=np.int64)
        chunks = prompts.chunk(self.num_workers)
        step = int(prompts.meta_info["global_steps"])
        outputs = [self._generate_chunk(c, step, i * len(c)) for i, c in enumerate(chunks)]
        output = DataProto.concat(outputs)
        output.meta_info = {
            "timing": {"agent_loop/generate_sequences/mean": 0.01, "agent_loop/slowest/generate_sequences": 0.02},
            "reward_extra_keys": ["score", "acc", "pred"],
        }
        return output

    def _generate_chunk(self, chunk: DataProto, step: int, offset: int) -> DataProto:
        """Rows are drawn from (seed, prompt id, step, position): a resumed run sees the same rollouts."""
        n = len(chunk)
        p_len, r_len = self.prompt_length, self.response_length
        prompt_ids = torch.zeros(n, p_len, dtype=torch.long)
        prompt_mask = torch.zeros(n, p_len, dtype=torch.long)
        responses = torch.zeros(n, r_len, dtype=torch.long)
        response_attn = torch.zeros(n, r_len, dtype=torch.long)
        rm_scores = torch.zeros(n, r_len, dtype=torch.float32)
        score, acc, pred = [], [], []
        for i in range(n):
            text = self.tokenizer.apply_chat_template(
                list(chunk.non_tensor_batch["raw_prompt"][i]), add_generation_prompt=True, tokenize=False
            )
            ids = self.tokenizer.encode(text, add_special_tokens=False)[-p_len:]
            prompt_ids[i, p_len - len(ids) :] = torch.tensor(ids)
            prompt_mask[i, p_len - len(ids) :] = 1
            rng = np.random.default_rng([self.seed, int(chunk.non_tensor_batch["index"][i]), step, offset + i])
            length = int(rng.integers(1, r_len + 1))
            responses[i, :length] = torch.from_numpy(rng.integers(3, 40, size=length))
            response_attn[i, :length] = 1
            truth = chunk.non_tensor_batch["reward_model"][i]["ground_truth"]
            correct = bool(rng.random() < float(chunk.non_tensor_batch["extra_info"][i]["success_prob"]))
            if self.reward_fn is not None:
                text = self.tokenizer.decode(responses[i, :length].tolist(), skip_special_tokens=True)
                correct = bool(
                    self.reward_fn(
                        data_source=chunk.non_tensor_batch["data_source"][i],
                        solution_str=text,
                        ground_truth=truth,
                        extra_info=chunk.non_tensor_batch["extra_info"][i],
                    )["acc"]
                )
            rm_scores[i, length - 1] = 1.0 if correct else -1.0
            score.append(1.0 if correct else -1.0)
            acc.append(correct)
            pred.append(truth if correct else "wrong")
        attention_mask = torch.cat([prompt_mask, response_attn], dim=1)
        position_ids = torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0)
        batch = TensorDict(
            {
                "prompts": prompt_ids,
                "responses": responses,
                "response_mask": response_attn.clone(),
                "input_ids": torch.cat([prompt_ids, responses], dim=1),
                "attention_mask": attention_mask,
                "position_ids": position_ids,
                "rm_scores": rm_scores,
            },
            batch_size=n,
        )
        empty = np.empty(n, dtype=object)
        non_tensor = {
            "__num_turns__": np.full(n, 2, dtype=np.int32),
            "score": np.array(score),
            "acc": np.array(acc),
            "pred": np.array(pred),
            "raw_prompt": chunk.non_tensor_batch["raw_prompt"].copy(),
            # The rollout server tags each output with the weight version that generated it.
            "global_steps": np.full(n, self.replicas.weight_version, dtype=object),
        }
        reward_info = np.empty(n, dtype=object)
        reward_info[:] = [{"score": sc, "acc": ac, "pred": pr} for sc, ac, pr in zip(score, acc, pred, strict=True)]
        non_tensor["reward_extra_info"] = reward_info
        for key in ("turn_scores", "tool_rewards", "min_global_steps", "max_global_steps", "extras"):
            non_tensor[key] = empty.copy()
        return DataProto(batch=batch, non_tensor_batch=non_tensor, meta_info={"metrics": [{}] * n})


@dataclass
class ActorCall:
    kind: str
    num_rows: int
    uids: list = field(default_factory=list)
    rollout_steps: list = field(default_factory=list)
    is_pilot: list = field(default_factory=list)
    acc: list = field(default_factory=list)
    mini_batch_rows: int | None = None
    advantages: torch.Tensor | None = None  # update_actor: per-row, as received (padded layout)
    loss_tokens: torch.Tensor | None = None  # update_actor: loss_mask tokens per row


class StandInActorWorkerGroup:
    """Plays the FSDP actor worker group's compute_log_prob / update_actor over ``dp_size`` ranks."""

    def __init__(self, dp_size: int, replicas: ReplicaState):
        self.dp_size = dp_size
        self.replicas = replicas
        self._dispatch_info: dict = {}
        self.calls: list[ActorCall] = []

    def _query_dispatch_info(self, role: str) -> list[int]:
        return list(range(self.dp_size))

    def _check_dispatch(self, data: TensorDict) -> int:
        assert not self.replicas.awake, "actor compute while rollout replicas still hold the GPU"
        rows = data.batch_size[0]
        assert rows % self.dp_size == 0, f"{rows} rows do not split over {self.dp_size} data-parallel ranks"
        assert data["input_ids"].is_nested, "the trainer must send no-padding (nested) input_ids"
        return rows

    def _record(self, kind: str, data: TensorDict, **extra) -> ActorCall:
        call = ActorCall(
            kind,
            data.batch_size[0],
            uids=tu.get(data, "uid"),
            rollout_steps=tu.get(data, "pc_rollout_step"),
            is_pilot=tu.get(data, "pc_is_pilot"),
            acc=tu.get(data, "acc"),
            **extra,
        )
        self.calls.append(call)
        return call

    @staticmethod
    def _per_token(data: TensorDict, scale: float) -> torch.Tensor:
        ids = data["input_ids"]
        values = -scale * (ids.values() % 7).float()
        return torch.nested.nested_tensor_from_jagged(values, offsets=ids.offsets())

    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None) -> None:
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "weights.txt"), "w") as f:
            f.write(str(global_step))

    def load_checkpoint(self, local_path, del_local_after_load=False) -> None:
        with open(os.path.join(local_path, "weights.txt")) as f:
            self.loaded_step = int(f.read())

    def compute_log_prob(self, data: TensorDict) -> TensorDict:
        self._check_dispatch(data)
        assert "old_log_probs" not in data.keys(), "stale old_log_probs rode along into the log-prob recompute"
        self._record("compute_log_prob", data)
        return tu.get_tensordict(
            {"log_probs": self._per_token(data, 0.01), "entropy": self._per_token(data, -0.1)},
            non_tensor_dict={"metrics": {"mfu": 0.0}},
        )

    def update_actor(self, data: TensorDict) -> TensorDict:
        rows = self._check_dispatch(data)
        for key in ("advantages", "old_log_probs", "response_mask", "loss_mask"):
            assert key in data.keys(), f"update_actor input lacks {key}"
        mini = tu.get_non_tensor_data(data, "mini_batch_size", None)
        assert mini % self.dp_size == 0, f"mini-batch {mini} does not split over {self.dp_size} ranks"
        per_rank, mini_per_rank = rows // self.dp_size, mini // self.dp_size
        assert per_rank % mini_per_rank == 0, f"{per_rank} % {mini_per_rank} != 0 (verl's make_iterator)"
        assert torch.isfinite(data["advantages"]).all()
        loss_tokens = data["loss_mask"].sum(dim=-1)  # left_right_2_no_padding makes it the response_mask
        self._record(
            "update_actor", data, mini_batch_rows=mini, advantages=data["advantages"].clone(), loss_tokens=loss_tokens
        )
        # verl's metrics hold one grad_norm per optimizer step (one per mini-batch of a rank).
        grad_norms = [1.0] * (per_rank // mini_per_rank) * tu.get_non_tensor_data(data, "epochs", 1)
        return tu.get_tensordict(
            {}, non_tensor_dict={"metrics": {"mfu": 0.0, "pg_loss": [0.0], "grad_norm": grad_norms}}
        )


class StandInCheckpointManager:
    """Plays CheckpointEngineManager: update_weights syncs and wakes the replicas, sleep_replicas frees the GPU."""

    def __init__(self, replicas: ReplicaState):
        self.replicas = replicas
        self.weight_updates: list[int] = []
        self.sleeps = 0

    def update_weights(self, global_steps: int) -> None:
        self.weight_updates.append(global_steps)
        self.replicas.awake = True
        self.replicas.weight_version = global_steps

    def sleep_replicas(self) -> None:
        self.sleeps += 1
        self.replicas.awake = False


def read_metrics(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def step_records(path: str) -> list[dict]:
    """The logged per-step records (those with training metrics), in order."""
    out = []
    for rec in read_metrics(path):
        data = rec.get("data", rec)
        if "training/global_step" in data:
            out.append(data)
    return out


def env_file_logger(tmp_path) -> str:
    path = os.path.join(str(tmp_path), "metrics.jsonl")
    os.environ["VERL_FILE_LOGGER_PATH"] = path
    return path
