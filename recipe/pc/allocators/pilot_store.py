"""The pilot store: passing pilot groups kept once, compactly, the staleness-bounded buffer of the prompts waiting for
a commit, and the prompts a pilot marked for eviction.

Pilot-Commit and the knapsack each hold a ``PilotStore`` and call only its public methods: ``classify`` a round's
pilot (it marks solved prompts for eviction), ``store`` the groups they keep or ``park`` them in the buffer,
``draw_rows`` for the prompts they commit, ``end_step`` (the staleness bound), ``evict`` at an epoch's end, and
``state_dict``/``load_state_dict`` for checkpoints. The buffer (``store.buffer``) ranks, hands out and drops entries.
Plain Python and numpy over DataProto rows: no Ray, no GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from verl import DataProto

from recipe.pc import checkpoint as ckpt
from recipe.pc import metric_names as m
from recipe.pc.allocation import GroupVerdict, classify_pilot
from recipe.pc.allocators.base import concat_rows, metric_values
from recipe.pc.compact import CompactRows, Segment
from recipe.pc.replay_buffer import BufferEntry, Draw, PilotReplayBuffer
from recipe.pc.settings import BufferSettings, PCSettings, PilotSettings


@dataclass
class PilotRound:
    """The kept pilot groups of one round, stored once; buffer entries point into it.

    ``rollouts`` holds ``n_pilot`` consecutive rows per kept prompt, compacted, and ``prompts`` one
    dataloader row per kept prompt, in the same order. It is freed once no entry refers to it.
    """

    prompts: DataProto
    rollouts: CompactRows
    n_pilot: int


@dataclass(frozen=True)
class PilotRef:
    """Buffer payload: where one prompt's pilot group lives."""

    round: PilotRound
    position: int


@dataclass(frozen=True)
class ClassifiedPilot:
    """A round's pilot through the band test: the verdict on each prompt, the rows' metric values, and which prompts
    are fresh (not already in the step's batch), all aligned with ``verdict.stats``."""

    verdict: GroupVerdict
    values: np.ndarray
    fresh: np.ndarray


# ------------------------------------------------------------------ entries in a checkpoint
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
    if len(n_values) > 1:
        raise ValueError(f"buffer entries hold different rollout counts {sorted(n_values)}")

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


class PilotStore:
    """Kept pilot groups, the buffer of those waiting for a commit, and the prompts marked for eviction."""

    @staticmethod
    def state_settings(pc: PCSettings) -> dict:
        """The settings stored groups are shaped by: rollouts stored a prompt, reused a commit, and the commit's own."""
        return {"exploration.n": pc.pilot.n, "exploration.n_effective": pc.pilot.n_effective, "rollout.n": pc.n_commit}

    def __init__(self, pilot: PilotSettings, buffer: BufferSettings, agg_metric: str, rng: np.random.Generator):
        self.pilot = pilot
        self.max_off_steps = buffer.max_off_steps
        self.agg_metric = agg_metric
        self.buffer = PilotReplayBuffer(
            capacity=buffer.size,
            prompt_strategy=buffer.prompt_strategy,
            response_strategy=buffer.response_strategy,
            rng=rng,
            tie_order=buffer.tie_order,
            take_all_order=buffer.take_all_order,
        )
        self.evict_next_epoch: set[int] = set()

    # ------------------------------------------------------------------ a round
    def classify(self, rows: DataProto, prompts: DataProto, taken) -> ClassifiedPilot:
        """Band-test a pilot of ``exploration.n`` interleaved rows a prompt and mark its solved prompts for eviction;
        a prompt in ``taken`` (already in the step's batch) is not fresh."""
        pilot = self.pilot
        values = metric_values(rows, self.agg_metric)
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
        self.evict_next_epoch.update(verdict.stats.prompt_ids[verdict.evict].tolist())
        fresh = ~np.isin(verdict.stats.prompt_ids, list(taken))
        return ClassifiedPilot(verdict, values, fresh)

    def store(
        self, rows: DataProto, prompts: DataProto, first_rows: np.ndarray, values: np.ndarray
    ) -> tuple[list[PilotRef], np.ndarray]:
        """The given pilot groups (first row of each) stored once, compactly: where each lies, and its metric values
        (a row each). Nothing enters the buffer."""
        n = self.pilot.n
        # Rows are interleaved, so prompt j owns rows [j*n, (j+1)*n) of the pilot and row j of prompts.
        prompt_pos = first_rows // n
        kept_prompts = prompts.select_idxs(prompt_pos)
        kept_prompts.meta_info = {}
        rollouts = CompactRows.from_proto(rows, n, groups=prompt_pos)
        pilot_round = PilotRound(prompts=kept_prompts, rollouts=rollouts, n_pilot=n)
        refs = [PilotRef(pilot_round, position) for position in range(len(prompt_pos))]
        return refs, values.reshape(-1, n)[prompt_pos]

    def park(self, rows: DataProto, prompts: DataProto, first_rows: np.ndarray, prompt_ids: np.ndarray, values, step):
        """Store the given groups and buffer each under its prompt id, inserted at ``step``."""
        refs, group_values = self.store(rows, prompts, first_rows, values)
        for ref, prompt_id, row in zip(refs, prompt_ids.tolist(), group_values, strict=True):
            self.buffer.add(prompt_id, ref, row, step)

    def draw_rows(self, draws: list[Draw]) -> tuple[DataProto | None, list[Segment]]:
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

    # ------------------------------------------------------------------ step and epoch ends
    def end_step(self, step: int) -> dict:
        """Drop entries past the staleness bound; the step's buffer counts (then reset) and the size after the drop."""
        self.buffer.flush_stale(step, self.max_off_steps)
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

    def evict(self, dataset) -> int:
        """Remove the marked prompts from ``dataset`` (one that can evict) and forget the marks; the rows removed."""
        evicted_rows = 0
        if self.evict_next_epoch and hasattr(dataset, "evict"):
            evicted_rows = dataset.evict(self.evict_next_epoch)
        self.evict_next_epoch.clear()
        return evicted_rows

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        return {
            "buffer": buffer_to_plain(self.buffer.entries(), self.buffer.state_dict()["next_order"]),
            "evict_next_epoch": sorted(int(i) for i in self.evict_next_epoch),
        }

    def load_state_dict(self, state: dict) -> None:
        self.buffer.load_state_dict(buffer_from_plain(state["buffer"]))
        self.evict_next_epoch = set(state["evict_next_epoch"])

    def summary(self) -> str:
        return f"buffer_size={len(self.buffer)} evict_next_epoch={len(self.evict_next_epoch)}"
