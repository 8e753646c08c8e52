"""recipe.pc_tools.report (``python -m recipe.pc_tools.report``) on synthetic logs in the three input formats, with
hand-computed expected numbers.

Runs (training steps 1..6, validation at steps 0, 2, 4, 6; accuracy = mean of aime and math):
  grpo (verl file-logger JSONL): 100 rollouts, 10 s, 1 gen call per step; accuracy 0.2 0.3 0.4 0.3
  dapo (W&B CSV):                150 rollouts, 12 s, 2 gen calls per step; accuracy 0.2 0.25 0.4 0.45
  pc   (W&B JSON):                50 rollouts,  8 s, 3 gen calls per step; accuracy 0.2 0.4 0.5 0.45
"""

import glob
import json
import logging
import os
import re
import sys
import types

import numpy as np
import pandas as pd
import pytest
from support import FIXTURES, ROOT, run_module

from recipe.pc import metric_names as names
from recipe.pc_tools import curves as curve_fns
from recipe.pc_tools import intervals, report, tables
from recipe.pc_tools import logs as readers
from recipe.pc_tools import plot as figures
from recipe.pc_tools.logs import ReportError

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
            names.CUMULATIVE_SAMPLED: spec["rollouts"] * step,
            names.STEP_TIME: spec["secs"],
            names.ROUNDS: spec["gens"],
            names.ZERO_VARIANCE_GROUP_FRAC: 0.5 - 0.05 * step,
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
            lines.append({"step": 3, "data": {"exclusion_stats/epoch": 0, names.DATASET_SIZE: 90}})
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
    frame = readers.load_run(logs["grpo"])
    assert frame.index.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert frame.loc[4, names.CUMULATIVE_SAMPLED] == 400 and frame.loc[4, AIME] == 0.3  # two lines at step 4
    assert frame.loc[3, names.DATASET_SIZE] == 90 and frame.loc[3, names.STEP_TIME] == 10
    assert pd.isna(frame.loc[0, names.CUMULATIVE_SAMPLED]) and frame.loc[0, MATH] == 0.3


def test_wandb_csv_json_and_jsonl_load_to_the_same_frame(tmp_path):
    rows = step_rows(RUNS["pc"])
    jsonl = tmp_path / "pc.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in wandb_rows(rows)))
    frames = [
        readers.load_run(write_wandb_csv(tmp_path / "pc.csv", rows)),
        readers.load_run(write_wandb_json(tmp_path / "pc.json", rows)),
        readers.load_run(jsonl),
        readers.load_run(write_file_logger(tmp_path / "pc_file.jsonl", rows)),
    ]
    expected = frames[-1].drop(columns=[names.EXCLUSION_EPOCH, names.DATASET_SIZE]).sort_index(axis=1)
    assert "_runtime" not in frames[0].columns and "_timestamp" not in frames[1].columns
    for frame in frames[:-1]:
        pd.testing.assert_frame_equal(frame.sort_index(axis=1), expected, check_dtype=False)


def test_wandb_chart_export_columns_are_normalised(tmp_path):
    path = tmp_path / "chart.csv"
    path.write_text(f'Step,"r1 - {AIME}","r1 - {AIME}__MIN","r1 - {AIME}__MAX"\n0,0.1,0.1,0.1\n2,,,\n4,0.3,0.3,0.3\n')
    frame = readers.load_run(path)
    assert frame.columns.tolist() == [AIME]
    assert frame[AIME].dropna().to_dict() == {0: 0.1, 4: 0.3}


@pytest.mark.parametrize(
    "name, text, where",
    [
        ("bad.jsonl", '{"step": 0, "data": {}}\n{"step": 1, "data": \n{"step": 2, "data": {}}\n', "line 2"),
        ("cut_only_line.jsonl", '{"step": 0, "da', "line 1: invalid JSON"),
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
        readers.load_run(path)
    assert str(path) in str(info.value)


def test_cut_off_last_line_is_left_out_with_a_warning(logs, caplog):
    text = logs["grpo"].read_text()
    logs["grpo"].write_text(text + '{"step": 7, "data": {"rollout_stats/cumulative_rollouts_sa')  # killed mid-write
    frame = readers.load_run(logs["grpo"])
    assert frame.index.tolist() == [0, 1, 2, 3, 4, 5, 6] and frame.loc[6, names.CUMULATIVE_SAMPLED] == 600
    last = len(text.splitlines()) + 1
    assert f"{logs['grpo']}: line {last} is cut off" in caplog.text


def test_run_arguments_take_an_optional_label(tmp_path):
    file, tb, wandb = readers.RunSource("file", "/x/y.csv"), "tensorboard", "wandb"
    assert readers.parse_run_arg("pc=/x/y.csv") == ("pc", file)
    assert readers.parse_run_arg("/x/grpo_1.5b.jsonl") == ("grpo_1.5b", readers.RunSource("file", "/x/grpo_1.5b.jsonl"))
    assert readers.parse_run_arg("pc=tb:/x/tb/pc_run") == ("pc", readers.RunSource(tb, "/x/tb/pc_run"))
    assert readers.parse_run_arg("tb:/x/tb/pc_run") == ("pc_run", readers.RunSource(tb, "/x/tb/pc_run"))
    assert readers.parse_run_arg(str(tmp_path)) == (tmp_path.name, readers.RunSource(tb, str(tmp_path)))
    assert readers.parse_run_arg("pc=wandb:me/proj/ab12") == ("pc", readers.RunSource(wandb, "me/proj/ab12"))
    assert readers.parse_run_arg("wandb:me/proj/runs/ab12") == ("ab12", readers.RunSource(wandb, "me/proj/runs/ab12"))
    for bad in ("pc=wandb:me/ab12", "wandb:me//ab12", "wandb:me/proj/x/ab12"):
        with pytest.raises(ReportError, match="expected wandb:ENTITY/PROJECT/RUN_ID"):
            readers.parse_run_arg(bad)


# ------------------------------------------------------------------ TensorBoard and W&B readers
def write_tensorboard(folder, rows):
    """Scalars as verl's ``tensorboard`` logger writes them: add_scalar(metric, value, step) per logged metric."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step, row in rows.items():
        for key, value in row.items():
            writer.add_scalar(key, value, step)
    writer.close()
    return folder


def test_tensorboard_folder_loads_like_the_file_logger(logs, tmp_path):
    folder = write_tensorboard(tmp_path / "tb" / "grpo", step_rows(RUNS["grpo"]))
    expected = readers.load_run(logs["grpo"]).drop(columns=[names.EXCLUSION_EPOCH, names.DATASET_SIZE])
    for source in (folder, readers.RunSource("tensorboard", str(folder))):
        frame = readers.load_run(source)
        # TensorBoard stores float32: compare at that precision.
        pd.testing.assert_frame_equal(
            frame.sort_index(axis=1), expected.sort_index(axis=1), check_dtype=False, rtol=1e-6
        )
    with pytest.raises(ReportError, match="no events.out.tfevents"):
        readers.load_run(tmp_path / "tb")  # the parent folder: its event files are one level down


def test_tensorboard_and_file_runs_in_one_report(logs, tmp_path, capsys):
    folder = write_tensorboard(tmp_path / "tb" / "pc_run", step_rows(RUNS["pc"]))
    code, _, table = run_main([f"grpo={logs['grpo']}", f"pc=tb:{folder}", str(folder)], tmp_path, capsys)
    assert code == 0 and table["run"].tolist() == ["grpo", "pc", "pc_run"]
    assert table["rollouts_to_target"].tolist() == [400, 100, 100]


WANDB_FIXTURE = os.path.join(FIXTURES, "wandb_scan_history_pc.json")


class FakeWandbApi:
    """Stands in for ``wandb.Api``: ``run(path).scan_history()`` yields the recorded rows; remembers the paths."""

    paths: list = []

    def __init__(self, rows=None, error=None):
        self.rows, self.error = rows, error

    def run(self, path):
        FakeWandbApi.paths.append(path)
        if self.error:
            raise self.error
        return types.SimpleNamespace(scan_history=lambda: iter(self.rows))


@pytest.fixture
def fake_wandb(monkeypatch):
    """Install a fake ``wandb`` module; returns a setter for what its Api serves."""
    FakeWandbApi.paths = []
    module = types.ModuleType("wandb")
    monkeypatch.setitem(sys.modules, "wandb", module)

    def serve(rows=None, error=None):
        module.Api = lambda: FakeWandbApi(rows, error)
        return FakeWandbApi.paths

    return serve


def test_wandb_run_history_through_the_api(logs, fake_wandb):
    """The fixture holds scan_history() rows in W&B's shape (``_step``, ``_runtime``, ``_timestamp``, a media
    entry, ``_wandb``), written for the pc run of this module (no network here to record a real one)."""
    with open(WANDB_FIXTURE) as f:
        rows = json.load(f)
    paths = fake_wandb(rows)
    frame = readers.load_run(readers.RunSource("wandb", "me/proj/ab12"))
    assert paths == ["me/proj/ab12"]
    expected = readers.load_run(write_wandb_json(logs["pc"].parent / "pc_expected.json", step_rows(RUNS["pc"])))
    pd.testing.assert_frame_equal(frame.sort_index(axis=1), expected.sort_index(axis=1))
    assert not any(c.startswith(("_", "val/generations")) for c in frame.columns)


def test_wandb_run_in_a_report_and_an_unreadable_one_stops_it(logs, tmp_path, capsys, caplog, fake_wandb):
    with open(WANDB_FIXTURE) as f:
        paths = fake_wandb(json.load(f))
    code, _, table = run_main([f"grpo={logs['grpo']}", "pc=wandb:me/proj/ab12"], tmp_path, capsys)
    assert code == 0 and table.set_index("run")["rollouts_to_target"].to_dict() == {"grpo": 400, "pc": 100}
    fake_wandb(error=ValueError("Could not find run me/proj/zz"))
    out = tmp_path / "second"
    assert report.main([f"grpo={logs['grpo']}", "pc=wandb:me/proj/zz", "--out", str(out), "--no-plot"]) == 2
    assert capsys.readouterr().out == "" and not out.exists()  # no table that would read as complete
    assert "run pc: wandb:me/proj/zz: cannot read the run's history: ValueError: Could not find" in caplog.text
    assert paths == ["me/proj/ab12", "me/proj/zz"]


def test_a_malformed_run_argument_stops_before_anything_is_loaded(logs, tmp_path, capsys, caplog, fake_wandb):
    paths = fake_wandb([])
    code, _, _ = run_main(["a=wandb:me/proj/ab12", "b=wandb:proj/ab12"], tmp_path, capsys)
    assert code == 2 and "b=wandb:proj/ab12: expected wandb:ENTITY/PROJECT/RUN_ID" in caplog.text
    assert paths == []


# ------------------------------------------------------------------ curves and smoothing
def test_smoothing_is_a_trailing_mean_over_available_points():
    values = pd.Series([0.1, 0.2, 0.6, 0.3])
    assert curve_fns.smooth(values, 1).tolist() == values.tolist()
    assert curve_fns.smooth(values, 2).tolist() == pytest.approx([0.1, 0.15, 0.4, 0.45])
    assert curve_fns.smooth(values, 3).tolist() == pytest.approx([0.1, 0.15, 0.3, 1.1 / 3])
    with pytest.raises(ReportError, match="--smooth"):
        curve_fns.smooth(values, 0)


def test_validation_curve_uses_each_steps_cumulative_rollouts(logs):
    frame = readers.load_run(logs["grpo"])
    curve = curve_fns.validation_curve(frame, curve_fns.benchmark_columns(frame), k=2)
    assert curve_fns.benchmark_columns(frame) == {"aime": AIME, "math": MATH}
    assert curve.index.tolist() == [0, 2, 4, 6]
    assert curve["rollouts"].tolist() == [0, 200, 400, 600]  # step-0 validation: before any rollout
    assert curve["accuracy"].tolist() == pytest.approx([0.2, 0.3, 0.4, 0.3])
    assert curve["smoothed"].tolist() == pytest.approx([0.2, 0.25, 0.35, 0.35])
    assert curve_fns.rollouts_to_target(curve, 0.35) == curve_fns.Reach(
        step=4, rollouts=400.0, accuracy=pytest.approx(0.35)
    )
    assert curve_fns.rollouts_to_target(curve, 0.36) is None


# ------------------------------------------------------------------ table
def test_default_target_is_the_baseline_peak(logs, tmp_path, capsys):
    code, stdout, table = run_main(specs(logs), tmp_path, capsys)
    assert code == 0
    rows = table.set_index("run")
    assert rows["target"].tolist() == pytest.approx([0.4] * 3)
    assert rows["step"].to_dict() == {"grpo": 4, "dapo": 4, "pc": 2}
    assert rows["rollouts_to_target"].to_dict() == {"grpo": 400, "dapo": 600, "pc": 100}
    assert rows["rollouts_ratio_vs_grpo"].tolist() == pytest.approx([1.0, 600 / 400, 0.25])
    assert rows["rollouts_ratio_vs_dapo"].tolist() == pytest.approx([400 / 600, 1.0, 100 / 600])  # dapo by label
    assert rows["wallclock_s_to_target"].tolist() == pytest.approx([40.0, 48.0, 16.0])
    assert rows["gen_calls_to_target"].tolist() == [4, 8, 6]
    assert rows["mean_s_per_step"].tolist() == pytest.approx([10.0, 12.0, 8.0])
    assert rows["peak_accuracy"].tolist() == pytest.approx([0.4, 0.45, 0.5])
    assert rows["total_rollouts"].tolist() == [600, 900, 300]
    assert "| pc | 2 | 100 | 0.25× | 0.17× | 16.0 | 6 | 8.0 | 0.5000 | 300 |" in stdout
    assert "| run | step | rollouts to target | rollouts to target × grpo | rollouts to target × dapo |" in stdout
    assert "Target accuracy 0.4000 (peak of grpo): mean of aime (mean@32), math (mean@1), unsmoothed" in stdout
    assert (tmp_path / "out" / "table.md").read_text() == stdout


def test_smoothed_target_and_reach(logs, tmp_path, capsys):
    code, _, table = run_main([*specs(logs), "--smooth", "2"], tmp_path, capsys)
    rows = table.set_index("run")
    assert code == 0 and rows["target"].iloc[0] == pytest.approx(0.35)  # grpo smoothed peak
    assert rows["rollouts_to_target"].to_dict() == {"grpo": 400, "dapo": 900, "pc": 200}
    assert rows["rollouts_ratio_vs_grpo"].tolist() == pytest.approx([1.0, 900 / 400, 0.5])
    assert rows["rollouts_ratio_vs_dapo"].tolist() == pytest.approx([400 / 900, 1.0, 200 / 900])
    assert rows["peak_accuracy"].tolist() == pytest.approx([0.35, 0.425, 0.475])


def test_explicit_target_and_not_reached(logs, tmp_path, capsys, caplog):
    code, stdout, table = run_main([*specs(logs), "--target", "0.45", "--compare", "dapo"], tmp_path, capsys)
    rows = table.set_index("run")
    assert code == 0
    assert not rows.loc["grpo", "reached"] and pd.isna(rows.loc["grpo", "rollouts_to_target"])
    assert rows["rollouts_to_target"][["dapo", "pc"]].tolist() == [900, 200]
    assert rows["rollouts_ratio_vs_grpo"].isna().all()  # the baseline never gets there
    assert rows.loc["pc", "rollouts_ratio_vs_dapo"] == pytest.approx(200 / 900)
    assert pd.isna(rows.loc["grpo", "rollouts_ratio_vs_dapo"])  # nor does grpo itself
    assert rows.loc["pc", "wallclock_s_to_target"] == pytest.approx(32.0)
    assert "| grpo | — | not reached (peak 0.4000) | — | — | — | — | 10.0 | 0.4000 | 600 |" in stdout
    assert "run grpo never reaches the target 0.4500 (peak 0.4000)" in caplog.text


def test_run_missing_a_required_metric_is_skipped_with_a_message(logs, tmp_path, capsys, caplog):
    broken = write_wandb_csv(tmp_path / "pc2.csv", step_rows(RUNS["pc"], drop={names.CUMULATIVE_SAMPLED}))
    code, _, table = run_main([*specs(logs), f"pc2={broken}"], tmp_path, capsys)
    assert code == 0 and table["run"].tolist() == ["grpo", "dapo", "pc"]
    message = next(r.getMessage() for r in caplog.records if "pc2" in r.getMessage())
    assert f"run pc2: missing metric {names.CUMULATIVE_SAMPLED}" in message
    assert "actor/* (1)" in message and "val-core/* (2)" in message and "benchmarks: aime, math" in message


def test_missing_timing_is_reported_not_fatal(logs, tmp_path, capsys, caplog):
    untimed = write_wandb_json(tmp_path / "pc.json", step_rows(RUNS["pc"], drop={names.STEP_TIME}))
    code, stdout, table = run_main([f"grpo={logs['grpo']}", f"pc={untimed}"], tmp_path, capsys)
    assert code == 0 and pd.isna(table.set_index("run").loc["pc", "wallclock_s_to_target"])
    assert "| pc | 2 | 100 | 0.25× | missing | 6 | missing |" in stdout
    assert f"run pc: no {names.STEP_TIME} logged" in caplog.text


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
    assert code == 0 and table["rollouts_ratio_vs_grpo_a"].tolist() == pytest.approx([1.0, 600 / 400])
    code, _, table = run_main([*two, "--target", "0.4"], tmp_path, capsys)
    assert code == 0 and table["rollouts_to_target"].tolist() == [400, 600]
    assert not any(c.startswith("rollouts_ratio") for c in table.columns)


# ------------------------------------------------------------------ seeds
# Accuracy per validation step 0, 2, 4, 6 (aime = acc - 0.1, math = acc + 0.1), rollouts per training step.
SEED_RUNS = {
    "grpo_s1": (100, [0.2, 0.3, 0.4, 0.3]),
    "grpo_s2": (100, [0.2, 0.4, 0.3, 0.5]),  # mean curve of grpo: 0.2 0.35 0.35 0.4 -> target 0.4
    "pc_s1": (50, [0.2, 0.4, 0.5, 0.45]),  # reaches 0.4 at step 2: 100 rollouts
    "pc-seed2": (60, [0.2, 0.3, 0.35, 0.45]),  # reaches 0.4 at step 6: 360 rollouts
    "dapo": (150, [0.2, 0.25, 0.3, 0.35]),  # one run, never reaches 0.4
}


@pytest.fixture
def seed_logs(tmp_path):
    specs = []
    for label, (rollouts, accs) in SEED_RUNS.items():
        val = {step: (acc - 0.1, acc + 0.1) for step, acc in zip((0, 2, 4, 6), accs, strict=True)}
        spec = dict(rollouts=rollouts, secs=10.0, gens=1, val=val)
        specs.append(f"{label}={write_file_logger(tmp_path / f'{label}.jsonl', step_rows(spec))}")
    return specs


def test_seed_suffixes_group_runs_into_configurations():
    labels = ["grpo_s1", "grpo_s2", "pc-seed2", "pc_seed10", "dapo", "dapo_s", "s1", "grpo_seed1b"]
    assert curve_fns.seed_groups(labels) == {
        "grpo": ["grpo_s1", "grpo_s2"],
        "pc": ["pc-seed2", "pc_seed10"],
        "dapo": ["dapo"],
        "dapo_s": ["dapo_s"],
        "s1": ["s1"],
        "grpo_seed1b": ["grpo_seed1b"],
    }


def test_mean_curve_averages_seeds_at_the_steps_they_all_logged():
    a = pd.DataFrame({"rollouts": [0, 100, 200, 300], "accuracy": [0.2, 0.4, 0.6, 0.8]}, index=[0, 2, 4, 6])
    b = pd.DataFrame({"rollouts": [0, 120, 240], "accuracy": [0.0, 0.2, 0.2]}, index=[0, 2, 4])  # cut short
    mean = curve_fns.mean_curve([a, b], k=2)
    assert mean.index.tolist() == [0, 2, 4]
    assert mean["rollouts"].tolist() == pytest.approx([0, 110, 220])
    assert mean["accuracy"].tolist() == pytest.approx([0.1, 0.3, 0.4])
    assert mean["smoothed"].tolist() == pytest.approx([0.1, 0.2, 0.35])


def test_seeds_table_has_mean_spread_and_reach_counts(seed_logs, tmp_path, capsys):
    out = tmp_path / "out"
    code = report.main([*seed_logs, "--seeds", "--out", str(out), "--no-plot"])
    stdout = capsys.readouterr().out
    assert code == 0
    table = pd.read_csv(out / "seeds_table.csv").set_index("configuration")
    assert table.index.tolist() == ["grpo", "pc", "dapo"]
    assert table["target"].tolist() == pytest.approx([0.4] * 3)  # peak of grpo's mean curve, not of a seed
    assert table["seeds"].tolist() == [2, 2, 1] and table["seeds_reached"].tolist() == [2, 2, 0]
    assert table.loc["grpo", "runs"] == "grpo_s1,grpo_s2" and table.loc["pc", "runs"] == "pc_s1,pc-seed2"
    assert table["rollouts_to_target_mean"].tolist()[:2] == pytest.approx([300, 230])
    assert table["rollouts_to_target_min"].tolist()[:2] == [200, 100]
    assert table["rollouts_to_target_max"].tolist()[:2] == [400, 360]
    assert table["rollouts_to_target_std"].tolist()[:2] == pytest.approx([100 * 2**0.5, 130 * 2**0.5])
    assert table["rollouts_ratio_vs_grpo"].tolist()[:2] == pytest.approx([1.0, 230 / 300])
    assert table.loc["dapo", ["rollouts_ratio_vs_grpo", "rollouts_to_target_mean"]].isna().all()
    assert table["rollouts_ratio_vs_dapo"].isna().all()  # dapo never gets there
    # Mean curves at equal rollouts: grpo's seeds share their points, 0.2 0.35 0.35 0.4 at 0, 200, 400, 600, so it
    # reaches 0.4 at 600. pc's seeds (a point every 100 and 120 rollouts) are 0.36 together at 120 and 0.41667 at 200,
    # peak 0.425 at 300 where pc_s1 ends; dapo's one run peaks at 0.35.
    crossing = 120 + 80 * 0.04 / (0.5 / 1.2 - 0.36)
    assert table["peak_mean_accuracy"].tolist() == pytest.approx([0.4, 0.425, 0.35])
    assert table["mean_curve_rollouts_to_target"].tolist() == pytest.approx([600, crossing, np.inf])
    assert table["mean_curve_rollouts_ratio_vs_grpo"].tolist() == pytest.approx([1.0, crossing / 600, np.inf])
    assert table["mean_curve_rollouts_ratio_vs_dapo"].isna().all()  # not read: dapo's mean curve never gets there
    assert "| pc | 2 of 2 | 230 | 100–360 | 184 | 0.77× | — | 176 | 0.29× | not read | 0.4250 |" in stdout
    assert "| dapo | 0 of 1 | — | — | — | — | — | not reached | not reached | not read | 0.3500 |" in stdout
    assert "Target accuracy 0.4000 (peak of grpo's mean curve over its seeds)" in stdout
    assert stdout == (out / "seeds_table.md").read_text()


def test_the_mean_curve_ratio_exists_where_a_baseline_seed_never_reaches_the_target():
    def curve(rollouts_per_point, accuracies):
        steps = range(0, 2 * len(accuracies), 2)
        frame = pd.DataFrame({"rollouts": [rollouts_per_point * i for i in range(len(accuracies))]}, index=steps)
        frame["accuracy"] = frame["smoothed"] = accuracies
        return frame

    curves = {
        "base_s1": curve(100, [0.1, 0.3, 0.5]),  # reaches 0.4 at its last point
        "base_s2": curve(100, [0.1, 0.3, 0.35]),  # never does
        "new_s1": curve(100, [0.1, 0.45, 0.5]),  # reaches it at 100 rollouts
        "new_s2": curve(100, [0.1, 0.3, 0.45]),  # at 200
    }
    groups = {"base": ["base_s1", "base_s2"], "new": ["new_s1", "new_s2"]}
    target = float(curve_fns.interpolated_mean_curve([curves["base_s1"], curves["base_s2"]])["smoothed"].max())
    assert target == pytest.approx(0.425)  # at base's last point: the default target
    table = tables.build_seed_table(curves, groups, target, ("base",)).set_index("configuration")
    assert table["seeds_reached"].tolist() == [1, 2]
    assert pd.isna(table.loc["new", "rollouts_ratio_vs_base"])  # not every base seed got there
    # new's mean curve (0.1, 0.375, 0.475 at 0, 100, 200 rollouts) reaches 0.425 halfway from 100 to 200; base's at 200.
    assert table["mean_curve_rollouts_to_target"].tolist() == pytest.approx([200, 150])
    assert table["mean_curve_rollouts_ratio_vs_base"].tolist() == pytest.approx([1.0, 0.75])


def test_equal_accuracy_finds_the_baseline_step_with_the_same_mean_accuracy(seed_logs, tmp_path):
    def curve(steps, rollouts, accuracies):
        frame = pd.DataFrame({"rollouts": rollouts, "accuracy": accuracies}, index=steps)
        frame["smoothed"] = frame["accuracy"]
        return frame

    means = {
        "grpo": curve([0, 2, 4, 6], [0, 200, 400, 600], [0.1, 0.3, 0.3, 0.5]),
        "pc": curve([0, 2, 4, 6], [0, 300, 500, 900], [0.1, 0.4, 0.2, 0.6]),
    }
    table = tables.equal_accuracy_table(means, "grpo")
    assert table["configuration"].tolist() == ["pc"] * 3 and table["step"].tolist() == [2, 4, 6]  # not step 0
    # 0.4 lies halfway between grpo's 0.3 at step 4 (its first 0.3 is at step 2, but 0.4 is first reached after
    # step 4) and 0.5 at step 6: step 5, 500 rollouts; one pc step was worth 2.5 grpo steps, at 300 / 500 rollouts.
    assert table.loc[0, ["baseline_step", "baseline_rollouts"]].tolist() == pytest.approx([5, 500])
    assert table.loc[0, ["steps_worth", "rollouts_ratio"]].tolist() == pytest.approx([2.5, 0.6])
    # 0.2: halfway from 0.1 at step 0 to 0.3 at step 2.
    assert table.loc[1, ["baseline_step", "baseline_rollouts", "steps_worth"]].tolist() == pytest.approx([1, 100, 0.25])
    assert table.loc[2, ["baseline_step", "steps_worth", "rollouts_ratio"]].isna().all()  # 0.6: beyond grpo's peak
    # The window since the previous validation step: steps 0-2 as above (0.1 is grpo's step 0); steps 2-4 lost
    # accuracy (grpo's equal point went back from step 5 to 1: -2 a step, no rollout ratio); steps 4-6 none.
    assert table.loc[0, ["window_steps_worth", "window_rollouts_ratio"]].tolist() == pytest.approx([2.5, 0.6])
    assert table.loc[1, "window_steps_worth"] == pytest.approx(-2.0) and pd.isna(table.loc[1, "window_rollouts_ratio"])
    assert table.loc[2, ["window_steps_worth", "window_rollouts_ratio"]].isna().all()
    # A costly start and a cheap window after it: at step 4 the whole run is level with grpo (1.5 steps a step, the
    # same rollouts), while steps 2-4 alone were worth 2 grpo steps each at half grpo's rollouts.
    late = tables.equal_accuracy_table({**means, "pc": curve([0, 2, 4], [0, 400, 600], [0.1, 0.3, 0.5])}, "grpo")
    assert late.loc[1, ["steps_worth", "rollouts_ratio"]].tolist() == pytest.approx([1.5, 1.0])
    assert late.loc[1, ["window_steps_worth", "window_rollouts_ratio"]].tolist() == pytest.approx([2.0, 0.5])
    # Without a step-0 validation (trainer.val_before_train=false) the first step still gets its row, with no window.
    unvalidated = tables.equal_accuracy_table({**means, "pc": curve([2, 4], [400, 600], [0.3, 0.5])}, "grpo")
    assert unvalidated["step"].tolist() == [2, 4]
    assert unvalidated.loc[0, "steps_worth"] == pytest.approx(1.0) and pd.isna(unvalidated.loc[0, "window_steps_worth"])
    assert unvalidated.loc[1, "window_steps_worth"] == pytest.approx(2.0)
    markdown = tables.equal_accuracy_markdown(table, "grpo").splitlines()
    assert markdown[4] == "| pc | 2 | 0.400 | 300 | 5.0 | 500 | 2.50 | 0.60× | 2.50 | 0.60× |"
    assert markdown[6] == "| pc | 6 | 0.600 | 900 | — | — | — | — | — | — |"
    # From the command line: written beside the seed table, and refused without --seeds.
    out = tmp_path / "out"
    assert report.main([*seed_logs, "--seeds", "--equal-accuracy", "--out", str(out), "--no-plot"]) == 0
    written = pd.read_csv(out / "equal_accuracy.csv")
    assert set(written["configuration"]) == {"pc", "dapo"} and (out / "equal_accuracy.md").exists()
    with pytest.raises(SystemExit):
        report.main([*seed_logs, "--equal-accuracy", "--out", str(out), "--no-plot"])


def test_a_reference_at_the_target_before_any_rollout_gives_no_ratio():
    def curve(accuracies):
        frame = pd.DataFrame({"rollouts": [0.0, 100.0, 200.0], "accuracy": accuracies}, index=[0, 2, 4])
        frame["smoothed"] = frame["accuracy"]
        return frame

    # "new" starts at the target, at 0 rollouts; "base" gets there at 200.
    curves = {"base_s1": curve([0.1, 0.2, 0.5]), "new_s1": curve([0.5, 0.5, 0.5])}
    groups = {"base": ["base_s1"], "new": ["new_s1"]}
    table = tables.build_seed_table(curves, groups, 0.5, ("base", "new")).set_index("configuration")
    assert table.loc["new", "rollouts_to_target_mean"] == 0 and table.loc["new", "mean_curve_rollouts_to_target"] == 0
    assert table.loc["new", ["rollouts_ratio_vs_base", "mean_curve_rollouts_ratio_vs_base"]].tolist() == [0, 0]
    assert table["rollouts_ratio_vs_new"].isna().all() and table["mean_curve_rollouts_ratio_vs_new"].isna().all()
    assert table.loc["base", "rollouts_ratio_vs_base"] == 1.0


def test_seeds_with_a_given_target_and_a_named_baseline(seed_logs, tmp_path, capsys):
    out = tmp_path / "out"
    code = report.main([*seed_logs, "--seeds", "--target", "0.45", "--baseline", "pc", "--out", str(out), "--no-plot"])
    table = pd.read_csv(out / "seeds_table.csv").set_index("configuration")
    assert code == 0 and table["seeds_reached"].tolist() == [1, 2, 0]
    assert table.loc["pc", "rollouts_to_target_mean"] == pytest.approx((200 + 360) / 2)  # pc_s1 at step 4 (0.5)
    assert pd.isna(table.loc["grpo", "rollouts_to_target_std"])  # one seed reached: no spread
    assert pd.isna(table.loc["grpo", "rollouts_ratio_vs_pc"])  # grpo_s1 never reached 0.45


def test_seed_plot_draws_thin_seeds_and_a_thick_mean(seed_logs, tmp_path):
    frames = report._load_runs(report._parse_runs(seed_logs))
    curves = {label: curve_fns.validation_curve(f, curve_fns.benchmark_columns(f)) for label, f in frames.items()}
    groups = curve_fns.seed_groups(list(curves))
    means = {c: curve_fns.interpolated_mean_curve([curves[label] for label in labels]) for c, labels in groups.items()}
    fig = figures.plot_seeds(curves, groups, means, 0.4, tmp_path / "seeds.png", "acc")
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    thick = [lines[f"{c} (mean of {len(groups[c])})"] for c in groups]
    thin = [line for line in fig.axes[0].get_lines() if line.get_linewidth() < 1]
    assert len(thin) == len(SEED_RUNS) and min(line.get_linewidth() for line in thick) > 1
    # pc: its seeds' points (50 and 60 rollouts a step) up to 300, where pc_s1 ends.
    assert thick[1].get_xdata().tolist() == pytest.approx([0, 100, 120, 200, 240, 300])


def hand_curve(rollouts, accuracy):
    return pd.DataFrame({"rollouts": rollouts, "smoothed": accuracy})


def test_the_mean_band_is_students_t_over_the_seeds_pointwise():
    """Catches: a normal quantile or a population SD (both narrower), n degrees of freedom, or the band of the
    points outside the range all seeds cover."""
    seeds = [
        hand_curve([0, 100, 200], [0.1, 0.2, 0.3]),
        hand_curve([0, 100], [0.3, 0.4]),
        hand_curve([0, 100], [0.2, 0.3]),
    ]
    band = curve_fns.mean_band(seeds)
    assert band["rollouts"].tolist() == [0, 100]  # 200: one seed only, no mean there
    assert band["smoothed"].tolist() == pytest.approx([0.2, 0.3])
    half = 4.302652729749464 * 0.1 / np.sqrt(3)  # t(0.975, 2 df) × SD 0.1 / √3
    assert (band["high"] - band["smoothed"]).tolist() == pytest.approx([half, half])
    assert (band["smoothed"] - band["low"]).tolist() == pytest.approx([half, half])
    lone = curve_fns.mean_band(seeds[:1])  # one seed: a mean, no interval
    assert lone["smoothed"].tolist() == [0.1, 0.2, 0.3] and lone["low"].isna().all()


def test_the_seed_plot_shades_the_interval_of_each_mean_it_has(tmp_path):
    """Catches: a band drawn from the seeds' min and max, or around another configuration's mean."""
    seeds = [hand_curve([0, 100], [0.1, 0.3]), hand_curve([0, 100], [0.3, 0.5])]
    curves = {"a_s1": seeds[0], "a_s2": seeds[1], "b_s1": hand_curve([0, 100], [0.2, 0.2])}
    groups = {"a": ["a_s1", "a_s2"], "b": ["b_s1"]}
    bands = {"a": curve_fns.mean_band(seeds), "b": curve_fns.mean_band([curves["b_s1"]])}
    fig = figures.plot_seeds(curves, groups, bands, 0.4, tmp_path / "seeds.png", "acc")
    ax = fig.axes[0]
    (shaded,) = ax.collections  # b has one seed: no band
    assert shaded.get_label() == "a: 95% interval of the mean" and "95% interval" in ax.get_title()
    half = 12.706204736174698 * np.std([0.1, 0.3], ddof=1) / np.sqrt(2)
    corners = shaded.get_paths()[0].vertices
    assert corners[:, 1].min() == pytest.approx(0.2 - half) and corners[:, 1].max() == pytest.approx(0.4 + half)


def test_without_scipy_the_seed_plot_draws_the_means_alone_and_says_why(seed_logs, tmp_path, monkeypatch, caplog):
    def no_scipy(name):
        raise ReportError("scipy is not installed")

    drawn = {}
    monkeypatch.setattr(report, "plot_seeds", lambda curves, groups, means, *_: drawn.update(means))
    monkeypatch.setattr(curve_fns, "scipy_module", no_scipy)
    assert report.main([*seed_logs, "--seeds", "--target", "0.45", "--out", str(tmp_path)]) == 0
    assert drawn and all("low" not in mean for mean in drawn.values())
    assert "the seed plot has no intervals: scipy is not installed" in caplog.text


def test_lines_of_different_runs_stay_distinguishable(logs, tmp_path):
    frames = {label: readers.load_run(path) for label, path in logs.items()}
    curves = {label: curve_fns.validation_curve(f, curve_fns.benchmark_columns(f)) for label, f in frames.items()}
    fig = figures.plot(frames, curves, 0.4, tmp_path / "p.png", "acc")
    for ax in fig.axes:
        runs = [line for line in ax.get_lines() if line.get_label() in curves]
        assert len(runs) == 3
        assert len({line.get_marker() for line in runs}) == 3 and len({line.get_linestyle() for line in runs}) == 3
        # Drawn later = on top = thinner, so a line underneath still shows around it.
        widths = [line.get_linewidth() for line in sorted(runs, key=lambda line: line.get_zorder())]
        assert widths == sorted(widths, reverse=True) and len(set(widths)) == 3


# ------------------------------------------------------------------ command line
def test_default_output_folder_and_wrote_lines(logs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert report.main([*specs(logs), "--no-plot"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (tmp_path / "report" / "table.md").read_text()
    assert captured.err.splitlines()[-2:] == [
        f"wrote {os.path.join('report', name)}" for name in ("table.md", "table.csv")
    ]
    with pytest.raises(SystemExit):
        report.main(["--help"])
    assert "(default: report/" in " ".join(capsys.readouterr().out.split())


def test_table_without_matplotlib(logs, tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    out = tmp_path / "out"
    assert report.main([*specs(logs), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["table.csv", "table.md"]
    assert "| pc | 2 | 100 |" in capsys.readouterr().out
    warnings = [r.getMessage() for r in caplog.records if "matplotlib" in r.getMessage()]
    assert warnings == ['matplotlib is not installed, so no plot (pip install -e ".[report]"); the tables are written']


def test_bad_options_are_argument_errors(logs, tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    for bad in (["--smooth", "0"], ["--out", str(tmp_path / "afile")]):
        with pytest.raises(SystemExit) as info:
            report.main([*specs(logs), *bad])
        assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--smooth must be >= 1, got 0" in err and "exists and is not a folder" in err


def test_cli_writes_table_and_plot(logs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "report"
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert run_module("recipe.pc_tools.report", *specs(logs), "--smooth", "2", "--out", str(out)) == 0
    result = capsys.readouterr()
    assert result.out == (out / "table.md").read_text()
    assert f"wrote {out / 'accuracy_vs_rollouts.png'}" in result.err
    assert "| grpo | 4 | 400 | 1.00× | 0.44× | 40.0 | 4 | 10.0 | 0.3500 | 600 |" in result.out
    assert pd.read_csv(out / "table.csv")["run"].tolist() == ["grpo", "dapo", "pc"]
    png = (out / "accuracy_vs_rollouts.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_cli_fails_on_a_run_it_cannot_read_or_find(logs, tmp_path, capsys, caplog):
    bad = tmp_path / "grpo.jsonl"
    bad.write_text("not json\n")
    assert report.main([str(bad), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().out == ""
    assert f"run grpo: {bad}: line 1: invalid JSON" in caplog.text
    missing = tmp_path / "nope" / "metrics.jsonl"
    assert report.main([f"grpo={logs['grpo']}", f"pc={missing}", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().out == "" and f"run pc: {missing}" in caplog.text


def test_no_run_or_too_few_a_side_for_the_intervals_is_one_not_read_line_and_exit_0(logs, tmp_path, capsys):
    """The pre-registered command run before its runs have finished: it says what is not read and why."""
    ci = ["--seeds", "--interpolate", "--ci", "--no-plot", "--at-rollouts", "300", "--baseline", "grpo"]
    ci += ["--out", str(tmp_path / "o")]
    assert report.main(ci) == 0
    assert capsys.readouterr().out == "not read: no run given; no table is written\n"
    assert report.main([*ci, f"grpo_s1={logs['grpo']}", f"pc_s1={logs['pc']}", f"pc_s2={logs['pc']}"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("not read: --ci resamples and permutes runs") and "grpo (1)" in out and out.count("\n") == 1
    assert not list((tmp_path / "o").glob("*.md"))
    assert report.main([*ci, f"pc_s1={logs['pc']}", f"pc_s2={logs['pc']}"]) == 0
    assert capsys.readouterr().out.startswith("not read: --baseline grpo has no run (runs: pc)")


@pytest.fixture(autouse=True)
def _capture_warnings(caplog):
    caplog.set_level(logging.WARNING)


def test_a_long_benchmark_list_is_shortened_on_the_axis_but_kept_in_the_caption():
    import argparse

    from recipe.pc_tools.report import _describe

    args = argparse.Namespace(smooth=1)
    few = ["arith_l1", "arith_l2"]
    many = [f"arith_l{i}" for i in range(1, 8)]
    assert _describe(args, few, {b: f"val-core/{b}/acc/mean@4" for b in few})[1] == "mean accuracy (arith_l1, arith_l2)"
    caption, ylabel = _describe(args, many, {b: f"val-core/{b}/acc/mean@4" for b in many})
    assert ylabel == "mean accuracy (7 benchmarks)"
    assert all(f"{b} (mean@4)" in caption for b in many)


def test_means_table_per_run_and_per_configuration(caplog):
    import pandas as pd

    from recipe.pc_tools.tables import means_markdown, means_table

    def frame(values, extra=None):
        data = {"actor/grad_norm": values, **(extra or {})}
        return pd.DataFrame(data, index=pd.Index(range(1, len(values) + 1), name="step"))

    frames = {
        "pc_s1": frame([1.0, 3.0], {"actor/ppo_kl": [0.1, 0.3]}),  # means 2.0 and 0.2
        "pc_s2": frame([4.0, 4.0, float("nan")], {"actor/ppo_kl": [0.4, 0.4, 0.4]}),  # a step without grad_norm
        "grpo": frame([1.0]),  # never logged ppo_kl
    }
    metrics = ["actor/grad_norm", "actor/ppo_kl"]
    per_config = means_table(frames, metrics, seeds=True).set_index("configuration")
    assert per_config.loc["pc", "runs"] == 2
    assert per_config.loc["pc", "actor/grad_norm"] == pytest.approx(3.0)  # (2.0 + 4.0) / 2
    assert (per_config.loc["pc", "actor/grad_norm min"], per_config.loc["pc", "actor/grad_norm max"]) == (2.0, 4.0)
    assert per_config.loc["pc", "actor/ppo_kl"] == pytest.approx(0.3)
    assert pd.isna(per_config.loc["grpo", "actor/ppo_kl"])
    assert "run grpo: no actor/ppo_kl logged" in caplog.text
    # A seed that did not log a metric leaves its configuration's mean undefined, not a mean of the other seeds.
    partial = {"dapo_s1": frame([1.0], {"actor/ppo_kl": [0.5]}), "dapo_s2": frame([3.0])}
    dapo = means_table(partial, metrics, seeds=True).set_index("configuration").loc["dapo"]
    assert dapo["actor/grad_norm"] == pytest.approx(2.0) and pd.isna(dapo["actor/ppo_kl"])
    text = means_markdown(means_table(frames, metrics, seeds=True), metrics)
    assert "| pc | 2 | 3 (2–4) | 0.3 (0.2–0.4) |" in text and "| grpo | 1 | 1 | — |" in text
    per_run = means_table(frames, metrics, seeds=False)
    assert list(per_run["run"]) == ["pc_s1", "pc_s2", "grpo"] and list(per_run["runs"]) == [1, 1, 1]


def test_sums_table_sums_each_window_and_warns_about_steps_a_run_did_not_log(caplog):
    import pandas as pd

    from recipe.pc_tools.tables import sums_markdown, sums_table

    def frame(rounds, extra=None):
        # Step 0 is the validation before training: no training metric there.
        data = {names.ROUNDS: [float("nan"), *rounds], **(extra or {})}
        return pd.DataFrame(data, index=pd.Index(range(len(rounds) + 1), name="step"))

    frames = {
        "pc_s1": frame([3.0, 1.0, 2.0, 1.0], {"skipped": [float("nan"), 0.0, 0.0, 5.0, 2.5]}),
        "pc_s2": frame([2.0, 2.0]),  # stopped at step 2, and never logged "skipped"
    }
    table = sums_table(frames, [names.ROUNDS, "skipped"], [(1, 2), (3, 4), None]).set_index("run")
    assert table.loc["pc_s1", f"{names.ROUNDS}, steps 1–2"] == 4.0
    assert table.loc["pc_s1", f"{names.ROUNDS}, steps 3–4"] == 3.0
    assert table.loc["pc_s1", f"{names.ROUNDS}, all steps"] == 7.0  # step 0's NaN is not a round
    assert table.loc["pc_s1", "skipped, steps 3–4"] == 7.5
    assert pd.isna(table.loc["pc_s2", f"{names.ROUNDS}, steps 3–4"])  # nothing logged in the window
    assert pd.isna(table.loc["pc_s2", "skipped, all steps"])
    assert "run pc_s2: no skipped logged" in caplog.text
    assert "run pc_s2: skipped logged at" not in caplog.text  # a metric never logged: that one warning, not per window
    assert f"run pc_s2: {names.ROUNDS} logged at 0 of the 2 steps steps 3–4" in caplog.text
    assert "run pc_s1:" not in caplog.text
    assert table.loc["pc_s2", f"{names.ROUNDS}, steps 3–4: steps logged"] == 0
    assert f"{names.ROUNDS}, all steps: steps logged" not in table.columns  # no length to compare with
    text = sums_markdown(table.reset_index(), [(1, 2), (3, 4), None])
    calls = names.ROUNDS
    assert f"| run | {calls}, steps 1–2 | {calls}, steps 3–4 | {calls}, all steps |" in text  # no count columns
    assert "| pc_s1 | 4 | 3 | 7 | 0 | 7.5 | 7.5 |" in text and "| pc_s2 | 4 | — | 4 | — | — | — |" in text
    # A run that stopped inside a window: its sum says how many of the window's steps it covers, here and in the CSV.
    short = sums_table({"a": frame([1.0, 2.0])}, [names.ROUNDS], [(1, 3), (1, 2)])
    assert short.loc[0, f"{names.ROUNDS}, steps 1–3: steps logged"] == 2
    assert "| a | 3 (2 of 3 steps) | 3 |" in sums_markdown(short, [(1, 3), (1, 2)])
    # Counts print in full (a 30-step rollout total is not 3.187e+04); fractions to 4 significant digits.
    assert "| x | 31,872 | 0.1235 |" in sums_markdown(pd.DataFrame([{"run": "x", "n": 31872.0, "f": 0.12345}]), [None])


def test_sum_steps_are_checked_before_any_run_is_read(logs, tmp_path, capsys):
    for bad in ("5:3", "1-4", "a:b", "3", ","):
        with pytest.raises(SystemExit):
            report.main([*specs(logs), "--sums", names.ROUNDS, "--sum-steps", bad, "--out", str(tmp_path)])
        assert "--sum-steps" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        report.main([*specs(logs), "--sum-steps", "1:2", "--out", str(tmp_path)])
    assert "name the metrics with --sums" in capsys.readouterr().err


def test_values_table_reads_each_metric_at_each_step_and_dashes_what_was_not_logged(caplog):
    import pandas as pd

    from recipe.pc_tools.tables import values_markdown, values_table

    steps = pd.Index([0, 1, 2, 3], name="step")
    frames = {
        "pc_s1": pd.DataFrame({names.ROUNDS: [float("nan"), 5.0, 2.0, 1.0], "p": [None, 0.5, 0.49, 0.37]}, steps),
        "pc_s2": pd.DataFrame({names.ROUNDS: [float("nan"), 4.0]}, steps[:2]),  # stopped at step 1, no "p"
    }
    table = values_table(frames, [names.ROUNDS, "p"], [1, 3]).set_index("run")
    assert table.loc["pc_s1", f"{names.ROUNDS}, step 1"] == 5.0  # that step's value, not a sum or a mean
    assert table.loc["pc_s1", "p, step 3"] == 0.37
    assert pd.isna(table.loc["pc_s2", f"{names.ROUNDS}, step 3"]) and pd.isna(table.loc["pc_s2", "p, step 1"])
    assert "run pc_s2: no p logged" in caplog.text and "run pc_s1:" not in caplog.text
    text = values_markdown(table.reset_index())
    assert f"| run | {names.ROUNDS}, step 1 | {names.ROUNDS}, step 3 | p, step 1 | p, step 3 |" in text
    assert "| pc_s1 | 5 | 1 | 0.5 | 0.37 |" in text and "| pc_s2 | 4 | — | — | — |" in text


def test_values_and_value_steps_are_checked_before_any_run_is_read(logs, tmp_path, capsys):
    for bad in ("-1", "a", ","):
        with pytest.raises(SystemExit):
            report.main([*specs(logs), "--values", names.ROUNDS, "--value-steps", bad, "--out", str(tmp_path)])
        assert "--value-steps" in capsys.readouterr().err
    for half in (["--values", names.ROUNDS], ["--value-steps", "1"]):
        with pytest.raises(SystemExit):
            report.main([*specs(logs), *half, "--out", str(tmp_path)])
        assert "--values and --value-steps go together" in capsys.readouterr().err


def test_at_steps_lists_each_runs_accuracy_and_rollouts(caplog):
    import pandas as pd

    from recipe.pc_tools.tables import at_steps_markdown

    curve = pd.DataFrame(
        {"rollouts": [0, 5120, 10240], "accuracy": [0.1, 0.2, 0.4], "smoothed": [0.1, 0.15, 0.3]},
        index=pd.Index([0, 10, 20], name="step"),
    )
    text = at_steps_markdown({"grpo_s1": curve}, [10, 15])
    assert "| grpo_s1 | 0.150 | 5,120 | — | — |" in text  # the smoothed value, as the table uses
    assert "run grpo_s1: no validation at step 15" in caplog.text


def test_extra_tables_cover_only_the_runs_the_main_table_used(logs, tmp_path, capsys, caplog):
    rows = step_rows(RUNS["pc"])
    for i, step in enumerate(sorted(RUNS["pc"]["val"])):  # every validation lacks one benchmark: no usable point
        rows[step].pop(AIME if i % 2 else MATH)
    partial = write_wandb_json(tmp_path / "partial.json", rows)
    extra = ["--means", "actor/pg_loss", "--at-steps", "2", "--sums", names.ROUNDS, "--sum-steps", "1:3,4:6"]
    extra += ["--values", names.ROUNDS, "--value-steps", "2"]
    code, stdout, table = run_main([*specs(logs, ("grpo", "pc")), f"pc2={partial}", *extra], tmp_path, capsys)
    assert code == 0 and table["run"].tolist() == ["grpo", "pc"]
    means = (tmp_path / "out" / "means_table.md").read_text()
    assert "| grpo |" in means and "| pc |" in means and "pc2" not in means
    sums = (tmp_path / "out" / "sums_table.md").read_text()
    assert "| grpo | 3 | 3 |" in sums and "| pc | 9 | 9 |" in sums and "pc2" not in sums  # 1 and 3 rounds a step
    assert "Sums over windows" in stdout
    values = (tmp_path / "out" / "values_table.md").read_text()
    assert "| grpo | 1 |" in values and "| pc | 3 |" in values and "pc2" not in values
    assert "Training metrics at given steps" in stdout
    assert "pc2" not in (tmp_path / "out" / "at_steps.md").read_text()
    # With --seeds: a configuration whose seeds share no range of rollouts (one point each) is dropped from every table.
    only = {2: RUNS["pc"]["val"][2]}, {4: RUNS["pc"]["val"][4]}
    seeds = [
        write_wandb_json(tmp_path / f"x{i}.json", step_rows({**RUNS["pc"], "val": val})) for i, val in enumerate(only)
    ]
    argv = [f"grpo_s1={logs['grpo']}", f"x_s1={seeds[0]}", f"x_s2={seeds[1]}", "--seeds", *extra]
    assert report.main([*argv, "--out", str(tmp_path / "seeds"), "--no-plot"]) == 0
    means = (tmp_path / "seeds" / "means_table.md").read_text()
    assert "| grpo | 1 |" in means and "| x |" not in means


def test_accuracy_at_rollouts_interpolates_between_validation_points_and_never_extrapolates(logs):
    curves = {
        label: curve_fns.validation_curve(readers.load_run(logs[label]), {"a": AIME, "m": MATH}) for label in logs
    }
    budgets = [150, 300, 500]
    # grpo: 0.2, 0.3, 0.4, 0.3 at 0, 200, 400, 600 rollouts; pc: 0.2, 0.4, 0.5, 0.45 at 0, 100, 200, 300.
    assert curve_fns.accuracy_at_rollouts(curves["grpo"], budgets) == pytest.approx([0.275, 0.35, 0.35])
    pc = curve_fns.accuracy_at_rollouts(curves["pc"], budgets)
    assert pc[:2] == pytest.approx([0.45, 0.45]) and pc[2] is None  # 500 is past pc's last point (300)
    # dapo: 0.2, 0.25, 0.4, 0.45 at 0, 300, 600, 900.
    assert curve_fns.accuracy_at_rollouts(curves["dapo"], budgets) == pytest.approx([0.225, 0.25, 0.35])
    late = curves["grpo"].iloc[1:]  # a curve that starts at 200 rollouts has no value before it
    assert curve_fns.accuracy_at_rollouts(late, [100, 200]) == [None, pytest.approx(0.3)]


def test_at_rollouts_gives_a_configurations_mean_only_where_every_seed_got_that_far():
    def curve(rollouts, accuracy):
        return pd.DataFrame({"rollouts": rollouts, "smoothed": accuracy}, index=pd.Index(range(len(rollouts))))

    curves = {
        "pc_s1": curve([0, 100, 200], [0.1, 0.3, 0.5]),
        "pc_s2": curve([0, 120], [0.1, 0.4]),  # stopped at 120 rollouts
        "grpo": curve([0, 200], [0.1, 0.3]),
    }
    table = tables.at_rollouts_table(curves, {"pc": ["pc_s1", "pc_s2"], "grpo": ["grpo"]}, [100, 200])
    pc = table[table["configuration"] == "pc"].to_dict("records")
    assert pc[0]["runs_there"] == 2 and pc[0]["mean"] == pytest.approx((0.3 + 0.1 + 0.3 * 100 / 120) / 2)
    assert (pc[0]["min"], pc[0]["max"]) == (pytest.approx(0.3), pytest.approx(0.35))
    assert pc[1]["runs_there"] == 1 and pd.isna(pc[1]["mean"]) and pc[1]["values"] == "0.5000,"
    text = tables.at_rollouts_markdown(table, [100, 200])
    assert "| pc | 2 | 0.325 (0.300–0.350) | — (1 of 2) |" in text
    assert "| grpo | 1 | 0.200 | 0.300 |" in text


def test_cli_at_rollouts_per_run_and_per_configuration(logs, tmp_path, capsys):
    code, stdout, _ = run_main([*specs(logs), "--at-rollouts", "150,300,500"], tmp_path, capsys)
    assert code == 0
    text = (tmp_path / "out" / "at_rollouts.md").read_text()
    assert "| pc | 1 | 0.450 | 0.450 | — (0 of 1) |" in text and text in stdout
    assert "| grpo | 1 | 0.275 | 0.350 | 0.350 |" in text
    argv = [f"grpo_s1={logs['grpo']}", f"grpo_s2={logs['dapo']}", f"pc_s1={logs['pc']}", "--seeds"]
    assert report.main([*argv, "--at-rollouts", "300", "--out", str(tmp_path / "s"), "--no-plot"]) == 0
    seeds = (tmp_path / "s" / "at_rollouts.md").read_text()
    assert "| grpo | 2 | 0.300 (0.250–0.350) |" in seeds and "| pc | 1 | 0.450 |" in seeds
    for bad in ("0", "100,x"):
        with pytest.raises(SystemExit):
            report.main([*specs(logs), "--at-rollouts", bad, "--out", str(tmp_path / "bad"), "--no-plot"])
        assert "--at-rollouts" in capsys.readouterr().err


# ------------------------------------------------------------------ interpolated read-off and intervals
def linear_curve(rollouts, accuracy):
    """A run's validation curve as validation_curve gives it (unsmoothed), by cumulative rollouts."""
    frame = pd.DataFrame({"rollouts": rollouts, "accuracy": accuracy}, index=range(len(rollouts)), dtype=float)
    frame["smoothed"] = frame["accuracy"]
    return frame


def test_the_interpolated_mean_pairs_seeds_at_equal_rollouts_linear_between_their_points():
    curves = {
        "a_s1": linear_curve([0, 1000, 2000], [0.1, 0.3, 0.5]),
        "a_s2": linear_curve([0, 1500, 3000], [0.1, 0.4, 0.4]),  # a step apart in rollouts from a_s1
    }
    # At every seed's points within 0..2000 (a_s1's end): a_s2 is 0.3 at 1000, a_s1 0.4 at 1500.
    mean = curve_fns.interpolated_mean_curve(list(curves.values()))
    assert mean["rollouts"].tolist() == [0, 1000, 1500, 2000]
    assert mean["smoothed"].tolist() == pytest.approx([0.1, 0.3, 0.4, 0.45])
    # 1250 lies between both seeds' points: 0.35 each (a step rule would read 0.3 and 0.1); 2500 is past a_s1's end.
    table = intervals.interpolated_table(curves, {"a": ["a_s1", "a_s2"]}, "a", [1250, 2500])
    assert table.loc[0, "accuracy_at_1250"] == pytest.approx(0.35) and pd.isna(table.loc[0, "accuracy_at_2500"])
    assert table.loc[0, ["peak_mean_accuracy", "rollouts_to_target", "rollouts_ratio_vs_a"]].tolist() == [
        pytest.approx(0.45),
        2000,
        1.0,
    ]
    text = intervals.interpolated_markdown(table, [1250, 2500], "a", "caption")
    assert "| a | 2 | 0.350 | not read | 0.4500 | 2,000 | 1.00× |" in text


# Mean curves at 0, 1000, 2000 rollouts: base 0.1 0.4 0.3 (target 0.4, reached at 1000), new 0.1 0.3 0.5.
CROSSING_RUNS = {
    "base_s1": [0.1, 0.45, 0.3],
    "base_s2": [0.1, 0.35, 0.3],
    "new_s1": [0.1, 0.25, 0.55],
    "new_s2": [0.1, 0.35, 0.45],
}


@pytest.mark.parametrize(
    "target, crossings",
    [
        (None, [1000, 1500]),  # new reaches 0.4 halfway from 1000 (0.3) to 2000 (0.5); a step rule says 2000
        (0.25, [500, 750]),  # the baseline's crossing is interpolated by the same rule
    ],
)
def test_crossings_are_linear_between_points_and_the_ratio_is_their_quotient(target, crossings):
    curves = {label: linear_curve([0, 1000, 2000], accuracy) for label, accuracy in CROSSING_RUNS.items()}
    groups = curve_fns.seed_groups(list(curves))
    table = intervals.interpolated_table(curves, groups, "base", [], target).set_index("configuration")
    assert table["target"].tolist() == pytest.approx([target or 0.4] * 2)
    assert table["rollouts_to_target"].tolist() == pytest.approx(crossings)
    assert table["rollouts_ratio_vs_base"].tolist() == pytest.approx([1.0, 1.5])
    # The bootstrap's crossing on arrays is equal_accuracy_table's rule (_interpolate_reach) on the mean curve.
    new = curve_fns.interpolated_mean_curve([curves["new_s1"], curves["new_s2"]])
    assert curve_fns.interpolate_reach(new, target or 0.4)[1] == pytest.approx(crossings[1])
    ratio = intervals.intervals_table(curves, groups, "base", [], target, resamples=200).iloc[0]
    assert (ratio["measure"], ratio["estimate"]) == ("ratio", pytest.approx(1.5))
    assert [ratio["value"], ratio["baseline_value"]] == pytest.approx(crossings[::-1])


def shifted_seeds(shift, offsets):
    """Five GRPO-like seeds (a point every 4,608 rollouts) and five of another configuration (every 4,700 + 50·i),
    each linear in rollouts: accuracy 0.2 + 1e-5 · rollouts + its offset, the other configuration ``shift`` higher."""
    curves = {}
    for i, offset in enumerate(offsets):
        base, other = 4608.0 * np.arange(1, 7), 4700.0 * np.arange(1, 7) + 50 * i
        curves[f"grpo_s{i + 4}"] = linear_curve(base, 0.2 + 1e-5 * base + offset)
        curves[f"pc_s{i + 4}"] = linear_curve(other, 0.2 + shift + 1e-5 * other + offset)
    return curves


OFFSETS = [-0.02, -0.01, 0.0, 0.01, 0.02]  # seed-to-seed spread, the same in both configurations


def test_a_configuration_shifted_by_005_differs_by_005_with_an_interval_about_it():
    curves = shifted_seeds(0.05, OFFSETS)
    budgets = [9216, 12000]  # a baseline validation point; between points of every run
    table = intervals.intervals_table(curves, curve_fns.seed_groups(list(curves)), "grpo", budgets)
    rows = table[table["measure"] == "difference"]
    assert rows["rollouts"].tolist() == budgets
    base = [[0.2 + 1e-5 * b + offset for offset in OFFSETS] for b in budgets]  # every grpo run's own value
    assert rows["baseline_values"].tolist() == [",".join(f"{v:.4f}" for v in runs) for runs in base]
    assert rows["values"].tolist() == [",".join(f"{v + 0.05:.4f}" for v in runs) for runs in base]
    assert rows["value"].tolist() == pytest.approx([0.25 + 1e-5 * b for b in budgets])
    assert rows["estimate"].tolist() == pytest.approx([0.05, 0.05])
    for low, high in zip(rows["low"], rows["high"], strict=True):
        # Independent resampling of each configuration (the same offsets resampled in pairs would give a width of 0;
        # pooling the ten runs would centre it on 0): about ±1.96·√(2·0.0002/5) = ±0.018 around 0.05.
        assert 0.025 < low < 0.05 < high < 0.075 and high - low > 0.02
    # Every run of pc above every run of grpo: 2 of the 252 splits (this one and its mirror) are as extreme.
    assert rows["p_value"].tolist() == pytest.approx([2 / 252] * 2)
    assert table["resamples"].tolist() == [10_000] * 3 and table["seed"].tolist() == [0] * 3


def test_identical_configurations_differ_by_0_with_p_1():
    curves = shifted_seeds(0.0, OFFSETS)
    table = intervals.intervals_table(curves, curve_fns.seed_groups(list(curves)), "grpo", [12000], resamples=2000)
    difference, ratio = table.to_dict("records")
    assert difference["estimate"] == pytest.approx(0, abs=1e-12) and difference["p_value"] == 1.0
    assert difference["low"] < 0 < difference["high"]
    assert ratio["estimate"] == pytest.approx(1.0, rel=0.01)  # pc's points are a little later, so not exactly 1


def test_the_exact_permutation_test_counts_both_tails_of_every_split():
    separated = intervals.permutation_p(np.arange(5.0), np.arange(5.0, 10.0))
    assert separated == pytest.approx(2 / 252)  # a one-sided test would give 1/252
    # {0, 1} against {2, 3}: of the 6 splits, differences -2, -1, 0, 0, 1, 2; |d| >= 2 twice.
    assert intervals.permutation_p(np.array([0.0, 1.0]), np.array([2.0, 3.0])) == pytest.approx(2 / 6)
    # One run against three: differences -2, -2/3, 2/3, 2 for 0, 1, 2, 3 alone.
    assert intervals.permutation_p(np.array([0.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(2 / 4)
    assert intervals.permutation_p(np.array([0.3, 0.3]), np.array([0.3, 0.3])) == 1.0


def test_a_configuration_that_misses_the_target_in_some_resamples_has_an_infinite_upper_end():
    curves = {
        "base_s1": linear_curve([0, 1000, 2000], [0.1, 0.4, 0.3]),  # identical seeds: target 0.4 at 1000 always
        "base_s2": linear_curve([0, 1000, 2000], [0.1, 0.4, 0.3]),
        "new_s1": linear_curve([0, 1000, 2000], [0.1, 0.3, 0.7]),
        "new_s2": linear_curve([0, 1000, 2000], [0.1, 0.3, 0.3]),
        "never_s1": linear_curve([0, 1000, 2000], [0.1, 0.2, 0.3]),
        "never_s2": linear_curve([0, 1000, 2000], [0.1, 0.3, 0.2]),
    }
    table = intervals.intervals_table(curves, curve_fns.seed_groups(list(curves)), "base", [])
    new, never = table.to_dict("records")
    # new's resamples: both new_s1 (a quarter) reach 0.4 at 1250, one of each (a half) at 1500, both new_s2 never.
    assert (new["estimate"], new["low"], new["high"]) == (pytest.approx(1.5), pytest.approx(1.25), np.inf)
    assert never["value"] == never["estimate"] == never["low"] == never["high"] == np.inf
    text = intervals.intervals_markdown(table, "base", "peak", "method")
    assert "| new | rollouts to target | 1,500 | 1,000 | 1.50× | [1.25×, ∞] | — |  |  |" in text
    assert "| never | rollouts to target | not reached | 1,000 | not reached | [∞, ∞] | — |  |  |" in text


def test_the_target_is_the_resampled_baselines_peak_in_each_resample():
    curves = {
        "base_s1": linear_curve([0, 1000, 2000], [0.1, 0.5, 0.5]),  # the mean's peak, 0.4, is neither seed's
        "base_s2": linear_curve([0, 1000, 2000], [0.1, 0.3, 0.3]),
        "new_s1": linear_curve([0, 1000, 2000], [0.1, 0.3, 0.5]),
        "new_s2": linear_curve([0, 1000, 2000], [0.1, 0.3, 0.5]),
    }
    # base reaches its resample's peak at 1000 in every resample; new reaches 0.3, 0.4 or 0.5 at 1000, 1500 or 2000.
    (ratio,) = intervals.intervals_table(curves, curve_fns.seed_groups(list(curves)), "base", []).to_dict("records")
    assert (ratio["estimate"], ratio["low"], ratio["high"]) == (pytest.approx(1.5), 1.0, 2.0)


def test_cli_interpolate_and_ci_on_seed_logs(seed_logs, tmp_path, capsys):
    out = tmp_path / "out"
    runs = seed_logs[:4]  # grpo_s1, grpo_s2, pc_s1, pc-seed2: dapo has one run
    argv = [*runs, "--seeds", "--interpolate", "--ci", "--at-rollouts", "300,500", "--ci-resamples", "2000"]
    assert report.main([*argv, "--out", str(out), "--no-plot"]) == 0
    stdout = capsys.readouterr().out
    interpolated = pd.read_csv(out / "interpolated.csv").set_index("configuration")
    # grpo's mean curve: 0.2 0.35 0.35 0.4 at 0, 200, 400, 600. pc's seeds (points every 100 and 120 rollouts) are
    # 0.36 at 120 and 0.41667 at 200 together, so it reaches 0.4 at 120 + 80 · 0.04 / 0.05667.
    crossing = 120 + 80 * 0.04 / (0.5 / 1.2 - 0.36)
    assert interpolated["rollouts_to_target"].tolist() == pytest.approx([600, crossing])
    assert interpolated["accuracy_at_300"].tolist() == pytest.approx([0.35, 0.425])
    assert pd.isna(interpolated.loc["pc", "accuracy_at_500"])  # pc's seeds stop at 300 and 360 rollouts
    intervals = (out / "intervals.md").read_text()
    assert intervals in stdout and (out / "interpolated.md").read_text() in stdout
    assert "2,000 resamples" in intervals and "default_rng(0)" in intervals
    assert "| pc | acc. at 300 rollouts | 0.425 | 0.350 | +0.075 |" in intervals
    assert "| 0.3333 (2 of 6) | s1 0.450, s2 0.400 | s1 0.350, s2 0.350 |" in intervals
    assert (
        "| pc | acc. at 500 rollouts | not read | 0.375 | not read | — | — | s1 —, s2 — | s1 0.350, s2 0.400 "
        "| pc_s1 (ended at 300), pc-seed2 (ended at 360) |" in intervals
    )
    table = pd.read_csv(out / "intervals.csv")
    assert table["measure"].tolist() == ["difference", "difference", "ratio"]
    assert table.loc[2, "estimate"] == pytest.approx(crossing / 600)


def test_the_seeds_table_and_the_interpolated_table_read_the_same_mean_curve(tmp_path, monkeypatch):
    """PC's seeds make 50 and 200 rollouts a step, with the same accuracy at every step: averaged at equal steps they
    reach 0.45 at step 6 (750 rollouts, peak 0.5), but at equal rollouts the slow seed is far behind while the fast
    one runs (0.3875 at 300, where the fast one ends), so the mean curve never gets there. Every table says the latter,
    and every ratio is rollouts over grpo's."""
    accuracies = {
        "grpo_s1": (100, [0.2, 0.35, 0.45, 0.5]),  # both reach 0.45 at 400
        "grpo_s2": (100, [0.2, 0.35, 0.45, 0.5]),
        "pc_s1": (50, [0.2, 0.3, 0.4, 0.5]),  # at 300
        "pc_s2": (200, [0.2, 0.3, 0.4, 0.5]),  # at 1,200
        "fast_s1": (50, [0.2, 0.4, 0.5, 0.5]),  # mean curve 0.2 0.35 0.5 0.5 at 0-300: 0.45 at 100 + 200 / 3
        "fast_s2": (50, [0.2, 0.3, 0.5, 0.5]),
    }
    runs = []
    for label, (rollouts, accs) in accuracies.items():
        val = {step: (acc - 0.1, acc + 0.1) for step, acc in zip((0, 2, 4, 6), accs, strict=True)}
        rows = step_rows(dict(rollouts=rollouts, secs=10.0, gens=1, val=val))
        runs.append(f"{label}={write_file_logger(tmp_path / f'{label}.jsonl', rows)}")
    drawn = {}
    monkeypatch.setattr(report, "plot_seeds", lambda curves, groups, means, *_: drawn.update(means))
    out = tmp_path / "out"
    assert report.main([*runs, "--seeds", "--interpolate", "--target", "0.45", "--out", str(out)]) == 0
    seeds = pd.read_csv(out / "seeds_table.csv").set_index("configuration")
    interpolated = pd.read_csv(out / "interpolated.csv").set_index("configuration")
    crossings, peaks = [400, np.inf, 500 / 3], [0.5, 0.3875, 0.5]
    assert seeds["mean_curve_rollouts_to_target"].tolist() == pytest.approx(crossings)
    assert interpolated["rollouts_to_target"].tolist() == pytest.approx(crossings)
    assert seeds["peak_mean_accuracy"].tolist() == pytest.approx(peaks)
    assert interpolated["peak_mean_accuracy"].tolist() == pytest.approx(peaks)
    assert [drawn[c]["smoothed"].max() for c in seeds.index] == pytest.approx(peaks)  # the plot's thick lines
    ratios = [1.0, np.inf, 500 / 3 / 400]
    assert seeds["mean_curve_rollouts_ratio_vs_grpo"].tolist() == pytest.approx(ratios)
    assert interpolated["rollouts_ratio_vs_grpo"].tolist() == pytest.approx(ratios)
    # The seeds' own crossings (first validation point at or above 0.45) in the same direction: pc's mean 750.
    assert seeds["rollouts_ratio_vs_grpo"].tolist() == pytest.approx([1.0, 750 / 400, 200 / 400])
    seeds_md, interpolated_md = (out / "seeds_table.md").read_text(), (out / "interpolated.md").read_text()
    assert "| pc | 2 of 2 | 750 | 300–1,200 | 636 | 1.88× | not reached | not reached | 0.3875 |" in seeds_md
    assert "| pc | 2 | 0.3875 | not reached | not reached |" in interpolated_md
    assert "| fast | 2 of 2 | 200 | 200–200 | 0 | 0.50× | 167 | 0.42× | 0.5000 |" in seeds_md
    assert "| fast | 2 | 0.5000 | 167 | 0.42× |" in interpolated_md


def test_interpolate_and_ci_refuse_what_they_cannot_read(seed_logs, tmp_path, capsys, caplog):
    out = ["--out", str(tmp_path / "out"), "--no-plot"]
    for argv, message in [
        (
            ["--ci", "--seeds", "--at-rollouts", "300"],
            "--ci compares configurations' interpolated mean curves at budgets: add --interpolate",
        ),
        (["--ci", "--interpolate", "--at-rollouts", "300"], "add --seeds"),
        (["--ci", "--seeds", "--interpolate"], "add --at-rollouts R1,R2"),
        (["--interpolate"], "--interpolate reads configurations' mean curves: it needs --seeds"),
        (["--ci-seed", "1"], "--ci-resamples and --ci-seed set the bootstrap of --ci: add --ci"),
        (["--seeds", "--interpolate", "--ci", "--at-rollouts", "300", "--ci-resamples", "0"], "--ci-resamples must"),
    ]:
        with pytest.raises(SystemExit):
            report.main([*seed_logs, *argv, *out])
        assert message in capsys.readouterr().err
    # A configuration of one run (dapo) can be neither resampled nor permuted: not read, before any table is written.
    assert report.main([*seed_logs, "--seeds", "--interpolate", "--ci", "--at-rollouts", "300", *out]) == 0
    assert (
        "not read: --ci resamples and permutes runs, 2 or more a configuration, and dapo (1)" in capsys.readouterr().out
    )
    assert not (tmp_path / "out" / "seeds_table.md").exists()


LOGGED_NAMES = sorted(v for k, v in vars(names).items() if k.isupper() and isinstance(v, str))


def test_the_logged_metric_names_change_only_on_purpose():
    """Tests and tools read metrics through ``recipe.pc.metric_names``, so a renamed value would pass them all while
    breaking users' dashboards and old logs: the names as users see them are pinned in a fixture."""
    with open(os.path.join(FIXTURES, "metric_names.txt")) as f:
        pinned = f.read().split()
    assert LOGGED_NAMES == pinned, "a metric name changed: update tests/fixtures/metric_names.txt if intended"


def test_every_metric_name_the_docs_mention_is_one_the_trainer_logs():
    verl_own = {"training/rollout_probs_diff_mean"}  # verl's, compared in the GPU checks page
    pages = [os.path.join(ROOT, "README.md"), *glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)]
    pattern = re.compile(
        r"\b(?:training|rollout_stats|buffer_stats|filtering_stats|pilot_stats|exclusion_stats|val_budget)/\w+"
    )
    mentioned = {}
    for page in pages:
        if "/results/" not in page:  # study notebooks quote old logs
            with open(page, encoding="utf-8") as f:
                mentioned.update({name: os.path.relpath(page, ROOT) for name in pattern.findall(f.read())})
    assert len(mentioned) >= 5
    assert {name: page for name, page in mentioned.items() if name not in {*LOGGED_NAMES, *verl_own}} == {}


def test_a_seed_that_stopped_below_the_target_is_counted_apart_from_the_finished_ones():
    def curve(accuracies):
        steps = range(0, 2 * len(accuracies), 2)
        frame = pd.DataFrame({"rollouts": [100 * i for i in range(len(accuracies))]}, index=steps)
        frame["accuracy"] = frame["smoothed"] = accuracies
        return frame

    curves = {
        "base_s1": curve([0.1, 0.3, 0.4]),
        "new_s1": curve([0.1, 0.3, 0.45]),  # finished, reached 0.4
        "new_s2": curve([0.1, 0.3, 0.35]),  # finished, never reached it
        "new_s3": curve([0.1, 0.3]),  # stopped below it: not read
        "new_s4": curve([0.1, 0.42]),  # stopped, but reached it first
    }
    groups = {"base": ["base_s1"], "new": ["new_s1", "new_s2", "new_s3", "new_s4"]}
    table = tables.build_seed_table(curves, groups, 0.4, ("base",)).set_index("configuration")
    assert table["seeds_reached"].tolist() == [1, 2] and table["seeds_stopped"].tolist() == [0, 1]
    markdown = tables.seed_table_markdown(table.reset_index(), "caption")
    assert "| new | 2 of 3 finished, 1 stopped |" in markdown and "| base | 1 of 1 |" in markdown
    # The mean curve leaves out the stopped seeds, which end before it gets there (0.4 at 200, with s1 and s2 alone).
    assert table.loc["new", "mean_curve_rollouts_to_target"] == pytest.approx(200)
    assert "| 200 (left out: s3 (ended at 100), s4 (ended at 100)) |" in markdown


def test_runs_validated_by_rollout_budget_get_a_table_of_where_each_budget_s_point_lay(tmp_path):
    def log(path, points):
        """Validation steps as the trainer logs them: (step, budget or None, budgets reached, rollouts generated)."""
        with open(path, "w") as f:
            for step, budget, reached, rollouts in points:
                data = {names.CUMULATIVE_SAMPLED: rollouts, "val-core/t/acc/mean@1": 0.1 * step}
                data |= {names.VAL_BUDGET_INTERVAL: 100, names.VAL_BUDGETS_REACHED: reached}
                data |= {names.VAL_BUDGET_ROLLOUTS: rollouts} | ({names.VAL_BUDGET: budget} if budget else {})
                f.write(json.dumps({"step": step, "data": data}) + "\n")

    # Even steps land on every budget. Uneven ones: 130 for 100, 260 for 200, 410 for both 300 and 400, and a
    # last-step validation at 450 that stands for no budget.
    log(tmp_path / "even.jsonl", [(1, 100, 1, 100), (2, 200, 1, 200)])
    log(tmp_path / "uneven.jsonl", [(1, 100, 1, 130), (2, 200, 1, 260), (3, 400, 2, 410), (4, None, 0, 450)])
    out = tmp_path / "out"
    runs = [f"grpo={tmp_path / 'even.jsonl'}", f"pc={tmp_path / 'uneven.jsonl'}"]
    assert report.main([*runs, "--no-plot", "--out", str(out), "--target", "0.1"]) == 0
    table = pd.read_csv(out / "budget_points.csv").set_index("run")
    assert table.loc["grpo", ["budgets", "last_budget", "overshoot_max"]].tolist() == [2, 200, 0]
    # Overshoots 30, 60, 110 (300 at 410) and 10 (400 at 410): four budgets from four validations.
    assert table.loc["pc", ["budgets", "last_budget", "validations"]].tolist() == [4, 400, 3]
    assert table.loc["pc", "overshoot_mean"] == pytest.approx(52.5) and table.loc["pc", "overshoot_max"] == 110
    assert "| pc | 100 | 4 | 400 | 3 | 52 | 110 |" in (out / "budget_points.md").read_text()
