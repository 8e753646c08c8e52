"""Pilot-Commit: pilot new prompts, buffer those in the band, commit buffered ones.

Each round pilots the dataloader's new prompts with ``exploration.n`` rollouts and commits up to
the batch's remaining need from the buffer with ``rollout.n`` rollouts, both in the round's one
generation call. A pilot group whose pass rate lands in the band waits in the buffer; a committed
prompt trains on its stored pilot rollouts plus its new commit rollouts, as one GRPO group. Solved
prompts are marked for eviction and leave the dataset at the epoch's end.

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
    PilotVerdict,
    classify_pilot,
    commit_size,
    group_rows,
    group_stats,
    subset_stats,
)
from recipe.pc.allocators.base import COMMIT, PILOT, Allocator, Request, concat_rows, metric_values, register
from recipe.pc.compact import CompactRows, Segment
from recipe.pc.metrics import StepTally
from recipe.pc.replay_buffer import BufferCounters, Draw, PilotReplayBuffer
from recipe.pc.stages.downsample import downsample_rows


@dataclass
class PilotRound:
    """The passing pilot groups of one round, stored once; buffer entries point into it.

    ``rollouts`` holds ``n_pilot`` consecutive rows per passing prompt, compacted, and ``prompts`` one
    dataloader row per passing prompt, in the same order. It is freed once no entry refers to it.
    """

    prompts: DataProto
    rollouts: CompactRows
    n_pilot: int


@dataclass(frozen=True)
class PilotRef:
    """Buffer payload: where one prompt's pilot group lives."""

    round: PilotRound
    position: int


@dataclass
class ScreenedPilots:
    """Prompts whose screen disagreed, with their ``screen_n`` rollouts each, waiting for the rest of the pilot."""

    prompts: DataProto
    rows: DataProto


@register
class PilotCommitAllocator(Allocator):
    name = "pilot_commit"
    filter_timer = "pilot_filter"

    def __init__(self, pc, rng):
        super().__init__(pc, rng)
        self.buffer = PilotReplayBuffer(
            capacity=pc.buffer_size,
            prompt_strategy=pc.prompt_strategy,
            response_strategy=pc.response_strategy,
            rng=rng,
            tie_order=pc.buffer_tie_order,
        )
        self.evict_next_epoch: set[int] = set()
        self._round: tuple | None = None  # what plan() asked for, read back by absorb()
        self.screened: ScreenedPilots | None = None  # screens that disagreed, completed next round

    @property
    def counters(self) -> BufferCounters:
        return self.buffer.counters

    # ------------------------------------------------------------------ a round
    def plan(self, prompts: DataProto, tally: StepTally, step: int) -> list[Request]:
        needed = self.pc.train_batch_size - tally.committed_prompts
        draws = self.buffer.sample(commit_size(needed, len(self.buffer)), self.pc.n_pilot_effective)
        commit_prompts, reused = self._take_from_buffer(draws)
        # Marked before this round's pilot is absorbed: a prompt committed now is not queued again this step.
        tally.committed_ids.update(d.entry.prompt_id for d in draws)
        continuing, self.screened = self.screened, None
        self._round = (prompts, draws, reused, continuing)
        requests = [Request(prompts, self.pc.screen_n or self.pc.n_pilot, PILOT)]
        if continuing is not None:
            requests.append(Request(continuing.prompts, self.pc.n_pilot - self.pc.screen_n, PILOT))
        if commit_prompts is not None:
            requests.append(Request(commit_prompts, self.pc.n_generated, COMMIT))
        return requests

    def absorb(self, generated: list[DataProto], tally: StepTally, step: int) -> list[Segment] | None:
        prompts, draws, reused, continuing = self._round
        self._round = None
        if self.pc.screen_n is None:
            self._absorb_pilot(generated[0], prompts, tally, step)
        else:
            self._absorb_screen(generated[0], prompts, tally)
        if continuing is not None:
            self._absorb_pilot(self._complete_pilot(continuing, generated[1]), continuing.prompts, tally, step)
        if not draws:
            return None
        tally.committed_prompts += len(draws)
        tally.commit_ages.append(np.array([step - d.entry.inserted_step for d in draws]))
        commit_rows = generated[-1]
        if self.pc.downsample_n is not None:
            n, m = self.pc.downsample_n, self.pc.n_commit
            values = metric_values(commit_rows, self.pc.agg_metric)
            keep = downsample_rows(values, np.arange(len(draws)) * n, n, m, self.rng)
            tally.downsampled_rollouts += len(draws) * (n - m)
            commit_rows = commit_rows.select_idxs(keep)
        return self._round_contribution(reused, commit_rows)

    @staticmethod
    def _round_contribution(reused: list[Segment], commit_rows: DataProto) -> list[Segment]:
        """A round's training rows, in batch order: reused pilot rollouts, then the commit rollouts."""
        return [*reused, Segment(commit_rows)]

    def _take_from_buffer(self, draws: list[Draw]) -> tuple[DataProto | None, list[Segment]]:
        """Prompt rows of the drawn prompts, and where their reused pilot rollouts lie (one segment per pilot
        round); the rollouts themselves are only copied once, into the step's training batch."""
        if not draws:
            return None, []
        by_round: dict[int, tuple[PilotRound, list[Draw]]] = {}
        for draw in draws:
            ref: PilotRef = draw.entry.payload
            by_round.setdefault(id(ref.round), (ref.round, []))[1].append(draw)
        prompt_parts, reused = [], []
        for pilot_round, round_draws in by_round.values():
            positions = np.array([d.entry.payload.position for d in round_draws])
            rows = np.concatenate(
                [d.entry.payload.position * pilot_round.n_pilot + d.response_index for d in round_draws]
            )
            prompt_parts.append(pilot_round.prompts.select_idxs(positions))
            reused.append(Segment(pilot_round.rollouts, rows))
        return concat_rows(prompt_parts, what="buffered prompt rows"), reused

    def _absorb_pilot(self, pilot_rows: DataProto, prompts: DataProto, tally: StepTally, step: int) -> None:
        """Band-filter the pilot, park passing groups in the buffer, mark solved prompts for eviction."""
        values = metric_values(pilot_rows, self.pc.agg_metric)
        verdict = classify_pilot(
            pilot_rows.non_tensor_batch["index"],
            values,
            p_lower=self.pc.p_lower,
            p_upper=self.pc.p_upper,
            evict_threshold=self.pc.evict_threshold,
        )
        if verdict.num_prompts != len(prompts) or not (verdict.stats.count == self.pc.n_pilot).all():
            raise RuntimeError(
                f"pilot returned {verdict.num_prompts} prompts with rollout counts "
                f"{np.unique(verdict.stats.count).tolist()}; expected {len(prompts)} x {self.pc.n_pilot}"
            )
        tally.add_verdict(verdict, values)
        self.evict_next_epoch.update(verdict.stats.prompt_ids[verdict.evict].tolist())

        # A prompt already in this step's batch (committed before an epoch boundary) is not queued twice.
        fresh = ~np.isin(verdict.stats.prompt_ids, list(tally.committed_ids))
        passing = np.flatnonzero(verdict.passed & fresh)
        if passing.size == 0:
            return
        self._park_in_buffer(
            pilot_rows, prompts, verdict.stats.first_row[passing], verdict.stats.prompt_ids[passing], values, step
        )

    def _absorb_screen(self, rows: DataProto, prompts: DataProto, tally: StepTally) -> None:
        """Drop prompts whose screen all agreed (counted as too correct or too incorrect); keep the others,
        with their screen rollouts, for the rest of their pilot in the next round."""
        values = metric_values(rows, self.pc.agg_metric)
        stats = group_stats(rows.non_tensor_batch["index"], values)
        if len(stats.prompt_ids) != len(prompts) or not (stats.count == self.pc.screen_n).all():
            raise RuntimeError(
                f"screening pilot returned {len(stats.prompt_ids)} prompts with rollout counts "
                f"{np.unique(stats.count).tolist()}; expected {len(prompts)} x {self.pc.screen_n}"
            )
        flat = stats.std == 0
        if flat.any():  # the prompts decided here; the others are counted once their pilot is complete
            out = subset_stats(stats, flat)
            no = np.zeros(int(flat.sum()), dtype=bool)
            verdict = PilotVerdict(out, passed=no, too_correct=out.mean > 0, too_incorrect=out.mean <= 0, evict=no)
            tally.add_verdict(verdict, values[group_rows(out.first_row, self.pc.screen_n)])
            tally.screened_out += int(flat.sum())
        mixed = stats.first_row[~flat]
        if mixed.size:
            self.screened = ScreenedPilots(
                prompts=prompts.select_idxs(mixed // self.pc.screen_n),
                rows=rows.select_idxs(group_rows(mixed, self.pc.screen_n)),
            )

    def _complete_pilot(self, screened: ScreenedPilots, rest: DataProto) -> DataProto:
        """Each prompt's screen rollouts followed by the rest of its pilot: ``exploration.n`` rows per prompt."""
        k, s, r = len(screened.prompts), self.pc.screen_n, self.pc.n_pilot - self.pc.screen_n
        both = concat_rows([screened.rows, rest], what="screen and remaining pilot rollouts")
        prompt = np.arange(k)[:, None]
        order = np.concatenate([prompt * s + np.arange(s), k * s + prompt * r + np.arange(r)], axis=1)
        return both.select_idxs(order.ravel())

    def _park_in_buffer(
        self, pilot_rows: DataProto, prompts: DataProto, first_rows: np.ndarray, prompt_ids: np.ndarray, values, step
    ) -> None:
        """Store the passing groups (first pilot row of each given) compactly, one buffer entry per prompt."""
        # Rows are interleaved, so prompt j owns rows [j*n, (j+1)*n) of the pilot and row j of prompts.
        prompt_pos = first_rows // self.pc.n_pilot
        kept_prompts = prompts.select_idxs(prompt_pos)
        kept_prompts.meta_info = {}
        rollouts = CompactRows.from_proto(pilot_rows, self.pc.n_pilot, groups=prompt_pos)
        pilot_round = PilotRound(prompts=kept_prompts, rollouts=rollouts, n_pilot=self.pc.n_pilot)
        group_values = values.reshape(-1, self.pc.n_pilot)[prompt_pos]
        for position, prompt_id in enumerate(prompt_ids.tolist()):
            self.buffer.add(prompt_id, PilotRef(pilot_round, position), group_values[position], step)

    # ------------------------------------------------------------------ step and epoch ends
    def pending(self) -> int:
        return len(self.buffer)

    def end_step(self, step: int) -> dict:
        self.buffer.flush_stale(step, self.pc.buffer_max_off_steps)
        return {
            "buffer_stats/local/evict_count": self.buffer.counters.evict,
            "buffer_stats/local/buffer_size": len(self.buffer),
        }

    def end_epoch(self, dataset) -> int:
        evicted_rows = 0
        if self.evict_next_epoch and hasattr(dataset, "evict"):
            evicted_rows = dataset.evict(self.evict_next_epoch)
        self.evict_next_epoch.clear()
        return evicted_rows

    def drop_pending(self) -> int:
        return self.buffer.flush_all()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        state = {
            "buffer": ckpt.buffer_to_plain(self.buffer.entries(), self.buffer.state_dict()["next_order"]),
            "evict_next_epoch": sorted(int(i) for i in self.evict_next_epoch),
        }
        if self.screened is not None:  # written only when pending: states without the key read as none
            state["screened"] = {
                "prompts": ckpt.proto_to_plain(self.screened.prompts),
                "rows": ckpt.proto_to_plain(self.screened.rows),
            }
        return state

    def load_state_dict(self, state: dict) -> None:
        self.buffer.load_state_dict(ckpt.buffer_from_plain(state["buffer"], PilotRound, PilotRef))
        self.evict_next_epoch = set(state["evict_next_epoch"])
        screened = state.get("screened")
        if screened is not None and self.pc.screen_n is None:
            raise ValueError(
                "the state holds screened pilots waiting for the rest of their rollouts, but "
                "algorithm.exploration.screen_n is off; resume with the screen_n it was saved with"
            )
        self.screened = None
        if screened is not None:
            self.screened = ScreenedPilots(
                ckpt.proto_from_plain(screened["prompts"]), ckpt.proto_from_plain(screened["rows"])
            )

    def summary(self) -> str:
        screened = 0 if self.screened is None else len(self.screened.prompts)
        return f"buffer_size={len(self.buffer)} evict_next_epoch={len(self.evict_next_epoch)} screened={screened}"
