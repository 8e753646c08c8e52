"""recipe.pc_tools.bench: medians, start-up and the projected line time, from a bench run's logs."""

import json

import pytest

from recipe.pc import metric_names as m
from recipe.pc_tools import bench

LAUNCH = 1_700_000_000.0


def write_run(folder, steps, launched=LAUNCH):
    """A bench run's folder: ``steps`` as (step seconds, validation seconds or None, update seconds), logged at the
    end of each step 60 s + the steps so far after ``launched``."""
    folder.mkdir(parents=True)
    (folder / "launched_at").write_text(f"{launched}\n")
    clock = launched + 60.0
    with open(folder / "metrics.jsonl", "w") as f:
        for i, (step, testing, update) in enumerate(steps, start=1):
            clock += step
            data = {m.STEP_TIME: step, m.UNIX_TIME: clock, "timing_s/update_actor": update}
            data |= {"timing_s/old_log_prob": 2.0, "timing_s/gen": 3.0, "training/rollout_probs_diff_mean": 0.008}
            if testing is not None:
                data["timing_s/testing"] = testing
            f.write(json.dumps({"step": i, "data": data}) + "\n")
    return folder


# Step 1 warms up (40 s); steps 3 and 5 validate (the step's time includes the validation's).
STEPS = [(40.0, None, 9.0), (12.0, None, 5.0), (22.0, 9.0, 6.0), (14.0, None, 5.5), (21.0, 11.0, 5.0)]


def test_medians_leave_out_the_first_step_and_each_steps_validation(tmp_path):
    run = bench.read_run(write_run(tmp_path / "g2_pc_on", STEPS))
    assert (run.per_gpu, run.arm, run.fixes, run.steps, run.validations) == (2, "pc", "on", 5, 2)
    assert run.step == 12.5  # median of 12, 13, 14, 10: the steps after the first, validations taken out
    assert run.parts == {"update": 5.25, "old_log_prob": 2.0, "generation": 3.0}
    assert run.validation == 10.0
    # Launch to the end of step 1 is 100 s; less a median step: 87.5 s before the steps ran at their pace.
    assert run.startup == pytest.approx(87.5)
    assert run.elapsed == pytest.approx(60.0 + sum(s for s, _, _ in STEPS))


def test_the_projection_is_start_up_plus_steps_and_validations_at_the_runs_pace(tmp_path):
    run = bench.read_run(write_run(tmp_path / "g1_grpo_on", STEPS))
    assert run.projected(36, 12) == pytest.approx(87.5 + 36 * 12.5 + 12 * 10.0)
    # Its own steps and validations project its own measured time, up to how the steps spread around the median.
    assert run.projected(run.steps, run.validations) == pytest.approx(run.elapsed, abs=5.0)
    assert bench.line_seconds(100.0, 10, 5.0, 0, float("nan")) == 150.0  # no validation: no validation time


def test_the_table_projects_each_arm_to_its_line(tmp_path, capsys):
    write_run(tmp_path / "g2_pc_on", STEPS)
    write_run(tmp_path / "g2_grpo_off", [(s * 2, t, u) for s, t, u in STEPS])
    (tmp_path / "bench_gpu0.log").write_text("")  # not a run
    assert bench.main([str(tmp_path), "--out", str(tmp_path / "table.md")]) == 0
    out = capsys.readouterr().out
    pc = next(line for line in out.splitlines() if line.startswith("| g2_pc_on "))
    cells = [c.strip() for c in pc.strip("|").split("|")]
    assert cells[:10] == ["g2_pc_on", "2", "on", "5 (2)", "12.5", "5.2", "2.0", "3.0", "10.0", "1.5"]
    assert cells[11:13] == ["42, 16", f"{(87.5 + 42 * 12.5 + 16 * 10.0) / 60:.1f}"]
    grpo = next(line for line in out.splitlines() if line.startswith("| g2_grpo_off "))
    assert "| 36, 12 |" in grpo
    assert (tmp_path / "table.md").read_text() == out
    assert bench.main([str(tmp_path), "--line", "pc=10:2"]) == 0
    assert f"| 10, 2 | {(87.5 + 10 * 12.5 + 2 * 10.0) / 60:.1f} |" in capsys.readouterr().out


def test_a_log_without_a_launch_time_has_no_start_up_unless_one_is_assumed(tmp_path, capsys):
    old = write_run(tmp_path / "first_lease_grpo_s9", [(2 * s, t and 2 * t, u) for s, t, u in STEPS])
    (old / "launched_at").unlink()  # an earlier release's log, run under another name
    write_run(tmp_path / "bench" / "g2_pc_on", STEPS)
    cut = tmp_path / "bench" / "g1_grpo_on"
    cut.mkdir()  # a run lost before its first step
    args = [str(tmp_path / "bench"), f"g2_grpo_off={old}"]
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| g2_grpo_off "))
    assert "| 25.0 |" in row and row.count("—") == 4  # its medians, no start-up, no projections
    assert f"not read: g1_grpo_on: {cut}/metrics.jsonl is missing: the run logged no step" in out
    assert bench.main([*args, "--assume-startup", "4"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| g2_grpo_off "))
    assert f"| 4.0 (assumed) | — / {(240 + 5 * 25 + 2 * 20) / 60:.1f} |" in row
    assert f"| 36, 12 | {(240 + 36 * 25 + 12 * 20) / 60:.1f} |" in row


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: write_run(p / "g2_pc_on", STEPS[:1]), "1 step logged"),
        (lambda p: write_run(p / "g2_knap_on", STEPS), "no --line for arm knap"),
        (lambda p: None, "no bench run"),
    ],
)
def test_what_cannot_be_read_is_one_line_and_exit_2(tmp_path, capsys, make, message):
    make(tmp_path)
    assert bench.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("recipe.pc_tools.bench: ") and message in err and err.count("\n") == 1
