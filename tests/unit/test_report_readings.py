"""The report's reading of a two-arm design on synthetic curves whose answer is known: runs that stopped, targets
fixed in advance, wide gaps between validation points, PCHIP curves, the equivalence test, the studentized interval
and the seeds a design needs."""

import argparse
import json
import os
import re
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.interpolate import PchipInterpolator
from scipy.optimize import brentq
from support import ROOT

from recipe.pc_tools import curves as curve_fns
from recipe.pc_tools import intervals, power, report

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_interval_coverage  # noqa: E402


def curve(rollouts, accuracy):
    """A run's validation curve as validation_curve gives it (unsmoothed), one validation step per point: a run with
    fewer points than its configuration's others stopped early."""
    frame = pd.DataFrame({"rollouts": rollouts, "accuracy": accuracy}, index=range(len(rollouts)), dtype=float)
    frame["smoothed"] = frame["accuracy"]
    return frame


POINTS = [0, 1000, 2000, 3000]


@pytest.mark.parametrize(
    "stopped, target, crossing, used",
    [
        # All three cover 0-1000, where their mean reaches 0.15 halfway.
        ([0.1, 0.2], 0.15, 500, (0, 1, 2)),
        # Their mean never gets to 0.4 before the stopped run ends at 1,000: the two finished runs, 0.3 at 2,000 and
        # 0.5 at 3,000, reach it at 2,500 without it.
        ([0.1, 0.2], 0.4, 2500, (0, 1)),
        # The finished runs never get to 0.6: not reached, by them.
        ([0.1, 0.2], 0.6, np.inf, (0, 1)),
        # The finished runs alone reach 0.35 at 1,500, but the stopped run covered 1,500 and with it the mean had
        # not got there: not read.
        ([0.1, 0.1, 0.1], 0.35, np.nan, (0, 1)),
    ],
)
def test_a_crossing_is_read_from_the_runs_that_cover_the_range_up_to_it(stopped, target, crossing, used):
    finished = [0.1, 0.2, 0.3, 0.5] if len(stopped) == 2 else [0.1, 0.3, 0.4, 0.5]
    runs = [curve(POINTS, finished), curve(POINTS, finished), curve(POINTS[: len(stopped)], stopped)]
    assert curve_fns.stopped_runs(runs).tolist() == [False, False, True]
    read = curve_fns.read_crossing(runs, target)
    assert read.rollouts == pytest.approx(crossing, nan_ok=True) and read.used == used


def stopped_design():
    """base: two runs at 0.4 from 1,000 rollouts (the peak, crossed at 1,000 in every resample); new: two finished
    runs reaching 0.4 at 2,500, and one that stopped at 1,000 rollouts below it."""
    return {
        "base_s1": curve(POINTS, [0.1, 0.4, 0.4, 0.4]),
        "base_s2": curve(POINTS, [0.1, 0.4, 0.4, 0.4]),
        "new_s1": curve(POINTS, [0.1, 0.2, 0.3, 0.5]),
        "new_s2": curve(POINTS, [0.1, 0.2, 0.3, 0.5]),
        "new_s3": curve(POINTS[:2], [0.1, 0.2]),
    }


def test_a_run_that_stopped_is_not_read_past_its_end_nor_counted_as_never_reaching_the_target():
    runs = stopped_design()
    groups = curve_fns.seed_groups(list(runs))
    table = intervals.intervals_table(runs, groups, "base", [500, 2500], resamples=500)
    early, late, ratio = table.to_dict("records")
    # At 500 every run is read; at 2,500 new_s3 is not, and the difference comes from the two runs that got there.
    assert early["left_out"] == "" and early["value"] == pytest.approx(0.15)
    assert late["left_out"] == "new_s3 (ended at 1,000)" and late["value"] == pytest.approx(0.4)
    assert late["estimate"] == pytest.approx(0.0) and late["p_value"] == 1.0
    # The ratio from the finished runs only: every resample of them crosses at 2,500, none is infinite.
    assert (ratio["estimate"], ratio["low"], ratio["high"]) == (pytest.approx(2.5), 2.5, 2.5)
    assert ratio["left_out"] == "new_s3 (ended at 1,000)"
    text = intervals.intervals_markdown(table, "base", "peak", "method")
    assert "| new | rollouts to target | 2,500 | 1,000 | 2.50× | [2.50×, 2.50×] |" in text
    assert "∞" not in text.split("\n\n", 1)[1]  # in the table (the caption says when an end is ∞)
    assert "| new | acc. at 2,500 rollouts | 0.400 | 0.400 | +0.000 |" in text
    read = intervals.interpolated_table(runs, groups, "base", [500, 2500])
    markdown = intervals.interpolated_markdown(read, [500, 2500], "base", "caption")
    assert "| new | 3 | 0.150 | not read | 0.2000 | 2,500 (left out: s3 (ended at 1,000)) | 2.50× |" in markdown
    assert "not reached" not in markdown


def test_a_resample_whose_range_a_stopped_run_cuts_short_is_not_read_not_infinite():
    runs = list(stopped_design().values())[2:]
    draws = np.array([[0, 1, 2], [0, 1, 1], [2, 2, 2]])
    low, high = curve_fns.drawn_crossings(runs, draws, np.full(3, 0.4))
    # With new_s3 drawn the mean ends at 1,000 below 0.4: its crossing lies somewhere past 1,000.
    assert low.tolist() == [1000, 2500, 1000] and high.tolist() == [np.inf, 2500, np.inf]
    # A target not read in a resample leaves the crossing anywhere.
    low, high = curve_fns.drawn_crossings(runs, draws[1:2], np.array([np.nan]))
    assert (low[0], high[0]) == (0.0, np.inf)


def test_the_ratio_reports_the_share_of_resamples_a_stopped_run_leaves_unread():
    """All three new runs reach 0.2 by 1,000 on average, so the crossing is read from all three; a resample that
    draws the stopped one (0.12 at its end, 1,000) two or three times ends below 0.2 there: 7 in 27 are not read."""
    runs = {
        "base_s1": curve(POINTS, [0.1, 0.4, 0.4, 0.4]),
        "base_s2": curve(POINTS, [0.1, 0.4, 0.4, 0.4]),
        "new_s1": curve(POINTS, [0.1, 0.3, 0.4, 0.5]),
        "new_s2": curve(POINTS, [0.1, 0.3, 0.4, 0.5]),
        "new_s3": curve(POINTS[:2], [0.1, 0.12]),
    }
    table = intervals.intervals_table(runs, curve_fns.seed_groups(list(runs)), "base", [500], 0.2, resamples=2000)
    (ratio,) = [row for row in table.to_dict("records") if row["measure"] == "ratio" and row["target"] == 0.2]
    assert ratio["left_out"] == "" and ratio["unread_share"] == pytest.approx(7 / 27, abs=0.03)
    text = intervals.intervals_markdown(table, "base", "given", "method")
    assert f"({ratio['unread_share']:.0%} of resamples not read) |" in text


def test_a_target_the_baseline_never_reaches_gives_no_ratio_only_not_read():
    """The new runs reach 0.4 at 2,000; the baseline's mean never does (one run reaches it, one ends at 0.3): the
    ratio is not read, never 0.00×, and resamples whose baseline never reaches it are not read either."""
    runs = {
        "base_s1": curve(POINTS, [0.1, 0.2, 0.3, 0.5]),
        "base_s2": curve(POINTS, [0.1, 0.2, 0.25, 0.3]),
        "new_s1": curve(POINTS, [0.1, 0.3, 0.4, 0.5]),
        "new_s2": curve(POINTS, [0.1, 0.3, 0.4, 0.5]),
    }
    groups = curve_fns.seed_groups(list(runs))
    table = intervals.intervals_table(runs, groups, "base", [500], 0.45, resamples=2000)
    (ratio,) = [row for row in table.to_dict("records") if row["measure"] == "ratio" and row["target"] == 0.45]
    assert ratio["value"] == pytest.approx(2500) and ratio["baseline_value"] == np.inf and np.isnan(ratio["estimate"])
    # A resample of the baseline has a ratio only when it draws base_s1 twice: 1 in 4.
    assert ratio["unread_share"] == pytest.approx(3 / 4, abs=0.03)
    assert ratio["low"] == ratio["high"] == pytest.approx(2500 / 2750)  # base_s1 alone crosses 0.45 at 2,750
    text = intervals.intervals_markdown(table, "base", "given", "method")
    row = next(line for line in text.splitlines() if line.startswith("| new | rollouts to 0.4500"))
    assert "| 2,500 | not reached | not read |" in row and "0.00×" not in text
    assert f"({ratio['unread_share']:.0%} of resamples not read)" in row
    interpolated = intervals.interpolated_table(runs, groups, "base", [500], 0.45)
    assert np.isnan(interpolated.set_index("configuration").loc["new", "rollouts_ratio_vs_base"])


@pytest.mark.parametrize(
    "unread, bound, interval",
    [
        ([], None, [1.0, 1.0]),
        # 1 in 100 not read, known to lie above 2 (above every read value): neither end depends on it.
        ([1], 2.0, [1.0, 1.0]),
        # 10 in 100 not read, known only to lie above 0.8: both ends depend on where they lie.
        ([10], 0.8, [np.nan, np.nan]),
    ],
)
def test_an_interval_end_is_read_only_where_the_unread_resamples_cannot_move_it(unread, bound, interval):
    count = unread[0] if unread else 0
    least = np.array([1.0] * (100 - count) + [bound] * count)
    most = np.array([1.0] * (100 - count) + [np.inf] * count)
    assert intervals._censored_interval(least, most) == pytest.approx(tuple(interval), nan_ok=True)


def test_a_target_fixed_in_advance_is_read_beside_the_baselines_peak():
    runs = {
        "base_s1": curve(POINTS, [0.1, 0.2, 0.2, 0.4]),
        "base_s2": curve(POINTS, [0.1, 0.2, 0.4, 0.6]),  # peak of the mean: 0.5 at 3,000
        "new_s1": curve(POINTS, [0.1, 0.2, 0.2, 0.6]),
        "new_s2": curve(POINTS, [0.1, 0.2, 0.2, 0.6]),
    }
    groups = curve_fns.seed_groups(list(runs))
    # base's mean at 2,000 is 0.3, which base reaches at 2,000 and new halfway from 2,000 (0.2) to 3,000 (0.6).
    table = intervals.interpolated_table(runs, groups, "base", [], target_at=2000).set_index("configuration")
    assert table["target"].tolist() == pytest.approx([0.3, 0.3]) and table["target_peak"].tolist() == [0.5, 0.5]
    assert table["rollouts_to_target"].tolist() == pytest.approx([2000, 2250])
    assert table["rollouts_ratio_vs_base"].tolist() == pytest.approx([1.0, 1.125])
    # The peak's crossings: base at 3,000; new's mean passes 0.5 three quarters of the way from 2,000 to 3,000.
    assert table["rollouts_to_target_peak"].tolist() == pytest.approx([3000, 2750])
    # An accuracy fixed in advance is read the same way; the interval table has a ratio row per target.
    fixed = intervals.intervals_table(runs, groups, "base", [], 0.4, resamples=200)
    assert fixed["target"].tolist() == [0.4, 0.5] and fixed["estimate"].tolist() == pytest.approx(
        [2500 / 2500, 2750 / 3000]
    )
    assert fixed["target_source"].tolist() == ["given", "peak of base's interpolated mean curve over its points"]


def test_a_budget_between_far_validation_points_is_flagged():
    runs = {"a": curve([0, 1000, 5000], [0.1, 0.2, 0.4]), "b": curve([0, 2000, 3000, 5000], [0.1, 0.2, 0.3, 0.4])}
    # 3,000: inside a's 4,000-wide gap (> 0.1 · 3,000) and on one of b's points; 1,000 on a point of a, inside b's
    # 2,000-wide gap; 4,000 in b's gap of 2,000, which 0.6 · 4,000 = 2,400 allows.
    found = curve_fns.budget_gaps(runs, [1000, 3000, 4000], 0.1)
    assert [(g["run"], g["budget"], g["gap"]) for g in found] == [
        ("a", 3000, 4000),
        ("a", 4000, 4000),
        ("b", 1000, 2000),
        ("b", 4000, 2000),
    ]
    assert [(g["run"], g["budget"]) for g in curve_fns.budget_gaps(runs, [1000, 3000, 4000], 0.6)] == [
        ("a", 3000),
        ("a", 4000),
        ("b", 1000),
    ]


def test_pchip_keeps_straight_data_straight_and_does_not_overshoot_a_flat_stretch():
    straight = curve([0, 1000, 3000], [0.1, 0.2, 0.4])
    assert curve_fns.accuracy_at_rollouts(straight, [500, 2000], "pchip") == pytest.approx([0.15, 0.3])
    # A rise then a plateau: a cubic spline would pass above 0.4 between 1,000 and 2,000; PCHIP stays at it.
    plateau = curve([0, 1000, 2000, 3000], [0.0, 0.4, 0.4, 0.4])
    assert curve_fns.accuracy_at_rollouts(plateau, [1500, 2500], "pchip") == pytest.approx([0.4, 0.4])
    # A curve that bends: PCHIP reads above the straight line inside the bend, and nothing past the end.
    bend = curve([0, 1000, 2000], [0.0, 0.3, 0.4])
    (linear,), (cubic, past) = (
        curve_fns.accuracy_at_rollouts(bend, [1500]),
        curve_fns.accuracy_at_rollouts(bend, [1500, 2500], "pchip"),
    )
    assert linear == pytest.approx(0.35) and 0.35 < cubic < 0.4 and past is None
    # The mean curve's crossing under PCHIP is read on its grid: of a straight run, where the line crosses.
    read = curve_fns.read_crossing([straight, straight], 0.25, "pchip")
    assert read.rollouts == pytest.approx(1500, abs=1.0)
    # Of the bend, where the cubic crosses (on PCHIP's grid), before the straight line's 1,700.
    root = brentq(lambda x: PchipInterpolator([0, 1000, 2000], [0.0, 0.3, 0.4])(x) - 0.37, 1000, 2000)
    assert root < 1650 and curve_fns.read_crossing([bend], 0.37, "pchip").rollouts == pytest.approx(root, abs=2.0)


OFFSETS = np.array([-0.01, -0.005, 0.0, 0.005, 0.01])  # sample variance 6.25e-5: Welch's error for 5 + 5 is 0.005


def test_the_equivalence_test_is_two_one_sided_welch_t_tests():
    mine, theirs = 0.304 + OFFSETS, 0.3 + OFFSETS
    # Δ = 0.004, error 0.005, 8 degrees of freedom (equal sizes and spreads): t = (0.004 - 0.02) / 0.005 = -3.2 decides.
    result = intervals.equivalence_test(mine, theirs, 0.02)
    assert result["tost_p"] == pytest.approx(stats.t.cdf(-3.2, 8))
    half = stats.t.ppf(0.95, 8) * 0.005
    assert [result["tost_low"], result["tost_high"]] == pytest.approx([0.004 - half, 0.004 + half])
    # A margin of 0.01: t = -1.2, p ≈ 0.13, and the 90% interval reaches past +0.01: not equivalent.
    narrow = intervals.equivalence_test(mine, theirs, 0.01)
    assert narrow["tost_p"] == pytest.approx(stats.t.cdf(-1.2, 8)) and narrow["tost_high"] > 0.01


def test_the_studentized_interval_scales_the_resampled_t_by_the_observed_error():
    mine, theirs = 0.304 + OFFSETS, 0.3 + OFFSETS
    # Resamples whose t is +2, 0 or -1 in equal shares (their difference less the observed, over their error of
    # 0.005): the interval runs from Δ − 2 errors to Δ + 1 error, the t's tails swapped.
    drawn_mine = np.array([mine + 0.01, mine, mine - 0.005] * 100)
    drawn_theirs = np.array([theirs] * 300)
    low, high = intervals.studentized_interval(mine, theirs, drawn_mine, drawn_theirs)
    assert (low, high) == pytest.approx((0.004 - 0.01, 0.004 + 0.005))


def test_the_studentized_interval_covers_where_the_percentile_one_falls_short():
    # Normal seeds, 5 a side: docs/tools.md gives 2,000 experiments of 2,000 resamples; 150 of 400 here.
    coverage = bench_interval_coverage.coverage(experiments=150, resamples=400, seed=0)
    assert coverage["percentile"] < 0.93 and coverage["studentized"] > 0.93


def test_seeds_needed_for_a_difference_and_for_equivalence():
    # The t-test needs 13 a side where the normal approximation, 2 (1.96 + 0.84)² 0.017² / 0.02² = 11.3, says 12.
    assert power.seeds_needed(0.017, 0.02) == 13
    assert power.t_test_power(12, 0.017, 0.02) < 0.8 < power.t_test_power(13, 0.017, 0.02)
    # The equivalence test's power against a simulation of the same design: 13 a side, true difference 0.
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 0.017, (40_000, 13)), rng.normal(0, 0.017, (40_000, 13))
    error = np.sqrt((a.var(axis=1, ddof=1) + b.var(axis=1, ddof=1)) / 13)
    half = stats.t.ppf(0.95, 24) * error
    difference = a.mean(axis=1) - b.mean(axis=1)
    simulated = np.mean((difference - half > -0.02) & (difference + half < 0.02))
    assert power.tost_power(13, 0.017, 0.02) == pytest.approx(simulated, abs=0.01)
    assert power.tost_seeds_needed(0.017, 0.02) == 14


def test_power_cli_prints_both_designs(capsys):
    assert power.main(["--sd", "0.017", "--delta", "0.02", "--margin", "0.02", "--seeds", "13"]) == 0
    out = capsys.readouterr().out
    assert "| difference 0.02 (two-sided t) | 13 | 0.821 |" in out
    assert "| equivalence ±0.02 (two one-sided t, true difference 0) | 14 | 0.795 |" in out


SEED_CURVES = {
    "grpo_s1": ([0, 1000, 2000, 3000], [0.10, 0.25, 0.33, 0.40]),
    "grpo_s2": ([0, 1000, 2000, 3000], [0.12, 0.27, 0.35, 0.42]),
    "grpo_s3": ([0, 1000, 2000, 3000], [0.11, 0.26, 0.36, 0.41]),
    "pc_s1": ([0, 1200, 2400, 3600], [0.10, 0.27, 0.36, 0.43]),
    "pc_s2": ([0, 1200, 2400, 3600], [0.12, 0.28, 0.34, 0.41]),
    "pc_s3": ([0, 1200], [0.11, 0.26]),  # stopped after one step
}


@pytest.fixture
def seed_files(tmp_path):
    specs = []
    for label, (rollouts, accuracy) in SEED_CURVES.items():
        lines = [
            f'{{"step": {step}, "data": {{"rollout_stats/cumulative_rollouts_sample": {r}, '
            f'"val-core/arith/acc/mean@8": {a}}}}}\n'
            for step, (r, a) in enumerate(zip(rollouts, accuracy, strict=True))
        ]
        path = tmp_path / f"{label}.jsonl"
        path.write_text("".join(lines))
        specs.append(f"{label}={path}")
    return specs


def test_cli_reads_a_design_with_every_reading_option(seed_files, tmp_path, capsys, caplog):
    out = tmp_path / "out"
    argv = [*seed_files, "--seeds", "--interpolate", "--ci", "--at-rollouts", "1500,3000", "--ci-resamples", "300"]
    argv += ["--curve", "pchip", "--target-at", "3000", "--equivalence-margin", "0.02", "--interval", "studentized"]
    argv += ["--max-gap", "0.5", "--power", "0.02", "--out", str(out), "--no-plot"]
    assert report.main(argv) == 0
    stdout = capsys.readouterr().out
    table = pd.read_csv(out / "intervals.csv")
    # Differences get the studentized interval asked for; ratios (censored, possibly infinite) a percentile one.
    assert (
        table["interval"].tolist() == ["studentized"] * 2 + ["percentile"] * 2
        and table["curve"].tolist() == ["pchip"] * 4
    )
    assert table["measure"].tolist() == ["difference", "difference", "ratio", "ratio"]
    assert table.loc[1, "left_out"] == "pc_s3 (ended at 1,200)" and table["margin"].tolist() == [0.02] * 4
    power_table = pd.read_csv(out / "power.csv")
    # pc_s3 ended at 1,200: neither budget reads it.
    assert power_table["runs"].tolist() == [2, 2] and power_table["baseline_runs"].tolist() == [3, 3]
    first = power_table.iloc[0]
    assert first["seeds_needed"] == power.seeds_needed(first["sd"], 0.02)
    assert first["tost_power"] == pytest.approx(power.tost_power(2, first["sd"], 0.02))
    # Every run's points lie 1,000 or 1,200 apart: 1,500 is inside a gap over 0.5 × 1,500 = 750.
    assert "pc_s1 at 1,500 (points 1,200 and 2,400)" in stdout
    # The note stands under the intervals table itself, not only under the table before it on stdout.
    assert "pc_s1 at 1,500 (points 1,200 and 2,400)" in (out / "intervals.md").read_text()
    assert "run grpo_s1: 1,500 rollouts fall between validation points at 1,000 and 2,000" in caplog.text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--equivalence-margin", "0"], "argument --equivalence-margin: must be a number > 0, got '0'"),
        (["--equivalence-margin", "-0.02"], "argument --equivalence-margin: must be a number > 0, got '-0.02'"),
        (["--power", "0.02"], "--power reads the runs' spread at budgets: add --seeds, --interpolate, --at-rollouts"),
        (["--alpha", "1.5"], "argument --alpha: must lie between 0 and 1, got '1.5'"),
        (["--target-at", "3000"], "--target-at reads interpolated mean curves: add --seeds --interpolate"),
        (["--interval", "studentized"], "--interval sets --ci's intervals: add --ci"),
        (["--equivalence-margin", "0.02"], "--equivalence-margin tests --ci's budgets or powers --power's design: add"),
    ],
)
def test_bad_reading_options_are_one_error_line(seed_files, tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        report.main([*seed_files, *argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(f"python -m recipe.pc_tools.report: error: {message}")
    assert err.count("\n") == 1


def test_power_with_a_configuration_of_one_run_is_one_error_line(seed_files, tmp_path, capsys, caplog):
    argv = [*seed_files[:4], "--seeds", "--interpolate", "--at-rollouts", "1500", "--power", "0.02"]
    assert report.main([*argv, "--out", str(tmp_path / "out"), "--no-plot"]) == 2
    assert [r.getMessage() for r in caplog.records] == [
        "--power estimates the spread from 2 or more runs a side; pc (1)"
    ]
    assert not (tmp_path / "out").exists()


def test_every_report_and_power_option_is_in_the_help_and_the_docs(capsys, monkeypatch):
    with open(os.path.join(ROOT, "docs", "tools.md")) as f:
        docs = f.read()
    parsers = []

    def caught(self, *args, **kwargs):  # the parser each tool builds, kept as it starts to parse
        parsers.append(self)
        raise SystemExit(0)

    for main in (report.main, power.main):
        with pytest.raises(SystemExit):
            main(["--help"])
        helped = capsys.readouterr().out
        with monkeypatch.context() as patch:
            patch.setattr(argparse.ArgumentParser, "parse_args", caught)
            with pytest.raises(SystemExit):
                main([])
        options = [o for action in parsers[-1]._actions for o in action.option_strings if o[1] == "-" and o != "--help"]
        assert len(options) > 5 and [o for o in options if o not in helped] == []
        assert [o for o in options if not re.search(rf"(?<![\w-]){o}(?![\w-])", docs)] == []


def test_a_permutation_test_with_too_many_splits_samples_them_with_the_observed_split_counted():
    rng = np.random.default_rng(3)
    mine, theirs = rng.normal(0.02, 0.017, 13), rng.normal(0.0, 0.017, 13)  # 10,400,600 splits
    p = intervals.permutation_p(mine, theirs, seed=0)
    assert p == intervals.permutation_p(mine, theirs, seed=0) != intervals.permutation_p(mine, theirs, seed=1)
    # Against a permutation distribution drawn independently: within a few standard errors of 200,000 draws.
    pooled, observed = np.concatenate([mine, theirs]), abs(mine.mean() - theirs.mean())
    order = np.random.default_rng(7).random((50_000, 26)).argsort(axis=1)
    differences = pooled[order[:, :13]].mean(axis=1) - pooled[order[:, 13:]].mean(axis=1)
    expected = np.mean(np.abs(differences) >= observed)
    assert abs(p - expected) < 5 * np.sqrt(expected * (1 - expected) / 50_000) + 1e-5
    # Every split as extreme as the observed one: (1 + draws) / (1 + draws), never above 1; none of the random ones
    # as extreme (the observed split is one of 2 in 10,400,600): 1 / (1 + draws), never 0.
    assert intervals.permutation_p(np.zeros(13), np.zeros(13)) == 1.0
    assert intervals.permutation_p(np.ones(13), np.zeros(13)) == 1 / (1 + intervals.PERMUTATION_DRAWS)
    # Where the splits can be enumerated the test stays exact: 5 + 5 runs, one value apart, p = 2 / 252.
    assert intervals.permutation_p(np.ones(5), np.zeros(5)) == pytest.approx(2 / 252)
    # The table's cell says which: the count of the 200,000 random splits and the observed one.
    points = [0, 1000]
    runs = {f"base_s{i}": curve(points, [0.1, 0.4 + v]) for i, v in enumerate(theirs)}
    runs |= {f"new_s{i}": curve(points, [0.1, 0.4 + v]) for i, v in enumerate(mine)}
    table = intervals.intervals_table(runs, curve_fns.seed_groups(list(runs)), "base", [1000], 0.2, resamples=50)
    text = intervals.intervals_markdown(table, "base", "given", "method")
    assert f"| {p:.4f} ({round(p * 200_001):,} of 200,001 random) |" in text


def trainer_log(path, accuracies, configured=None):
    """A log as the trainer writes it: a validation at every step, 100 rollouts a step, and (``configured``) the
    run's configured last step on each line."""
    lines = []
    for step, acc in enumerate(accuracies, start=1):
        data = {"rollout_stats/cumulative_rollouts_sample": 100 * step, "val-core/arith/acc/mean@8": acc}
        if configured is not None:
            data["training/total_training_steps"] = configured
        lines.append(f'{{"step": {step}, "data": {json.dumps(data)}}}\n')
    path.write_text("".join(lines))
    return str(path)


@pytest.mark.parametrize("logged", [True, False])
def test_a_run_is_finished_only_when_it_reached_its_configured_last_step(tmp_path, capsys, logged):
    """Both GRPO seeds were cut at step 3 of 5, alike: against each other they look finished, against their
    configured last step (logged, or --last-step for older logs) they stopped, so 0.5 is not read for them."""
    cut = [0.1, 0.2, 0.3]
    runs = [
        f"grpo_s1={trainer_log(tmp_path / 'g1.jsonl', cut, 5 if logged else None)}",
        f"grpo_s2={trainer_log(tmp_path / 'g2.jsonl', cut, 5 if logged else None)}",
        f"pc_s1={trainer_log(tmp_path / 'p1.jsonl', [0.1, 0.2, 0.3, 0.4, 0.45], 5 if logged else None)}",
    ]
    argv = [*runs, "--seeds", "--target", "0.5", "--baseline", "grpo", "--no-plot", "--out", str(tmp_path / "o")]
    assert report.main(argv + ([] if logged else ["--last-step", "grpo=5"])) == 0
    table = pd.read_csv(tmp_path / "o" / "seeds_table.csv").set_index("configuration")
    assert table.loc["grpo", "seeds_stopped"] == 2 and table.loc["pc", "seeds_stopped"] == 0
    assert "| grpo | 0 of 0 finished, 2 stopped |" in capsys.readouterr().out
    if not logged:  # without the configured last step, runs cut alike read as finished (the older rule)
        assert report.main(argv) == 0
        table = pd.read_csv(tmp_path / "o" / "seeds_table.csv").set_index("configuration")
        assert table.loc["grpo", "seeds_stopped"] == 0
    # One run's own value wins over its configuration's.
    frame = pd.DataFrame({"x": [1.0, 1.0]}, index=[1, 2])
    marked = curve([0, 100], [0.1, 0.2])
    curve_fns.mark_run_end(marked, frame, configured_last_step=2)
    assert curve_fns.stopped_runs([marked]).tolist() == [False]
    assert report._given_last_step({"grpo": 5, "grpo_s2": 3}, "grpo_s2") == 3
    assert report._given_last_step({"grpo": 5}, "grpo_s1") == 5 and report._given_last_step({}, "pc_s1") is None
