"""Driver-side cost of one Pilot-Commit round at paper scale, generation excluded.

Runs the real ``RayPCTrainer`` round (pilot prompts, buffer draw, generation-batch assembly and
padding, reward extraction, band filter, buffer insert) then the training-batch assembly and the
staleness flush on CPU, with a rollout stand-in that builds fresh int64 verl rows (left-padded
prompt, right-padded response) and whose own time is subtracted. The workload is the 1.5B paper
shape: 384 pilot prompts x 32 + 128 committed prompts x 96 rows a round, pass rates drawn from
Beta(0.5, 1), the buffer filled by 10 pilot rounds at steps 95-99 before the timed rounds start at
step 100 (staleness bound 4, band [0.125, 0.75], max-variance prompt and response sampling).

Each token shape runs in its own process, so its peak RSS is its own.

    python benchmarks/bench_round_bookkeeping.py [--shapes 128x512,512x2048 --rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np
import torch
from tensordict import TensorDict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from verl import DataProto  # noqa: E402
from verl.single_controller.ray import ResourcePoolManager  # noqa: E402
from verl.trainer.ppo.utils import Role  # noqa: E402
from verl.utils.dataset.rl_dataset import collate_fn  # noqa: E402

from recipe.pc.dataset import PilotCommitDataset  # noqa: E402
from recipe.pc.pc_ray_trainer import RayPCTrainer  # noqa: E402
from recipe.pc.step import StepState  # noqa: E402
from recipe.pc.testing.standins import make_tokenizer, write_prompt_parquet  # noqa: E402

FIRST_TIMED_STEP = 100


class FreshRollouts:
    """Builds new verl rows per call, as Ray would hand them to the driver; its own time is counted apart."""

    def __init__(self, prompt_len: int, response_len: int, vocab: int, seed: int = 0):
        self.prompt_len, self.response_len, self.vocab = prompt_len, response_len, vocab
        self.gen = torch.Generator().manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.seconds = 0.0

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        start = time.perf_counter()
        n, p, r = len(prompts), self.prompt_len, self.response_len
        prompt_lens = torch.randint(max(1, p // 4), p + 1, (n, 1), generator=self.gen)
        response_lens = torch.randint(1, r + 1, (n, 1), generator=self.gen)
        response_mask = (torch.arange(r) < response_lens).long()
        # Rows of one prompt share its prompt tokens, as in a real rollout.
        _, first, which = np.unique(prompts.non_tensor_batch["index"], return_index=True, return_inverse=True)
        which = torch.from_numpy(which.reshape(-1))
        prompt_lens = prompt_lens[torch.from_numpy(first)][which]
        prompt_mask = (torch.arange(p) >= p - prompt_lens).long()
        prompt_ids = torch.randint(3, self.vocab, (len(first), p), generator=self.gen)[which] * prompt_mask
        responses = torch.randint(3, self.vocab, (n, r), generator=self.gen) * response_mask
        attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
        probs = np.array([e["success_prob"] for e in prompts.non_tensor_batch["extra_info"]])
        acc = self.rng.random(n) < probs
        rm_scores = torch.zeros(n, r)
        rm_scores.scatter_(1, response_lens - 1, torch.from_numpy(acc.astype(np.float32))[:, None])
        out = DataProto(
            batch=TensorDict(
                {
                    "prompts": prompt_ids,
                    "responses": responses,
                    "response_mask": response_mask,
                    "input_ids": torch.cat([prompt_ids, responses], dim=1),
                    "attention_mask": attention_mask,
                    "position_ids": torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0),
                    "rm_scores": rm_scores,
                },
                batch_size=n,
            ),
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


class Phases:
    """Per-round wall time of selected trainer methods; ``_generate`` has the stand-in's time taken out."""

    def __init__(self, rollouts: FreshRollouts):
        self.rollouts = rollouts
        self.current: dict[str, float] = defaultdict(float)
        self.rounds: list[dict[str, float]] = []

    def wrap(self, owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            gen_before, start = self.rollouts.seconds, time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.current[label] += time.perf_counter() - start - (self.rollouts.seconds - gen_before)

        setattr(owner, name, timed)

    def close_round(self, total: float) -> None:
        self.current["other"] = total - sum(self.current.values())
        self.rounds.append(dict(self.current))
        self.current.clear()


def build(args, workdir: str, prompt_len: int, response_len: int) -> RayPCTrainer:
    from recipe.pc.testing import compose_pc_config

    rng = np.random.default_rng(args.seed)
    probs = rng.beta(0.5, 1.0, args.gen_batch * (args.fill_rounds + args.rounds + 1)).tolist()
    data = write_prompt_parquet(os.path.join(workdir, "train.parquet"), probs)
    cfg = compose_pc_config(
        [
            f"data.train_files={data}",
            f"data.val_files={data}",
            f"data.train_batch_size={args.train_batch}",
            f"data.gen_batch_size={args.gen_batch}",
            f"data.max_prompt_length={prompt_len}",
            f"data.max_response_length={response_len}",
            "data.filter_overlong_prompts=False",
            "data.dataloader_num_workers=0",
            f"data.seed={args.seed}",
            "actor_rollout_ref.model.path=/none",
            "actor_rollout_ref.rollout.name=vllm",
            f"actor_rollout_ref.rollout.n={args.n_commit}",
            f"actor_rollout_ref.rollout.agent.num_workers={args.agent_workers}",
            f"algorithm.exploration.n={args.n_pilot}",
            "algorithm.buffer_max_off_steps=4",
            "algorithm.diversity_threshold_lower=0.125",
            "algorithm.diversity_threshold_upper=0.25",
            "algorithm.buffer_sampling_method=max_variance",
            "algorithm.buffer_response_sampling_method=max_variance",
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
    trainer.async_rollout_manager = FreshRollouts(prompt_len, response_len, args.vocab, args.seed)
    trainer.actor_rollout_wg = Idle(args.dp)
    trainer.checkpoint_manager = Idle(args.dp)
    return trainer


def stored_bytes(trainer: RayPCTrainer) -> tuple[int, int]:
    """(bytes, rollouts) held by the pilot rounds the buffer points into."""
    rounds = {id(e.payload.round): e.payload.round for e in trainer.allocator.buffer.entries()}
    total = rows = 0
    for pilot_round in rounds.values():
        stored = pilot_round.rollouts
        if hasattr(stored, "nbytes"):
            total += stored.nbytes
        else:  # the full DataProto rows of releases before the compact buffer
            total += sum(t.numel() * t.element_size() for t in stored.batch.values())
        rows += len(stored) if hasattr(stored, "__len__") else stored.num_rows
    return total, rows


def reset_peak_rss() -> bool:
    """Linux lets a process reset its own peak RSS (VmHWM); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_shape(args, prompt_len: int, response_len: int) -> dict:
    with tempfile.TemporaryDirectory() as workdir:
        trainer = build(args, workdir, prompt_len, response_len)
        batches = iter(trainer.train_dataloader)
        # Fill: pilot-only rounds, two per step, at the steps before the first timed one.
        sample = trainer.allocator.buffer.sample
        trainer.allocator.buffer.sample = lambda size, n: []
        for i in range(args.fill_rounds):
            trainer.global_steps = FIRST_TIMED_STEP - args.fill_rounds // 2 + i // 2
            trainer._run_round(trainer._to_prompts(next(batches)), StepState())
        trainer.allocator.buffer.sample = sample
        buffered_groups = len(trainer.allocator.buffer)

        phases = Phases(trainer.async_rollout_manager)
        phases.wrap(trainer.allocator.buffer, "sample", "buffer_sample")
        phases.wrap(trainer.allocator, "_take_from_buffer", "take_from_buffer")
        phases.wrap(trainer, "_generate", "generation_batch_and_rewards")
        phases.wrap(trainer.allocator, "_absorb_pilot", "pilot_filter_and_insert")
        phases.wrap(trainer, "_assemble_training_batch", "assemble_training_batch")
        phases.wrap(trainer.allocator.buffer, "flush_stale", "staleness_flush")
        gc.collect()
        peak_reset = reset_peak_rss()
        round_seconds, release_seconds, rows = [], [], 0
        for r in range(args.rounds):
            trainer.global_steps = FIRST_TIMED_STEP + r
            step = StepState()
            gen_before, start = trainer.async_rollout_manager.seconds, time.perf_counter()
            trainer._run_round(trainer._to_prompts(next(batches)), step)
            batch = trainer._assemble_training_batch(step)
            trainer.allocator.buffer.flush_stale(trainer.global_steps, trainer.pc.buffer.max_off_steps)
            elapsed = time.perf_counter() - start - (trainer.async_rollout_manager.seconds - gen_before)
            round_seconds.append(elapsed)
            phases.close_round(elapsed)
            rows = len(batch)
            start = time.perf_counter()
            del step, batch  # reference counting frees the round's rows here
            release_seconds.append(time.perf_counter() - start)
        peak = peak_rss_bytes()
        stored, stored_rows = stored_bytes(trainer)
        return {
            "shape": f"{prompt_len}/{response_len}",
            "generated_rows_per_round": args.gen_batch * args.n_pilot + args.train_batch * args.n_commit,
            "trained_rows_per_round": rows,
            "buffered_groups_at_start": buffered_groups,
            "round_median_s": float(np.median(round_seconds)),
            "round_max_s": float(np.max(round_seconds)),
            "phase_median_s": {k: float(np.median([p[k] for p in phases.rounds])) for k in phases.rounds[0]},
            "release_median_s": float(np.median(release_seconds)),
            "peak_rss_gib": peak / 2**30,
            "peak_rss_scope": "timed rounds" if peak_reset else "whole process",
            "stored_bytes_per_rollout": stored / max(stored_rows, 1),
        }


def report(result: dict) -> None:
    print(
        f"shape {result['shape']}: {result['generated_rows_per_round']} rows generated and "
        f"{result['trained_rows_per_round']} trained per round, {result['buffered_groups_at_start']} groups buffered"
    )
    print(f"  round (generation excluded): median {result['round_median_s']:.3f} s, max {result['round_max_s']:.3f} s")
    for name, seconds in result["phase_median_s"].items():
        print(f"    {name:32s} median {seconds:.3f} s")
    print(f"  release of the round's batch: median {result['release_median_s']:.3f} s")
    print(f"  peak RSS ({result['peak_rss_scope']}): {result['peak_rss_gib']:.2f} GiB")
    print(f"  buffer: {result['stored_bytes_per_rollout']:.0f} bytes per stored rollout")


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="128x512,512x2048", help="prompt x response token lengths, comma-separated")
    ap.add_argument("--train-batch", type=int, default=128)
    ap.add_argument("--gen-batch", type=int, default=384)
    ap.add_argument("--n-pilot", type=int, default=32)
    ap.add_argument("--n-commit", type=int, default=96)
    ap.add_argument("--agent-workers", type=int, default=8)
    ap.add_argument("--dp", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=151_936, help="token ids are drawn below this (Qwen2.5's vocabulary)")
    ap.add_argument("--fill-rounds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one JSON line per shape instead of the report")
    ap.add_argument("--in-process", action="store_true", help="run the shapes in this process (peak RSS is shared)")
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    results = []
    for prompt_len, response_len in shapes:
        if args.in_process or len(shapes) == 1:
            result = run_shape(args, prompt_len, response_len)
        else:
            rest = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--json"]
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                *rest,
                "--shapes",
                f"{prompt_len}x{response_len}",
                "--json",
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(result)
        print(json.dumps(result)) if args.json else report(result)
    return results


if __name__ == "__main__":
    main()
