"""Pilot-Commit: pilot new prompts, buffer those in the band, commit buffered ones.

Each round pilots the dataloader's new prompts with ``exploration.n`` rollouts and commits up to
the batch's remaining need from the buffer with ``rollout.n`` rollouts, both in the round's one
generation call. A pilot group whose pass rate lands in the band waits in the buffer; a committed
prompt trains on its stored pilot rollouts plus its new commit rollouts, as one GRPO group. Solved
prompts are marked for eviction and leave the dataset at the epoch's end. The pilot groups, the
buffer and the eviction marks are a ``PilotStore``'s, one the knapsack holds too.

With ``exploration.screen_n`` a pilot starts with ``screen_n`` rollouts; only prompts whose screen
disagrees get the rest of their pilot, in the next round's generation call, and the band test then
uses all of their pilot rollouts. An all-wrong screen defers the prompt, an all-correct one skips it
for this epoch (never evicted: eviction needs a full pilot).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from verl import DataProto

from recipe.pc import checkpoint as ckpt
from recipe.pc.allocation import (
    DownsampleSettings,
    GroupVerdict,
    commit_size,
    downsample_rows,
    generated_per_group,
    group_rows,
    group_stats,
    subset_stats,
)
from recipe.pc.allocators.base import (
    COMMIT,
    PILOT,
    Allocator,
    Request,
    RoundPlan,
    RoundResult,
    StepView,
    Verdict,
    concat_rows,
    metric_values,
    register,
)
from recipe.pc.allocators.pilot_store import PilotStore
from recipe.pc.compact import Segment
from recipe.pc.replay_buffer import Draw, PilotReplayBuffer
from recipe.pc.settings import PCSettings

# Request names: a round's new pilots, the rest of last round's screened pilots, and the commits.
NEW_PILOTS, SCREEN_REST = "pilot", "screen_rest"


@dataclass
class ScreenedPilots:
    """Prompts whose screen disagreed, with their ``screen_n`` rollouts each, waiting for the rest of the pilot."""

    prompts: DataProto
    rows: DataProto


@dataclass(frozen=True)
class RoundContext:
    """What ``plan`` took out of the buffer and which screens it completes, for ``absorb``."""

    prompts: DataProto
    draws: list[Draw]
    reused: list[Segment]
    continuing: ScreenedPilots | None


@register
class PilotCommitAllocator(Allocator):
    name = "pilot_commit"
    filter_timer = "pilot_filter"

    @classmethod
    def group_size(cls, pc: PCSettings) -> int:
        return pc.pilot.n_effective + pc.n_commit

    @classmethod
    def idle_rounds(cls, pc: PCSettings) -> int:
        # A step's first round commits nothing when the buffer is empty (two with screening).
        return 1 if pc.pilot.screen_n is None else 2

    @classmethod
    def state_settings(cls, pc: PCSettings) -> dict:
        return PilotStore.state_settings(pc)

    @classmethod
    def check_settings(cls, pc: PCSettings) -> None:
        """Screening pilots is this allocator's: nothing to refuse beyond each group's own ranges."""

    def __init__(self, pc, rng):
        super().__init__(pc, rng)
        self.store = PilotStore(pc.pilot, pc.buffer, pc.agg_metric, rng)
        self.screened: ScreenedPilots | None = None  # screens that disagreed, completed next round

    @property
    def buffer(self) -> PilotReplayBuffer:
        return self.store.buffer

    @property
    def evict_next_epoch(self) -> set[int]:
        return self.store.evict_next_epoch

    # ------------------------------------------------------------------ a round
    def plan(self, prompts: DataProto, view: StepView) -> RoundPlan:
        draws = self.buffer.sample(commit_size(view.needed, len(self.buffer)), self.pc.pilot.n_effective)
        commit_prompts, reused = self._take_from_buffer(draws)
        continuing, self.screened = self.screened, None
        pilot = self.pc.pilot
        requests = [Request(NEW_PILOTS, prompts, pilot.screen_n or pilot.n, PILOT)]
        if continuing is not None:
            requests.append(Request(SCREEN_REST, continuing.prompts, pilot.n - pilot.screen_n, PILOT))
        if commit_prompts is not None:
            requests.append(Request(COMMIT, commit_prompts, generated_per_group(self.pc), COMMIT))
        return RoundPlan(tuple(requests), RoundContext(prompts, draws, reused, continuing))

    def absorb(self, plan: RoundPlan, generated: dict[str, DataProto], view: StepView) -> RoundResult:
        ctx: RoundContext = plan.context
        result = RoundResult()
        # A prompt committed this round is not queued again by its own step's pilots.
        taken = view.committed_ids | {d.entry.prompt_id for d in ctx.draws}
        if self.pc.pilot.screen_n is None:
            self._absorb_pilot(generated[NEW_PILOTS], ctx.prompts, result, view.step, taken)
        else:
            self._absorb_screen(generated[NEW_PILOTS], ctx.prompts, result)
        if ctx.continuing is not None:
            rows = self._complete_pilot(ctx.continuing, generated[SCREEN_REST])
            self._absorb_pilot(rows, ctx.continuing.prompts, result, view.step, taken)
        if not ctx.draws:
            return result
        result.committed_ids = np.array([d.entry.prompt_id for d in ctx.draws], dtype=np.int64)
        result.commit_ages = np.array([view.step - d.entry.inserted_step for d in ctx.draws], dtype=np.int64)
        commit_rows = generated[COMMIT]
        if self.pc.group(DownsampleSettings).n is not None:
            n, keep_n = self.pc.group(DownsampleSettings).n, self.pc.n_commit
            values = metric_values(commit_rows, self.pc.agg_metric)
            keep = downsample_rows(values, np.arange(len(ctx.draws)) * n, n, keep_n, self.rng)
            result.downsampled_rollouts = len(ctx.draws) * (n - keep_n)
            commit_rows = commit_rows.select_idxs(keep)
        # In batch order: the reused pilot rollouts, then the commit rollouts (the authors' concatenation).
        result.segments = [*ctx.reused, Segment(commit_rows)]
        return result

    def _take_from_buffer(self, draws: list[Draw]) -> tuple[DataProto | None, list[Segment]]:
        """Prompt rows of the drawn prompts and where their reused pilot rollouts lie."""
        return self.store.draw_rows(draws)

    def _absorb_pilot(self, rows: DataProto, prompts: DataProto, result: RoundResult, step: int, taken) -> None:
        """Band-filter the pilot (solved prompts are marked for eviction) and park the fresh passing groups."""
        pilot = self.store.classify(rows, prompts, taken)
        result.verdicts.append(Verdict(pilot.verdict, pilot.values))
        # A prompt already in this step's batch (committed before an epoch boundary) is not queued twice.
        passing = np.flatnonzero(pilot.verdict.passed & pilot.fresh)
        if passing.size:
            stats = pilot.verdict.stats
            self._park_in_buffer(rows, prompts, stats.first_row[passing], stats.prompt_ids[passing], pilot.values, step)

    def _absorb_screen(self, rows: DataProto, prompts: DataProto, result: RoundResult) -> None:
        """Drop prompts whose screen all agreed (counted as too correct or too incorrect); keep the others,
        with their screen rollouts, for the rest of their pilot in the next round."""
        screen_n = self.pc.pilot.screen_n
        values = metric_values(rows, self.pc.agg_metric)
        stats = group_stats(rows.non_tensor_batch["index"], values)
        if len(stats.prompt_ids) != len(prompts) or not (stats.count == screen_n).all():
            raise RuntimeError(
                f"screening pilot returned {len(stats.prompt_ids)} prompts with rollout counts "
                f"{np.unique(stats.count).tolist()}; expected {len(prompts)} x {screen_n}"
            )
        flat = stats.std == 0
        if flat.any():  # the prompts decided here; the others are counted once their pilot is complete
            out = subset_stats(stats, flat)
            no = np.zeros(int(flat.sum()), dtype=bool)
            verdict = GroupVerdict(out, passed=no, too_correct=out.mean > 0, too_incorrect=out.mean <= 0, evict=no)
            result.verdicts.append(Verdict(verdict, values[group_rows(out.first_row, screen_n)]))
            result.screened_out += int(flat.sum())
        mixed = stats.first_row[~flat]
        if mixed.size:
            self.screened = ScreenedPilots(
                prompts=prompts.select_idxs(mixed // screen_n),
                rows=rows.select_idxs(group_rows(mixed, screen_n)),
            )

    def _complete_pilot(self, screened: ScreenedPilots, rest: DataProto) -> DataProto:
        """Each prompt's screen rollouts followed by the rest of its pilot: ``exploration.n`` rows per prompt."""
        k, s = len(screened.prompts), self.pc.pilot.screen_n
        r = self.pc.pilot.n - s
        both = concat_rows([screened.rows, rest], what="screen and remaining pilot rollouts")
        prompt = np.arange(k)[:, None]
        order = np.concatenate([prompt * s + np.arange(s), k * s + prompt * r + np.arange(r)], axis=1)
        return both.select_idxs(order.ravel())

    def _park_in_buffer(
        self, pilot_rows: DataProto, prompts: DataProto, first_rows: np.ndarray, prompt_ids: np.ndarray, values, step
    ) -> None:
        """Store the passing groups (first pilot row of each given) compactly, one buffer entry per prompt."""
        self.store.park(pilot_rows, prompts, first_rows, prompt_ids, values, step)

    # ------------------------------------------------------------------ step and epoch ends
    def pending(self) -> int:
        return len(self.buffer)

    def end_step(self, step: int) -> dict:
        return self.store.end_step(step)

    def end_epoch(self, dataset) -> int:
        return self.store.evict(dataset)

    def drop_pending(self) -> int:
        return self.buffer.flush_all()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        state = self.store.state_dict()
        if self.screened is not None:  # written only when pending: states without the key read as none
            state["screened"] = {
                "prompts": ckpt.proto_to_plain(self.screened.prompts),
                "rows": ckpt.proto_to_plain(self.screened.rows),
            }
        return state

    def load_state_dict(self, state: dict) -> None:
        self.store.load_state_dict(state)
        self.screened = None
        if state.get("screened") is not None:
            self.screened = ScreenedPilots(
                ckpt.proto_from_plain(state["screened"]["prompts"]), ckpt.proto_from_plain(state["screened"]["rows"])
            )
            self._check_screen_size(self.screened)

    def _check_screen_size(self, screened: ScreenedPilots) -> None:
        """Pending screens hold the screen size they were saved with (rows a prompt); completing them with another
        would misalign every pilot. With none pending, screen_n may change across a resume."""
        prompts, rows = len(screened.prompts), len(screened.rows)
        if prompts == 0 or rows % prompts:
            raise ValueError(f"its screened pilots hold {rows} rollouts for {prompts} prompts")
        saved = rows // prompts
        configured = self.pc.pilot.screen_n
        if configured != saved:
            set_to = "is off" if configured is None else f"is {configured}"
            raise ckpt.CheckpointError(
                f"the state holds {prompts} screened pilots of {saved} rollouts waiting for the rest, "
                f"but algorithm.exploration.screen_n {set_to}; resume with algorithm.exploration.screen_n={saved}"
            )

    def summary(self) -> str:
        screened = 0 if self.screened is None else len(self.screened.prompts)
        return f"{self.store.summary()} screened={screened}"
