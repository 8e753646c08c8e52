"""recipe.pc.report on synthetic logs in the three input formats, with hand-computed expected numbers.

Runs (training steps 1..6, validation at steps 0, 2, 4, 6; accuracy = mean of aime and math):
  grpo (verl file-logger JSONL): 100 rollouts, 10 s, 1 gen call per step; accuracy 0.2 0.3 0.4 0.3
  dapo (W&B CSV):                150 rollouts, 12 s, 2 gen calls per step; accuracy 0.2 0.25 0.4 0.45
  pc   (W&B JSON):                50 rollouts,  8 s, 3 gen calls per step; accuracy 0.2 0.4 0.5 0.45
"""

import json
import logging
import os
import subprocess
import sys

import pandas as pd
import pytest

from recipe.pc import report
from recipe.pc.report import ReportError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AIME = "val-core/aime/acc/mean@32"
MATH = "val-core/math/acc/mean@1"
RUNS = {
    "grpo": dict(rollouts=100, secs=10.0, gens=1, val={0: (0.1, 0.3), 2: (0.2, 0.4), 4: (0.3, 0.5), 6: (0.2, 0.4)}),
    "dapo": dict(rollouts=150, secs=12.0, gens=2, val={0: (0.1, 0.3), 2: (0.15, 0.35), 4: (0.3, 0.5), 6: (0.35, 0.55)}),
    "pc": dict(rollouts=50, secs=8.0, gens=3, val={0: (0.1, 0.3), 2: (0.3, 0.5), 4: (0.4, 0.6), 6: (0.35, 0.55)}),
}


def step_rows(spec, drop=(), extra_val=None):
    """{step: metrics} for one run; ``drop`` removes metrics, ``extra_val`` adds {metric: value} at each validation."""
    rows = {0: {}}
    for step in range(1, 7):
        rows[step] = {
            report.ROLLOUTS: spec["rollouts"] * step,
            report.STEP_TIME: spec["secs"],
            report.GEN_CALLS: spec["gens"],
            report.ZERO_VAR: 0.5 - 0.05 * step,
            "actor/pg_loss": 0.01,
        }
    for step, (aime, math) in spec["val"].items():
        rows[step].update({AIME: aime, MATH: math, **(extra_val or {})})
    return {step: {k: v for k, v in row.items() if k not in drop} for step, row in rows.items()}


def write_file_logger(path, rows):
    """verl's file logger: step 0 validation alone, step 4 validation on its own line after the training line,
    an epoch-end line at step 3, the other validations in the step's training line."""
    lines = []
    for step, row in rows.items():
        if step == 4:
            lines.append({"step": 4, "data": {k: v for k, v in row.items() if not k.startswith("val-")}})
            lines.append({"step": 4, "data": {k: v for k, v in row.items() if k.startswith("val-")}})
        else:
            lines.append({"step": step, "data": row})
        if step == 3:
            lines.append({"step": 3, "data": {"exclusion_stats/epoch": 0, "exclusion_stats/dataset_size": 90}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def write_wandb_csv(path, rows):
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.insert(0, "_step", frame.index)
    frame["_runtime"] = frame.index * 10.0
    frame.to_csv(path, index=False)  # NaN -> empty cell, as W&B exports unlogged values
    return path


def wandb_rows(rows):
    return [
        {"_step": step, "_timestamp": 1.7e9 + step, "_wandb": {"runtime": step}, **row} for step, row in rows.items()
    ]


def write_wandb_json(path, rows):
    path.write_text(json.dumps(wandb_rows(rows)))
    return path


@pytest.fixture
def logs(tmp_path):
    return {
        "grpo": write_file_logger(tmp_path / "grpo_run.jsonl", step_rows(RUNS["grpo"])),
        "dapo": write_wandb_csv(tmp_path / "dapo_run.csv", step_rows(RUNS["dapo"])),
        "pc": write_wandb_json(tmp_path / "pc_run.json", step_rows(RUNS["pc"])),
    }


def run_main(argv, tmp_path, capsys):
    out = tmp_path / "out"
    code = report.main([*argv, "--out", str(out), "--no-plot"])
    stdout = capsys.readouterr().out
    table = pd.read_csv(out / "table.csv", keep_default_na=True) if code == 0 else None
    return code, stdout, table


def specs(logs, labels=("grpo", "dapo", "pc")):
    return [f"{label}={logs[label]}" for label in labels]


# ------------------------------------------------------------------ loading
def test_file_logger_lines_sharing_a_step_are_merged(logs):
    frame = report.load_run(logs["grpo"])
    assert frame.index.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert frame.loc[4, report.ROLLOUTS] == 400 and frame.loc[4, AIME] == 0.3  # two lines at step 4
    assert frame.loc[3, "exclusion_stats/dataset_size"] == 90 and frame.loc[3, report.STEP_TIME] == 10
    assert pd.isna(frame.loc[0, report.ROLLOUTS]) and frame.loc[0, MATH] == 0.3


def test_wandb_csv_json_and_jsonl_load_to_the_same_frame(tmp_path):
    rows = step_rows(RUNS["pc"])
    jsonl = tmp_path / "pc.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in wandb_rows(rows)))
    frames = [
        report.load_run(write_wandb_csv(tmp_path / "pc.csv", rows)),
        report.load_run(write_wandb_json(tmp_path / "pc.json", rows)),
        report.load_run(jsonl),
        report.load_run(write_file_logger(tmp_path / "pc_file.jsonl", rows)),
    ]
    expected = frames[-1].drop(columns=["exclusion_stats/epoch", "exclusion_stats/dataset_size"]).sort_index(axis=1)
    assert "_runtime" not in frames[0].columns and "_timestamp" not in frames[1].columns
    for frame in frames[:-1]:
        pd.testing.assert_frame_equal(frame.sort_index(axis=1), expected, check_dtype=False)


def test_wandb_chart_export_columns_are_normalised(tmp_path):
    path = tmp_path / "chart.csv"
    path.write_text(f'Step,"r1 - {AIME}","r1 - {AIME}__MIN","r1 - {AIME}__MAX"\n0,0.1,0.1,0.1\n2,,,\n4,0.3,0.3,0.3\n')
    frame = report.load_run(path)
    assert frame.columns.tolist() == [AIME]
    assert frame[AIME].dropna().to_dict() == {0: 0.1, 4: 0.3}


@pytest.mark.parametrize(
    "name, text, where",
    [
        ("bad.jsonl", '{"step": 0, "data": {}}\n{"step": 1, "data": {}}\n{"step": 2, "data": \n', "line 3"),
        ("nostep.jsonl", '{"step": 0, "data": {}}\n{"data": {"a": 1}}\n', "line 2: no step"),
        ("bad.json", '[\n{"_step": 0},\n{"_step": 1,,}\n]', "line 3"),
        ("bad.csv", "_step,a\n0,1\nx,2\n", "line 3"),
        ("nostep.csv", "a,b\n1,2\n", "no step column"),
    ],
)
def test_unparseable_files_name_file_and_line(tmp_path, name, text, where):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ReportError, match=where) as info:
        report.load_run(path)
    assert str(path) in str(info.value)


def test_run_arguments_take_an_optional_label(tmp_path):
    assert report.parse_run_arg("pc=/x/y.csv") == ("pc", report.Path("/x/y.csv"))
    assert report.parse_run_arg("/x/grpo_1.5b.jsonl") == ("grpo_1.5b", report.Path("/x/grpo_1.5b.jsonl"))


# ------------------------------------------------------------------ curves and smoothing
def test_smoothing_is_a_trailing_mean_over_available_points():
    values = pd.Series([0.1, 0.2, 0.6, 0.3])
    assert report.smooth(values, 1).tolist() == values.tolist()
    assert report.smooth(values, 2).tolist() == pytest.approx([0.1, 0.15, 0.4, 0.45])
    assert report.smooth(values, 3).tolist() == pytest.approx([0.1, 0.15, 0.3, 1.1 / 3])
    with pytest.raises(ReportError, match="--smooth"):
        report.smooth(values, 0)


def test_validation_curve_uses_each_steps_cumulative_rollouts(logs):
    frame = report.load_run(logs["grpo"])
    curve = report.validation_curve(frame, report.benchmark_columns(frame), k=2)
    assert report.benchmark_columns(frame) == {"aime": AIME, "math": MATH}
    assert curve.index.tolist() == [0, 2, 4, 6]
    assert curve["rollouts"].tolist() == [0, 200, 400, 600]  # step-0 validation: before any rollout
    assert curve["accuracy"].tolist() == pytest.approx([0.2, 0.3, 0.4, 0.3])
    assert curve["smoothed"].tolist() == pytest.approx([0.2, 0.25, 0.35, 0.35])
    assert report.rollouts_to_target(curve, 0.35) == report.Reach(step=4, rollouts=400.0, accuracy=pytest.approx(0.35))
    assert report.rollouts_to_target(curve, 0.36) is None


# ------------------------------------------------------------------ table
def test_default_target_is_the_baseline_peak(logs, tmp_path, capsys):
    code, stdout, table = run_main(specs(logs), tmp_path, capsys)
    assert code == 0
    rows = table.set_index("run")
    assert rows["target"].tolist() == pytest.approx([0.4] * 3)
    assert rows["step"].to_dict() == {"grpo": 4, "dapo": 4, "pc": 2}
    assert rows["rollouts_to_target"].to_dict() == {"grpo": 400, "dapo": 600, "pc": 100}
    assert rows["speedup_vs_grpo"].tolist() == pytest.approx([1.0, 400 / 600, 4.0])
    assert rows["speedup_vs_dapo"].tolist() == pytest.approx([1.5, 1.0, 6.0])  # dapo picked by label
    assert rows["wallclock_s_to_target"].tolist() == pytest.approx([40.0, 48.0, 16.0])
    assert rows["gen_calls_to_target"].tolist() == [4, 8, 6]
    assert rows["mean_s_per_step"].tolist() == pytest.approx([10.0, 12.0, 8.0])
    assert rows["peak_accuracy"].tolist() == pytest.approx([0.4, 0.45, 0.5])
    assert rows["total_rollouts"].tolist() == [600, 900, 300]
    assert "| pc | 2 | 100 | 4.00× | 6.00× | 16.0 | 6 | 8.0 | 0.5000 | 300 |" in stdout
    assert "Target accuracy 0.4000 (peak of grpo): mean of aime (mean@32), math (mean@1), unsmoothed" in stdout
    assert (tmp_path / "out" / "table.md").read_text() == stdout


def test_smoothed_target_and_reach(logs, tmp_path, capsys):
    code, _, table = run_main([*specs(logs), "--smooth", "2"], tmp_path, capsys)
    rows = table.set_index("run")
    assert code == 0 and rows["target"].iloc[0] == pytest.approx(0.35)  # grpo smoothed peak
    assert rows["rollouts_to_target"].to_dict() == {"grpo": 400, "dapo": 900, "pc": 200}
    assert rows["speedup_vs_grpo"].tolist() == pytest.approx([1.0, 400 / 900, 2.0])
    assert rows["speedup_vs_dapo"].tolist() == pytest.approx([900 / 400, 1.0, 4.5])
    assert rows["peak_accuracy"].tolist() == pytest.approx([0.35, 0.425, 0.475])


def test_explicit_target_and_not_reached(logs, tmp_path, capsys, caplog):
    code, stdout, table = run_main([*specs(logs), "--target", "0.45", "--compare", "dapo"], tmp_path, capsys)
    rows = table.set_index("run")
    assert code == 0
    assert not rows.loc["grpo", "reached"] and pd.isna(rows.loc["grpo", "rollouts_to_target"])
    assert rows["rollouts_to_target"][["dapo", "pc"]].tolist() == [900, 200]
    assert rows["speedup_vs_grpo"].isna().all()  # the baseline never gets there
    assert rows.loc["pc", "speedup_vs_dapo"] == pytest.approx(4.5)
    assert rows.loc["pc", "wallclock_s_to_target"] == pytest.approx(32.0)
    assert "| grpo | — | not reached (peak 0.4000) | — | — | — | — | 10.0 | 0.4000 | 600 |" in stdout
    assert "run grpo never reaches the target 0.4500 (peak 0.4000)" in caplog.text


def test_run_missing_a_required_metric_is_skipped_with_a_message(logs, tmp_path, capsys, caplog):
    broken = write_wandb_csv(tmp_path / "pc2.csv", step_rows(RUNS["pc"], drop={report.ROLLOUTS}))
    code, _, table = run_main([*specs(logs), f"pc2={broken}"], tmp_path, capsys)
    assert code == 0 and table["run"].tolist() == ["grpo", "dapo", "pc"]
    message = next(r.getMessage() for r in caplog.records if "pc2" in r.getMessage())
    assert f"run pc2: missing metric {report.ROLLOUTS}" in message
    assert "actor/* (1)" in message and "val-core/* (2)" in message and "benchmarks: aime, math" in message


def test_missing_timing_is_reported_not_fatal(logs, tmp_path, capsys, caplog):
    untimed = write_wandb_json(tmp_path / "pc.json", step_rows(RUNS["pc"], drop={report.STEP_TIME}))
    code, stdout, table = run_main([f"grpo={logs['grpo']}", f"pc={untimed}"], tmp_path, capsys)
    assert code == 0 and pd.isna(table.set_index("run").loc["pc", "wallclock_s_to_target"])
    assert "| pc | 2 | 100 | 4.00× | missing | 6 | missing |" in stdout
    assert f"run pc: no {report.STEP_TIME} logged" in caplog.text


def test_mixed_benchmarks_use_the_common_ones(logs, tmp_path, capsys, caplog):
    extra = write_wandb_json(tmp_path / "pc.json", step_rows(RUNS["pc"], extra_val={"val-core/gpqa/acc/mean@4": 0.9}))
    code, _, table = run_main([f"grpo={logs['grpo']}", f"dapo={logs['dapo']}", f"pc={extra}"], tmp_path, capsys)
    assert code == 0 and table["rollouts_to_target"].tolist() == [400, 600, 100]  # gpqa ignored
    assert "grpo: aime, math; dapo: aime, math; pc: aime, gpqa, math" in caplog.text


def test_no_common_benchmark_is_an_error(logs, tmp_path, capsys, caplog):
    rows = {
        s: {k.replace("aime", "gpqa").replace("math", "amc"): v for k, v in r.items()}
        for s, r in step_rows(RUNS["pc"]).items()
    }
    other = write_wandb_json(tmp_path / "pc.json", rows)
    code, _, _ = run_main([f"grpo={logs['grpo']}", f"pc={other}"], tmp_path, capsys)
    assert code == 2
    assert "no validation benchmark in common (grpo: aime, math; pc: amc, gpqa)" in caplog.text


def test_chosen_benchmarks(logs, tmp_path, capsys, caplog):
    code, stdout, table = run_main([*specs(logs), "--benchmarks", "aime"], tmp_path, capsys)
    assert code == 0 and table["target"].iloc[0] == pytest.approx(0.3)  # grpo's aime peak
    assert table["rollouts_to_target"].tolist() == [400, 600, 100]
    assert "mean of aime (mean@32)" in stdout
    code, _, table = run_main([*specs(logs), "--benchmarks", "aime,gpqa"], tmp_path, capsys)
    assert code == 2 and "run grpo: missing metric val-core/gpqa/acc/mean@<N>" in caplog.text


def test_baseline_must_be_unambiguous_without_a_target(logs, tmp_path, capsys, caplog):
    two = [f"grpo_a={logs['grpo']}", f"grpo_b={logs['dapo']}"]
    code, _, _ = run_main(two, tmp_path, capsys)
    assert code == 2 and "2 runs have 'grpo' in their label (grpo_a, grpo_b)" in caplog.text
    code, _, table = run_main([*two, "--baseline", "grpo_a"], tmp_path, capsys)
    assert code == 0 and table["speedup_vs_grpo_a"].tolist() == pytest.approx([1.0, 400 / 600])
    code, _, table = run_main([*two, "--target", "0.4"], tmp_path, capsys)
    assert code == 0 and table["rollouts_to_target"].tolist() == [400, 600]
    assert not any(c.startswith("speedup") for c in table.columns)


# ------------------------------------------------------------------ command line
def test_cli_writes_table_and_plot(logs, tmp_path):
    out = tmp_path / "report"
    env = {**os.environ, "PYTHONPATH": ROOT, "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, "-m", "recipe.pc.report", *specs(logs), "--smooth", "2", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (out / "table.md").read_text()
    assert "| grpo | 4 | 400 | 1.00× | 2.25× | 40.0 | 4 | 10.0 | 0.3500 | 600 |" in result.stdout
    assert pd.read_csv(out / "table.csv")["run"].tolist() == ["grpo", "dapo", "pc"]
    png = (out / "accuracy_vs_rollouts.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_cli_fails_when_nothing_is_usable(tmp_path):
    bad = tmp_path / "grpo.jsonl"
    bad.write_text("not json\n")
    result = subprocess.run(
        [sys.executable, "-m", "recipe.pc.report", str(bad), "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert f"run grpo skipped: {bad}: line 1: invalid JSON" in result.stderr
    assert "no usable run" in result.stderr


@pytest.fixture(autouse=True)
def _capture_warnings(caplog):
    caplog.set_level(logging.WARNING)
