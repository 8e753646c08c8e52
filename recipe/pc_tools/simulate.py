"""Monte Carlo rollout costs that drive the trainer's own step loop with Bernoulli rollouts.

Each simulated step is the trainer's (``recipe.pc.step.StepLoop``): the allocator that ``algorithm.rollout_allocation``
names plans each round, every request is "generated" by drawing each rollout's ``acc`` with its prompt's pass rate,
the allocator absorbs the rows, and the step ends once it has ``train_batch_size`` prompts, or after
``max_num_gen_batches`` rounds with what it has (at least ``min_train_prompts``); GRESO skipping is the trainer's
prompt filter. So a change to an
allocator changes the simulator with it, and a new allocator is simulated as soon as it is registered. What it leaves
out, as the analytic model does: the policy learning, eviction, epoch-end effects.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from verl import DataProto

from recipe.pc.allocators import make_allocator
from recipe.pc.settings import PCSettings
from recipe.pc.stages.prompt_filter import make_prompt_filter
from recipe.pc.stages.skip import SkipSettings
from recipe.pc.step import Generation, RunCounters, StepLoop, StepState

# A step still open after this many rounds raises: with no round limit, or with algorithm.min_train_prompts above what
# the limit's rounds committed (a step then goes on until it has them, as the trainer's does).
MAX_ROUNDS_A_STEP = 10_000
MAX_EPOCHS_A_ROUND = 100  # the dataloader passes a skipping filter may take for one round (the trainer: total_epochs)


class SimulatedRun:
    """One run: shuffled epochs over prompts with fixed pass rates ``p``, the allocator and prompt filter of
    ``settings``, and the simulator's own random draws (``rng`` for the rollouts, ``filter_rng`` for skipping)."""

    def __init__(self, settings: PCSettings, p: np.ndarray, rng: np.random.Generator, filter_rng: np.random.Generator):
        if len(p) < settings.gen_batch_size:
            raise ValueError(f"{len(p)} prompts are fewer than one generation batch of {settings.gen_batch_size}")
        self.settings, self.p, self.rng = settings, p, rng
        self.allocator = make_allocator(settings, rng)
        self.prompt_filter = make_prompt_filter(settings)
        self.counters = RunCounters()
        # A step cut at the round limit trains what it has if that is at least algorithm.min_train_prompts (unset:
        # anything; the trainer's floor is also the smallest batch that splits over its ranks, which has no ranks here).
        self.loop = StepLoop(settings, self.allocator, self.prompt_filter, self.counters, warn=False)
        self.loop.min_train_prompts = settings.min_train_prompts or 0
        self.epoch = -1  # of the last dataloader batch drawn
        self._round_asked_at = 0  # the epoch at which the round being drawn was asked for
        self.rounds = self.prompt_filter.rounds(self._dataloader(), filter_rng)

    def _dataloader(self):
        """Shuffled epochs in batches of ``gen_batch_size``, the last partial batch dropped (as the trainer's)."""
        size = self.settings.gen_batch_size
        while True:
            self.epoch += 1
            if self.epoch - self._round_asked_at > MAX_EPOCHS_A_ROUND:
                raise RuntimeError(
                    f"skipping kept fewer than {size} prompts in {MAX_EPOCHS_A_ROUND} epochs: no round can fill"
                )
            order = self.rng.permutation(len(self.p))
            for start in range(0, len(order) - size + 1, size):
                ids = order[start : start + size]
                yield DataProto.from_dict(
                    tensors={"prompt": torch.zeros(len(ids), 1, dtype=torch.int64)},
                    non_tensors={"index": ids.astype(np.int64)},
                )

    def _generate(self, requests) -> Generation:
        rows = {}
        for request in requests:
            out = request.prompts.repeat(request.n, interleave=True)
            ids = out.non_tensor_batch["index"]
            out.non_tensor_batch["acc"] = (self.rng.random(len(ids)) < self.p[ids]).astype(np.float64)
            rows[request.name] = out
        return Generation(rows)

    def _step_rounds(self):
        """The run's rounds for one step; a step still open after ``MAX_ROUNDS_A_STEP`` rounds raises."""
        asked = 0
        while True:
            if asked >= MAX_ROUNDS_A_STEP:
                method = self.settings.method
                raise RuntimeError(f"{method}: a step did not fill in {asked} rounds; the data cannot fill it")
            self._round_asked_at = max(self.epoch, 0)
            asked += 1
            yield next(self.rounds)

    def step(self, number: int) -> np.ndarray:
        """One step: rounds, pilot and commit rollouts, trained and informative groups, filter passes, candidates."""
        state = StepState(began_at_epoch=max(self.epoch, 0))
        self.loop.fill(state, self._step_rounds(), number, self._generate)
        self.loop.end_step(number, self.epoch)
        totals = [state.rounds, state.pilot_rollouts, state.commit_rollouts, state.committed_prompts]
        # The filter's passes are what the allocator reports (PC: pilots in the band whose rollouts disagree; DAPO:
        # groups kept; GRPO: groups whose rollouts vary, though it trains the rest too).
        counts = [_informative_groups(state), state.filter_passes, state.pilot_prompts]
        return np.array([*totals, *counts], dtype=np.float64)


def _informative_groups(state: StepState) -> int:
    """Trained groups whose metric is not constant (GRPO gets a gradient from them)."""
    segments = [s for s in state.segments if len(s)]
    if not segments:
        return 0
    uid = np.concatenate([s.column("uid") for s in segments])
    acc = np.concatenate([np.asarray(s.column("acc"), dtype=np.float64) for s in segments])
    _, group, count = np.unique(uid, return_inverse=True, return_counts=True)
    mean = np.bincount(group, weights=acc) / count
    spread = np.bincount(group, weights=(acc - mean[group]) ** 2) > 0
    return int(spread.sum())


def simulate_totals(
    settings: PCSettings,
    pass_rates: np.ndarray,
    steps: int,
    warmup: int,
    seed: int,
    skip: SkipSettings | None,
    runs: int,
    prompts: int | None,
) -> np.ndarray:
    """Per-step means of ``SimulatedRun.step``'s totals over ``steps`` steps after ``warmup``, pooled over ``runs``
    runs (seeds ``seed``, ``seed + 1``, ...); ``prompts``: each run draws that many prompts from ``pass_rates``."""
    if skip is not None:
        owned = {**settings.owned, SkipSettings.name: dataclasses.replace(skip, enable=True)}
        settings = dataclasses.replace(settings, owned=owned)
    totals = np.zeros(7)
    for run in range(runs):
        rng = np.random.default_rng(seed + run)
        p = pass_rates if prompts is None else np.random.default_rng([seed + run, 2]).choice(pass_rates, size=prompts)
        sim = SimulatedRun(settings, p, rng, np.random.default_rng([seed + run, 1]))
        for number in range(1, warmup + steps + 1):
            result = sim.step(number)
            if number > warmup:
                totals += result
    return totals / (steps * runs)
