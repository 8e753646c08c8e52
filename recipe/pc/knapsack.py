"""Commit sizes from the pilot: what a commit of ``c`` rollouts is worth to one prompt, and an exact knapsack that
sizes a round's commits under a fixed total. Plain numpy: no verl, no Ray.

The value. Knapsack RL (Li et al., 2025, "Knapsack RL: Unlocking Exploration of LLMs via Optimizing Budget
Allocation", arXiv:2509.25849; code: github.com/liziniu/KnapsackRL) values ``N`` rollouts of a prompt whose pass
rate is ``p`` as

    Value(N, p) = ProbNonZeroGradient(N, p) * InfoGain(p),
    ProbNonZeroGradient(N, p) = 1 - p**N - (1 - p)**N,    InfoGain(p) = p * (1 - p)**2,

the chance that a GRPO group of ``N`` has both outcomes (otherwise its advantages are all zero) times their
estimate of how much a gradient step on the prompt raises its pass rate. They plug in a pass rate measured in an
earlier epoch. Here ``p`` is unknown, but the round's pilot of ``n`` rollouts with ``k`` successes gives its
posterior, ``Beta(alpha0 + k, beta0 + n - k)`` under the prior ``Beta(alpha0, beta0)`` (the uniform ``Beta(1, 1)`` by
default), and the trained group is the reused pilot rows plus the ``c`` commit rows. The value of a commit of ``c``
is the posterior expectation of Knapsack RL's value for that group:

    v(c) = E[ P(group has both outcomes | p, c) * p * (1 - p)**2 ],     v(0) = 0 (no commit: nothing trains).

With ``M(a, b) = E[p**a * (1 - p)**b] = B(alpha + a, beta + b) / B(alpha, beta)``:

- reused pilot rows that already disagree: the group disagrees whatever the commit, ``v(c) = M(1, 2)`` for c >= 1;
- reused rows all failures: the group disagrees iff a commit row succeeds, ``v(c) = M(1, 2) - M(1, c + 2)``;
- reused rows all successes: iff a commit row fails, ``v(c) = M(1, 2) - M(c + 1, 2)``;
- no reused rows: iff the commit rows disagree among themselves, ``v(c) = M(1, 2) - M(1, c + 2) - M(c + 1, 2)``
  (Knapsack RL's own value for a group of ``c``; 0 at ``c = 1``).

Why the value depends on the commit size: for a prompt whose reused pilot rows agree (the band's edges, which
Pilot-Commit defers or skips), a larger commit is likelier to contain the other outcome, and only then does the
group give a gradient. ``v`` then rises strictly with ``c`` with strictly shrinking steps (each step is
``M(2, c + 2)`` resp. ``M(c + 1, 3)``, which falls with ``c``; with no reused rows their sum, from ``v(1) = 0``)
towards ``M(1, 2)``. For a prompt whose reused rows already disagree the size changes nothing (the first row of the
commit is what makes it train), so a knapsack gives such prompts the smallest size whenever another prompt can use
the rollouts.

The knapsack. Each candidate gets a size from ``{0} | {min, min + unit, ..., max}``; exactly ``count`` candidates get
a non-zero size and the sizes add up to ``budget`` exactly; the sum of values is largest. Among allocations of the
largest value (up to float rounding) the one closest to uniform sizing wins: the least sum of squared sizes, which
for a fixed count and total is the least spread. So prompts of equal value get equal sizes wherever the budget
allows, and a flat value (disagreeing pilots) does not leave the sizes to chance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Two allocations whose values differ by less than this (relative to the largest possible total) are a tie.
TIE_TOLERANCE = 1e-12

_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


def beta_moment(alpha, beta, a, b) -> np.ndarray:
    """``E[p**a * (1 - p)**b]`` for ``p ~ Beta(alpha, beta)`` (arrays broadcast; ``a, b >= 0``)."""
    alpha, beta = np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    log = _lgamma(alpha + a) + _lgamma(beta + b) - _lgamma(alpha + beta + a + b)
    log -= _lgamma(alpha) + _lgamma(beta) - _lgamma(alpha + beta)
    return np.exp(log)


def commit_values(
    successes: np.ndarray,
    pilot_n: np.ndarray,
    reused_successes: np.ndarray,
    reused_n: np.ndarray,
    commits: np.ndarray,
    prior_alpha: float,
    prior_beta: float,
) -> np.ndarray:
    """``v(c)`` of the module docstring: one row per prompt, one column per commit size in ``commits``.

    ``successes`` of ``pilot_n`` pilot rollouts set the posterior; ``reused_successes`` of the ``reused_n`` pilot rows
    that train in the group decide whether the group already disagrees (with ``reused_n`` 0 the group is the commit
    rows alone).
    """
    successes, pilot_n = np.asarray(successes, dtype=np.float64), np.asarray(pilot_n, dtype=np.float64)
    reused_successes, reused_n = np.asarray(reused_successes), np.asarray(reused_n)
    commits = np.asarray(commits, dtype=np.int64)
    if (commits < 0).any():
        raise ValueError(f"commit sizes {commits.tolist()} must not be negative")
    outside = (successes < 0) | (successes > pilot_n) | (reused_successes < 0) | (reused_successes > reused_n)
    if outside.any():
        raise ValueError("successes must lie between 0 and the rollouts they count")
    alpha = (prior_alpha + successes)[:, None]
    beta = (prior_beta + pilot_n - successes)[:, None]
    c = commits[None, :]
    # P(the group agrees | p) = [no reused success] (1-p)^c + [no reused failure] p^c; no reused rows: both terms.
    no_success = (reused_successes == 0)[:, None]
    no_failure = (reused_successes == reused_n)[:, None]
    values = beta_moment(alpha, beta, 1, 2)  # E[InfoGain(p)]
    values = values - np.where(no_success, beta_moment(alpha, beta, 1, c + 2), 0.0)
    values = values - np.where(no_failure, beta_moment(alpha, beta, c + 1, 2), 0.0)
    # A lone commit row's value is 0 exactly; its three moments cancel only up to rounding.
    return np.where(c > 0, np.maximum(values, 0.0), 0.0)


class KnapsackInfeasible(ValueError):
    """No allocation meets the count and the budget exactly."""


def solve(values: np.ndarray, sizes: np.ndarray, count: int, budget: int) -> np.ndarray:
    """The size level of each item: exactly ``count`` items at a non-zero size, sizes summing to ``budget``, the
    largest total value, then the least sum of squared sizes. Exact (a dynamic program over items, chosen count and
    budget); among allocations equal in both, the earlier items are preferred.

    ``values[i, l]``: item i's value at size ``sizes[l]``; ``sizes[0]`` must be 0 with value 0 (not chosen), the
    other sizes positive and increasing. Returns indices into ``sizes``, one per item.
    """
    values = np.asarray(values, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.int64)
    m, levels = values.shape
    if levels != len(sizes) or sizes[0] != 0 or (np.diff(sizes) <= 0).any():
        raise ValueError(f"sizes {sizes.tolist()} must start at 0 and increase, one per column of values")
    if m and (values[:, 0] != 0).any():
        raise ValueError("an item's value at size 0 must be 0")
    if not np.isfinite(values).all():
        raise ValueError("values must be finite")
    if count < 0 or budget < 0:
        raise KnapsackInfeasible(f"count {count} and budget {budget} must not be negative")
    if count > m:
        raise KnapsackInfeasible(f"{count} items must be chosen but only {m} are offered")
    chosen = np.zeros(m, dtype=np.int64)
    if count == 0 and budget == 0:
        return chosen
    if levels == 1 or not count * sizes[1] <= budget <= count * sizes[-1]:
        low, high = (0, 0) if levels == 1 else (count * sizes[1], count * sizes[-1])
        raise KnapsackInfeasible(
            f"{count} items of sizes {sizes[1:].tolist()} cannot add up to {budget}: the total must lie in "
            f"[{low}, {high}]"
        )
    items = _items_that_can_matter(values, count)
    level_of = _dp(values[items], sizes, count, budget)
    chosen[items] = level_of
    return chosen


def _items_that_can_matter(values: np.ndarray, count: int) -> np.ndarray:
    """The items some optimal allocation is made of: at each size, the ``count`` of largest value there.

    If an allocation gives size l to an item outside that size's top ``count``, one of the top ``count`` is free
    (at most ``count - 1`` others are chosen) and worth at least as much at size l: swapping them keeps the count, the
    budget and the squared sizes, and loses no value. Ties rank the earlier item first, as the solver does.
    """
    keep = np.zeros(len(values), dtype=bool)
    for level in range(1, values.shape[1]):
        keep[np.argsort(-values[:, level], kind="stable")[:count]] = True
    return np.flatnonzero(keep)


def _dp(values: np.ndarray, sizes: np.ndarray, count: int, budget: int) -> np.ndarray:
    """The dynamic program: ``best[j, w]`` is the best (value, -squared sizes) of the items so far with ``j`` chosen
    and ``w`` spent; ``pick[i, j, w]`` the level item i took to reach it."""
    m, levels = values.shape
    tolerance = TIE_TOLERANCE * float(np.abs(values).max()) * count  # scales with the values: no floor
    unreachable = np.iinfo(np.int64).max // 4
    best = np.full((count + 1, budget + 1), -np.inf)
    best[0, 0] = 0.0
    squares = np.full((count + 1, budget + 1), unreachable, dtype=np.int64)
    squares[0, 0] = 0
    pick = np.zeros((m, count + 1, budget + 1), dtype=np.int16)
    for i in range(m):
        new_best, new_squares = best.copy(), squares.copy()
        for level in range(1, levels):
            s = int(sizes[level])
            if s > budget:
                break
            value = best[:-1, : budget + 1 - s] + values[i, level]
            square = squares[:-1, : budget + 1 - s] + s * s
            current, current_sq = new_best[1:, s:], new_squares[1:, s:]
            better = (value > current + tolerance) | ((value >= current - tolerance) & (square < current_sq))
            better &= np.isfinite(value)
            np.copyto(current, value, where=better)
            np.copyto(current_sq, square, where=better)
            pick[i, 1:, s:][better] = level
        best, squares = new_best, new_squares
    if not np.isfinite(best[count, budget]):
        raise KnapsackInfeasible(
            f"no {count} of the {m} items with sizes in {sizes[1:].tolist()} add up to exactly {budget}"
        )
    chosen = np.zeros(m, dtype=np.int64)
    j, w = count, budget
    for i in range(m - 1, -1, -1):
        level = int(pick[i, j, w])
        if level:
            chosen[i] = level
            j, w = j - 1, w - int(sizes[level])
    return chosen


@dataclass(frozen=True)
class CommitSizes:
    """A round's commit sizes (rollouts, 0: no commit) and their value against uniform sizing's."""

    sizes: np.ndarray
    value: float
    uniform_value: float  # the best value with every commit of rollout.n, over the same candidates and count


def size_commits(values: np.ndarray, commits: np.ndarray, count: int, n_commit: int, unit: int) -> CommitSizes:
    """Choose ``count`` of the candidates and their commit sizes, spending ``count * n_commit`` rollouts.

    ``values[i, l]`` is candidate i's value at ``commits[l]`` rollouts (``commits[0] == 0``, the rest multiples of
    ``unit``, ``n_commit`` among them): the knapsack runs in units so its table stays small.
    """
    commits = np.asarray(commits, dtype=np.int64)
    if (commits % unit).any() or n_commit % unit or n_commit not in commits:
        raise ValueError(f"commit sizes {commits.tolist()} and rollout.n={n_commit} must be multiples of {unit}")
    budget = count * n_commit // unit
    levels = solve(values, commits // unit, count, budget)
    uniform_level = int(np.flatnonzero(commits == n_commit)[0])
    uniform = solve(values[:, [0, uniform_level]], np.array([0, 1]), count, count)
    rows = np.arange(len(values))
    return CommitSizes(
        sizes=commits[levels],
        value=float(values[rows, levels].sum()),
        uniform_value=float(values[rows, np.where(uniform > 0, uniform_level, 0)].sum()),
    )
