"""The pilot store that Pilot-Commit and the knapsack each hold, through its public methods only: classify a pilot,
store and park its groups, draw their rows back, the staleness bound, eviction, and the state it saves."""

import io

import numpy as np
import torch

from recipe.pc import metric_names as names
from recipe.pc.allocators.pilot_store import PilotStore
from recipe.pc.compact import assemble
from recipe.pc.settings import BufferSettings, PilotSettings
from recipe.pc.testing import pilot_of, prompt_rows, rollout_rows

N = 4
PILOT = PilotSettings(n=N, n_effective=N, screen_n=None, p_lower=0.25, p_upper=0.25, evict_threshold=1.0)
BUFFER = BufferSettings(
    size=8,
    max_off_steps=1,
    prompt_strategy="random",
    response_strategy="first_n",
    tie_order="newest_first",
    take_all_order="ranked",
)


def a_store(seed=0) -> PilotStore:
    return PilotStore(PILOT, BUFFER, "acc", np.random.default_rng(seed))


def a_pilot(correct_counts, first_id=100):
    """Interleaved pilot rows of prompts ``first_id, first_id + 1, ...`` and their prompt rows."""
    ids, values = pilot_of(correct_counts, N)
    ids += first_id - 100
    return rollout_rows(ids, values), prompt_rows(ids[::N])


def park_passing(store, rows, prompts, step, taken=frozenset()):
    pilot = store.classify(rows, prompts, taken)
    keep = pilot.verdict.passed & pilot.fresh
    stats = pilot.verdict.stats
    store.park(rows, prompts, stats.first_row[keep], stats.prompt_ids[keep], pilot.values, step)
    return pilot


def pilot_responses(store, draws):
    """The reused rollouts' (prompt, position) tags, in batch order, and the drawn prompts' ids."""
    prompts, segments = store.draw_rows(draws)
    rows = assemble(segments, None, "reused rows")
    return rows.batch["responses"].tolist(), prompts.non_tensor_batch["index"].tolist()


def test_a_pilot_is_classified_and_its_solved_prompts_marked_for_eviction():
    store = a_store()
    rows, prompts = a_pilot([2, 0, 4, 1, 3])
    pilot = store.classify(rows, prompts, taken={103})
    assert pilot.verdict.passed.tolist() == [True, False, False, True, True]
    assert pilot.fresh.tolist() == [True, True, True, False, True]
    assert pilot.values.tolist() == rows.non_tensor_batch["acc"].tolist()
    assert store.evict_next_epoch == {102} and len(store.buffer) == 0  # classifying buffers nothing


def test_parked_groups_come_back_as_their_own_pilot_rows_in_draw_order():
    store = a_store()
    rows, prompts = a_pilot([2, 0, 1, 3])
    park_passing(store, rows, prompts, step=1, taken={103})
    assert [e.prompt_id for e in store.buffer.entries()] == [100, 102]
    assert [e.metric_values.tolist() for e in store.buffer.entries()] == [[1, 1, 0, 0], [1, 0, 0, 0]]
    later_rows, later_prompts = a_pilot([1], first_id=200)
    park_passing(store, later_rows, later_prompts, step=2)
    draws = sorted(store.buffer.sample(3, N), key=lambda d: -d.entry.prompt_id)
    responses, ids = pilot_responses(store, draws)
    assert ids == [200, 102, 100]
    assert responses == [[i, p] for i in (200, 102, 100) for p in range(N)]
    assert store.draw_rows([]) == (None, [])


def test_stored_groups_stay_out_of_the_buffer_until_the_caller_adds_them():
    store = a_store()
    rows, prompts = a_pilot([0, 2, 4])
    refs, values = store.store(rows, prompts, np.array([0, 2 * N]), rows.non_tensor_batch["acc"])
    assert len(store.buffer) == 0 and values.tolist() == [[0, 0, 0, 0], [1, 1, 1, 1]]
    assert [r.position for r in refs] == [0, 1] and refs[0].round is refs[1].round
    store.buffer.add(102, refs[1], values[1], step=1)
    (draw,) = store.buffer.sample(1, N)
    assert pilot_responses(store, [draw]) == ([[102, p] for p in range(N)], [102])


def test_the_staleness_bound_drops_entries_older_than_max_off_steps_after_a_step():
    store = a_store()
    rows, prompts = a_pilot([1, 2])
    park_passing(store, rows, prompts, step=1)
    store.buffer.take([101])
    kept = store.end_step(2)  # one step old: within the bound
    assert [e.prompt_id for e in store.buffer.entries()] == [100]
    assert (kept[names.BUFFER_ADDED], kept[names.BUFFER_POPPED], kept[names.BUFFER_FLUSHED]) == (2, 1, 0)
    assert kept[names.BUFFER_SIZE] == 1
    flushed = store.end_step(3)
    assert len(store.buffer) == 0 and flushed[names.BUFFER_FLUSHED] == 1
    assert (flushed[names.BUFFER_ADDED], flushed[names.BUFFER_POPPED], flushed[names.BUFFER_SIZE]) == (0, 0, 0)


class EvictingDataset:
    def __init__(self):
        self.evicted = []

    def evict(self, ids):
        self.evicted.append(set(ids))
        return 3 * len(ids)


def test_eviction_removes_the_marked_prompts_once_and_forgets_the_marks():
    store, dataset = a_store(), EvictingDataset()
    store.classify(*a_pilot([4, 2, 4]), taken=set())
    assert store.evict(dataset) == 6 and dataset.evicted == [{100, 102}]
    assert store.evict_next_epoch == set() and store.evict(dataset) == 0 and len(dataset.evicted) == 1
    store.classify(*a_pilot([4]), taken=set())
    assert store.evict(object()) == 0 and store.evict_next_epoch == set()  # a dataset that cannot evict


def test_the_saved_state_is_plain_data_and_restores_the_buffer_and_the_marks():
    store = a_store()
    rows, prompts = a_pilot([1, 4, 3, 2])
    park_passing(store, rows, prompts, step=2)
    store.buffer.take([102])
    saved = io.BytesIO()
    torch.save(store.state_dict(), saved)
    saved.seek(0)
    state = torch.load(saved, weights_only=True)
    assert set(state) == {"buffer", "evict_next_epoch"}  # the keys Pilot-Commit's saved states have

    restored = a_store(seed=1)
    restored.load_state_dict(state)
    assert restored.evict_next_epoch == {101} and restored.summary() == store.summary()
    for a, b in zip(restored.buffer.entries(), store.buffer.entries(), strict=True):
        assert (a.prompt_id, a.inserted_step, a.insertion_order) == (b.prompt_id, b.inserted_step, b.insertion_order)
        assert a.metric_values.tolist() == b.metric_values.tolist()
    drawn = [sorted(s.buffer.sample(2, N), key=lambda d: d.entry.prompt_id) for s in (restored, store)]
    assert pilot_responses(restored, drawn[0]) == pilot_responses(store, drawn[1])
    restored.buffer.add(7, None, [1.0], step=3)  # the insertion counter resumes where it stopped
    assert restored.buffer.entries()[-1].insertion_order == 3
