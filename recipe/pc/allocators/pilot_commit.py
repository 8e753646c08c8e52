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
import torch
from verl import DataProto

from recipe.pc import checkpoint as ckpt
from recipe.pc import metric_names as m
from recipe.pc.allocation import (
    DownsampleSettings,
    GroupVerdict,
    classify_pilot,
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
from recipe.pc.compact import CompactRows, Segment
from recipe.pc.replay_buffer import BufferEntry, Draw, PilotReplayBuffer
from recipe.pc.settings import PCSettings

# Request names: a round's new pilots, the rest of last round's screened pilots, and the commits.
NEW_PILOTS, SCREEN_REST = "pilot", "screen_rest"


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


# ------------------------------------------------------------------ the buffer in a checkpoint
def buffer_to_plain(entries: list[BufferEntry], next_order: int) -> dict:
    """Entries and the pilot rounds they point into, each round cut to the groups still referenced."""
    rounds, round_of, positions = [], {}, {}
    for e in entries:
        ref = e.payload
        key = id(ref.round)
        if key not in round_of:
            round_of[key] = len(rounds)
            rounds.append(ref.round)
            positions[key] = set()
        positions[key].add(ref.position)
    remap, plain_rounds = {}, []
    for pilot_round in rounds:
        kept = np.array(sorted(positions[id(pilot_round)]), dtype=np.int64)
        remap[id(pilot_round)] = {int(p): i for i, p in enumerate(kept)}
        rows = pilot_round.rollouts.take_groups(kept)
        plain_rounds.append(
            {
                "n_pilot": pilot_round.n_pilot,
                "prompts": ckpt.proto_to_plain(pilot_round.prompts.select_idxs(kept)),
                "rollouts": rows.to_plain(),
                "rollouts_non_tensor": {k: ckpt.to_plain(v, k) for k, v in rows.non_tensor.items()},
            }
        )
    n_values = {e.num_rollouts for e in entries}
    width = n_values.pop() if len(n_values) == 1 else 0
    if n_values:
        raise ValueError(f"buffer entries hold different rollout counts {sorted(n_values | {width})}")

    def column(values, dtype):
        return torch.tensor(values, dtype=dtype)

    return {
        "next_order": int(next_order),
        "rounds": plain_rounds,
        "prompt_id": column([e.prompt_id for e in entries], torch.int64),
        "round": column([round_of[id(e.payload.round)] for e in entries], torch.int64),
        "position": column([remap[id(e.payload.round)][e.payload.position] for e in entries], torch.int64),
        "inserted_step": column([e.inserted_step for e in entries], torch.int64),
        "insertion_order": column([e.insertion_order for e in entries], torch.int64),
        "metric_values": torch.from_numpy(np.stack([e.metric_values for e in entries]))
        if entries
        else torch.zeros(0, 0, dtype=torch.float64),
    }


def buffer_from_plain(d: dict) -> dict:
    """The replay buffer's ``load_state_dict`` input, its payloads rebuilt as ``PilotRef`` into ``PilotRound``."""
    rounds = []
    for r in d["rounds"]:
        non_tensor = {k: ckpt.from_plain(v) for k, v in r["rollouts_non_tensor"].items()}
        rollouts = CompactRows.from_plain(r["rollouts"], non_tensor)
        rounds.append(PilotRound(ckpt.proto_from_plain(r["prompts"]), rollouts, int(r["n_pilot"])))
    entries = []
    columns = [d[k].tolist() for k in ("prompt_id", "round", "position", "inserted_step", "insertion_order")]
    for i, (pid, rnd, pos, step, order) in enumerate(zip(*columns, strict=True)):
        values = d["metric_values"][i].numpy()
        entries.append(BufferEntry(pid, PilotRef(rounds[rnd], pos), values, step, order))
    return {"entries": entries, "next_order": int(d["next_order"])}


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
        # They shape the buffered groups: rollouts stored a prompt, reused a commit, and the commit's own.
        return {"exploration.n": pc.pilot.n, "exploration.n_effective": pc.pilot.n_effective, "rollout.n": pc.n_commit}

    @classmethod
    def check_settings(cls, pc: PCSettings) -> None:
        """Screening pilots is this allocator's: nothing to refuse beyond each group's own ranges."""

    def __init__(self, pc, rng):
        super().__init__(pc, rng)
        self.buffer = PilotReplayBuffer(
            capacity=pc.buffer.size,
            prompt_strategy=pc.buffer.prompt_strategy,
            response_strategy=pc.buffer.response_strategy,
            rng=rng,
            tie_order=pc.buffer.tie_order,
            take_all_order=pc.buffer.take_all_order,
        )
        self.evict_next_epoch: set[int] = set()
        self.screened: ScreenedPilots | None = None  # screens that disagreed, completed next round

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
        """Prompt rows of the drawn prompts, in draw order, and where their reused pilot rollouts lie (a segment per
        run of draws from one pilot round); the rollouts themselves are only copied once, into the step's batch."""
        if not draws:
            return None, []
        runs: list[tuple[PilotRound, list[Draw]]] = []
        for draw in draws:
            pilot_round = draw.entry.payload.round
            if runs and runs[-1][0] is pilot_round:
                runs[-1][1].append(draw)
            else:
                runs.append((pilot_round, [draw]))
        prompt_parts, reused = [], []
        for pilot_round, run in runs:
            positions = np.array([d.entry.payload.position for d in run])
            rows = np.concatenate([d.entry.payload.position * pilot_round.n_pilot + d.response_index for d in run])
            prompt_parts.append(pilot_round.prompts.select_idxs(positions))
            reused.append(Segment(pilot_round.rollouts, rows))
        return concat_rows(prompt_parts, what="buffered prompt rows"), reused

    def _absorb_pilot(self, rows: DataProto, prompts: DataProto, result: RoundResult, step: int, taken) -> None:
        """Band-filter the pilot, park passing groups in the buffer, mark solved prompts for eviction."""
        pilot = self.pc.pilot
        values = metric_values(rows, self.pc.agg_metric)
        verdict = classify_pilot(
            rows.non_tensor_batch["index"],
            values,
            p_lower=pilot.p_lower,
            p_upper=pilot.p_upper,
            evict_threshold=pilot.evict_threshold,
        )
        if verdict.num_prompts != len(prompts) or not (verdict.stats.count == pilot.n).all():
            raise RuntimeError(
                f"pilot returned {verdict.num_prompts} prompts with rollout counts "
                f"{np.unique(verdict.stats.count).tolist()}; expected {len(prompts)} x {pilot.n}"
            )
        result.verdicts.append(Verdict(verdict, values))
        self.evict_next_epoch.update(verdict.stats.prompt_ids[verdict.evict].tolist())
        # A prompt already in this step's batch (committed before an epoch boundary) is not queued twice.
        fresh = ~np.isin(verdict.stats.prompt_ids, list(taken))
        self._keep_pilots(rows, prompts, verdict, values, step, fresh)

    def _keep_pilots(self, rows: DataProto, prompts: DataProto, verdict: GroupVerdict, values, step, fresh) -> None:
        """Park the fresh passing groups in the buffer."""
        passing = np.flatnonzero(verdict.passed & fresh)
        if passing.size:
            stats = verdict.stats
            self._park_in_buffer(rows, prompts, stats.first_row[passing], stats.prompt_ids[passing], values, step)

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
        pilot_round, group_values = self._store_pilots(pilot_rows, prompts, first_rows, values)
        for position, prompt_id in enumerate(prompt_ids.tolist()):
            self.buffer.add(prompt_id, PilotRef(pilot_round, position), group_values[position], step)

    def _store_pilots(
        self, pilot_rows: DataProto, prompts: DataProto, first_rows: np.ndarray, values
    ) -> tuple[PilotRound, np.ndarray]:
        """The given pilot groups (first row of each) stored once, compactly, and their metric values (a row each)."""
        n = self.pc.pilot.n
        # Rows are interleaved, so prompt j owns rows [j*n, (j+1)*n) of the pilot and row j of prompts.
        prompt_pos = first_rows // n
        kept_prompts = prompts.select_idxs(prompt_pos)
        kept_prompts.meta_info = {}
        rollouts = CompactRows.from_proto(pilot_rows, n, groups=prompt_pos)
        pilot_round = PilotRound(prompts=kept_prompts, rollouts=rollouts, n_pilot=n)
        return pilot_round, values.reshape(-1, n)[prompt_pos]

    # ------------------------------------------------------------------ step and epoch ends
    def pending(self) -> int:
        return len(self.buffer)

    def end_step(self, step: int) -> dict:
        """Flush stale entries; the step's buffer counts (then reset) and the buffer's size after the flush."""
        self.buffer.flush_stale(step, self.pc.buffer.max_off_steps)
        counters = self.buffer.counters
        metrics = {
            m.BUFFER_ADDED: counters.add,
            m.BUFFER_POPPED: counters.pop,
            m.BUFFER_FLUSHED: counters.evict,
            m.BUFFER_OVERFLOW: counters.overflow,
            m.BUFFER_SIZE: len(self.buffer),
        }
        counters.reset()
        return metrics

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
            "buffer": buffer_to_plain(self.buffer.entries(), self.buffer.state_dict()["next_order"]),
            "evict_next_epoch": sorted(int(i) for i in self.evict_next_epoch),
        }
        if self.screened is not None:  # written only when pending: states without the key read as none
            state["screened"] = {
                "prompts": ckpt.proto_to_plain(self.screened.prompts),
                "rows": ckpt.proto_to_plain(self.screened.rows),
            }
        return state

    def load_state_dict(self, state: dict) -> None:
        self.buffer.load_state_dict(buffer_from_plain(state["buffer"]))
        self.evict_next_epoch = set(state["evict_next_epoch"])
        screened = state.get("screened")
        if screened is not None and self.pc.pilot.screen_n is None:
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
