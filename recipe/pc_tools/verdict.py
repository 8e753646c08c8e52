"""An equal-budget comparison read by a fixed rule, from the ``intervals.csv`` that ``report --ci
--equivalence-margin`` writes (linear curves) and, for the sensitivity reading, the one its PCHIP run writes.

    python -m recipe.pc_tools.verdict DIR [--pchip DIR] --budget 27648 [--runs 13] [--target 0.40]
        [--assumed-sd 0.017] [--names PC,GRPO] [--out FILE]

At the budget B*, with E = "the two one-sided tests both reject (p < alpha)" and D = "the permutation p < alpha and
the 95% interval excludes 0":

- E and not D: the two are **equivalent within ± margin** at B*;
- D and not E: the configuration is **ahead** (or **behind**) by the sign of the difference; D and E: ahead (behind)
  **by less than the margin**;
- neither: **inconclusive at this margin**, the 95% interval being the range of differences left open.

The PCHIP reading is given beside; where its verdict differs the linear one stands. Rollouts to ``--target`` is read
with its interval; where it points the other way from the difference at B*, the difference decides. With fewer than
``--runs`` runs on either side at B* the reading is "interim (n a side), no verdict": the numbers, no verdict words.
Last, the power of the design (``--runs`` a side; the runs' own, the smaller side, once both have that many) at the
runs' SD at B* (within arms, pooled over both), with the SD's 95% interval: the equivalence test's when the true
difference is 0, and a t-test's against a difference of the margin, a stand-in for D. ``--assumed-sd`` adds the power
the design assumed, and whether the SD's interval holds the assumed SD. The line says "underpowered" where the
equivalence power at the runs' SD is below 0.70.
A missing or unreadable table, or one without a row at B*, stops with exit 2 and one line naming it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from recipe.pc_tools.curves import seed_groups
from recipe.pc_tools.logs import ReportError
from recipe.pc_tools.power import pooled_sd, sd_interval, t_test_power, tost_power

ALPHA = 0.05
# Equivalence power below this at the runs' SD reads "underpowered": at 13 a side and ±0.02 an SD above about 0.0185,
# the pre-registration's "near GRPO's 0.020"; its assumed 0.017 gives 0.80.
UNDERPOWERED = 0.70


@dataclass(frozen=True)
class Reading:
    """One curve kind's numbers at B*: E, D and the rule's verdict on them."""

    names: tuple[str, str]  # the configuration's and the baseline's
    difference: float
    low: float
    high: float
    p_value: float
    tost_p: float
    margin: float
    runs: int
    baseline_runs: int
    values: tuple[float, ...]  # each run's accuracy at B*
    baseline_values: tuple[float, ...]
    equivalent: bool  # E
    differs: bool  # D

    @property
    def kind(self) -> str:
        """The rule's branch: equivalent, ahead or behind (by less than the margin when also equivalent), or
        inconclusive."""
        if self.differs:
            side = "ahead" if self.difference > 0 else "behind"
            return f"{side}, by less than the margin" if self.equivalent else side
        return "equivalent" if self.equivalent else "inconclusive"

    def verdict(self, budget: float) -> str:
        config, baseline = self.names
        at = f"at {budget:,.0f} rollouts"
        if self.kind == "equivalent":
            return f"{config} and {baseline} are equivalent within ±{self.margin:g} {at}"
        if self.kind == "inconclusive":
            return f"inconclusive at this margin {at}: the differences left open are {_interval(self.low, self.high)}"
        side = "ahead" if self.difference > 0 else "behind"
        by_less = f", by less than {self.margin:g}" if self.equivalent else ""
        return f"{config} is {side}{by_less} {at}"


def _signed(x: float) -> str:
    return f"{x:+.3f}".replace("-", "−")


def _interval(low: float, high: float) -> str:
    return f"[{_signed(low)}, {_signed(high)}]"


def read_table(folder: Path, budget: float, alpha: float = ALPHA) -> tuple[Reading, pd.DataFrame]:
    """The difference row at ``budget`` of ``folder/intervals.csv`` as a Reading, and the table's ratio rows."""
    path = folder / "intervals.csv"
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise ReportError(f"{path} cannot be read ({type(err).__name__}): run report --ci first") from None
    rows = table[(table["measure"] == "difference") & ((table["rollouts"] - budget).abs() < 0.5)]
    if len(rows) != 1:
        have = ", ".join(f"{r:,.0f}" for r in table.loc[table["measure"] == "difference", "rollouts"])
        raise ReportError(f"{path} has no difference at {budget:,.0f} rollouts (has: {have or 'none'}); check --budget")
    row = rows.iloc[0]
    if pd.isna(row["tost_p"]):
        raise ReportError(f"{path} has no equivalence test: run report with --equivalence-margin")
    baseline_runs = str(row["baseline_runs"]).split(",")
    values, baseline_values = (_values(row, column, path) for column in ("values", "baseline_values"))
    reading = Reading(
        names=(str(row["configuration"]), next(iter(seed_groups(baseline_runs)))),
        difference=float(row["estimate"]),
        low=float(row["low"]),
        high=float(row["high"]),
        p_value=float(row["p_value"]),
        tost_p=float(row["tost_p"]),
        margin=float(row["margin"]),
        runs=len(str(row["runs"]).split(",")),
        baseline_runs=len(baseline_runs),
        values=values,
        baseline_values=baseline_values,
        equivalent=bool(row["tost_p"] < alpha),
        differs=bool(row["p_value"] < alpha and (row["low"] > 0 or row["high"] < 0)),
    )
    return reading, table[table["measure"] == "ratio"]


def _values(row: pd.Series, column: str, path: Path) -> tuple[float, ...]:
    """The accuracies at B* of the runs that got there (a run left out has an empty entry)."""
    try:
        return tuple(float(v) for v in str(row[column]).split(",") if v.strip())
    except (KeyError, ValueError):
        raise ReportError(
            f"{path} has no run values in {column!r} at {row['rollouts']:,.0f}: rerun report --ci"
        ) from None


def _power_lines(reading: Reading, runs: int, design: bool, assumed_sd: float | None) -> list[str]:
    """The power of ``runs`` a side at the runs' SD, with the SD's 95% interval; against ``assumed_sd`` when given."""
    a, b = np.asarray(reading.values), np.asarray(reading.baseline_values)
    if min(len(a), len(b)) < 2:
        return ["- power: not read (an arm has fewer than 2 runs at the budget, no spread of its own)"]
    sd, df = pooled_sd(a, b), len(a) + len(b) - 2
    if not sd > 1e-9:  # no spread gives no power to read
        return [f"- power: not read (the runs' SD at the budget is {sd:.4f} on {df} degrees of freedom)"]
    low, high = sd_interval(sd, df)
    margin = reading.margin

    # Each test's power at the SD, then at the interval's ends (the larger SD gives the smaller power).
    equivalence, t_test = (
        [test(runs, x, margin, ALPHA) for x in (sd, high, low)] for test in (tost_power, t_test_power)
    )

    def shown(at: list[float]) -> str:
        return f"{at[0]:.2f} ({at[1]:.2f}–{at[2]:.2f} over the SD's interval)"

    short = ""
    if equivalence[0] < UNDERPOWERED:
        short = f" At this SD the design is underpowered for equivalence (below {UNDERPOWERED:.2f})."

    side = f"the design's {runs} a side" if design else f"{runs} a side"
    lines = [
        f"- power of {side} at the runs' SD {sd:.4f} (within arms, pooled over both; {df} degrees of freedom, 95% "
        f"interval {low:.4f}–{high:.4f}): {shown(equivalence)} to show equivalence within ±{margin:g} when the true "
        f"difference is 0; {shown(t_test)} for a t-test against a difference of {margin:g}, a stand-in for D "
        f"(which adds the permutation test and the interval). Pooled-variance tests: the rule's Welch tests run a "
        f"little lower.{short} Power at an observed SD is not evidence about the difference."
    ]
    if assumed_sd is not None:
        planned = tost_power(runs, assumed_sd, margin, ALPHA)
        if low > assumed_sd:
            where = "its 95% interval lies above it"
        elif high < assumed_sd:
            where = "its 95% interval lies below it"
        else:
            where = "its 95% interval holds it"
        lines.append(f"- the design assumed SD {assumed_sd:g} (equivalence power {planned:.2f}); the runs' SD: {where}")
    return lines


def _ratio_line(ratios: pd.DataFrame, target: float, difference: float) -> str:
    rows = ratios[(ratios["target"] - target).abs() < 1e-9]
    if rows.empty:
        return f"rollouts to {target:.2f}: not in the table (no --target {target:.2f} there)"
    row = rows.iloc[0]
    estimate = float(row["estimate"])
    if math.isnan(estimate):
        return f"rollouts to {target:.2f}: not read"
    if math.isinf(estimate):
        return f"rollouts to {target:.2f}: not reached"
    text = f"rollouts to {target:.2f}: {estimate:.2f}× [{row['low']:.2f}×, {row['high']:.2f}×]"
    # Fewer rollouts (ratio below 1) and a higher accuracy (difference above 0) both mean ahead.
    if estimate != 1 and difference != 0 and (estimate < 1) != (difference > 0):
        return f"{text}, the other way from the difference at the budget, which decides"
    return f"{text}, the same way as the difference at the budget"


def reading_lines(
    linear: Path,
    pchip: Path | None,
    budget: float,
    runs_needed: int,
    target: float,
    names: tuple[str, str] | None,
    assumed_sd: float | None = None,
) -> list[str]:
    """The reading by the rule, a line an entry (Markdown); ``names`` shorten the configurations' in the text;
    ``assumed_sd``: the SD the design's seed count assumed, to set the observed one against."""
    main, ratios = read_table(linear, budget)
    if names is not None:
        main = dataclasses.replace(main, names=names)
    config, baseline = main.names
    sides = (
        f"{main.runs} a side"
        if main.runs == main.baseline_runs
        else f"{config} {main.runs}, {baseline} {main.baseline_runs}"
    )
    final = min(main.runs, main.baseline_runs) >= runs_needed
    at = f"{budget:,.0f} rollouts"
    headline = main.verdict(budget) if final else f"interim ({sides}), no verdict before {runs_needed} a side"
    lines = [
        f"**{headline}** ({f'{sides}; ' if final else ''}linear curves).",
        f"- difference {config} − {baseline} at {at}: {_signed(main.difference)}, 95% interval "
        f"{_interval(main.low, main.high)}, permutation p = {main.p_value:.4f}",
        f"- E, equivalent within ±{main.margin:g} (both one-sided tests p < {ALPHA}): "
        f"{'yes' if main.equivalent else 'no'}, p = {main.tost_p:.4f}",
        f"- D, a difference (permutation p < {ALPHA} and the 95% interval excludes 0): "
        f"{'yes' if main.differs else 'no'}",
    ]
    if pchip is not None:
        other, _ = read_table(pchip, budget)
        other = dataclasses.replace(other, names=main.names)
        numbers = f"{_signed(other.difference)} {_interval(other.low, other.high)}"
        if not final:
            lines.append(f"- PCHIP: {numbers}")
        elif other.kind == main.kind:
            lines.append(f"- PCHIP: {numbers}, the same verdict")
        else:
            lines.append(
                f"- PCHIP: {numbers}, a different verdict ({other.verdict(budget)}); the linear reading stands"
            )
    lines.append(f"- {_ratio_line(ratios, target, main.difference)}")
    # The final reading's own sample size (its smaller side); an interim one the design's, the runs to come included.
    read = min(len(main.values), len(main.baseline_values))
    lines += _power_lines(main, read if final else runs_needed, not final, assumed_sd)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("linear", type=Path, help="folder of report --ci's intervals.csv on linear curves")
    parser.add_argument("--pchip", type=Path, help="folder of the PCHIP run's intervals.csv (sensitivity)")
    parser.add_argument("--budget", type=float, required=True, help="B*: the budget the verdict is read at")
    parser.add_argument("--runs", type=int, default=13, help="runs a side before a verdict (default 13)")
    parser.add_argument("--target", type=float, default=0.40, help="the rollouts-to-target row read (default 0.40)")
    parser.add_argument("--assumed-sd", type=float, help="the SD the design's seed count assumed (power beside)")
    parser.add_argument("--names", default=None, help="short names CONFIG,BASELINE (default: the table's)")
    parser.add_argument("--out", type=Path, help="also write the reading to this file")
    args = parser.parse_args(argv)
    names = None if args.names is None else tuple(args.names.split(",", 1))
    if names is not None and len(names) != 2:
        parser.error(f"--names {args.names}: give two names, CONFIG,BASELINE")
    try:
        lines = reading_lines(args.linear, args.pchip, args.budget, args.runs, args.target, names, args.assumed_sd)
    except ReportError as err:
        print(f"ERROR: {err}", file=sys.stderr)
        return 2
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
