"""The equal-budget reading rule (``recipe.pc_tools.verdict``) on hand-written interval tables whose verdicts are
known: each branch of the rule, the interim reading, the PCHIP and rollouts-to-target remarks, and bad input."""

import re

import numpy as np
import pandas as pd
import pytest

from recipe.pc_tools import verdict

BUDGET = 27648
PC = ",".join(f"pc_s{i}" for i in range(13))
GRPO = ",".join(f"grpo_s{i}" for i in range(13))


def spread(n: int, sd: float, mean: float = 0.42) -> str:
    """``n`` run values, comma-separated, whose sample SD is ``sd``."""
    z = np.arange(n) - (n - 1) / 2
    return ",".join(f"{v:.12f}" for v in mean + sd * z / z.std(ddof=1))


def write_table(
    folder,
    estimate=0.0,
    low=-0.01,
    high=0.01,
    p=0.5,
    tost_p=0.01,
    ratio=(0.9, 0.8, 1.0),
    runs=PC,
    baseline_runs=GRPO,
    values=None,
    baseline_values=None,
):
    """An intervals.csv as report --ci --equivalence-margin 0.02 writes it: differences at 3 budgets, one ratio; the
    runs' values at each budget (default: sample SD 0.017 an arm, means 0.44 and 0.42)."""
    folder.mkdir(parents=True, exist_ok=True)
    values = {
        "values": values or spread(len(runs.split(",")), 0.017, 0.44),
        "baseline_values": baseline_values or spread(len(baseline_runs.split(",")), 0.017),
    }
    common = {"configuration": "pc", "runs": runs, "baseline_runs": baseline_runs, "margin": 0.02} | values
    rows = [
        {**common, "measure": "difference", "rollouts": b, "estimate": 0.5, "low": 0.4, "high": 0.6, "p_value": 0.0}
        | {"tost_p": 0.9}
        for b in (9216.0, 18432.0)
    ]
    rows.append(
        {**common, "measure": "difference", "rollouts": float(BUDGET), "estimate": estimate, "low": low, "high": high}
        | {"p_value": p, "tost_p": tost_p}
    )
    rows.append({**common, "measure": "ratio", "estimate": ratio[0], "low": ratio[1], "high": ratio[2], "target": 0.4})
    pd.DataFrame(rows).to_csv(folder / "intervals.csv", index=False)
    return folder


def headline(tmp_path, pchip=None, **row):
    lines = verdict.reading_lines(write_table(tmp_path / "linear", **row), pchip, BUDGET, 13, 0.40, ("PC", "GRPO"))
    return lines[0], lines


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # E and not D
        (dict(estimate=0.002, low=-0.01, high=0.014, p=0.6, tost_p=0.01), "PC and GRPO are equivalent within ±0.02"),
        # D and not E, each sign
        (dict(estimate=0.03, low=0.01, high=0.05, p=0.01, tost_p=0.7), "PC is ahead at 27,648 rollouts"),
        (dict(estimate=-0.03, low=-0.05, high=-0.01, p=0.01, tost_p=0.7), "PC is behind at 27,648 rollouts"),
        # D and E
        (dict(estimate=0.01, low=0.002, high=0.018, p=0.02, tost_p=0.03), "PC is ahead, by less than 0.02 at"),
        # D needs both: a small p with an interval holding 0, or an interval without 0 and a large p
        (dict(estimate=0.02, low=-0.001, high=0.04, p=0.01, tost_p=0.4), "inconclusive at this margin"),
        (dict(estimate=0.02, low=0.001, high=0.04, p=0.06, tost_p=0.4), "inconclusive at this margin"),
        # An interval that ends at 0 holds it
        (dict(estimate=0.02, low=0.0, high=0.04, p=0.01, tost_p=0.4), "inconclusive at this margin"),
    ],
)
def test_each_branch_of_the_rule_reads_as_written(tmp_path, row, expected):
    """Catches: D read from the p value or the interval alone, the sign of 'ahead' flipped, or E and D together read
    as plain equivalence."""
    first, lines = headline(tmp_path, **row)
    assert expected in first and "(13 a side; linear curves)" in first
    if "inconclusive" in expected:
        assert f"the differences left open are [{row['low']:+.3f}, {row['high']:+.3f}]".replace("-", "−") in first


def test_fewer_runs_than_the_rule_needs_give_numbers_and_no_verdict(tmp_path):
    """Catches: a verdict printed from 12 runs, or the interim line losing the numbers it publishes."""
    twelve = ",".join(f"pc_s{i}" for i in range(12))
    first, lines = headline(tmp_path, estimate=0.002, low=-0.01, high=0.014, p=0.6, tost_p=0.01, runs=twelve)
    assert first == "**interim (PC 12, GRPO 13), no verdict before 13 a side** (linear curves)."
    assert not any("equivalent within ±0.02 at" in line for line in lines)
    assert "+0.002, 95% interval [−0.010, +0.014], permutation p = 0.6000" in lines[1]
    assert lines[2].endswith("yes, p = 0.0100")


def test_a_pchip_reading_that_disagrees_is_named_and_the_linear_one_stands(tmp_path):
    pchip = write_table(tmp_path / "pchip", estimate=0.03, low=0.01, high=0.05, p=0.01, tost_p=0.7)
    first, lines = headline(tmp_path, pchip, estimate=0.002, low=-0.01, high=0.014, p=0.6, tost_p=0.01)
    assert "equivalent" in first
    assert lines[4] == (
        "- PCHIP: +0.030 [+0.010, +0.050], a different verdict (PC is ahead at 27,648 rollouts); the linear reading "
        "stands"
    )
    same = write_table(tmp_path / "same", estimate=0.001, low=-0.012, high=0.015, p=0.7, tost_p=0.02)
    _, lines = headline(tmp_path, same, estimate=0.002, low=-0.01, high=0.014, p=0.6, tost_p=0.01)
    assert lines[4].endswith("the same verdict")


@pytest.mark.parametrize(
    ("estimate", "ratio", "remark"),
    [
        (0.03, (0.8, 0.7, 0.9), "the same way as the difference"),  # ahead, fewer rollouts
        (0.03, (1.2, 1.1, 1.3), "the other way from the difference at the budget, which decides"),
        (-0.03, (0.8, 0.7, 0.9), "the other way from the difference at the budget, which decides"),
        (0.03, (float("inf"), 0.7, float("inf")), "rollouts to 0.40: not reached"),
        (0.03, (float("nan"), 0.7, 1.3), "rollouts to 0.40: not read"),
    ],
)
def test_rollouts_to_target_is_read_with_its_direction(tmp_path, estimate, ratio, remark):
    """Catches: a ratio below 1 read as behind, or a not-reached ratio printed as a number."""
    _, lines = headline(tmp_path, estimate=estimate, low=-0.05, high=0.05, ratio=ratio)
    assert remark in next(line for line in lines if line.startswith("- rollouts to"))


def test_a_missing_table_or_budget_stops_with_one_line(tmp_path, capsys):
    assert verdict.main([str(tmp_path / "none"), "--budget", "27648"]) == 2
    assert capsys.readouterr().err.strip().startswith(f"ERROR: {tmp_path / 'none' / 'intervals.csv'} cannot be read")
    write_table(tmp_path / "t")
    assert verdict.main([str(tmp_path / "t"), "--budget", "20000"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("has no difference at 20,000 rollouts (has: 9,216, 18,432, 27,648); check --budget")


def test_the_command_names_the_configurations_from_the_table_and_writes_the_reading(tmp_path, capsys):
    folder = write_table(tmp_path / "t")
    assert verdict.main([str(folder), "--budget", "27648", "--out", str(tmp_path / "verdict.md")]) == 0
    out = capsys.readouterr().out
    assert "pc and grpo are equivalent within ±0.02" in out and out == (tmp_path / "verdict.md").read_text()


def power_lines(tmp_path, runs=13, baseline_runs=13, sd=0.017, baseline_sd=None, **table) -> list[str]:
    """The reading's power lines for arms of ``runs`` and ``baseline_runs`` runs with these sample SDs."""
    names = {"runs": ",".join(f"pc_s{i}" for i in range(runs))} | {
        "baseline_runs": ",".join(f"grpo_s{i}" for i in range(baseline_runs))
    }
    values = {"values": spread(runs, sd, 0.44), "baseline_values": spread(baseline_runs, baseline_sd or sd)}
    folder = write_table(tmp_path / "t", **(names | values | table))
    lines = verdict.reading_lines(folder, None, BUDGET, 13, 0.40, ("PC", "GRPO"), assumed_sd=0.017)
    return [line for line in lines if "power" in line]


def test_power_is_read_at_the_spread_the_runs_show_with_its_interval(tmp_path):
    """The pre-registration's power to show equivalence at 13 a side: 0.85 at SD 0.016 (0.86 for the t-test); its
    0.79 at the assumed 0.017 came from a Welch simulation, power.py's pooled test gives 0.80."""
    power, assumed = power_lines(tmp_path, sd=0.016)
    assert power.startswith(
        "- power of 13 a side at the runs' SD 0.0160 (within arms, pooled over both; 24 degrees of freedom, 95% "
        "interval 0.0125–0.0223): 0.85 ("
    )
    assert "to show equivalence within ±0.02 when the true difference is 0; 0.86 (" in power
    # Each range runs from the power at the interval's larger SD to that at its smaller one.
    for at, low, high in re.findall(r"(\d\.\d\d) \((\d\.\d\d)–(\d\.\d\d) over the SD's interval\)", power):
        assert float(low) < float(at) < float(high)
    assert power.endswith("Power at an observed SD is not evidence about the difference.")
    assert assumed == "- the design assumed SD 0.017 (equivalence power 0.80); the runs' SD: its 95% interval holds it"


@pytest.mark.parametrize(
    ("arms", "expected"),
    [
        # Each arm about its own mean (the means differ by 0.02), weighted by its degrees of freedom:
        # sqrt((2 × 0.010² + 12 × 0.020²) / 14) = 0.0189, not the larger arm's 0.020 nor the plain mean of variances.
        (dict(runs=3, sd=0.010, baseline_sd=0.020), "power of the design's 13 a side at the runs' SD 0.0189"),
        # A final reading: the smaller side's own count.
        (
            dict(runs=15, baseline_runs=14),
            "power of 14 a side at the runs' SD 0.0170 (within arms, pooled over both; 27",
        ),
        (dict(runs=15, baseline_runs=15), "power of 15 a side"),
        # Two runs an arm already have a spread; one has none of its own.
        (
            dict(runs=2, baseline_runs=2),
            "power of the design's 13 a side at the runs' SD 0.0170 (within arms, pooled over both; 2 ",
        ),
        (dict(runs=1), "- power: not read (an arm has fewer than 2 runs at the budget, no spread of its own)"),
    ],
)
def test_power_pools_within_arms_and_counts_the_design_or_the_runs(tmp_path, arms, expected):
    assert expected in power_lines(tmp_path, **arms)[0]


def test_a_final_reading_sets_the_assumed_sd_at_its_own_run_count(tmp_path):
    # 15 a side at SD 0.017: 0.87, where the design's 13 give 0.80.
    assumed = power_lines(tmp_path, runs=15, baseline_runs=15)[1]
    assert assumed.startswith("- the design assumed SD 0.017 (equivalence power 0.87);")


@pytest.mark.parametrize(
    ("sd", "underpowered", "where"),
    [
        (0.017, False, "holds it"),
        # Near GRPO's 0.020, as the pre-registration names it: power 0.59, though the interval (0.0156-0.0278) holds
        # the assumed 0.017.
        (0.020, True, "holds it"),
        (0.030, True, "lies above it"),  # interval 0.0234-0.0417
        (0.010, False, "lies below it"),  # interval 0.0078-0.0139
    ],
)
def test_underpowered_is_said_near_0_020_and_the_interval_set_against_the_assumed_sd(tmp_path, sd, underpowered, where):
    power, assumed = power_lines(tmp_path, sd=sd)
    said = "At this SD the design is underpowered for equivalence (below 0.70)." in power
    assert said == underpowered
    assert assumed.endswith(f"the runs' SD: its 95% interval {where}")


def test_runs_left_out_at_the_budget_and_no_spread_are_read_as_such(tmp_path):
    left_out = spread(12, 0.017, 0.44).replace(",", ",,", 1)  # 13 runs named, the second ended before the budget
    assert (
        "- power of 12 a side at the runs' SD 0.0170 (within arms, pooled over both; 23 degrees of freedom"
        in (power_lines(tmp_path, values=left_out)[0])
    )
    same = ",".join(["0.43"] * 13)
    lines = power_lines(tmp_path, values=same, baseline_values=same)
    assert lines == ["- power: not read (the runs' SD at the budget is 0.0000 on 24 degrees of freedom)"]


def test_a_table_without_run_values_stops_with_one_line(tmp_path, capsys):
    folder = write_table(tmp_path / "t")
    table = pd.read_csv(folder / "intervals.csv").drop(columns=["values"])
    table.to_csv(folder / "intervals.csv", index=False)
    assert verdict.main([str(folder), "--budget", "27648"]) == 2
    assert capsys.readouterr().err.strip().endswith("has no run values in 'values' at 27,648: rerun report --ci")
