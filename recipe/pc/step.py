"""The plain-Python part of a run's steps, written once for the trainer and the cost model's simulator.

``StepLoop`` runs a step's rounds until its batch is ready and the allocator's and prompt filter's end-of-step hooks;
``RayPCTrainer._fit`` (which generates on the GPU) and ``recipe.pc_tools.simulate.SimulatedRun`` (Bernoulli rollouts)
both drive it, each with its own ``generate``. A round: the round is counted and its prompts get uids, the allocator
plans, every request with rows is generated in one call (a ``Generation``), the allocator absorbs the rows, and the
step folds the generation and the allocator's ``RoundResult`` into its ``StepState``: the one place rollouts are
counted. ``RunCounters`` are the running totals that go into every step's metrics and into checkpoints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field, fields

import numpy as np
from verl import DataProto

from recipe.pc.allocators.base import PILOT, Allocator, Request, RoundResult, StepView
from recipe.pc.compact import Segment

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Generation:
    """What one generation call returns: each request's rows by name (rewards attached), the rows generated only to
    make the call divide (dropped, not trained), and the call's agent-loop timing."""

    rows: dict[str, DataProto]
    padding: int = 0
    timing: dict = field(default_factory=dict)


def aggregate_round_timing(rounds: list[tuple[dict, int]]) -> dict:
    """One step's agent-loop timing keys from its generation calls' (timing, rows) pairs.

    Each call reports min/max/mean over its rows and the timings of its slowest row
    (AgentLoopManager._performance_metrics); summing those over rounds would be wrong. A step's
    values: min of mins, max of maxes, row-weighted mean of means, the slowest row of all rounds;
    any other key is a duration and is summed.
    """
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


@dataclass
class StepState:
    """One optimizer step's rounds so far: counts, committed prompts, training rows, timings."""

    began_at_epoch: int = 0
    rounds: int = 0
    # rounds of a partial batch dropped at an epoch end: logged with this step, not held against its round limit
    dropped_rounds: int = 0
    pilot_rollouts: int = 0
    commit_rollouts: int = 0
    padding_rollouts: int = 0  # generated only to make the batch divide; dropped, not trained
    downsampled_rollouts: int = 0  # generated for a kept group but left out of it by down-sampling
    screened_out: int = 0  # prompts whose screening pilot all agreed: no rest of the pilot
    pilot_prompts: int = 0
    passed: int = 0
    filter_passes: int = 0  # groups through the allocator's filter (``Verdict.passes``): the cost model's pass rate
    too_correct: int = 0
    too_incorrect: int = 0
    evict_marked: int = 0
    unfilled_dropped_prompts: int = 0  # collected but cut from an unfilled batch to whole mini-batches
    committed_ids: set = field(default_factory=set)  # prompts already in this step's batch
    segments: list[Segment] = field(default_factory=list)  # the batch's rows, in batch order
    pilot_means: list[np.ndarray] = field(default_factory=list)
    pilot_values: list[np.ndarray] = field(default_factory=list)
    commit_ages: list[np.ndarray] = field(default_factory=list)
    timing: dict = field(default_factory=dict)  # verl's timing_raw for the step
    generation_timings: list[tuple[dict, int]] = field(default_factory=list)  # each call's agent-loop timing, rows

    @property
    def committed_prompts(self) -> int:
        return len(self.committed_ids)

    @property
    def sampled_rollouts(self) -> int:
        return self.pilot_rollouts + self.commit_rollouts

    def view(self, step: int, target_prompts: int) -> StepView:
        return StepView(step, target_prompts - self.committed_prompts, frozenset(self.committed_ids))

    def fold_generation(self, requests: tuple[Request, ...], generation: Generation) -> int:
        """Count one generation call's rows by kind, its padding and its timing; the rows it generated."""
        rows = 0
        for request in requests:
            count = len(generation.rows[request.name])
            rows += count
            if request.kind == PILOT:
                self.pilot_rollouts += count
            else:
                self.commit_rollouts += count
        self.padding_rollouts += generation.padding
        self.generation_timings.append((generation.timing, rows + generation.padding))
        self.timing.update(aggregate_round_timing(self.generation_timings))
        return rows

    def fold(self, result: RoundResult) -> None:
        """Add one round's result: its verdicts' counts, its committed prompts and their rows."""
        for classified in result.verdicts:
            verdict = classified.verdict
            self.pilot_prompts += verdict.num_prompts
            self.passed += int(verdict.passed.sum())
            self.filter_passes += classified.passes
            self.too_correct += int(verdict.too_correct.sum())
            self.too_incorrect += int(verdict.too_incorrect.sum())
            self.evict_marked += int(verdict.evict.sum())
            self.pilot_means.append(verdict.stats.mean)
            self.pilot_values.append(np.asarray(classified.values, dtype=np.float64))
        self.screened_out += result.screened_out
        self.downsampled_rollouts += result.downsampled_rollouts
        if result.commit_ages.size:
            self.commit_ages.append(result.commit_ages)
        self.committed_ids.update(result.committed_ids.tolist())
        self.segments.extend(result.segments)

    def carry_counts_only(self, epoch: int) -> StepState:
        """A fresh step that keeps the rollouts generated so far (so none go uncounted) but no batch."""
        return StepState(
            began_at_epoch=epoch,
            dropped_rounds=self.rounds + self.dropped_rounds,
            pilot_rollouts=self.pilot_rollouts,
            commit_rollouts=self.commit_rollouts,
            padding_rollouts=self.padding_rollouts,
            downsampled_rollouts=self.downsampled_rollouts,
            timing=self.timing,
            generation_timings=self.generation_timings,
        )


def round_uids(gen_round: int, ids: np.ndarray) -> np.ndarray:
    """The uids of a round's prompts: a prompt drawn again in a later round is a new group, never merged with its
    earlier rollouts."""
    return np.array([f"{gen_round}:{i}" for i in ids], dtype=object)


@dataclass
class RunCounters:
    """Running totals of a run, saved in checkpoints."""

    epoch: int = 0
    gen_round: int = 0  # generation rounds since the start of training (logged as total_sampling_rounds); in uids
    cumulative_rollouts: int = 0
    cumulative_trained_rollouts: int = 0
    total_consumed_prompts: int = 0

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state: dict) -> None:
        state = dict(state)
        # States written before there was one round counter also hold the same count as total_sampling_rounds.
        if "total_sampling_rounds" in state and state.pop("total_sampling_rounds") != state.get("gen_round"):
            raise ValueError("its round counters gen_round and total_sampling_rounds differ, as no trainer wrote them")
        known = {f.name for f in fields(self)}
        for name, value in state.items():
            if name not in known:
                raise KeyError(f"unknown counter {name!r}")
            setattr(self, name, int(value))


Generate = Callable[[tuple[Request, ...]], Generation]
Timer = Callable[[str], AbstractContextManager]


def no_timer(name: str) -> AbstractContextManager:
    return nullcontext()


class StepLoop:
    """A run's rounds, steps and end-of-step hooks over its allocator, prompt filter and counters.

    ``min_train_prompts``: the fewest prompts a step cut at ``algorithm.max_num_gen_batches`` rounds trains on (the
    trainer sets it once its workers are up; 0 trains whatever the step has). ``warn``: log the steps cut at the limit.
    """

    def __init__(self, settings, allocator: Allocator, prompt_filter, counters: RunCounters, warn: bool = True):
        self.settings = settings
        self.allocator = allocator
        self.prompt_filter = prompt_filter
        self.counters = counters
        self.min_train_prompts = 0
        self.warn = warn

    def fill(
        self, state: StepState, rounds: Iterable[DataProto], step: int, generate: Generate, timer: Timer = no_timer
    ) -> bool:
        """Run rounds of ``rounds`` until the step's batch is ready (True) or ``rounds`` runs out (False)."""
        for prompts in rounds:
            with timer("step"):  # verl's step time: each round of the step, and then its update
                self.run_round(state, prompts, step, generate, timer)
            if self.ready(state, step):
                return True
        return False

    def run_round(
        self, state: StepState, prompts: DataProto, step: int, generate: Generate, timer: Timer = no_timer
    ) -> RoundResult:
        """One round of ``prompts`` (new prompts with an integer ``index``): counted, given uids, planned by the
        allocator, its requests with rows generated in one call, absorbed and folded into ``state``; the prompt
        filter sees the result. ``timer(name)`` times generation and absorb."""
        counters = self.counters
        counters.gen_round += 1
        counters.total_consumed_prompts += len(prompts)
        state.rounds += 1
        prompts.non_tensor_batch["uid"] = round_uids(counters.gen_round, prompts.non_tensor_batch["index"])
        view = state.view(step, self.settings.train_batch_size)
        plan = self.allocator.plan(prompts, view)
        wanted = tuple(request for request in plan.requests if request.rows)
        rows = {}
        if wanted:  # a round that leaves every prompt out generates nothing
            with timer("gen"):
                generation = generate(wanted)
            counters.cumulative_rollouts += state.fold_generation(wanted, generation)
            rows = dict(generation.rows)
        for request in plan.requests:
            if not request.rows:
                rows[request.name] = request.prompts.select_idxs(np.zeros(0, dtype=np.int64))
        with timer(self.allocator.filter_timer):
            result = self.allocator.absorb(plan, rows, view)
        state.fold(result)
        self.prompt_filter.observe(result)
        return result

    def ready(self, state: StepState, step: int) -> bool:
        """True once the step has its prompts, or has used its rounds and may train on what it has."""
        settings = self.settings
        if state.committed_prompts >= settings.train_batch_size:
            return True
        limit = settings.max_num_gen_batches
        if limit <= 0 or state.rounds < limit:
            return False
        message = (
            f"step {step}: {state.rounds} generation rounds (max_num_gen_batches={limit}) committed "
            f"{state.committed_prompts} of {settings.train_batch_size} prompts; the data is too hard or too easy "
            "for the filter (widen algorithm.diversity_threshold_*, or raise the round limit; <= 0 is unlimited)"
        )
        if settings.raise_on_unfilled_batch:
            raise RuntimeError(message)
        if state.committed_prompts >= self.min_train_prompts:
            if self.warn:
                logger.warning("%s: training on the %d collected", message, state.committed_prompts)
            return True
        if state.rounds == limit and self.warn:
            logger.warning("%s: too few to train on, generating more rounds", message)
        return False

    def end_step(self, step: int, epoch: int) -> dict:
        """After the step's batch is assembled: the allocator's and the prompt filter's end of step, and their
        metrics (refused when the two name the same metric)."""
        allocator_metrics = self.allocator.end_step(step)
        filter_metrics = self.prompt_filter.end_step(epoch)
        if clash := sorted(allocator_metrics.keys() & filter_metrics.keys()):
            raise RuntimeError(
                f"the allocator {self.settings.method!r} and the prompt filter both log {clash}: rename the "
                "allocator's end_step metrics"
            )
        return {**allocator_metrics, **filter_metrics}


def with_hook_metrics(metrics: dict, hook_metrics: dict, method: str) -> dict:
    """The trainer's metrics of a step with the allocator's and prompt filter's added; a hook metric that would
    overwrite one of the trainer's is refused."""
    if clash := sorted(metrics.keys() & hook_metrics.keys()):
        raise RuntimeError(
            f"end_step metrics {clash} of the allocator {method!r} or its prompt filter are names the trainer logs "
            "itself; give them names of their own (e.g. a prefix of the allocator's)"
        )
    return {**metrics, **hook_metrics}
