"""Knapsack commits: Pilot-Commit's pilot and buffer, each round's commits chosen and sized by a knapsack.

Each round pilots the dataloader's new prompts as Pilot-Commit does, and parks the prompts whose pilot lands in the
band in the buffer. The prompts Pilot-Commit would not buffer (the band's edges: deferred as too incorrect, skipped
as too correct, or in the band with rows that all agree) are kept too, for the next round's plan only.

That plan commits as many prompts as Pilot-Commit would (what the step still needs, at most the buffered count) with
the rollouts Pilot-Commit would spend on them (``rollout.n`` each), so a step trains ``train_batch_size`` prompts on
``train_batch_size * rollout.n`` commit rollouts as Pilot-Commit's does. Which prompts, buffered or edge, and how many
rollouts each gets (from ``algorithm.knapsack.min_commit`` to ``max_commit`` in steps of ``unit``) is the knapsack of
``recipe.pc.knapsack`` over every candidate's value of a commit size given its pilot; ties are drawn at random.

A buffered prompt the knapsack passes over stays buffered, until it goes stale, as in Pilot-Commit. An edge prompt it
passes over is dropped: deferred or skipped for this epoch, as Pilot-Commit does with every edge. A committed prompt
trains on its reused pilot rows plus its commit rows as one GRPO group, whose size varies with its commit; a prompt
is committed at most once a step (the candidates are distinct prompts, none already in the step's batch).

Like Pilot-Commit it holds a ``PilotStore`` (the kept pilot groups, the buffer, the eviction marks and their saved
state) and calls only its public methods; it shares nothing else with Pilot-Commit's allocator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from verl import DataProto

from recipe.pc import metric_names as m
from recipe.pc.allocation import DownsampleSettings, commit_size, select_responses
from recipe.pc.allocators.base import (
    COMMIT,
    PILOT,
    Allocator,
    Request,
    RoundPlan,
    RoundResult,
    StepView,
    Verdict,
    register,
)
from recipe.pc.allocators.pilot_store import ClassifiedPilot, PilotStore, buffer_from_plain, buffer_to_plain
from recipe.pc.compact import Segment
from recipe.pc.errors import PCConfigError, PCConfigErrors
from recipe.pc.knapsack import commit_values, size_commits
from recipe.pc.registry import KeyGroup, key
from recipe.pc.replay_buffer import BufferEntry, Draw, PilotReplayBuffer
from recipe.pc.settings import PCSettings

NEW_PILOTS = "pilot"  # the request name of a round's pilots


@dataclass(frozen=True)
class KnapsackSettings(KeyGroup):
    """The knapsack's commit sizes, ``algorithm.knapsack.*``; its checks against ``rollout.n`` are the allocator's."""

    name = "knapsack"
    unit: int = key("algorithm.knapsack.unit", 4)  # commit sizes are multiples of it; it must divide rollout.n
    min_commit: int = key("algorithm.knapsack.min_commit", 4)  # the smallest non-zero commit, at most rollout.n
    max_commit: int = key("algorithm.knapsack.max_commit", 32)  # the largest commit, at least rollout.n
    # Beta(prior_alpha, prior_beta): the pass rate's prior before the pilot (1, 1: uniform). A smaller prior_alpha
    # doubts that a prompt whose pilot all failed can be solved, so commits go to it less.
    prior_alpha: float = key("algorithm.knapsack.prior_alpha", 1.0)
    prior_beta: float = key("algorithm.knapsack.prior_beta", 1.0)

    @property
    def commits(self) -> tuple[int, ...]:
        """The sizes a commit may have, 0 (none) first."""
        return (0, *range(self.min_commit, self.max_commit + 1, self.unit))

    def validate(self) -> None:
        if self.unit < 1:
            raise PCConfigError(f"algorithm.knapsack.unit={self.unit} must be at least 1")
        if not self.unit <= self.min_commit <= self.max_commit:
            raise PCConfigError(
                f"algorithm.knapsack.unit={self.unit}, min_commit={self.min_commit} and max_commit={self.max_commit} "
                "must satisfy unit <= min_commit <= max_commit"
            )
        for name, value in (("min_commit", self.min_commit), ("max_commit", self.max_commit)):
            if value % self.unit:
                raise PCConfigError(
                    f"algorithm.knapsack.{name}={value} must be a multiple of algorithm.knapsack.unit={self.unit}"
                )
        for name, value in (("prior_alpha", self.prior_alpha), ("prior_beta", self.prior_beta)):
            if not value > 0:  # also rejects NaN
                raise PCConfigError(f"algorithm.knapsack.{name}={value} must be positive (a Beta prior's parameter)")


@dataclass(frozen=True)
class SizedContext:
    """What ``plan`` took out of the buffer and the edges, for ``absorb``: the draws sorted by commit size, where
    their reused pilot rows lie, and each draw's size."""

    prompts: DataProto
    draws: list[Draw]
    reused: list[Segment]
    sizes: np.ndarray


@dataclass
class StepTally:
    """What the step's knapsacks chose, for its metrics."""

    sizes: list[np.ndarray] = field(default_factory=list)
    value: float = 0.0
    uniform_value: float = 0.0
    edge_candidates: int = 0
    edge_committed: int = 0


def commit_request(size: int) -> str:
    return f"{COMMIT}_{size}"


@register
class KnapsackAllocator(Allocator):
    name = "knapsack"
    filter_timer = "pilot_filter"
    keys = KnapsackSettings

    @classmethod
    def group_size(cls, pc: PCSettings) -> int:
        # The mean group: a full step spends Pilot-Commit's commit rollouts on its prompts.
        return pc.pilot.n_effective + pc.n_commit

    @classmethod
    def group_size_range(cls, pc: PCSettings) -> tuple[int, int]:
        reused, k = pc.pilot.n_effective, pc.group(KnapsackSettings)
        return reused + k.min_commit, reused + k.max_commit

    @classmethod
    def idle_rounds(cls, pc: PCSettings) -> int:
        # A step's first round commits nothing when nothing is buffered.
        return 1

    @classmethod
    def state_settings(cls, pc: PCSettings) -> dict:
        return PilotStore.state_settings(pc)

    @classmethod
    def check_settings(cls, pc: PCSettings) -> None:
        """Every setting the knapsack cannot run, all at once, each naming the value to set."""
        super().check_settings(pc)  # the base refuses screening pilots
        k, n, problems = pc.group(KnapsackSettings), pc.n_commit, []
        if n % k.unit:
            problems.append(
                f"actor_rollout_ref.rollout.n={n} must be a multiple of algorithm.knapsack.unit={k.unit}: set "
                f"algorithm.knapsack.unit to a divisor of {n} (a round spends rollout.n a prompt)"
            )
        if not k.min_commit <= n <= k.max_commit:
            wide = -(-2 * n // k.unit) * k.unit  # twice rollout.n, a multiple of the unit
            fix = f"max_commit={wide}" if n > k.max_commit else f"min_commit={k.unit}"
            problems.append(
                f"actor_rollout_ref.rollout.n={n} must lie in [algorithm.knapsack.min_commit={k.min_commit}, "
                f"algorithm.knapsack.max_commit={k.max_commit}], so that uniform sizing is one of the allocations: "
                f"set algorithm.knapsack.{fix}"
            )
        if k.min_commit == k.max_commit:
            problems.append(
                f"algorithm.knapsack.min_commit = max_commit = {k.min_commit} leaves every commit one size: use "
                "algorithm.rollout_allocation=pilot_commit, or widen the range"
            )
        if pc.group(DownsampleSettings).n is not None:
            problems.append(
                f"algorithm.downsample.n={pc.group(DownsampleSettings).n} down-samples commits of one size; "
                "algorithm.rollout_allocation=knapsack sizes each commit itself: set it to null"
            )
        if pc.buffer.prompt_strategy != "random":
            problems.append(
                f"algorithm.buffer_sampling_method={pc.buffer.prompt_strategy!r} ranks buffered prompts, which "
                "algorithm.rollout_allocation=knapsack does by their values (ties at random): set it to random"
            )
        if pc.reference.preset == "reference":
            problems.append(
                "preset=reference runs the authors' Pilot-Commit; algorithm.rollout_allocation=knapsack is not "
                "theirs: choose preset=improved (PRESET=improved in the paper scripts, whose default is reference) or "
                "drop preset=reference"
            )
        if pc.min_train_prompts != pc.train_batch_size and not pc.raise_on_unfilled_batch:
            problems.append(
                f"algorithm.rollout_allocation=knapsack trains full steps only (its groups differ in size, so an "
                f"unfilled step cannot be cut to whole mini-batches by its prompt count): set "
                f"algorithm.min_train_prompts={pc.train_batch_size} (data.train_batch_size) or "
                "algorithm.raise_on_unfilled_batch=true"
            )
        if problems:
            raise PCConfigErrors(problems)

    def __init__(self, pc, rng):
        super().__init__(pc, rng)
        self.store = PilotStore(pc.pilot, pc.buffer, pc.agg_metric, rng)
        self.edges: list[BufferEntry] = []  # last round's pilots that Pilot-Commit would not buffer
        self.tally = StepTally()

    @property
    def buffer(self) -> PilotReplayBuffer:
        return self.store.buffer

    @property
    def evict_next_epoch(self) -> set[int]:
        return self.store.evict_next_epoch

    # ------------------------------------------------------------------ a round
    def plan(self, prompts: DataProto, view: StepView) -> RoundPlan:
        draws, sizes = self._choose(commit_size(view.needed, len(self.buffer)), view)
        commit_prompts, reused = self.store.draw_rows(draws)
        requests = [Request(NEW_PILOTS, prompts, self.pc.pilot.n, PILOT)]
        for size in np.unique(sizes).tolist():
            block = np.flatnonzero(sizes == size)  # draws are sorted by size: one block each
            requests.append(Request(commit_request(size), commit_prompts.select_idxs(block), size, COMMIT))
        return RoundPlan(tuple(requests), SizedContext(prompts, draws, reused, sizes))

    def _choose(self, count: int, view: StepView) -> tuple[list[Draw], np.ndarray]:
        """The knapsack over the buffered and edge prompts: the draws it commits, sorted by size, and their sizes.
        The buffered ones leave the buffer; every edge is offered once, then dropped."""
        candidates, self.edges = self.buffer.entries() + self.edges, []
        if count == 0 or not candidates:
            return [], np.zeros(0, dtype=np.int64)
        # In random order: the solver keeps the first of equal candidates, so ties are drawn at random.
        candidates = [candidates[i] for i in self.rng.permutation(len(candidates))]
        n_reused, strategy = self.pc.pilot.n_effective, self.pc.buffer.response_strategy
        reused = [select_responses(e.metric_values, n_reused, strategy, self.rng) for e in candidates]
        pilot = [self._binary(e) for e in candidates]
        k = self.pc.group(KnapsackSettings)
        commits = np.asarray(k.commits, dtype=np.int64)
        values = commit_values(
            successes=np.array([v.sum() for v in pilot]),
            pilot_n=np.array([len(v) for v in pilot]),
            reused_successes=np.array([v[i].sum() for v, i in zip(pilot, reused, strict=True)]),
            reused_n=np.full(len(candidates), n_reused),
            commits=commits,
            prior_alpha=k.prior_alpha,
            prior_beta=k.prior_beta,
        )
        sized = size_commits(values, commits, count, self.pc.n_commit, k.unit)
        chosen = np.flatnonzero(sized.sizes)
        chosen = chosen[np.argsort(sized.sizes[chosen], kind="stable")]
        ids = [candidates[i].prompt_id for i in chosen]
        if set(ids) & view.committed_ids or len(set(ids)) != len(ids):
            raise RuntimeError(f"step {view.step}: the knapsack chose prompts already committed in it: {sorted(ids)}")
        buffered = {e.prompt_id for e in self.buffer.entries()}
        self.buffer.take([i for i in ids if i in buffered])
        self._count(sized, chosen, candidates, buffered)
        draws = [Draw(candidates[i], reused[i]) for i in chosen]
        return draws, sized.sizes[chosen]

    def _binary(self, entry: BufferEntry) -> np.ndarray:
        values = entry.metric_values
        if not np.isin(values, (0.0, 1.0)).all():
            raise ValueError(
                f"algorithm.agg_metric={self.pc.agg_metric!r} gave prompt {entry.prompt_id} the pilot values "
                f"{np.unique(values).tolist()}; algorithm.rollout_allocation=knapsack models a pass rate and needs "
                "0 or 1 per rollout (acc)"
            )
        return values

    def _count(self, sized, chosen: np.ndarray, candidates: list[BufferEntry], buffered: set) -> None:
        edge = np.array([e.prompt_id not in buffered for e in candidates])
        self.tally.sizes.append(sized.sizes[chosen])
        self.tally.value += sized.value
        self.tally.uniform_value += sized.uniform_value
        self.tally.edge_candidates += int(edge.sum())
        self.tally.edge_committed += int(edge[chosen].sum())

    def absorb(self, plan: RoundPlan, generated: dict[str, DataProto], view: StepView) -> RoundResult:
        ctx: SizedContext = plan.context
        result = RoundResult()
        taken = view.committed_ids | {d.entry.prompt_id for d in ctx.draws}
        rows = generated[NEW_PILOTS]
        pilot = self.store.classify(rows, ctx.prompts, taken)
        result.verdicts.append(Verdict(pilot.verdict, pilot.values))
        self._keep_pilots(rows, ctx.prompts, pilot, view.step)
        if not ctx.draws:
            return result
        result.committed_ids = np.array([d.entry.prompt_id for d in ctx.draws], dtype=np.int64)
        result.commit_ages = np.array([view.step - d.entry.inserted_step for d in ctx.draws], dtype=np.int64)
        commits = [Segment(generated[commit_request(size)]) for size in np.unique(ctx.sizes).tolist()]
        result.segments = [*ctx.reused, *commits]
        return result

    def _keep_pilots(self, rows: DataProto, prompts: DataProto, pilot: ClassifiedPilot, step: int) -> None:
        """Park the band's fresh prompts in the buffer and keep the other fresh ones for the next plan. An edge prompt
        that is still buffered from an earlier pilot keeps its buffered entry, as Pilot-Commit does."""
        stats = pilot.verdict.stats
        band = pilot.verdict.passed & pilot.fresh
        edge = ~pilot.verdict.passed & pilot.fresh & np.array([i not in self.buffer for i in stats.prompt_ids.tolist()])
        kept = np.flatnonzero(band | edge)
        if not kept.size:
            return
        refs, group_values = self.store.store(rows, prompts, stats.first_row[kept], pilot.values)
        for position, i in enumerate(kept.tolist()):
            prompt_id, ref = int(stats.prompt_ids[i]), refs[position]
            if band[i]:
                self.buffer.add(prompt_id, ref, group_values[position], step)
            else:
                self.edges.append(BufferEntry(prompt_id, ref, group_values[position], step, -1))

    # ------------------------------------------------------------------ step and epoch ends
    def pending(self) -> int:
        return len(self.buffer) + len(self.edges)

    def end_step(self, step: int) -> dict:
        metrics = self.store.end_step(step)
        tally, self.tally = self.tally, StepTally()
        sizes = np.concatenate(tally.sizes).astype(np.float64) if tally.sizes else np.zeros(0)
        metrics[f"{m.KNAPSACK_COMMIT_SIZE}/count"] = int(sizes.size)
        if sizes.size:
            for stat in ("mean", "std", "min", "max"):
                metrics[f"{m.KNAPSACK_COMMIT_SIZE}/{stat}"] = float(getattr(sizes, stat)())
        metrics[m.KNAPSACK_VALUE] = tally.value
        metrics[m.KNAPSACK_UNIFORM_VALUE] = tally.uniform_value
        metrics[m.KNAPSACK_EDGE_CANDIDATES] = tally.edge_candidates
        metrics[m.KNAPSACK_EDGE_COMMITTED] = tally.edge_committed
        metrics[m.KNAPSACK_EDGE_SHARE] = tally.edge_committed / max(tally.edge_candidates, 1)
        return metrics

    def end_epoch(self, dataset) -> int:
        # An edge prompt the pilot marked solved leaves the data now: it must not be committed next epoch either.
        evicted = {int(i) for i in self.evict_next_epoch} if hasattr(dataset, "evict") else set()
        self.edges = [edge for edge in self.edges if int(edge.prompt_id) not in evicted]
        return self.store.evict(dataset)

    def drop_pending(self) -> int:
        dropped, self.edges = len(self.edges), []
        return self.buffer.flush_all() + dropped

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        # The store's keys beside the edges: Pilot-Commit's state layout with one key more.
        return {**self.store.state_dict(), "edges": buffer_to_plain(self.edges, 0)}

    def load_state_dict(self, state: dict) -> None:
        self.store.load_state_dict(state)
        self.edges = buffer_from_plain(state["edges"])["entries"]

    def summary(self) -> str:
        # Pilot-Commit's fields, so that save and resume lines read alike; the knapsack never screens.
        return f"{self.store.summary()} screened=0 edges={len(self.edges)}"
