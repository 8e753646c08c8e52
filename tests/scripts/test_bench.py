"""The benchmarks run (at a tiny size) and report what they promise."""

import os
import sys

from support import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_reference_grader  # noqa: E402
import bench_round_bookkeeping as bench  # noqa: E402

TINY = ["--gen-batch", "24", "--n-pilot", "4", "--train-batch", "8", "--n-commit", "4", "--dp", "2"]
TINY += ["--agent-workers", "2", "--vocab", "300", "--rounds", "2", "--fill-rounds", "4", "--in-process"]


def test_benchmark_runs_both_shapes_and_reports_phases_rss_and_bytes(capsys):
    results = bench.main([*TINY, "--shapes", "8x16,16x32"])
    out = capsys.readouterr().out
    assert [r["shape"] for r in results] == ["8/16", "16/32"]
    for r in results:
        assert r["trained_rows_per_round"] == 8 * (4 + 4)  # every round fills the batch from the buffer
        assert r["buffered_groups_at_start"] >= 8
        assert set(r["phase_median_s"]) >= {"pilot_filter_and_insert", "assemble_training_batch", "staleness_flush"}
        assert r["peak_rss_gib"] > 0
        # Compact: far below a full verl row (int64 prompts, responses, response mask, three full-length
        # int64 fields, two float32 score rows).
        p, n = (int(x) for x in r["shape"].split("/"))
        full_row = 8 * (p + n + n + 3 * (p + n)) + 2 * 4 * n
        assert 0 < r["stored_bytes_per_rollout"] < full_row / 4
    assert "peak RSS" in out and "bytes per stored rollout" in out and "assemble_training_batch" in out


def test_reference_grader_benchmark_reports_throughput_and_latency(capsys):
    result = bench_reference_grader.main(["--repeats", "2", "--limit", "20"])
    assert (result["pairs"], result["repeats"]) == (20, 2)
    assert 0 < result["pairs_per_s"] <= result["best_pairs_per_s"] and result["pairs_per_cpu_s"] > 0
    assert 0 < result["median_ms"] <= result["p99_ms"] <= result["slowest_ms"]
    assert "pairs/s" in capsys.readouterr().out
