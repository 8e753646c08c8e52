"""Driver-side cost of one Pilot-Commit round at paper scale, generation excluded.

Runs the real ``RayPCTrainer._run_round`` (pilot prompts, buffer draw, generation-batch assembly
and padding, reward/metric extraction, band filter, buffer insert, training contribution) and
``_assemble_training_batch`` on CPU, with a rollout stand-in that hands back pre-built tensors so
only the trainer's own bookkeeping is timed. Default sizes are the 1.5B paper config:
384 pilot prompts x 32 + 128 committed prompts x 96 rows per round.

    python benchmarks/bench_round_bookkeeping.py [--prompt-len 256 --response-len 1024 --rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch
from tensordict import TensorDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from pc_standins import make_tokenizer, write_prompt_parquet  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.single_controller.ray import ResourcePoolManager  # noqa: E402
from verl.trainer.ppo.utils import Role  # noqa: E402
from verl.utils.dataset.rl_dataset import collate_fn  # noqa: E402

from recipe.pc.dataset import PilotCommitDataset  # noqa: E402
from recipe.pc.metrics import StepTally  # noqa: E402
from recipe.pc.pc_ray_trainer import RayPCTrainer  # noqa: E402


class PrebuiltRollouts:
    """Returns slices of one pre-built output batch; records the time spent here so it can be excluded."""

    def __init__(self, max_rows: int, prompt_len: int, response_len: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.tensors = TensorDict(
            {
                "prompts": torch.randint(3, 30000, (max_rows, prompt_len), generator=g),
                "responses": torch.randint(3, 30000, (max_rows, response_len), generator=g),
                "response_mask": torch.ones(max_rows, response_len, dtype=torch.long),
                "input_ids": torch.randint(3, 30000, (max_rows, prompt_len + response_len), generator=g),
                "attention_mask": torch.ones(max_rows, prompt_len + response_len, dtype=torch.long),
                "position_ids": torch.arange(prompt_len + response_len).expand(max_rows, -1).clone(),
                "rm_scores": torch.zeros(max_rows, response_len),
            },
            batch_size=max_rows,
        )
        self.rng = np.random.default_rng(seed)
        self.seconds = 0.0

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        start = time.perf_counter()
        n = len(prompts)
        probs = np.array([e["success_prob"] for e in prompts.non_tensor_batch["extra_info"]])
        acc = self.rng.random(n) < probs
        out = DataProto(
            batch=self.tensors[:n].clone(),
            non_tensor_batch={
                "acc": acc,
                "score": acc.astype(np.float64),
                "pred": np.full(n, "", dtype=object),
                "global_steps": np.zeros(n, dtype=object),
                "__num_turns__": np.full(n, 2, dtype=np.int32),
            },
            meta_info={"timing": {}, "reward_extra_keys": ["acc", "score", "pred"]},
        )
        self.seconds += time.perf_counter() - start
        return out


class Idle:
    def __init__(self, dp_size: int):
        self._dispatch_info = {"actor": list(range(dp_size))}

    def update_weights(self, step):
        pass

    def sleep_replicas(self):
        pass


def build(args, workdir: str) -> RayPCTrainer:
    from conftest import compose_pc_config

    rng = np.random.default_rng(0)
    data = write_prompt_parquet(os.path.join(workdir, "train.parquet"), rng.uniform(0.0, 1.0, args.prompts).tolist())
    cfg = compose_pc_config(
        [
            f"data.train_files={data}",
            f"data.val_files={data}",
            f"data.train_batch_size={args.train_batch}",
            f"data.gen_batch_size={args.gen_batch}",
            f"data.max_prompt_length={args.prompt_len}",
            f"data.max_response_length={args.response_len}",
            "data.filter_overlong_prompts=False",
            "data.dataloader_num_workers=0",
            "actor_rollout_ref.model.path=/none",
            "actor_rollout_ref.rollout.name=vllm",
            f"actor_rollout_ref.rollout.n={args.n_commit}",
            f"actor_rollout_ref.rollout.agent.num_workers={args.agent_workers}",
            f"algorithm.exploration.n={args.n_pilot}",
            "trainer.logger=[]",
            f"trainer.n_gpus_per_node={args.dp}",
            "trainer.device=cpu",
        ]
    )
    tok = make_tokenizer()
    ds = PilotCommitDataset(data_files=data, tokenizer=tok, config=cfg.data)
    trainer = RayPCTrainer(
        config=cfg,
        tokenizer=tok,
        role_worker_mapping={Role.ActorRollout: object},
        resource_pool_manager=ResourcePoolManager({"global_pool": [args.dp]}, {Role.ActorRollout: "global_pool"}),
        train_dataset=ds,
        val_dataset=ds,
        collate_fn=collate_fn,
    )
    max_rows = args.gen_batch * args.n_pilot + args.train_batch * args.n_commit
    trainer.async_rollout_manager = PrebuiltRollouts(
        max_rows + args.agent_workers * args.dp, args.prompt_len, args.response_len
    )
    trainer.actor_rollout_wg = Idle(args.dp)
    trainer.checkpoint_manager = Idle(args.dp)
    trainer.global_steps = 1
    return trainer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-batch", type=int, default=128)
    ap.add_argument("--gen-batch", type=int, default=384)
    ap.add_argument("--n-pilot", type=int, default=32)
    ap.add_argument("--n-commit", type=int, default=96)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--response-len", type=int, default=1024)
    ap.add_argument("--agent-workers", type=int, default=8)
    ap.add_argument("--dp", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    args.prompts = args.gen_batch * (args.rounds + 1)

    with tempfile.TemporaryDirectory() as workdir:
        trainer = build(args, workdir)
        batches = iter(trainer.train_dataloader)
        timing: dict = {}
        tally, parts = StepTally(), []
        trainer._run_round(next(batches), tally, parts, timing)  # fills the buffer (pilot only)
        round_seconds, assemble_seconds, rows = [], [], []
        for _ in range(args.rounds):
            tally, parts = StepTally(), []
            gen_before = trainer.async_rollout_manager.seconds
            start = time.perf_counter()
            contribution = trainer._run_round(next(batches), tally, parts, timing)
            round_seconds.append(time.perf_counter() - start - (trainer.async_rollout_manager.seconds - gen_before))
            start = time.perf_counter()
            batch = trainer._assemble_training_batch([contribution])
            assemble_seconds.append(time.perf_counter() - start)
            rows.append(tally.sampled_rollouts + tally.padding_rollouts)
            trainer.buffer.flush_stale(trainer.global_steps, trainer.pc.buffer_max_off_steps)
            trainer.global_steps += 1
        print(
            f"rows per round: {rows[0]} generated ({args.gen_batch}x{args.n_pilot} pilot + "
            f"{args.train_batch}x{args.n_commit} commit), {len(batch)} trained; "
            f"sequence length {args.prompt_len}+{args.response_len}"
        )
        print(
            f"round bookkeeping (generation excluded): median {np.median(round_seconds):.3f} s, "
            f"max {np.max(round_seconds):.3f} s over {args.rounds} rounds"
        )
        print(f"training-batch assembly: median {np.median(assemble_seconds):.3f} s")


if __name__ == "__main__":
    main()
