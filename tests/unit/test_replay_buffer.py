"""PilotReplayBuffer: strategies, capacity, staleness, response selection (fixes of spec section 14)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recipe.pc.replay_buffer import PROMPT_STRATEGIES, PilotReplayBuffer


def make_buffer(strategy="random", response="max_variance", capacity=100, seed=0):
    return PilotReplayBuffer(capacity, strategy, response, np.random.default_rng(seed))


def fill(buffer, specs):
    """specs: (prompt_id, step, values)."""
    for pid, step, values in specs:
        buffer.add(pid, payload=f"group-{pid}", metric_values=np.array(values, dtype=float), step=step)


def test_least_recent_takes_the_oldest_and_most_recent_the_newest():
    specs = [(10, 3, [1, 0]), (11, 1, [1, 0]), (12, 2, [1, 0]), (13, 1, [0, 1])]
    oldest = make_buffer("least_recent")
    fill(oldest, specs)
    assert [d.entry.prompt_id for d in oldest.sample(3, 2)] == [11, 13, 12]
    newest = make_buffer("most_recent")
    fill(newest, specs)
    assert [d.entry.prompt_id for d in newest.sample(3, 2)] == [10, 12, 13]


def test_max_variance_prefers_spread_then_newer_entries():
    buffer = make_buffer("max_variance")
    fill(buffer, [(1, 1, [1, 1, 1, 0]), (2, 1, [1, 0, 1, 0]), (3, 2, [0, 1, 0, 1]), (4, 3, [0, 0, 0, 1])])
    assert [d.entry.prompt_id for d in buffer.sample(3, 4)] == [3, 2, 4]


def test_sampling_more_than_held_returns_everything_with_down_sampling():
    buffer = make_buffer(response="max_variance")
    fill(buffer, [(1, 1, [1, 1, 1, 0, 0, 0, 0, 0]), (2, 1, [1, 0, 0, 0, 0, 0, 0, 0])])
    draws = buffer.sample(10, 4)
    assert len(buffer) == 0 and len(draws) == 2
    assert all(len(d.response_index) == 4 for d in draws)  # n_effective honoured on the take-all path
    assert [int(d.entry.metric_values[d.response_index].sum()) for d in draws] == [2, 1]
    assert buffer.counters.pop == 2


def test_capacity_drops_the_oldest_and_readding_replaces():
    buffer = make_buffer(capacity=3)
    fill(buffer, [(1, 1, [1, 0]), (2, 1, [1, 0]), (3, 2, [1, 0]), (1, 3, [0, 1]), (4, 3, [1, 0])])
    assert sorted(e.prompt_id for e in buffer.entries()) == [1, 3, 4]
    assert buffer.counters.overflow == 1 and buffer.counters.add == 5
    assert {e.prompt_id: e.inserted_step for e in buffer.entries()}[1] == 3


def test_staleness_flush_and_forced_flush():
    buffer = make_buffer()
    fill(buffer, [(1, 1, [1, 0]), (2, 3, [1, 0]), (3, 5, [1, 0])])
    assert buffer.flush_stale(current_step=5, max_off_steps=2) == 1
    assert sorted(e.prompt_id for e in buffer.entries()) == [2, 3]
    assert buffer.flush_all() == 2 and len(buffer) == 0
    assert buffer.counters.evict == 3


def test_random_sampling_is_seeded():
    picks = []
    for _ in range(2):
        buffer = make_buffer("random", seed=42)
        fill(buffer, [(i, 1, [1, 0]) for i in range(20)])
        picks.append([d.entry.prompt_id for d in buffer.sample(5, 2)])
    assert picks[0] == picks[1]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"capacity": 0}, "buffer_size"),
        ({"strategy": "oldest"}, "buffer_sampling_method"),
        ({"response": "all"}, "buffer_response_sampling_method"),
    ],
)
def test_bad_settings_name_the_key(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_buffer(**kwargs)


@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["add", "sample", "flush"]), st.integers(0, 30), st.integers(1, 6)),
        max_size=60,
    ),
    strategy=st.sampled_from(["random", "max_variance", "most_recent", "least_recent"]),
    capacity=st.integers(1, 12),
    max_off=st.integers(0, 3),
)
def test_buffer_invariants_under_any_operation_sequence(ops, strategy, capacity, max_off):
    buffer = make_buffer(strategy, capacity=capacity)
    rng = np.random.default_rng(0)
    step, taken = 1, set()
    for op, pid, size in ops:
        if op == "add":
            buffer.add(pid, payload=pid, metric_values=rng.integers(0, 2, 4).astype(float), step=step)
        elif op == "sample":
            before = {e.prompt_id for e in buffer.entries()}
            draws = buffer.sample(size, 2)
            got = [d.entry.prompt_id for d in draws]
            assert len(got) == len(set(got)) == min(size, len(before))
            assert set(got) <= before and not set(got) & {e.prompt_id for e in buffer.entries()}
            assert all(len(d.response_index) == 2 for d in draws)
            taken.update(got)
        else:
            step += 1
            buffer.flush_stale(step, max_off)
            assert (buffer.ages(step) <= max_off).all()
        assert len(buffer) <= capacity
        ids = [e.prompt_id for e in buffer.entries()]
        assert len(ids) == len(set(ids))


@pytest.mark.parametrize("tie_order, expected", [("oldest_first", [5, 6, 7]), ("newest_first", [9, 8, 7])])
def test_max_variance_tie_order_among_equal_std_and_step(tie_order, expected):
    buffer = PilotReplayBuffer(100, "max_variance", "first_n", np.random.default_rng(0), tie_order=tie_order)
    buffer.add(1, None, np.array([1.0, 1.0, 1.0, 0.0]), step=4)  # newest step but less spread: ranked last
    for pid in (5, 6, 7, 8, 9):  # equal std and step, added in this order
        buffer.add(pid, None, np.array([1.0, 0.0, 1.0, 0.0]), step=3)
    assert [d.entry.prompt_id for d in buffer.sample(3, 4)] == expected


# Buffered in this order; by max_variance (spread, then newer) they rank 1, 3, 9, 7.
IN_ORDER = [(7, 1, [0, 0, 0, 1]), (3, 2, [1, 0, 1, 0]), (9, 2, [1, 1, 1, 0]), (1, 3, [0, 1, 0, 1])]


@pytest.mark.parametrize("strategy", PROMPT_STRATEGIES)
def test_a_draw_of_every_buffered_prompt_keeps_insertion_order_under_the_reference(strategy):
    for size in (4, 10):  # all it holds, or more
        buffer = PilotReplayBuffer(100, strategy, "first_n", np.random.default_rng(0), take_all_order="insertion")
        fill(buffer, IN_ORDER)
        assert [d.entry.prompt_id for d in buffer.sample(size, 2)] == [7, 3, 9, 1]


def test_a_draw_of_every_buffered_prompt_is_ranked_by_default_and_a_partial_draw_always():
    ranked = make_buffer("max_variance")
    fill(ranked, IN_ORDER)
    assert [d.entry.prompt_id for d in ranked.sample(4, 2)] == [1, 3, 9, 7]
    partial = PilotReplayBuffer(100, "max_variance", "first_n", np.random.default_rng(0), take_all_order="insertion")
    fill(partial, IN_ORDER)
    assert [d.entry.prompt_id for d in partial.sample(3, 2)] == [1, 3, 9]
