"""PODS-style down-sampling: generate ``n`` rollouts per group, train on the ``m`` with the largest spread.

The subset is ``select_responses(..., "max_variance")``: for binary rewards the most balanced split,
so a group that had any spread keeps it. Advantages are then computed over the kept ``m`` only.
"""

from __future__ import annotations

import numpy as np

from recipe.pc.allocation import select_responses


def downsample_rows(values: np.ndarray, first_rows: np.ndarray, n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """Row indices keeping ``m`` of the ``n`` consecutive rows of each group starting at ``first_rows``.

    ``values`` holds the metric of every row; groups are kept in the order given, rows in row order.
    """
    values = np.asarray(values, dtype=np.float64)
    first_rows = np.asarray(first_rows, dtype=np.int64)
    if first_rows.size and (first_rows.min() < 0 or first_rows.max() + n > values.shape[0]):
        raise ValueError(f"groups of {n} rows starting at {first_rows.tolist()} exceed the {values.shape[0]} rows")
    if first_rows.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(
        [start + select_responses(values[start : start + n], m, "max_variance", rng) for start in first_rows.tolist()]
    )
