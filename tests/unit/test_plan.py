"""recipe.pc_tools.plan (``python -m recipe.pc_tools.plan``) on a tiny committed dump: its commands, and its errors on
dumps it cannot use."""

import json
import os
import shutil

import numpy as np
import pytest
from support import FIXTURES, run_module

from recipe.pc import metric_names as names
from recipe.pc_tools import plan
from recipe.pc_tools.costmodel import GRPO, PilotCommit, Prediction, predict, predict_at_filter_rate, simulate
from recipe.pc_tools.defaults import SKIP
from recipe.pc_tools.dumps import DumpError, parse_steps, pass_rates, read_dump, read_pass_counts, step_files
from recipe.pc_tools.predictions import (
    CRITERION_CAVEAT,
    default_splits,
    recommend,
    recommendation,
)

FIXTURE = os.path.join(FIXTURES, "plan")


def rows_of(step):
    with open(os.path.join(FIXTURE, f"{step}.jsonl")) as handle:
        return [json.loads(line) for line in handle]


def test_command_runs_on_the_fixture(capsys):
    assert (
        run_module("recipe.pc_tools.plan", "predict", FIXTURE, "--train-batch-size", "4", "--gen-batch-size", "8") == 0
    )
    out = capsys.readouterr().out
    assert "16 prompts, 160 rollouts from steps 1..3 (3 dumped steps)" in out
    for label in ("GRPO n=16", "DAPO n=16 G=8", "PC 2+14 G=8", "PC 4+12 G=8", "PC 8+8 G=8"):
        assert f"| {label} | 16 |" in out
    # Without the simulator only a measured split is recommended; the fixture's grid holds none that beat GRPO.
    assert out.splitlines()[-1].startswith("no recommendation: no split was measured")
    assert not [line for line in out.splitlines() if line.startswith("recommended")]


def test_pass_rates_per_prompt_and_window():
    files = step_files(FIXTURE, parse_steps("2:3"))
    assert [s for s, _ in files] == [2, 3]
    ids, seen, wins = read_pass_counts(files, "acc")
    expected = {}
    for step in (2, 3):
        for row in rows_of(step):
            n, s = expected.get(row["prompt_id"], (0, 0))
            expected[row["prompt_id"]] = (n + 1, s + row["acc"])
    assert ids.tolist() == sorted(expected)
    assert seen.tolist() == [expected[i][0] for i in ids]
    assert wins.tolist() == [expected[i][1] for i in ids]
    # Beta(1, 1) prior: (s + 1) / (k + 2).
    np.testing.assert_allclose(pass_rates(seen, wins, (1.0, 1.0)), (wins + 1) / (seen + 2))
    assert parse_steps("3") == (3, 3) and parse_steps(":2") == (None, 2)


def test_score_metric_counts_positive_scores():
    ids, seen, wins = read_pass_counts(step_files(FIXTURE, (1, 1)), "score")
    by_acc = read_pass_counts(step_files(FIXTURE, (1, 1)), "acc")[2]
    np.testing.assert_array_equal(wins, by_acc)  # the fixture scores +1 when correct, -1 when not


def test_recommendation_is_fewest_rollouts_per_informative_group():
    rates = np.full(500, 0.3)
    predictions = [predict(rates, c) for c in (GRPO(16, 32), PilotCommit(4, 12, 96, 32))]
    best = recommend(predictions)
    assert best.rollouts_per_informative_group == min(p.rollouts_per_informative_group for p in predictions)
    assert recommend([predict(np.zeros(10), GRPO(4, 8))]) is None


def row(label, rollouts, informative, group=64):
    return Prediction(label, group, 1.0, 0.0, float(rollouts), 12.0, float(informative), 0.5)


def test_a_recommendation_is_a_measured_split_or_a_row_simulated_in_this_call():
    grpo, pc2, pc4, pc16, pc16s4 = (
        GRPO(64, 12),
        *(PilotCommit(n_p, 64 - n_p, 36, 12) for n_p in (2, 4, 16)),
        PilotCommit(16, 48, 36, 12, screen_n=4),
    )
    configs = [grpo, pc2, pc4, pc16, pc16s4]
    # The model prices PC 2+62 (never measured) cheapest, then PC 16+48 (measured worse than GRPO).
    model = [row(c.label, r, 10) for c, r in zip(configs, (1300, 500, 900, 600, 950), strict=True)]
    # Without the simulator nothing is recommended: no split was measured ahead by a margin. The closest measured
    # below GRPO on every mix is named: PC 4+60 (0.95x, 0.83x) over PC 16+48 screen 4 (0.97x), whatever the model.
    assert recommendation(model, configs, [], []) == [
        "no recommendation: no split was measured to reach GRPO's accuracy with fewer rollouts by a measured margin, "
        "and the model's rows are not measurements; closest: PC 4+60 G=36 needed 0.95x (default mix), 0.83x "
        "(calibrated mix) GRPO n=64's rollouts to reach GRPO's accuracy, on two or three seeds without an interval "
        "(docs/results/regimes/README.md); --simulate STEPS ranks the rows on this dump",
    ]
    # A measured split the model says never fills on this dump is not named; nothing measured below GRPO: no name.
    assert (
        "closest: PC 16+48 G=36 screen 4 "
        in recommendation([*model[:2], row(pc4.label, 0, 0), *model[3:]], configs, [], [])[-1]
    )
    assert "closest" not in recommendation(model[:2], configs[:2], [], [])[-1]

    # With the simulator: among its rows only, PC 16+48 passed over as measured worse, never-measured PC 2+62 allowed.
    sim_configs = [grpo, pc2, pc16]
    simulated = [row(grpo.label, 1300, 10), row(pc2.label, 800, 10), row(pc16.label, 700, 10)]
    lines = recommendation(model, configs, simulated, sim_configs)
    assert lines[0].startswith("not recommended: PC 16+48 G=36, the simulator's fewest per informative group; measured")
    assert lines[1:] == [
        "recommended (simulated on this dump): PC 2+62 G=36 (80.0 generated rollouts per informative trained group "
        "of 64 against GRPO n=64's 130.0, 1.00 rounds per step)",
        CRITERION_CAVEAT,
    ]
    # None beats GRPO's simulated row (PC 4+60 measured better is not enough): no recommendation.
    simulated = [row(grpo.label, 1300, 10), row(pc2.label, 1300, 10), row(pc4.label, 1400, 10)]
    assert recommendation(model, configs, simulated, [grpo, pc2, pc4]) == [
        "no recommendation: no simulated configuration generated fewer rollouts per informative group than "
        "GRPO n=64 (130.0) on this dump"
    ]
    # The same, with the fewest passed over as measured worse: none of the others beat GRPO.
    simulated = [row(grpo.label, 1300, 10), row(pc2.label, 1300, 10), row(pc16.label, 700, 10)]
    lines = recommendation(model, configs, simulated, sim_configs)
    assert lines[0].startswith("not recommended: PC 16+48 G=36, the simulator's fewest per informative group; measured")
    assert lines[1:] == [
        "no recommendation: no other simulated configuration generated fewer rollouts per informative group than "
        "GRPO n=64 (130.0) on this dump"
    ]


def test_plan_recommends_from_the_rows_it_simulated(capsys):
    sizes = ["--train-batch-size", "4", "--gen-batch-size", "8"]
    assert plan.main(["predict", FIXTURE, *sizes, "--simulate", "3", "--simulate-warmup", "2", "--skip"]) == 0
    out = capsys.readouterr().out.splitlines()
    table = out[out.index(next(line for line in out if line.startswith("simulated"))) + 3 :]
    rows = {cells[1].strip(): float(cells[-2]) for cells in (line.split("|") for line in table[: table.index("")])}
    # Here the simulator's fewest is PC 4+12, which lost to GRPO when measured (with skipping on top too).
    assert min(rows, key=rows.get) == "PC 4+12 G=8"
    assert out[-3].startswith("not recommended: PC 4+12 G=8, the simulator's fewest per informative group; measured")
    picked = out[-2].removeprefix("recommended (simulated on this dump): ")
    label = picked.split(" (")[0]
    assert picked != out[-2] and not label.startswith("PC 4+12")
    assert rows[label] == min(r for name, r in rows.items() if not name.startswith("PC 4+12")) < rows["GRPO n=16"]
    assert out[-1] == CRITERION_CAVEAT


def test_default_grid_keeps_the_group_size():
    assert default_splits(16) == [(2, 14), (4, 12), (8, 8)]
    assert default_splits(64) == [(2, 62), (4, 60), (8, 56), (16, 48), (32, 32)]


def write_dump(tmp_path, drop_key):
    for step in (1, 2):
        rows = [{k: v for k, v in row.items() if k != drop_key} for row in rows_of(step)]
        (tmp_path / f"{step}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(tmp_path)


@pytest.mark.parametrize(
    "drop,args,message",
    [
        ("prompt_id", [], "no 'prompt_id'"),
        ("acc", [], "no 'acc'"),
        ("score", ["--metric", "score"], "no 'score'"),
    ],
)
def test_dump_without_ids_or_metric_says_what_to_run(tmp_path, capsys, drop, args, message):
    assert plan.main(["predict", write_dump(tmp_path, drop), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "1.jsonl line 1" in err
    assert "trainer.rollout_data_dir=DIR" in err


def test_other_bad_inputs(tmp_path, capsys):
    assert plan.main(["predict", str(tmp_path)]) == 2
    assert "no <step>.jsonl files" in capsys.readouterr().err
    shutil.copy(os.path.join(FIXTURE, "1.jsonl"), tmp_path / "1.jsonl")
    assert plan.main(["predict", str(tmp_path), "--steps", "5:9"]) == 2
    assert "has steps 1..1" in capsys.readouterr().err
    assert plan.main(["predict", FIXTURE, "--pc", "4-12"]) == 2
    assert "--pc" in capsys.readouterr().err
    assert plan.main(["predict", FIXTURE, "--p-lower", "0.9", "--p-upper", "0.5"]) == 2
    assert "diversity_threshold_lower" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--allocator", "dapo"], "--allocator dapo is simulated (it has no analytic model): add --simulate"),
        (["--set", "data.gen_batch_size=8", "--simulate", "5"], "--set overrides the config of the --allocator"),
        (["--allocator", "nope", "--simulate", "5"], "algorithm.rollout_allocation='nope'; choose one of"),
        (["--allocator", "dapo", "--set", "data.gen_size=8", "--simulate", "5"], "data.gen_size is not a key of"),
        (["--allocator", "dapo", "--set", "data.gen_batch_size", "--simulate", "5"], "expected an override KEY=VALUE"),
    ],
)
def test_a_registered_allocator_needs_the_simulator_a_known_name_and_known_keys(capsys, args, message):
    assert plan.main(["predict", FIXTURE, "--train-batch-size", "4", "--gen-batch-size", "8", *args]) == 2
    assert message in capsys.readouterr().err


def test_train_prompts_notes_the_pc_splits_that_would_pass_over_the_set_more_than_twice(capsys):
    args = ["--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12,8+8"]
    rates = pass_rates(*read_pass_counts(step_files(FIXTURE, (None, None)), "acc")[1:], (0.0, 0.0))
    rounds = {
        f"PC {p}+{c} G=8": predict(rates, PilotCommit(p, c, 8, 4, max_num_gen_batches=10)).rounds_per_step
        for p, c in ((4, 12), (8, 8))
    }
    # The fixture has 3 steps: a split's rounds a step x 8 prompts x 3 steps over the training prompts.
    for prompts in (10, 30, 100000):
        assert plan.main(["predict", FIXTURE, *args, "--train-prompts", str(prompts)]) == 0
        out = capsys.readouterr().out
        for label, r in rounds.items():
            passes = r * 8 * 3 / prompts
            note = f"note: {label}: {r:.2f} rounds a step of 8 prompts pass over the {prompts} training prompts "
            assert (note + f"{passes:.1f} times in 3 steps") in out if passes > 2 else note not in out
        assert "note: GRPO" not in out and "note: DAPO" not in out  # eviction is PC's
    assert any(r * 8 * 3 / 10 > 2 for r in rounds.values()) and all(r * 8 * 3 / 100000 <= 2 for r in rounds.values())
    assert plan.main(["predict", FIXTURE, *args]) == 0
    assert "pass over the" not in capsys.readouterr().out
    assert plan.main(["predict", FIXTURE, *args, "--train-prompts", "0"]) == 2
    assert "--train-prompts" in capsys.readouterr().err


def test_gzipped_dumps_read_the_same(tmp_path):
    import gzip

    for step in (1, 2, 3):
        with open(os.path.join(FIXTURE, f"{step}.jsonl"), "rb") as src:
            with gzip.open(tmp_path / f"{step}.jsonl.gz", "wb") as dst:
                dst.write(src.read())
    plain = read_pass_counts(step_files(FIXTURE, (None, None)), "acc")
    packed = read_pass_counts(step_files(str(tmp_path), (None, None)), "acc")
    for a, b in zip(plain, packed, strict=True):
        np.testing.assert_array_equal(a, b)
    shutil.copy(os.path.join(FIXTURE, "2.jsonl"), tmp_path / "2.jsonl")
    with pytest.raises(DumpError, match="both <step>.jsonl and <step>.jsonl.gz"):
        step_files(str(tmp_path), (None, None))


def _pack(folder, tmp_path) -> str:
    dump = tmp_path / "dump"
    shutil.copytree(folder, dump)
    assert run_module("recipe.pc_tools.dumps", "pack", str(dump)) == 0
    return f"{dump}.parquet"


def test_a_packed_dump_reads_as_its_folder(tmp_path, capsys):
    import pyarrow.parquet as pq

    from recipe.pc_tools.dumps import per_step_rates

    packed = _pack(FIXTURE, tmp_path)
    for window in ((None, None), (2, 3), (3, 3)):
        assert [s for s, _ in step_files(packed, window)] == [s for s, _ in step_files(FIXTURE, window)]
        for metric in ("acc", "score"):
            plain = read_dump(step_files(FIXTURE, window), metric)
            for a, b in zip(plain, read_dump(step_files(packed, window), metric), strict=True):
                np.testing.assert_array_equal(a, b)
    by_step = per_step_rates(step_files(packed, (None, None)), "acc", (0.0, 0.0), None)
    for step, rates in per_step_rates(step_files(FIXTURE, (None, None)), "acc", (0.0, 0.0), None).items():
        np.testing.assert_array_equal(by_step[step], rates)
    # The commands print the same, but for the path they were given.
    sizes = ["--train-batch-size", "4", "--gen-batch-size", "8"]
    for argv in (["predict", *sizes, "--simulate", "3", "--skip"], ["sources", "--window", "2", "--table"]):
        assert _out([argv[0], packed, *argv[1:]], capsys).replace(packed, FIXTURE) == _out(
            [argv[0], FIXTURE, *argv[1:]], capsys
        )
    # Each row as the trainer wrote it, in step order, without the prompt and response text.
    expected = [{k: v for k, v in row.items() if k not in ("input", "output")} for s in (1, 2, 3) for row in rows_of(s)]
    assert pq.read_table(packed).to_pylist() == expected


def test_packing_and_reading_refuse_what_they_cannot_use(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    packed = _pack(FIXTURE, tmp_path)
    shutil.rmtree(tmp_path / "dump")  # packed for keeping, the folder removed
    with pytest.raises(DumpError, match=r"dump is not a directory; its packed form .*dump.parquet is there"):
        step_files(str(tmp_path / "dump"), (None, None))
    with pytest.raises(DumpError, match="no packed dump"):
        step_files(str(tmp_path / "other.parquet"), (None, None))
    pq.write_table(pa.table({"prompt_id": [1]}), tmp_path / "nostep.parquet")
    with pytest.raises(DumpError, match="has no 'step' column"):
        step_files(str(tmp_path / "nostep.parquet"), (None, None))
    (tmp_path / "text.parquet").write_text("not parquet")
    with pytest.raises(DumpError, match="not a readable Parquet file"):
        step_files(str(tmp_path / "text.parquet"), (None, None))
    pq.write_table(pa.table({"step": [1], "prompt_id": [1], "score": [1.0]}), tmp_path / "noacc.parquet")
    with pytest.raises(DumpError, match=r"row 0 \(step 1\) has no 'acc'.*--metric score"):
        read_dump(step_files(str(tmp_path / "noacc.parquet"), (None, None)), "acc")
    # A row whose step is not its file's, and a field of two types, are refused, naming the folder.
    for name, line in (("wrong_step", {"step": 2, "prompt_id": 0}), ("mixed", {"step": 1, "prompt_id": "a"})):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "1.jsonl").write_text(json.dumps({"step": 1, "prompt_id": 0}) + "\n" + json.dumps(line) + "\n")
        assert run_module("recipe.pc_tools.dumps", "pack", str(folder)) == 2
        assert f"dumps pack: {folder}" in capsys.readouterr().err
    assert os.path.isfile(packed)


def _write_metrics(path, per_step: dict[int, tuple[int, int, int, int]], explore: int | None = None, **counters) -> str:
    """A verl file-logger log: step -> (generated rollouts, rounds, pass count, candidates); ``explore``: the
    pilot rollouts logged each step (None: not logged); ``counters``: more metrics, the same every step."""
    with open(path, "w") as handle:
        handle.write(json.dumps({"step": 0, "data": {"val-core/arith/acc/mean@4": 0.1}}) + "\n")
        for step, (rollouts, rounds, passed, candidates) in per_step.items():
            data = {
                names.ROLLOUTS_SAMPLED: rollouts,
                names.ROUNDS: rounds,
                names.PASS_COUNT: passed,
                names.CANDIDATES: candidates,
            }
            if explore is not None:
                data[names.ROLLOUTS_PILOT] = explore
            data.update(counters)
            handle.write(json.dumps({"step": step, "data": data}) + "\n")
    return str(path)


def test_measured_runs_sit_beside_the_prediction_of_their_configuration(tmp_path, capsys):
    args = ["--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12"]
    log = _write_metrics(tmp_path / "pc.jsonl", {1: (300, 2, 3, 16), 2: (100, 1, 5, 8), 3: (200, 1, 4, 8)})
    assert plan.main(["check", FIXTURE, *args, "--window", "2", "--measured", f"pc:4+12={log}"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 + 3  # header, rule, windows 1..2 and 3..3, then "all"
    config = PilotCommit(4, 12, 8, 4)
    cells = {}
    for line, window, files, measured, rounds, rate in (
        (table[2], "1..2", step_files(FIXTURE, (1, 2)), 200, 1.5, 8 / 24),
        (table[3], "3..3", step_files(FIXTURE, (3, 3)), 200, 1.0, 4 / 8),
    ):
        _, seen, wins = read_pass_counts(files, "acc")
        pred = predict(pass_rates(seen, wins, (0.0, 0.0)), config)
        cells[window] = pred.rollouts_per_step
        row = [c.strip() for c in line.strip("|").split("|")]
        assert row[0] == window and row[1] == "PC 4+12 G=8" and row[2] == log
        assert row[3] == ("2" if window == "1..2" else "1")  # logged steps in the window
        assert row[4] == f"{pred.rollouts_per_step:.0f}" and row[5] == f"{measured:.0f}"
        assert row[6] == f"{(pred.rollouts_per_step - measured) / measured:+.1%}"
        # The model again at the run's own filter pass rate (pass count / candidates over the window).
        at_rate = predict_at_filter_rate(rate, config).rollouts_per_step
        cells[window + " at rate"] = at_rate
        assert row[7:] == [
            f"{pred.rounds_per_step:.2f}",
            f"{rounds:.2f}",
            f"{pred.filter_pass_rate:.3f}",
            f"{rate:.3f}",
            f"{at_rate:.0f}",
            f"{(at_rate - measured) / measured:+.1%}",
        ]
    assert cells["1..2 at rate"] != cells["3..3 at rate"]  # the rates differ, so the windows must not share one
    # "all" weighs each window by its logged steps: (2 x window 1..2 + 1 x window 3..3) / 3 against 200.
    all_row = [c.strip() for c in table[4].strip("|").split("|")]
    assert all_row[:4] == ["all", "PC 4+12 G=8", log, "3"]
    assert all_row[4] == f"{(2 * cells['1..2'] + cells['3..3']) / 3:.0f}"
    all_at_rate = (2 * cells["1..2 at rate"] + cells["3..3 at rate"]) / 3
    assert all_row[11:] == [f"{all_at_rate:.0f}", f"{(all_at_rate - 200) / 200:+.1%}"]


def _rates(step: int) -> np.ndarray:
    _, seen, wins = read_pass_counts(step_files(FIXTURE, (step, step)), "acc")
    return pass_rates(seen, wins, (0.0, 0.0))


def test_per_step_predicts_each_logged_step_from_its_own_rates_then_averages(tmp_path, capsys):
    args = ["--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12", "--window", "2", "--per-step"]
    config = PilotCommit(4, 12, 8, 4)
    log = _write_metrics(tmp_path / "pc.jsonl", {1: (300, 2, 3, 16), 2: (100, 1, 5, 8), 3: (200, 1, 4, 8)})
    assert plan.main(["check", FIXTURE, *args, "--measured", f"pc:4+12={log}"]) == 0
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()[2:]]
    step = {k: predict(_rates(k), config) for k in (1, 2, 3)}
    pooled = predict(pass_rates(*read_pass_counts(step_files(FIXTURE, (1, 2)), "acc")[1:], (0.0, 0.0)), config)
    mean = (step[1].rollouts_per_step + step[2].rollouts_per_step) / 2
    assert f"{mean:.0f}" != f"{pooled.rollouts_per_step:.0f}"  # the fixture tells the two apart
    assert rows[0][4] == f"{mean:.0f}"
    assert rows[0][7] == f"{(step[1].rounds_per_step + step[2].rounds_per_step) / 2:.2f}"
    # The filter pass rate over both steps' candidates, which grow with a step's rounds.
    weighted = sum(step[k].filter_pass_rate * step[k].rounds_per_step for k in (1, 2))
    assert rows[0][9] == f"{weighted / (step[1].rounds_per_step + step[2].rounds_per_step):.3f}"
    # At the run's own rate, step by step (3/16 and 5/8), not at the window's pooled 8/24.
    at_rate = (
        predict_at_filter_rate(3 / 16, config).rollouts_per_step
        + predict_at_filter_rate(5 / 8, config).rollouts_per_step
    ) / 2
    assert rows[0][11] == f"{at_rate:.0f}"
    assert f"{predict_at_filter_rate(8 / 24, config).rollouts_per_step:.0f}" != rows[0][11]
    assert rows[1][4] == f"{step[3].rollouts_per_step:.0f}"
    # A step the run did not log (here 2) is left out of its window's prediction.
    short = _write_metrics(tmp_path / "short.jsonl", {1: (300, 2, 3, 16), 3: (200, 1, 4, 8)})
    assert plan.main(["check", FIXTURE, *args, "--measured", f"pc:4+12={short}"]) == 0
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows[0][3] == "1" and rows[0][4] == f"{step[1].rollouts_per_step:.0f}"
    assert plan.main(["predict", FIXTURE, "--per-step", "--simulate", "5"]) == 2
    assert "--per-step predicts step by step" in capsys.readouterr().err


def test_per_step_prediction_without_a_run_is_the_mean_of_each_steps_prediction(capsys):
    """Catches: the plain prediction pooling the steps' rates (fewer rounds where rates move) or averaging a ratio."""
    args = ["--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12", "--steps", "1:2"]
    assert plan.main(["predict", FIXTURE, *args, "--per-step"]) == 0
    out = capsys.readouterr().out
    assert "per step: each dumped step predicted from its own pass rates" in out
    cells = ([c.strip() for c in line.strip("|").split("|")] for line in out.splitlines())
    rows = {r[0]: r for r in cells if len(r) == 10}
    config = PilotCommit(4, 12, 8, 4)
    step = [predict(_rates(k), config) for k in (1, 2)]
    pc = rows[config.label]
    assert pc[2] == f"{(step[0].rounds_per_step + step[1].rounds_per_step) / 2:.2f}"
    assert pc[5] == f"{(step[0].rollouts_per_step + step[1].rollouts_per_step) / 2:.0f}"
    informative = (step[0].informative_groups_per_step + step[1].informative_groups_per_step) / 2
    assert pc[7] == f"{informative:.1f}"
    assert pc[9] == f"{(step[0].rollouts_per_step + step[1].rollouts_per_step) / 2 / informative:.1f}"
    assert plan.main(["predict", FIXTURE, *args]) == 0  # pooled: a different number on this fixture
    pooled = [[c.strip() for c in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()]
    assert [r for r in pooled if r[0] == config.label][0][5] != pc[5]


def test_per_step_names_a_configuration_whose_steps_never_fill(tmp_path, capsys):
    """Catches: a warm-up step where every prompt fails silently making the whole-run mean infinite."""
    for step in (1, 2):
        rows = rows_of(step)
        if step == 1:  # the format not learned yet: every rollout wrong
            rows = [{**row, "acc": 0, "score": 0.0} for row in rows]
        (tmp_path / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["predict", str(tmp_path), "--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12", "--per-step"]
    assert plan.main([*args, "--max-num-gen-batches", "0"]) == 0  # no round limit
    out = capsys.readouterr().out
    assert "note: PC 4+12 G=8: 1 of 2 steps never fill on their own rates" in out
    assert "note: GRPO" not in out  # one round always fills a GRPO step
    assert plan.main(args) == 0  # the trainer's default limit, 10 rounds: the empty step ends there, short
    out = capsys.readouterr().out
    assert "never fill" not in out
    pc = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| PC")][0]
    assert float(pc[2]) <= 10 and float(pc[6]) < 4  # rounds capped; fewer than 4 groups trained on average


def test_per_step_edges_a_gap_a_step_without_candidates_an_unreached_window_and_sources(tmp_path, capsys):
    args = ["--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12", "--per-step"]
    config = PilotCommit(4, 12, 8, 4)
    step = {k: predict(_rates(k), config) for k in (1, 2, 3)}

    def table(log, *extra):
        assert plan.main(["check", FIXTURE, *args, *extra, "--measured", f"pc:4+12={log}"]) == 0
        return [[c.strip() for c in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()[2:]]

    # Step 2 had no filter candidates: its at-rate is unknown, so the window's is step 1's alone; the measured side
    # and the prediction still cover both steps.
    log = _write_metrics(tmp_path / "a.jsonl", {1: (300, 2, 3, 16), 2: (100, 1, 0, 0), 3: (200, 1, 4, 8)})
    rows = table(log, "--window", "2")
    assert rows[0][3:6] == ["2", f"{(step[1].rollouts_per_step + step[2].rollouts_per_step) / 2:.0f}", "200"]
    at_1 = predict_at_filter_rate(3 / 16, config).rollouts_per_step
    at_3 = predict_at_filter_rate(4 / 8, config).rollouts_per_step
    assert rows[0][11] == f"{at_1:.0f}"
    assert rows[2][0] == "all" and rows[2][11] == f"{(2 * at_1 + at_3) / 3:.0f}"  # windows weighed by their steps
    # A run that logged a step the dump lacks (here 5) and none of a window's dumped steps: that window shows dashes
    # and the "all" row covers the steps both have.
    log = _write_metrics(tmp_path / "b.jsonl", {3: (200, 1, 4, 8), 5: (999, 9, 1, 8)})
    rows = table(log, "--window", "2")
    assert rows[0][3] == "0" and rows[0][5] == "—" and rows[0][11] == "—"
    assert rows[1][3:6] == ["1", f"{step[3].rollouts_per_step:.0f}", "200"]
    assert rows[2][3:6] == ["1", f"{step[3].rollouts_per_step:.0f}", "200"]
    # A dump with a gap (steps 1 and 3): the measured side covers the same steps as the prediction, not step 2.
    gap = tmp_path / "gap"
    gap.mkdir()
    for k in (1, 3):
        shutil.copy(os.path.join(FIXTURE, f"{k}.jsonl"), gap / f"{k}.jsonl")
    log = _write_metrics(tmp_path / "d.jsonl", {1: (300, 2, 3, 16), 2: (999, 9, 1, 8), 3: (200, 1, 4, 8)})
    assert plan.main(["check", str(gap), *args, "--measured", f"pc:4+12={log}"]) == 0
    row = [c.strip() for c in capsys.readouterr().out.splitlines()[2].strip("|").split("|")]
    assert row[0] == "1..3" and row[3] == "2" and row[5] == "250" and row[8] == "1.50"
    # --sources: each step keeps its prompts of those sources; a step may have none of one of them.
    for k in (1, 2, 3):
        lines = [json.loads(line) for line in open(os.path.join(FIXTURE, f"{k}.jsonl"))]
        for line in lines:
            line["data_source"] = "a" if line["prompt_id"] % 2 == 0 else ("b" if k == 1 else "c")
        (tmp_path / f"{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    log = _write_metrics(tmp_path / "c.jsonl", {1: (300, 2, 3, 16), 2: (100, 1, 5, 8)})
    assert (
        plan.main(["check", str(tmp_path), *args, "--steps", "1:2", "--sources", "a,b", "--measured", f"pc:4+12={log}"])
        == 0
    )
    row = [c.strip() for c in capsys.readouterr().out.splitlines()[2].strip("|").split("|")]
    files = step_files(str(tmp_path), (1, 2))
    step_rates = []
    for f in files:  # each step's prompts of a and b (step 2 has no b)
        _, seen, wins, labels = read_dump([f], "acc")
        keep = np.isin(labels, ["a", "b"])
        step_rates.append(pass_rates(seen[keep], wins[keep], (0, 0)))
    want = np.mean([predict(r, config).rollouts_per_step for r in step_rates])
    assert row[4] == f"{want:.0f}"
    assert (
        plan.main(["check", str(tmp_path), *args, "--steps", "2:2", "--sources", "a,b", "--measured", f"pc:4+12={log}"])
        == 2
    )
    assert "no prompt of ['b'] in steps 2..2" in capsys.readouterr().err  # checked once per window


def test_a_window_the_run_did_not_reach_shows_a_dash_and_grpo_has_no_filter_rate(tmp_path, capsys):
    log = _write_metrics(tmp_path / "grpo.jsonl", {1: (64, 1, 16, 16), 2: (64, 1, 16, 16)}, explore=0)  # to step 2
    assert plan.main(["check", FIXTURE, "--window", "2", "--measured", f"grpo={log}"]) == 0
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in capsys.readouterr().out.splitlines()[2:]]
    assert [r[0] for r in rows] == ["1..2", "3..3", "all"]
    assert rows[1][3] == "0" and rows[1][5:] == ["—", "—", "1.00", "—", "—", "—", "—", "—"]
    assert rows[0][9:] == ["—", "—", "—", "—"]  # GRPO logs pass_count == num_candidates: not a filter rate
    assert rows[2][3] == "2" and rows[2][5] == "64"


def test_measured_errors_name_the_problem(tmp_path, capsys):
    log = _write_metrics(tmp_path / "run.jsonl", {5: (100, 1, 1, 8)})
    assert plan.main(["check", FIXTURE, "--measured", f"pc:3+13={log}"]) == 2
    assert "names none of the configurations" in capsys.readouterr().err
    assert plan.main(["check", FIXTURE, "--measured", f"grpo={log}"]) == 2
    assert "no training step logged in steps 1..3" in capsys.readouterr().err
    pc_log = _write_metrics(tmp_path / "pc.jsonl", {1: (900, 2, 3, 16)}, explore=384)
    assert plan.main(["check", FIXTURE, "--measured", f"grpo={pc_log}"]) == 2
    assert "has pilot rollouts, so it is not a run of GRPO n=16" in capsys.readouterr().err
    grpo_log = _write_metrics(tmp_path / "grpo.jsonl", {1: (512, 1, 32, 32)}, explore=0)
    assert plan.main(["check", FIXTURE, "--measured", f"pc:4+12={grpo_log}"]) == 2
    assert "has no pilot rollouts, so it is not a run of PC 4+12" in capsys.readouterr().err
    assert plan.main(["check", FIXTURE, "--measured", "grpo"]) == 2
    assert "expected KIND=METRICS" in capsys.readouterr().err
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}}) + "\n")
    assert plan.main(["check", FIXTURE, "--measured", f"grpo={bare}"]) == 2
    assert "num_rollouts_sample" in capsys.readouterr().err
    assert plan.main(["check", FIXTURE, "--window", "0", "--measured", f"grpo={log}"]) == 2


def test_pass_rates_by_source_and_histogram(tmp_path, capsys):
    rows = [json.loads(line) for line in open(os.path.join(FIXTURE, "1.jsonl"))]
    for row in rows:  # two sources: even prompt ids "a", odd "b"
        row["data_source"] = "a" if row["prompt_id"] % 2 == 0 else "b"
    (tmp_path / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    png = tmp_path / "hist.png"
    assert plan.main(["sources", str(tmp_path), "--table", "--histogram", str(png)]) == 0
    lines = capsys.readouterr().out.splitlines()
    ids, seen, wins = read_pass_counts(step_files(str(tmp_path), (None, None)), "acc")
    rates = wins / seen
    for line, mask in ((lines[2], ids % 2 == 0), (lines[3], ids % 2 == 1), (lines[4], ids >= 0)):
        r = rates[mask]
        row = [c.strip() for c in line.strip("|").split("|")]
        assert row[2:] == [
            str(len(r)),
            f"{r.mean():.3f}",
            f"{(r == 0).mean():.2f}",
            f"{((r > 0) & (r < 1)).mean():.2f}",
            f"{(r == 1).mean():.2f}",
        ]
    assert [line.split("|")[2].strip() for line in lines[2:]] == ["a", "b", "all"]
    assert png.stat().st_size > 1000


def _two_source_dump(tmp_path) -> str:
    """The fixture's step 1 with two data sources: even prompt ids "a", odd "b"."""
    rows = [json.loads(line) for line in open(os.path.join(FIXTURE, "1.jsonl"))]
    for row in rows:
        row["data_source"] = "a" if row["prompt_id"] % 2 == 0 else "b"
    (tmp_path / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(tmp_path)


def test_sources_predict_a_mix_made_of_some_of_the_dumps_sources(tmp_path, capsys):
    dump = _two_source_dump(tmp_path)
    ids, seen, wins = read_pass_counts(step_files(dump, (None, None)), "acc")
    even = ids % 2 == 0
    args = ["--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12"]
    assert plan.main(["predict", dump, *args, "--sources", " a, "]) == 0  # spaces and an empty entry are ignored
    out = capsys.readouterr().out
    assert out.startswith(f"{even.sum()} prompts, {int(seen[even].sum())} rollouts") and "data sources a" in out
    subset, everything = (pass_rates(seen[m], wins[m], (0.0, 0.0)) for m in (even, ids >= 0))
    config = PilotCommit(4, 12, 8, 4)
    pc_row = next(line for line in out.splitlines() if line.startswith("| PC 4+12"))
    assert f"| {predict(subset, config).rollouts_per_step:.0f} |" in pc_row
    assert predict(subset, config).rollouts_per_step != predict(everything, config).rollouts_per_step
    # The comparison with a run predicts from the same subset.
    log = _write_metrics(tmp_path / "pc.jsonl", {1: (300, 2, 3, 16)}, explore=64)
    assert plan.main(["check", dump, *args, "--sources", "a", "--measured", f"pc:4+12={log}"]) == 0
    row = [c.strip() for c in capsys.readouterr().out.splitlines()[2].strip("|").split("|")]
    assert row[4] == f"{predict(subset, config).rollouts_per_step:.0f}"


def test_sources_errors(tmp_path, capsys):
    dump = _two_source_dump(tmp_path)
    assert plan.main(["predict", dump, "--sources", "a,c"]) == 2
    assert "--sources: no prompt of ['c'] in steps 1..1; the dump has ['a', 'b']" in capsys.readouterr().err


def test_screening_and_down_sampling_flags_reach_the_model_and_the_comparison(tmp_path, capsys):
    args = ["--train-batch-size", "4", "--gen-batch-size", "8", "--group-size", "16", "--pc", "4+12"]
    assert plan.main(["predict", FIXTURE, *args, "--screen-n", "2", "--downsample-n", "24"]) == 0
    out = capsys.readouterr().out
    _, seen, wins = read_pass_counts(step_files(FIXTURE, (None, None)), "acc")
    rates = pass_rates(seen, wins, (0.0, 0.0))
    for config in (GRPO(16, 4, 24), PilotCommit(4, 12, 8, 4, screen_n=2, downsample_n=24)):
        row = next(line for line in out.splitlines() if line.startswith(f"| {config.label} |"))
        assert f"| {predict(rates, config).rollouts_per_step:.0f} |" in row
    assert "| PC 4+12 of 24 G=8 screen 2 |" in out and "| GRPO n=16 of 24 |" in out
    # Against a screened run: the at-own-rate column uses the logged pass rate and the share not screened out.
    screened = {"filtering_stats/screened_out_count": 4}
    log = _write_metrics(tmp_path / "pc.jsonl", dict.fromkeys((1, 2, 3), (250, 2, 3, 16)), explore=40, **screened)
    assert plan.main(["check", FIXTURE, *args, "--screen-n", "2", "--measured", f"pc:4+12={log}"]) == 0
    row = [c.strip() for c in capsys.readouterr().out.splitlines()[2].strip("|").split("|")]
    want = predict_at_filter_rate(3 / 16, PilotCommit(4, 12, 8, 4, screen_n=2), screen_mixed=1 - 4 / 16)
    assert row[10:12] == ["0.188", f"{want.rollouts_per_step:.0f}"]
    assert plan.main(["predict", FIXTURE, *args, "--downsample-n", "8"]) == 2  # fewer generated than trained
    assert "algorithm.downsample.n=8" in capsys.readouterr().err


def test_a_run_must_match_the_stages_it_is_measured_against(tmp_path, capsys):
    args = ["--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12"]

    def log(name: str, **counters) -> str:
        return _write_metrics(tmp_path / name, {1: (200, 1, 2, 8)}, explore=32, **counters)

    off = {"filtering_stats/screened_out_count": 0, names.ROLLOUTS_DOWNSAMPLED: 0}
    unscreened = log("plain.jsonl", **off)
    screened = log("screened.jsonl", **{**off, names.SCREENED_OUT: 3})
    downsampled = log("pods.jsonl", **{**off, names.ROLLOUTS_DOWNSAMPLED: 96})
    for extra, path, message in (
        (["--screen-n", "2"], unscreened, "has no screened-out prompts"),
        ([], screened, "has screened-out prompts"),
        ([], downsampled, "has down-sampled rollouts"),
        (["--downsample-n", "24"], unscreened, "has no down-sampled rollouts"),
    ):
        assert plan.main(["check", FIXTURE, *args, *extra, "--measured", f"pc:4+12={path}"]) == 2
        assert message in capsys.readouterr().err
    assert plan.main(["check", FIXTURE, *args, "--screen-n", "2", "--measured", f"pc:4+12={screened}"]) == 0
    capsys.readouterr()
    # Without --pc the default grid keeps the splits whose pilot is longer than the screen.
    assert plan.main(["predict", FIXTURE, "--train-batch-size", "4", "--gen-batch-size", "8", "--screen-n", "4"]) == 0
    labels = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| PC")]
    assert labels == ["PC 8+8 G=8 screen 4"]
    assert plan.main(["predict", FIXTURE, "--train-batch-size", "4", "--screen-n", "8"]) == 2
    assert "no default split has a longer pilot" in capsys.readouterr().err


def test_simulated_runs_from_the_start_with_skipping_and_the_runs_prompt_count(capsys):

    args = ["--train-batch-size", "4", "--gen-batch-size", "8", "--group-size", "16", "--pc", "4+12"]
    sim = ["--simulate", "6", "--simulate-warmup", "0", "--simulate-runs", "3", "--prompts", "50", "--skip"]
    assert plan.main(["predict", FIXTURE, *args, *sim]) == 0
    out = capsys.readouterr().out
    assert "simulated (6 steps after 0, 3 run(s), 50 prompts drawn from these):" in out
    _, seen, wins = read_pass_counts(step_files(FIXTURE, (None, None)), "acc")
    rates = pass_rates(seen, wins, (0.0, 0.0))
    config = PilotCommit(4, 12, 8, 4)
    for skip in (None, SKIP):
        want = simulate(rates, config, steps=6, warmup=0, skip=skip, runs=3, prompts=50)
        assert f"| {want.label} | 16 | {want.rounds_per_step:.2f} | {want.pilot_rollouts_per_step:.0f} |" in out
    # Each of these only tunes the simulator: refused without it, naming the flag.
    for flag in (["--skip"], ["--prompts", "50"], ["--simulate-warmup", "0"], ["--simulate-runs", "2"]):
        assert plan.main(["predict", FIXTURE, *args, *flag]) == 2
        assert f"{flag[0]} set(s) the simulator: add --simulate STEPS" in capsys.readouterr().err
    assert plan.main(["predict", FIXTURE, *args, "--simulate", "2", "--prompts", "0"]) == 2


# ------------------------------------------------------------------ the commands and the options each refuses
def _out(argv, capsys) -> str:
    assert plan.main(argv) == 0
    return capsys.readouterr().out


def test_predict_command_and_the_options_it_refuses(capsys):
    args = [FIXTURE, "--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12", "--train-prompts", "10"]
    out = _out(["predict", *args], capsys)
    assert "16 prompts, 160 rollouts from steps 1..3 (3 dumped steps)" in out and "| PC 4+12 G=8 | 16 |" in out
    assert "note: PC 4+12 G=8:" in out and "recommended: " in out
    # Its own checks, now in its parser: the simulator's options need --simulate; --per-step excludes it.
    assert plan.main(["predict", FIXTURE, "--skip"]) == 2
    assert "--skip set(s) the simulator: add --simulate STEPS" in capsys.readouterr().err
    assert plan.main(["predict", FIXTURE, "--per-step", "--simulate", "5"]) == 2
    assert "--per-step predicts step by step" in capsys.readouterr().err
    for bad in (["--measured", "grpo=x.jsonl"], ["--window", "2"], ["--table"]):  # other commands' options
        assert plan.main(["predict", FIXTURE, *bad]) == 2
        assert "unrecognized arguments" in capsys.readouterr().err


def test_plan_simulates_the_knapsack_through_its_allocator_and_prices_it_per_1000_rollouts(capsys, monkeypatch):
    from recipe.pc.allocators import knapsack

    counts, size_commits = [], knapsack.size_commits
    monkeypatch.setattr(knapsack, "size_commits", lambda *a, **k: counts.append(a[2]) or size_commits(*a, **k))
    args = [FIXTURE, "--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12", "--per-1000"]
    args += ["--simulate", "5", "--simulate-warmup", "2", "--allocator", "knapsack"]
    for override in ("exploration.n=4", "knapsack.max_commit=24", "min_train_prompts=4"):
        args += ["--set", f"algorithm.{override}"]
    out = _out(["predict", *args, "--set", "actor_rollout_ref.rollout.n=12"], capsys)
    assert counts and max(counts) <= 4  # the allocator's own knapsack sized every round's commits
    assert out.count("| rollouts per informative group | informative groups per 1,000 rollouts |") == 2
    rows = {line.split(" | ")[0][2:]: line.strip("| ").split(" | ") for line in out.splitlines() if line[:2] == "| "}
    label = next(name for name in rows if name.startswith("knapsack n=12 G=8"))
    # Pilot-Commit's commit budget, 4 prompts x 12; per 1,000 rollouts, 1,000 / its rollouts per informative group.
    knap, pc = rows[label], rows["PC 4+12 G=8"]
    assert knap[4] == pc[4] == "48" and knap[1] == "16"
    for row in (knap, pc, rows["GRPO n=16"]):
        assert float(row[10]) == pytest.approx(1000 / float(row[9]), abs=0.2)
    assert _out(["predict", *args[:5]], capsys).count("per 1,000") == 0  # not asked: the tables as before


def test_check_command_and_the_options_it_refuses(tmp_path, capsys):
    log = _write_metrics(tmp_path / "pc.jsonl", {1: (300, 2, 3, 16), 2: (100, 1, 5, 8), 3: (200, 1, 4, 8)})
    args = [FIXTURE, "--train-batch-size", "4", "--gen-batch-size", "8", "--pc", "4+12", "--window", "2"]
    out = _out(["check", *args, "--measured", f"pc:4+12={log}"], capsys)
    assert out.splitlines()[0].startswith("| steps | configuration | run |") and len(out.splitlines()) == 5
    assert plan.main(["check", FIXTURE]) == 2
    assert "the following arguments are required: --measured" in capsys.readouterr().err
    for bad in (["--simulate", "5"], ["--train-prompts", "10"]):  # predict's options
        assert plan.main(["check", FIXTURE, "--measured", f"grpo={log}", *bad]) == 2
        assert "unrecognized arguments" in capsys.readouterr().err
    assert plan.main(["check", FIXTURE, "--measured", "pc:4-12=x.jsonl"]) == 2
    assert "argument --measured" in capsys.readouterr().err


def test_sources_command_prints_the_table_unless_only_a_histogram_is_asked_for(tmp_path, capsys):
    dump = _two_source_dump(tmp_path)
    table = _out(["sources", dump], capsys)
    assert table.splitlines()[0].startswith("| steps | data source | prompts |") and len(table.splitlines()) == 5
    assert table == _out(["sources", dump, "--table"], capsys)
    png = tmp_path / "hist.png"
    assert _out(["sources", dump, "--histogram", str(png)], capsys) == ""  # as the old --histogram alone
    assert png.stat().st_size > 1000
    assert _out(["sources", dump, "--table", "--histogram", str(png)], capsys) == table
    for bad in (["--pc", "4+12"], ["--sources", "a"], ["--per-step"]):  # predict's and check's options
        assert plan.main(["sources", dump, *bad]) == 2
        assert "unrecognized arguments" in capsys.readouterr().err


def test_a_command_line_without_a_command_or_with_an_old_flag_is_refused(capsys):
    """One form of each command line: the old form without a command, and its --by-source, are gone."""
    assert plan.main([FIXTURE, "--pc", "4+12"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert plan.main(["sources", FIXTURE, "--by-source"]) == 2
    assert "unrecognized arguments: --by-source" in capsys.readouterr().err


def test_defaults_are_the_trainer_yamls():
    from recipe.pc.settings import yaml_defaults

    algorithm = yaml_defaults().algorithm
    for command in (["predict", FIXTURE], ["check", FIXTURE, "--measured", "grpo=g.jsonl"]):
        args = plan.parse_args(command)
        assert (args.p_lower, args.p_upper) == (
            algorithm.diversity_threshold_lower,
            algorithm.diversity_threshold_upper,
        )
        assert args.max_off_steps == algorithm.buffer_max_off_steps
        assert args.max_num_gen_batches == algorithm.max_num_gen_batches
        assert args.metric == algorithm.agg_metric
