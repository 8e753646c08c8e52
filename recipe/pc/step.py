"""The state of one optimizer step while its rounds run, one round of it, and the counters of the whole run.

``StepState`` is everything a step has generated, counted and collected, folded in round by round from the
allocators' ``RoundResult``; the trainer starts a fresh one after each logged step. ``run_round`` is a round, the
same for the trainer (which generates on the GPU) and the cost model's simulator (Bernoulli rollouts).
``RunCounters`` are the running totals that go into every step's metrics and into checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field, fields

import numpy as np
from verl import DataProto

from recipe.pc.allocators.base import PILOT, Allocator, Request, RoundResult, StepView
from recipe.pc.compact import Segment


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

    def count_generated(self, kind: str, rows: int) -> None:
        if kind == PILOT:
            self.pilot_rollouts += rows
        else:
            self.commit_rollouts += rows

    def fold(self, result: RoundResult) -> None:
        """Add one round's result: its verdicts' counts, its committed prompts and their rows."""
        for classified in result.verdicts:
            verdict = classified.verdict
            self.pilot_prompts += verdict.num_prompts
            self.passed += int(verdict.passed.sum())
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


def run_round(
    allocator: Allocator,
    prompt_filter,
    state: StepState,
    prompts: DataProto,
    step: int,
    target: int,
    generate: Callable[[tuple[Request, ...]], dict[str, DataProto]],
    timer: Callable[[str], AbstractContextManager] = lambda name: nullcontext(),
) -> RoundResult:
    """One round: the allocator's plan for ``prompts``, generated in one call, absorbed and folded into ``state``;
    the prompt filter sees the result. ``target``: the step's prompts; ``timer(name)`` times generation and absorb."""
    view = state.view(step, target)
    plan = allocator.plan(prompts, view)
    wanted = tuple(request for request in plan.requests if request.rows)
    generated = {}
    if wanted:  # a round that leaves every prompt out generates nothing
        with timer("gen"):
            generated = generate(wanted)
    for request in plan.requests:
        if request.rows:
            state.count_generated(request.kind, len(generated[request.name]))
        else:
            generated[request.name] = request.prompts.select_idxs(np.zeros(0, dtype=np.int64))
    with timer(allocator.filter_timer):
        result = allocator.absorb(plan, generated, view)
    state.fold(result)
    prompt_filter.observe(result)
    return result


@dataclass
class RunCounters:
    """Running totals of a run, saved in checkpoints."""

    epoch: int = 0
    gen_round: int = 0  # rounds since the start of training; part of each pilot uid
    cumulative_rollouts: int = 0
    cumulative_trained_rollouts: int = 0
    total_consumed_prompts: int = 0
    total_sampling_rounds: int = 0

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state: dict) -> None:
        known = {f.name for f in fields(self)}
        for name, value in state.items():
            if name not in known:
                raise KeyError(f"unknown counter {name!r}")
            setattr(self, name, int(value))
