"""Seeds a side for a two-arm comparison of accuracy at one budget, before any GPU time is spent.

Usage::

    python -m recipe.pc_tools.power --sd SD --delta DELTA [--margin M] [--seeds N] [--alpha A] [--power-goal P]

Both arms have ``n`` runs (seeds) whose accuracy at the budget is normal with the same standard deviation ``sd``.

* Difference test: two-sided two-sample t-test (pooled variance, 2n − 2 degrees of freedom) at level ``alpha``. Its
  power against a true difference ``delta`` is exact, from the noncentral t distribution (noncentrality
  delta / (sd·√(2/n))); the seeds needed are the smallest n with that power at or above the goal. The normal
  approximation n = 2 (z₁₋α/₂ + z₁₋β)² sd² / delta² falls short at these sizes: 11.3, so 12, for sd 0.017 and delta
  0.02 at 80%, where 12 seeds give 79% and 13 give 82%.
* Equivalence test (``margin``): two one-sided t-tests at level ``alpha`` each (equivalent when the (1 − 2α) t
  interval of the difference lies within ±margin). Its power at a true difference ``delta`` (default 0) is exact:
  the probability over the difference's normal distribution and the pooled variance's chi-square distribution,
  integrated numerically.

The report reads the same numbers from the observed spread of a finished experiment (``--power DELTA``, with
``--equivalence-margin``).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import pandas as pd

from recipe.pc_tools.curves import scipy_module, values_at
from recipe.pc_tools.tables import format_cell

MAX_SEEDS = 10_000  # a design needing more is not one to run


def t_test_power(n: int, sd: float, delta: float, alpha: float = 0.05) -> float:
    """Power of the two-sided pooled two-sample t-test at level ``alpha``, ``n`` runs a side, against ``delta``."""
    stats = scipy_module("stats")
    df, shift = 2 * n - 2, abs(delta) / (sd * math.sqrt(2 / n))
    critical = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))


def tost_power(n: int, sd: float, margin: float, alpha: float = 0.05, delta: float = 0.0) -> float:
    """Power of two one-sided pooled t-tests at level ``alpha`` each to show |difference| < ``margin`` when it is
    ``delta``, ``n`` runs a side."""
    stats, integrate = scipy_module("stats"), scipy_module("integrate")
    df, scale = 2 * n - 2, sd * math.sqrt(2 / n)
    critical = stats.t.ppf(1 - alpha, df)

    def given_variance(v: float) -> float:
        # The pooled SD is sd·√(v/df) with v ~ chi-square(df); equivalence needs |estimate| ≤ margin − t·SE.
        half = margin - critical * scale * math.sqrt(v / df)
        inside = stats.norm.cdf((half - delta) / scale) - stats.norm.cdf((-half - delta) / scale)
        return max(inside, 0.0) * stats.chi2.pdf(v, df)

    # Past v_max the interval is wider than the margin: no chance.
    v_max = df * (margin / (critical * scale)) ** 2
    return float(integrate.quad(given_variance, 0, v_max, limit=200)[0])


def _smallest(power_at, goal: float) -> int:
    n = 2
    while power_at(n) < goal:
        n += 1
        if n > MAX_SEEDS:
            raise ValueError(f"more than {MAX_SEEDS:,} seeds a side")
    return n


def seeds_needed(sd: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """The fewest runs a side for the two-sided t-test to detect ``delta`` with ``power`` (``t_test_power``)."""
    return _smallest(lambda n: t_test_power(n, sd, delta, alpha), power)


def tost_seeds_needed(sd: float, margin: float, alpha: float = 0.05, power: float = 0.8, delta: float = 0.0) -> int:
    """The fewest runs a side for the equivalence test (``tost_power``) to reach ``power``."""
    return _smallest(lambda n: tost_power(n, sd, margin, alpha, delta), power)


def pooled_sd(mine: np.ndarray, theirs: np.ndarray) -> float:
    """The runs' SD, each arm about its own mean, pooled over both (the pooled-variance t-test's)."""
    return math.sqrt(
        ((len(mine) - 1) * mine.var(ddof=1) + (len(theirs) - 1) * theirs.var(ddof=1)) / (len(mine) + len(theirs) - 2)
    )


def sd_interval(sd: float, df: int, level: float = 0.95) -> tuple[float, float]:
    """The ``level`` interval of a normal SD estimated as ``sd`` on ``df`` degrees of freedom (chi-square)."""
    chi2 = scipy_module("stats").chi2
    tail = (1 - level) / 2
    return sd * math.sqrt(df / chi2.ppf(1 - tail, df)), sd * math.sqrt(df / chi2.ppf(tail, df))


def power_table(
    curves: dict[str, pd.DataFrame],
    groups: dict[str, list[str]],
    baseline: str,
    budgets: list[float],
    delta: float,
    margin: float | None = None,
    alpha: float = 0.05,
    goal: float = 0.8,
    kind: str = "linear",
) -> pd.DataFrame:
    """Per configuration other than ``baseline`` and budget: the runs of each that got there, the pooled SD of their
    accuracy there, the power this design had to detect ``delta`` and the seeds a side it needs for ``goal``; with a
    ``margin`` the same for the equivalence test at a true difference of 0. NaN where fewer than 2 runs a side."""
    values = {
        config: values_at([curves[label] for label in labels], budgets, kind) for config, labels in groups.items()
    }
    rows = []
    for config in groups:
        if config == baseline:
            continue
        for i, budget in enumerate(budgets):
            mine, theirs = values[config][:, i], values[baseline][:, i]
            mine, theirs = mine[~np.isnan(mine)], theirs[~np.isnan(theirs)]
            row = {"configuration": config, "rollouts": budget, "runs": len(mine), "baseline_runs": len(theirs)}
            row |= {"sd": np.nan, "power": np.nan, "seeds_needed": np.nan}
            row |= {"tost_power": np.nan, "tost_seeds_needed": np.nan} if margin is not None else {}
            if len(mine) >= 2 and len(theirs) >= 2:
                sd = row["sd"] = pooled_sd(mine, theirs)
                n = min(len(mine), len(theirs))  # an unequal design is powered as its smaller side
                if sd > 0:
                    row["power"], row["seeds_needed"] = (
                        t_test_power(n, sd, delta, alpha),
                        seeds_needed(sd, delta, alpha, goal),
                    )
                    if margin is not None:
                        row["tost_power"] = tost_power(n, sd, margin, alpha)
                        row["tost_seeds_needed"] = tost_seeds_needed(sd, margin, alpha, goal)
            rows.append(row)
    table = pd.DataFrame(rows)
    table["delta"], table["alpha"], table["goal"] = delta, alpha, goal
    if margin is not None:
        table["margin"] = margin
    return table


def power_markdown(table: pd.DataFrame, baseline: str) -> str:
    first = table.iloc[0]
    has_margin = "margin" in table.columns
    caption = (
        f"Seeds a side from the observed spread: at each budget the pooled SD of the runs of both arms that got there "
        f"(the others are not read), the power this design had, at its smaller side, to detect a difference of "
        f"{first['delta']:g} (two-sided pooled t-test, α = {first['alpha']:g}, exact noncentral t) and the seeds "
        f"a side for {first['goal']:.0%} power"
        + (
            f"; the same for the equivalence test with margin ±{first['margin']:g} (two one-sided t-tests at α each, "
            "a true difference of 0)."
            if has_margin
            else "."
        )
    )
    header = ["configuration", "budget", "runs", f"{baseline} runs", "pooled SD", f"power for {first['delta']:g}"]
    header += [f"seeds a side for {first['goal']:.0%}"]
    header += (
        [f"equivalence ±{first['margin']:g}: power", f"seeds a side for {first['goal']:.0%}"] if has_margin else []
    )
    lines = [caption, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.to_dict("records"):
        cells = [row["configuration"], f"{row['rollouts']:,.0f}", str(row["runs"]), str(row["baseline_runs"])]
        cells += [
            format_cell(row["sd"], ".4f"),
            format_cell(row["power"], ".2f"),
            format_cell(row["seeds_needed"], ".0f"),
        ]
        if has_margin:
            cells += [format_cell(row["tost_power"], ".2f"), format_cell(row["tost_seeds_needed"], ".0f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


class OneLineParser(argparse.ArgumentParser):
    """Bad input is one line naming the option and the fix, not the usage block before it."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def level(text: str) -> float:
    value = positive(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must lie between 0 and 1, got {text!r}")
    return value


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="python -m recipe.pc_tools.power",
        description="Seeds a side for a two-arm accuracy comparison at one budget, from an assumed seed-to-seed SD.",
    )
    parser.add_argument("--sd", type=positive, required=True, help="seed-to-seed standard deviation of the accuracy")
    parser.add_argument("--delta", type=positive, help="the true difference the t-test must detect")
    parser.add_argument(
        "--margin", type=positive, help="the equivalence margin (two one-sided tests, true difference 0)"
    )
    parser.add_argument("--seeds", type=int, metavar="N", help="also the power of a design with N seeds a side")
    parser.add_argument("--alpha", type=level, default=0.05, help="test level (default 0.05; each one-sided test's)")
    parser.add_argument("--power-goal", type=level, default=0.8, metavar="P", help="the power wanted (default 0.8)")
    args = parser.parse_args(argv)
    if args.delta is None and args.margin is None:
        parser.error("name what to power: --delta DELTA (difference test), --margin M (equivalence test) or both")
    if args.seeds is not None and args.seeds < 2:
        parser.error(f"--seeds must be 2 or more (a spread needs two runs a side), got {args.seeds}")
    return args


def design_table(
    sd: float,
    delta: float | None = None,
    margin: float | None = None,
    seeds: int | None = None,
    alpha: float = 0.05,
    goal: float = 0.8,
) -> str:
    """Markdown: per test asked for, the seeds a side for ``goal`` power and, with ``seeds``, that design's power."""
    tests = []
    if delta is not None:
        tests.append((f"difference {delta:g} (two-sided t)", seeds_needed, t_test_power, delta))
    if margin is not None:
        tests.append(
            (f"equivalence ±{margin:g} (two one-sided t, true difference 0)", tost_seeds_needed, tost_power, margin)
        )
    header = ["test", f"seeds a side for {goal:.0%} power"] + ([f"power with {seeds} a side"] if seeds else [])
    lines = [f"SD {sd:g}, α {alpha:g}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, needed, power, size in tests:
        try:
            cells = [name, str(needed(sd, size, alpha, goal))]
        except ValueError as exc:
            cells = [name, str(exc)]
        cells += [f"{power(seeds, sd, size, alpha):.3f}"] if seeds else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    sys.stdout.write(design_table(args.sd, args.delta, args.margin, args.seeds, args.alpha, args.power_goal))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
