"""Staleness-bounded replay buffer of pilot groups, keyed by prompt id.

The buffer does not know what a rollout is: each entry carries an opaque payload (the trainer
stores where the prompt's compacted pilot rollouts lie) plus the per-rollout metric values used to
rank prompts and to down-sample responses. That keeps it testable without verl or Ray.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recipe.pc.allocation import select_responses, stale_mask

PROMPT_STRATEGIES = ("random", "max_variance", "most_recent", "least_recent")
RESPONSE_STRATEGIES = ("max_variance", "first_n")
# max_variance among entries of equal (std, step): the newer one first, or the older one (the reference's order).
TIE_ORDERS = ("newest_first", "oldest_first")
# A draw that takes every buffered prompt: in the strategy's order, or in insertion order (the reference's).
TAKE_ALL_ORDERS = ("ranked", "insertion")


@dataclass
class BufferEntry:
    prompt_id: int
    payload: Any
    metric_values: np.ndarray  # one value of the aggregation metric per stored rollout
    inserted_step: int
    insertion_order: int  # global add counter: breaks ties between entries of the same step
    metric_mean: float = field(init=False)
    metric_std: float = field(init=False)

    def __post_init__(self) -> None:
        self.metric_values = np.asarray(self.metric_values, dtype=np.float64)
        self.metric_mean = float(self.metric_values.mean())
        self.metric_std = float(self.metric_values.std())

    @property
    def num_rollouts(self) -> int:
        return int(self.metric_values.shape[0])


@dataclass
class Draw:
    """One prompt taken out of the buffer for a commit, with the stored rollouts to reuse."""

    entry: BufferEntry
    response_index: np.ndarray


@dataclass
class BufferCounters:
    add: int = 0
    pop: int = 0
    evict: int = 0  # dropped for staleness or at a forced flush
    overflow: int = 0  # dropped because the buffer was full

    def reset(self) -> None:
        self.add = self.pop = self.evict = self.overflow = 0


class PilotReplayBuffer:
    """Prompts whose pilot landed in the band, waiting to be committed.

    Capacity is enforced by dropping the oldest entries. Re-adding a prompt id replaces its entry.
    """

    def __init__(
        self,
        capacity: int,
        prompt_strategy: str,
        response_strategy: str,
        rng: np.random.Generator,
        tie_order: str = "newest_first",
        take_all_order: str = "ranked",
    ):
        if capacity <= 0:
            raise ValueError(f"algorithm.buffer_size must be positive, got {capacity}")
        if prompt_strategy not in PROMPT_STRATEGIES:
            raise ValueError(f"algorithm.buffer_sampling_method={prompt_strategy!r}; choose one of {PROMPT_STRATEGIES}")
        if response_strategy not in RESPONSE_STRATEGIES:
            raise ValueError(
                f"algorithm.buffer_response_sampling_method={response_strategy!r}; choose one of {RESPONSE_STRATEGIES}"
            )
        if tie_order not in TIE_ORDERS:
            raise ValueError(f"algorithm.buffer_tie_order={tie_order!r}; choose one of {TIE_ORDERS}")
        if take_all_order not in TAKE_ALL_ORDERS:
            raise ValueError(f"algorithm.buffer_take_all_order={take_all_order!r}; choose one of {TAKE_ALL_ORDERS}")
        self.tie_order = tie_order
        self.take_all_order = take_all_order
        self.capacity = int(capacity)
        self.prompt_strategy = prompt_strategy
        self.response_strategy = response_strategy
        self.rng = rng
        self._entries: OrderedDict[int, BufferEntry] = OrderedDict()
        self._next_order = 0
        self.counters = BufferCounters()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, prompt_id: int) -> bool:
        return int(prompt_id) in self._entries

    def entries(self) -> list[BufferEntry]:
        return list(self._entries.values())

    def add(self, prompt_id: int, payload: Any, metric_values: np.ndarray, step: int) -> None:
        prompt_id = int(prompt_id)
        self._entries.pop(prompt_id, None)
        self._entries[prompt_id] = BufferEntry(prompt_id, payload, metric_values, int(step), self._next_order)
        self._next_order += 1
        self.counters.add += 1
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)  # insertion order: the oldest entry goes first
            self.counters.overflow += 1

    def _rank(self, entries: list[BufferEntry], size: int) -> list[int]:
        """Positions (into ``entries``) of the ``size`` prompts the strategy picks, in pick order."""
        steps = np.array([e.inserted_step for e in entries], dtype=np.int64)
        order = np.array([e.insertion_order for e in entries], dtype=np.int64)
        if self.prompt_strategy == "random":
            return self.rng.choice(len(entries), size=size, replace=False).tolist()
        if self.prompt_strategy == "max_variance":
            std = np.array([e.metric_std for e in entries])
            tie = order if self.tie_order == "oldest_first" else -order
            ranked = np.lexsort((tie, -steps, -std))  # highest spread, then newest step, then the tie order
        elif self.prompt_strategy == "most_recent":
            ranked = np.lexsort((-order, -steps))
        else:  # least_recent
            ranked = np.lexsort((order, steps))
        return ranked[:size].tolist()

    def sample(self, size: int, n_responses: int) -> list[Draw]:
        """Remove and return ``min(size, len(self))`` prompts, each with ``n_responses`` rollouts chosen."""
        size = min(int(size), len(self._entries))
        if size <= 0:
            return []
        entries = self.entries()
        if size == len(entries) and self.take_all_order == "insertion":
            picked = entries  # in the order they were buffered
        else:
            picked = [entries[i] for i in self._rank(entries, size)]
        draws = []
        for entry in picked:
            del self._entries[entry.prompt_id]
            index = select_responses(entry.metric_values, n_responses, self.response_strategy, self.rng)
            draws.append(Draw(entry=entry, response_index=index))
        self.counters.pop += len(draws)
        return draws

    def take(self, prompt_ids) -> list[BufferEntry]:
        """Remove and return the entries of ``prompt_ids``, in that order (a caller that ranks prompts itself)."""
        taken = [self._entries.pop(int(prompt_id)) for prompt_id in prompt_ids]
        self.counters.pop += len(taken)
        return taken

    def flush_stale(self, current_step: int, max_off_steps: int) -> int:
        """Drop entries more than ``max_off_steps`` steps old; returns how many were dropped."""
        if not self._entries:
            return 0
        ids = np.fromiter(self._entries.keys(), dtype=np.int64, count=len(self._entries))
        steps = np.fromiter((e.inserted_step for e in self._entries.values()), dtype=np.int64, count=len(ids))
        stale = ids[stale_mask(steps, current_step, max_off_steps)]
        for prompt_id in stale.tolist():
            del self._entries[prompt_id]
        self.counters.evict += len(stale)
        return int(len(stale))

    def flush_all(self) -> int:
        dropped = len(self._entries)
        self._entries.clear()
        self.counters.evict += dropped
        return dropped

    def state_dict(self) -> dict:
        """Entries and insertion counter (the RNG belongs to the trainer and is saved there)."""
        return {"entries": list(self._entries.values()), "next_order": self._next_order}

    def load_state_dict(self, state: dict) -> None:
        self._entries = OrderedDict((e.prompt_id, e) for e in state["entries"])
        self._next_order = int(state["next_order"])
        self.counters.reset()

    def ages(self, current_step: int) -> np.ndarray:
        return np.array([current_step - e.inserted_step for e in self._entries.values()], dtype=np.int64)
