"""The allocation policy functions, directly and through hypothesis properties (spec section 15)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recipe.pc.allocation import (
    classify_by_spread,
    classify_pilot,
    commit_size,
    generation_divisor,
    group_stats,
    select_responses,
    stale_mask,
)
from recipe.pc.testing import pilot_of


@pytest.mark.parametrize(
    "n, passing",
    [(32, range(4, 25)), (16, range(2, 13)), (4, range(1, 4))],  # spec section 4 integer bands
)
def test_band_passes_exactly_the_inclusive_integer_range(n, passing):
    ids, values = pilot_of(range(n + 1), n)
    verdict = classify_pilot(ids, values, p_lower=0.125, p_upper=0.25, evict_threshold=1.0)
    assert np.flatnonzero(verdict.passed).tolist() == list(passing)
    assert np.flatnonzero(verdict.evict).tolist() == [n]  # only the all-correct prompt
    assert np.flatnonzero(verdict.too_incorrect).tolist() == list(range(0, passing.start))
    assert np.flatnonzero(verdict.too_correct).tolist() == list(range(passing.stop, n + 1))


def test_group_stats_keep_generation_order_and_population_std():
    ids = np.array([7, 7, 3, 3, 9, 9])
    stats = group_stats(ids, np.array([1, 0, 1, 1, 0, 0]))
    assert stats.prompt_ids.tolist() == [7, 3, 9]
    assert stats.mean.tolist() == [0.5, 1.0, 0.0]
    assert stats.std.tolist() == [0.5, 0.0, 0.0]
    assert stats.first_row.tolist() == [0, 2, 4]


def test_band_rejects_zero_spread_groups_with_nonbinary_metric():
    ids = np.repeat([1, 2], 4)
    values = np.array([0.5, 0.5, 0.5, 0.5, 0.0, 1.0, 0.5, 0.5])
    verdict = classify_pilot(ids, values, p_lower=0.125, p_upper=0.25, evict_threshold=None)
    assert verdict.passed.tolist() == [False, True]  # same mean, only the second has a gradient
    assert not verdict.evict.any()


@pytest.mark.parametrize(
    ("groups", "passed", "too_correct", "too_incorrect"),
    [
        # +-1 rewards: flat at -1 or +1 dropped, a mixed group kept although its mean is 0
        ([[-1] * 4, [1, -1, 1, -1], [1] * 4], [False, True, False], [False, False, True], [True, False, False]),
        # graded scores: a flat group is dropped whatever its mean, a mixed one kept
        ([[0.5] * 4, [0, 0.5, 0.5, 1], [0] * 4], [False, True, False], [True, False, False], [False, False, True]),
        ([[0.7], [0.2, 0.2]], [True, False], [False, True], [False, False]),  # a single rollout has no spread to test
        # any spread at all keeps a group: no threshold on how much
        ([[0.5, 0.5, 0.5, 0.55], [0.3] * 3], [True, False], [False, True], [False, False]),
    ],
    ids=["plus_minus_one", "graded", "single_rollout", "tiny_spread"],
)
def test_dapo_keeps_groups_by_their_spread_not_their_mean(groups, passed, too_correct, too_incorrect):
    ids = np.concatenate([[i] * len(g) for i, g in enumerate(groups)])
    verdict = classify_by_spread(ids, np.concatenate(groups))
    assert verdict.passed.tolist() == passed
    assert verdict.too_correct.tolist() == too_correct
    assert verdict.too_incorrect.tolist() == too_incorrect
    assert not verdict.evict.any()


def test_group_stats_rejects_misaligned_inputs():
    with pytest.raises(ValueError, match="3 prompt ids but 2"):
        group_stats(np.array([1, 1, 2]), np.array([1.0, 0.0]))


def test_commit_size_takes_what_is_needed_or_buffered():
    assert commit_size(8, 20) == 8
    assert commit_size(8, 3) == 3
    assert commit_size(0, 5) == 0
    assert commit_size(-2, 5) == 0


def test_generation_divisor_covers_agent_chunking_and_dp_dispatch():
    assert generation_divisor(8, 16) == 16
    assert generation_divisor(3, 2) == 6
    assert generation_divisor(0, 4) == 4


def test_stale_mask_keeps_entries_up_to_the_bound():
    steps = np.array([1, 2, 3, 4, 5])
    assert stale_mask(steps, current_step=6, max_off_steps=4).tolist() == [True, False, False, False, False]


@given(n_correct=st.integers(0, 32), seed=st.integers(0, 2**16), data=st.data())
def test_max_variance_down_sampling_is_as_balanced_as_possible(n_correct, seed, data):
    # Drawn so that every example is a valid request (at least one rollout, 1 <= m <= n): none is skipped.
    extra_wrong = data.draw(st.integers(0 if n_correct else 1, 32), label="extra_wrong")
    n = n_correct + extra_wrong
    m = data.draw(st.integers(1, n), label="m")
    values = np.array([1.0] * n_correct + [0.0] * extra_wrong)
    np.random.default_rng(seed).shuffle(values)
    picked = select_responses(values, m, "max_variance", np.random.default_rng(seed))
    assert len(picked) == m == len(set(picked.tolist()))
    ones = int(values[picked].sum())
    target = min(max(m // 2, m - extra_wrong), n_correct)  # floor(m/2) correct, shifted if a class is short
    assert ones == target


@settings(max_examples=60)
@given(values=st.lists(st.floats(-2, 2, allow_nan=False), min_size=2, max_size=12), data=st.data())
def test_max_variance_down_sampling_beats_every_other_subset(values, data):
    import itertools

    values = np.round(np.array(values), 3)
    m = data.draw(st.integers(1, len(values)))
    picked = select_responses(values, m, "max_variance", np.random.default_rng(0))
    best = max(np.var(values[list(c)]) for c in itertools.combinations(range(len(values)), m))
    assert math.isclose(np.var(values[picked]), best, rel_tol=1e-9, abs_tol=1e-9)


def test_max_variance_takes_equal_rollouts_in_the_seeded_order():
    # Which of several equal rollouts is reused comes from the seed, not from the rollouts' index order.
    values = np.array([1.0] * 4 + [0.0] * 4)
    picks = {seed: select_responses(values, 2, "max_variance", np.random.default_rng(seed)) for seed in range(64)}
    for seed, picked in picks.items():
        assert sorted(values[picked].tolist()) == [0.0, 1.0]
        assert select_responses(values, 2, "max_variance", np.random.default_rng(seed)).tolist() == picked.tolist()
    assert {i for picked in picks.values() for i in picked.tolist()} == set(range(8))  # every tied rollout is drawn


def test_first_n_and_unknown_strategy():
    values = np.array([1.0, 0.0, 1.0, 0.0])
    assert select_responses(values, 2, "first_n", np.random.default_rng(0)).tolist() == [0, 1]
    assert select_responses(values, 4, "anything", np.random.default_rng(0)).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="buffer_response_sampling_method"):
        select_responses(values, 2, "best", np.random.default_rng(0))
    with pytest.raises(ValueError, match="cannot keep 5 of 4"):
        select_responses(values, 5, "first_n", np.random.default_rng(0))


@given(
    counts=st.lists(st.integers(0, 8), min_size=1, max_size=40),
    p_lower=st.sampled_from([0.0, 0.125, 0.25]),
    p_upper=st.sampled_from([0.0, 0.25, 0.5]),
)
def test_every_prompt_is_classified_once_and_passing_groups_have_spread(counts, p_lower, p_upper):
    ids, values = pilot_of(counts, 8)
    verdict = classify_pilot(ids, values, p_lower=p_lower, p_upper=p_upper, evict_threshold=1.0)
    means = np.array(counts) / 8
    outside = verdict.too_correct | verdict.too_incorrect
    assert not (verdict.passed & outside).any()
    assert (verdict.passed | outside | (verdict.stats.std == 0)).all()
    assert (verdict.stats.std[verdict.passed] > 0).all()
    assert ((means[verdict.passed] >= p_lower) & (means[verdict.passed] <= 1 - p_upper)).all()
    assert verdict.evict.tolist() == (np.array(counts) == 8).tolist()
