"""The commit-size value and the exact knapsack of ``recipe.pc.knapsack``: the value's facts the allocator relies on,
the solver against brute force, and what a round's sizing guarantees (the budget, equal sizes for equal prompts)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recipe.pc.knapsack import (
    KnapsackInfeasible,
    _items_that_can_matter,
    beta_moment,
    commit_values,
    size_commits,
    solve,
)

COMMITS = np.array([0, 2, 4, 6, 8, 12, 16, 32])


def values_of(successes, n=4, reused=None, commits=COMMITS, prior=(1.0, 1.0)):
    """One row of values per pilot of ``successes`` of ``n``, all its rows reused unless ``reused`` says."""
    successes = np.atleast_1d(successes)
    reused_successes = successes if reused is None else np.atleast_1d(reused[0])
    reused_n = np.full(len(successes), n) if reused is None else np.atleast_1d(reused[1])
    return commit_values(successes, np.full(len(successes), n), reused_successes, reused_n, commits, *prior)


# ------------------------------------------------------------------ the value
def test_beta_moments_match_a_numerical_integral():
    p = np.linspace(0.0, 1.0, 200_001)
    for alpha, beta, a, b in [(1, 1, 1, 2), (1.0, 5.0, 1, 9), (4.5, 1.5, 7, 2), (2, 3, 0, 0)]:
        density = p ** (alpha - 1) * (1 - p) ** (beta - 1)
        exact = np.trapezoid(p**a * (1 - p) ** b * density, p) / np.trapezoid(density, p)
        assert beta_moment(alpha, beta, a, b) == pytest.approx(exact, rel=1e-6)


def test_a_commit_of_nothing_is_worth_nothing_and_the_value_never_passes_the_expected_information():
    values = values_of(np.arange(5))
    assert (values[:, 0] == 0).all()
    info = beta_moment(1 + np.arange(5), 1 + 4 - np.arange(5), 1, 2)
    assert (values[:, 1:] <= info[:, None] + 1e-15).all()


def test_a_pilot_that_already_disagrees_is_worth_the_same_at_every_commit_size():
    values = values_of([1, 2, 3])
    assert (values[:, 1:] == values[:, [1]]).all()  # exactly equal: the solver's tie rule then sizes them
    # E[p(1-p)^2] under Beta(1 + k, 1 + 4 - k), in closed form for k = 2: B(4, 5) / B(3, 3) = 3 / 28.
    assert values[1, 1] == pytest.approx(3 / 28, rel=1e-12)


@pytest.mark.parametrize("successes", [0, 4])
def test_an_edge_pilot_gains_from_a_larger_commit_by_ever_smaller_steps(successes):
    commits = np.arange(0, 41)
    values = values_of(successes, commits=commits)[0]
    steps = np.diff(values)
    assert (steps > 0).all() and (np.diff(steps) < 0).all()  # strictly increasing, strictly concave
    info = beta_moment(1 + successes, 1 + 4 - successes, 1, 2)
    # All failures: v(c) = E[(1 - (1-p)^c) p (1-p)^2] = 5/56 - 5 / ((c+7)(c+8)) under Beta(1, 5).
    if successes == 0:
        assert values[8] == pytest.approx(5 / 56 - 5 / (15 * 16), rel=1e-12)
    assert values[-1] < info and info - values[-1] < 0.1 * info


def test_the_posterior_uses_every_pilot_row_and_the_group_only_the_reused_ones():
    # 1 of 8 pilots succeeded, but the 2 reused rows both failed: the group disagrees only if a commit row succeeds,
    # under the posterior of all 8 rows, Beta(2, 8).
    value = values_of([1], n=8, reused=([0], [2]), commits=np.array([0, 4]))[0, 1]
    assert value == pytest.approx(beta_moment(2, 8, 1, 2) - beta_moment(2, 8, 1, 6), rel=1e-12)
    assert values_of([1], n=8, commits=np.array([0, 4]))[0, 1] == pytest.approx(beta_moment(2, 8, 1, 2), rel=1e-12)


def disagreement_by_enumeration(p, reused, c):
    """P(the group of the ``reused`` outcomes and ``c`` commit rows has both outcomes), summed over every commit."""
    total = np.zeros_like(p)
    for outcome in itertools.product([0, 1], repeat=c):
        rows = [*reused, *outcome]
        if 0 in rows and 1 in rows:
            total += p ** sum(outcome) * (1 - p) ** (c - sum(outcome))
    return total


@pytest.mark.parametrize("reused", [[], [0], [1], [0, 0], [1, 1], [0, 1]])
@pytest.mark.parametrize("prior", [(1.0, 1.0), (1.5, 2.0), (3.0, 1.0)])
def test_the_value_is_the_posterior_integral_of_knapsack_rls_value_for_the_group(reused, prior):
    # A pilot of 2 of 4, of which the rows in ``reused`` train: Beta(prior + (2, 2)) numerically.
    commits, successes = np.arange(5), 2
    p = np.linspace(0.0, 1.0, 20_001)
    density = p ** (prior[0] + successes - 1) * (1 - p) ** (prior[1] + 4 - successes - 1)
    expected = [
        np.trapezoid(disagreement_by_enumeration(p, reused, c) * p * (1 - p) ** 2 * density, p) if c else 0.0
        for c in commits
    ] / np.trapezoid(density, p)
    values = values_of([successes], reused=([sum(reused)], [len(reused)]), commits=commits, prior=prior)[0]
    assert values == pytest.approx(expected, abs=1e-7)


def test_a_group_of_commit_rows_alone_needs_two_of_them_to_disagree():
    # 2 of 4 pilots, none reused: Beta(3, 3), v(4) = E[(1 - p^4 - (1-p)^4) p (1-p)^2] = 3/28 - 1/132 - 1/66 = 13/154.
    values = commit_values([2], [4], [0], [0], [0, 1, 4], 1, 1)[0]
    assert values.tolist()[:2] == [0.0, 0.0] and values[2] == pytest.approx(13 / 154, rel=1e-12)


def test_the_prior_moves_the_value_of_an_edge():
    flat = values_of([0], commits=np.array([0, 8]))[0, 1]
    sceptical = values_of([0], commits=np.array([0, 8]), prior=(0.5, 2.0))[0, 1]
    assert sceptical < flat


# ------------------------------------------------------------------ the solver
def brute_force(values, sizes, count, budget):
    """Every assignment: the best (value, -squared sizes), or None when none meets the count and the budget."""
    best = None
    for levels in itertools.product(range(len(sizes)), repeat=len(values)):
        levels = np.array(levels)
        if (levels > 0).sum() != count or sizes[levels].sum() != budget:
            continue
        key = (values[np.arange(len(values)), levels].sum(), -int((sizes[levels] ** 2).sum()))
        if best is None or key[0] > best[0] + 1e-9 or (key[0] > best[0] - 1e-9 and key[1] > best[1]):
            best = key
    return best


@st.composite
def knapsacks(draw):
    m = draw(st.integers(1, 5))
    sizes = np.array([0, *sorted(draw(st.sets(st.integers(1, 6), min_size=1, max_size=3)))])
    # Rows like the allocator's: flat (a disagreeing pilot) or rising, with repeated values to exercise ties.
    palette = st.sampled_from([0.0, 0.05, 0.1, 0.1, 0.3])
    rows = []
    for _ in range(m):
        first = draw(palette)
        steps = [0.0] * (len(sizes) - 2)
        if draw(st.booleans()):
            steps = draw(st.lists(palette, min_size=len(sizes) - 2, max_size=len(sizes) - 2))
        rows.append([0.0, *np.cumsum([first, *steps])])
    count = draw(st.integers(0, m))
    # Mostly totals the sizes can reach, some just outside.
    budget = draw(st.integers(max(0, count * int(sizes[1]) - 1), count * int(sizes[-1]) + 1))
    return np.array(rows), sizes, count, budget


@settings(max_examples=300, deadline=None)
@given(knapsacks())
def test_the_solver_finds_what_brute_force_finds(case):
    values, sizes, count, budget = case
    best = brute_force(values, sizes, count, budget)
    if best is None:
        with pytest.raises(KnapsackInfeasible):
            solve(values, sizes, count, budget)
        return
    levels = solve(values, sizes, count, budget)
    assert (levels > 0).sum() == count and sizes[levels].sum() == budget  # the budget exactly, never more
    assert values[np.arange(len(values)), levels].sum() == pytest.approx(best[0], abs=1e-9)
    assert -int((sizes[levels] ** 2).sum()) == best[1]


def best_of(values, sizes, count, budget, items):
    """Brute force over ``count`` of ``items`` and their non-zero sizes: the best (value, -squared sizes), or None."""
    best = None
    for chosen in itertools.combinations(items, count):
        for levels in itertools.product(range(1, len(sizes)), repeat=count):
            if sizes[list(levels)].sum() != budget:
                continue
            key = (values[list(chosen), list(levels)].sum(), -int((sizes[list(levels)] ** 2).sum()))
            if best is None or key[0] > best[0] + 1e-9 or (key[0] > best[0] - 1e-9 and key[1] > best[1]):
                best = key
    return best


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_items_the_solver_keeps_hold_an_optimal_allocation(data):
    # Up to 8 items for at most 3 commits, so the pruning has items to drop; any values, ties included, not only the
    # shapes commit_values gives.
    m = data.draw(st.integers(1, 8))
    count = data.draw(st.integers(1, min(m, 3)))
    sizes = np.array([0, *sorted(data.draw(st.sets(st.integers(1, 5), min_size=1, max_size=3)))])
    palette = st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.3])
    rows = data.draw(
        st.lists(st.lists(palette, min_size=len(sizes) - 1, max_size=len(sizes) - 1), min_size=m, max_size=m)
    )
    values = np.array([[0.0, *row] for row in rows])
    budget = data.draw(st.integers(count * int(sizes[1]), count * int(sizes[-1])))
    kept = best_of(values, sizes, count, budget, _items_that_can_matter(values, count).tolist())
    best = best_of(values, sizes, count, budget, range(m))
    if best is None:  # no allocation of these sizes adds up to the budget
        return
    assert kept is not None and kept[0] == pytest.approx(best[0], abs=1e-9) and kept[1] == best[1]


@pytest.mark.parametrize("scale", [1.0, 1e-13, 1e13])
def test_a_difference_in_value_is_a_tie_or_not_whatever_the_values_scale(scale):
    # 0.1 + 0.20005 beats 0.2 + 0.1 by a part in 6,000, far above the tie tolerance at any scale; the squared sizes
    # tie, so a tolerance that does not scale would fall back on the earlier item and pick [2, 1].
    values = np.array([[0, 0.1, 0.2], [0, 0.1, 0.20005]]) * scale
    assert solve(values, np.array([0, 1, 2]), 2, 3).tolist() == [1, 2]
    # 0.1 + 1.3 and 0.7 + 0.7 differ by rounding only (the first is 1.4000000000000001): a tie, so the least spread.
    values = np.array([[0, 0.1, 0.7, 1.3]] * 2) * scale
    assert solve(values, np.array([0, 1, 2, 3]), 2, 4).tolist() == [2, 2]


@pytest.mark.parametrize(
    ("count", "budget", "message"),
    [
        (3, 6, "3 items must be chosen but only 2 are offered"),
        (2, 1, "cannot add up to 1: the total must lie in \\[4, 8\\]"),
        (2, 9, "cannot add up to 9"),
        (2, 5, "no 2 of the 2 items with sizes in \\[2, 4\\] add up to exactly 5"),
    ],
)
def test_an_allocation_that_cannot_meet_the_count_and_budget_is_refused(count, budget, message):
    with pytest.raises(KnapsackInfeasible, match=message):
        solve(np.array([[0, 1.0, 2.0], [0, 1.0, 2.0]]), np.array([0, 2, 4]), count, budget)


# ------------------------------------------------------------------ a round's sizes
@pytest.mark.parametrize("successes", [0, 1, 2, 4])
@pytest.mark.parametrize("count", [1, 3, 5])
def test_equal_pilots_get_equal_sizes(successes, count):
    values = values_of([successes] * 6)
    sized = size_commits(values, COMMITS, count=count, n_commit=8, unit=2)
    assert sorted(sized.sizes.tolist()) == [0] * (6 - count) + [8] * count
    assert sized.value == pytest.approx(sized.uniform_value)


def test_an_edge_takes_a_large_commit_from_band_prompts_whose_size_does_not_matter():
    # Two band prompts (1 and 3 of 4) and one all-wrong pilot, two to commit with 2 x 8 rollouts: the all-wrong
    # prompt at 12 is worth more than the 3-of-4 prompt at any size (5/56 - 5/(19*20) > 1/14), and the 1-of-4
    # prompt needs only the smallest commit.
    values = values_of([1, 3, 0])
    sized = size_commits(values, COMMITS, count=2, n_commit=8, unit=2)
    assert sized.sizes.tolist() == [4, 0, 12]
    assert sized.value == pytest.approx(values[0, 1] + 5 / 56 - 5 / (19 * 20), rel=1e-12)
    assert sized.uniform_value == pytest.approx(values[0, 1] + values[1, 1], rel=1e-12)
    assert sized.value > sized.uniform_value


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=1, max_size=40),
    st.integers(1, 40),
    st.sampled_from([(2, 2, 32), (4, 4, 16), (2, 6, 12)]),
)
def test_a_round_spends_exactly_count_times_rollout_n(successes, count, sizes):
    unit, low, high = sizes
    count = min(count, len(successes))
    commits = np.array([0, *range(low, high + 1, unit)])
    values = values_of(successes, n=8, commits=commits)
    sized = size_commits(values, commits, count=count, n_commit=8, unit=unit)
    assert sized.sizes.sum() == count * 8 and (sized.sizes > 0).sum() == count
    assert set(sized.sizes.tolist()) <= set(commits.tolist())
    assert sized.value >= sized.uniform_value - 1e-12
