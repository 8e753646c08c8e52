"""The data processors run as scripts (data/process_*.py, data/e2e_process_data.sh): their command lines, what
they write where, and one-line errors for bad arguments; and the one-GPU runs' arithmetic data
(data/process_arithmetic.py). The processors' functions are tested in-process in tests/unit/test_math_data.py."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from support import DEEPMATH_ROWS, ROOT, fixture, plain_rows, read_rows, write_jsonl, write_parquet

sys.path.insert(0, os.path.join(ROOT, "data"))
import process_eval  # noqa: E402


def test_as_authors_cli_writes_its_own_folder_and_prints_the_counts(tmp_path):
    env = {**os.environ, "DATA_DIR": str(tmp_path / "data")}
    out = run_cli("process_polaris.py", "--as-authors", "--local_path", fixture("polaris.jsonl"), env=env)
    assert out.returncode == 0, out.stderr
    assert len(plain_rows(tmp_path / "data" / "polaris_53k_as_authors" / "train.parquet")) == 6
    assert "polaris_53k: wrote 6 train rows to" in out.stdout
    out = run_cli("process_polaris.py", "--local_path", fixture("polaris.jsonl"), env=env)
    assert out.returncode == 0, out.stderr
    assert len(plain_rows(tmp_path / "data" / "polaris_53k" / "train.parquet")) == 3
    assert (
        "polaris_53k train: vs the authors' processing: 5 of their 6 rows change (3 rows ours); rows: "
        "dropped:duplicate_problem=1, dropped:empty_problem=1, dropped:missing_answer=1, answer_text=1, index=1, "
        "problem_text=1; metadata only: difficulty=1, original_id=3"
    ) in out.stdout


def test_as_authors_eval_and_deepmath_cli_default_folders(tmp_path):
    env = {**os.environ, "DATA_DIR": str(tmp_path / "data")}
    args = ["--as-authors", "--dataset", "olympiad_bench", "--local_path", fixture("olympiad.jsonl")]
    out = run_cli("process_eval.py", *args, env=env)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "data" / "math_test_as_authors" / "oylmpiad-bench-nosystem-boxed.parquet").exists()
    out = run_cli("process_deepmath.py", "--as-authors", "--local_path", fixture("deepmath_prefiltered"), env=env)
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "data" / "deepmath_103k_prefiltered_as_authors"
    assert [len(plain_rows(folder / f"{split}.parquet")) for split in ("train", "test")] == [8, 2]
    assert "deepmath train: vs the authors' processing: 6 of their 8 rows change" in out.stdout


def test_as_authors_refuses_a_row_their_processor_fails_on_in_one_line(tmp_path):
    source = write_jsonl(tmp_path / "p.jsonl", [{"problem": None, "answer": "1", "difficulty": "1/8"}])
    out = run_cli("process_polaris.py", "--as-authors", "--local_path", source, "--out_dir", str(tmp_path / "o"))
    assert_one_line_error(out, "process_polaris.py", "Polaris-53K source row 0: problem None is not a string")


# ---------------------------------------------------------------------------------------------------
# Command lines


def run_script(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_eval_cli_writes_the_named_dataset(tmp_path):
    source = write_parquet(
        tmp_path / "amc.parquet",
        [{"id": 5, "question": "Q one", "answer": "3"}, {"id": 5, "question": "Q dup", "answer": "3"}],
    )
    out = run_script(
        "data/process_eval.py", "--dataset", "amc_2023", "--local_path", source, "--out_dir", str(tmp_path / "m")
    )
    assert out.returncode == 0, out.stderr
    assert "amc_2023: wrote 32 test rows to" in out.stdout and "duplicate_id=1" in out.stdout
    assert "amc_2023: dropped 1 of 2 rows" in out.stderr  # the logged per-reason count
    rows = read_rows(tmp_path / "m" / "amc-2023-nosystem-boxed.parquet")
    assert len(rows) == 32 and {r["extra_info"]["index"] for r in rows} == {0}


def test_eval_cli_refuses_a_local_path_for_all_datasets(tmp_path):
    out = run_script("data/process_eval.py", "--local_path", "x.parquet", "--out_dir", str(tmp_path))
    assert out.returncode == 2 and "name it with --dataset" in out.stderr


def test_polaris_cli_uses_data_dir_by_default(tmp_path):
    source = write_jsonl(tmp_path / "p.jsonl", [{"problem": "P", "answer": "1", "difficulty": "1/8"}])
    out = subprocess.run(
        [sys.executable, "data/process_polaris.py", "--local_path", source],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DATA_DIR": str(tmp_path / "data")},
    )
    assert out.returncode == 0, out.stderr
    rows = read_rows(tmp_path / "data" / "polaris_53k" / "train.parquet")
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["1"]


def test_e2e_script_is_valid_bash_and_runs_every_processor():
    script = os.path.join(ROOT, "data", "e2e_process_data.sh")
    assert subprocess.run(["bash", "-n", script], capture_output=True).returncode == 0
    text = open(script).read()
    assert "set -euo pipefail" in text
    for name in ("process_deepmath.py", "process_polaris.py", "process_dapo17k.py", "process_eval.py"):
        assert name in text
    for dataset in process_eval.PROCESSORS:
        assert dataset in text


# ---------------------------------------------------------------------------------------------------
# Bad arguments: one line, exit 2, nothing imported or downloaded first

PROCESSOR_SCRIPTS = ("process_deepmath.py", "process_polaris.py", "process_dapo17k.py", "process_eval.py")


@pytest.fixture
def no_datasets(tmp_path):
    """A PYTHONPATH whose ``datasets`` module fails on import: a command that gets as far as loading data fails."""
    folder = tmp_path / "poisoned"
    folder.mkdir()
    (folder / "datasets.py").write_text(
        "raise ImportError('datasets was imported: the command went on to load data')\n"
    )
    return {**os.environ, "PYTHONPATH": str(folder)}


def run_cli(script, *args, env=None):
    return subprocess.run(
        [sys.executable, os.path.join("data", script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def assert_one_line_error(out, script, message):
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith(f"{script}: error: ")
    assert message in out.stderr


@pytest.mark.parametrize("script", PROCESSOR_SCRIPTS)
def test_help_prints_usage_without_loading_anything(script, no_datasets):
    out = run_cli(script, "--help", env=no_datasets)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: ") and "--local_path" in out.stdout and "--out_dir" in out.stdout


@pytest.mark.parametrize("script", PROCESSOR_SCRIPTS)
def test_a_missing_local_path_is_refused_before_loading(script, no_datasets, tmp_path):
    missing = str(tmp_path / "nope.parquet")
    extra = ["--dataset", "math_500"] if script == "process_eval.py" else []
    out = run_cli(script, *extra, "--local_path", missing, "--out_dir", str(tmp_path / "out"), env=no_datasets)
    assert_one_line_error(out, script, f"--local_path {missing}: no such file or folder")


@pytest.mark.parametrize(
    "script, args, message",
    [
        ("process_eval.py", ["--repeat", "0"], "--repeat must be at least 1, got 0"),
        ("process_eval.py", ["--repeat", "-3"], "--repeat must be at least 1, got -3"),
        ("process_eval.py", ["--dataset", "aime"], "argument --dataset: invalid choice: 'aime'"),
        ("process_deepmath.py", ["--test_size", "0"], "--test_size must be at least 1, got 0"),
        ("process_deepmath.py", ["--test_size", "-5"], "--test_size must be at least 1, got -5"),
        ("process_deepmath.py", ["--test_size", "ten"], "argument --test_size: invalid int value: 'ten'"),
        ("process_deepmath.py", ["--seed", "-1"], "--seed must be >= 0"),
        (
            "process_deepmath.py",
            ["--prefiltered", "--test_size", "10"],
            "--test_size cannot be used with --prefiltered",
        ),
        ("process_deepmath.py", ["--prefiltered", "--seed", "3"], "--seed cannot be used with --prefiltered"),
        ("process_deepmath.py", ["--as-authors", "--test_size", "9"], "--test_size cannot be used with --as-authors"),
        ("process_deepmath.py", ["--as-authors", "--local_path", "{parquet}"], "--as-authors reads a folder with"),
        ("process_polaris.py", ["--local_path", "{txt}"], "unsupported file type"),
        ("process_dapo17k.py", ["--out_dir", "{txt}"], "exists and is not a folder"),
        ("process_deepmath.py", ["--prefiltered", "--local_path", "{parquet}"], "reads a folder with train and test"),
    ],
)
def test_bad_arguments_get_one_line_errors(script, args, message, no_datasets, tmp_path):
    files = {"txt": tmp_path / "notes.txt", "parquet": tmp_path / "d.parquet"}
    for path in files.values():
        path.write_text("x")
    args = [arg.format(**{name: str(path) for name, path in files.items()}) for arg in args]
    out_dir = [] if "--out_dir" in args else ["--out_dir", str(tmp_path / "out")]
    out = run_cli(script, *args, *out_dir, env=no_datasets)
    assert_one_line_error(out, script, message)


def test_a_test_size_larger_than_the_data_is_a_one_line_error(tmp_path):
    source = write_parquet(tmp_path / "deepmath.parquet", DEEPMATH_ROWS)
    out = run_cli("process_deepmath.py", "--local_path", source, "--test_size", "8", "--out_dir", str(tmp_path / "o"))
    assert_one_line_error(out, "process_deepmath.py", "--test_size 8 must be between 1 and 7")
    assert not (tmp_path / "o").exists()


def test_a_bad_source_row_is_a_one_line_error_naming_the_row(tmp_path):
    source = write_jsonl(tmp_path / "ob.jsonl", [{"id": 1, "question": "Q", "final_answer": "5"}])
    out = run_cli("process_eval.py", "--dataset", "olympiad_bench", "--local_path", source, "--out_dir", str(tmp_path))
    assert_one_line_error(out, "process_eval.py", "olympiad_bench source row 0, column final_answer: expected a list")


@pytest.fixture
def fake_python(tmp_path):
    """An interpreter stand-in that only records its arguments, one call a line."""
    calls = tmp_path / "calls.txt"
    script = tmp_path / "fake_python"
    script.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n')
    script.chmod(0o755)
    return script, calls


def run_e2e(args, env):
    script = os.path.join("data", "e2e_process_data.sh")
    return subprocess.run(["bash", script, *args], cwd=ROOT, capture_output=True, text=True, env=env)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_e2e_script_help_prints_usage_and_runs_nothing(flag, fake_python, tmp_path):
    script, calls = fake_python
    env = {**os.environ, "PYTHON": str(script), "DATA_DIR": str(tmp_path / "data")}
    out = run_e2e([flag], env)
    assert out.returncode == 0 and out.stdout.startswith("Usage: ")
    assert "DATA_DIR" in out.stdout and "deepmath_103k_prefiltered" in out.stdout
    assert not calls.exists()


def test_e2e_script_refuses_arguments_and_otherwise_runs_each_processor(fake_python, tmp_path):
    script, calls = fake_python
    env = {**os.environ, "PYTHON": str(script), "DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run(
        ["bash", "data/e2e_process_data.sh", "--out"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert out.returncode == 2 and "unexpected argument '--out'" in out.stderr and not calls.exists()
    out = subprocess.run(["bash", "data/e2e_process_data.sh"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 2 * (3 + len(process_eval.PROCESSORS)) + 1
    assert lines[0].endswith(f"process_deepmath.py --out_dir {tmp_path}/data/deepmath_103k_prefiltered --prefiltered")
    assert lines[1].endswith(f"process_deepmath.py --out_dir {tmp_path}/data/deepmath_103k_filtered")
    # The authors' rows for PRESET=reference, each in its _as_authors folder (train_scripts/common.sh reads them).
    data = f"{tmp_path}/data"
    as_authors = [line.split("/data/", 1)[1] for line in lines if "--as-authors" in line]
    assert as_authors == [
        f"process_deepmath.py --as-authors --out_dir {data}/deepmath_103k_prefiltered_as_authors",
        f"process_polaris.py --as-authors --out_dir {data}/polaris_53k_as_authors",
        f"process_dapo17k.py --as-authors --out_dir {data}/dapo_formatted_as_authors",
        *(
            f"process_eval.py --as-authors --dataset {name} --out_dir {data}/math_test_as_authors"
            for name in process_eval.PROCESSORS
        ),
    ]
    common = open(os.path.join(ROOT, "train_scripts", "common.sh")).read()
    reference = common.split("  reference)", 1)[1].split(";;", 1)[0]
    for folder in ("deepmath_103k_prefiltered_as_authors", "polaris_53k_as_authors", "math_test_as_authors"):
        assert f"$DATA_DIR/{folder}/" in reference


def run_arithmetic(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "data/process_arithmetic.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_arithmetic_data_script(tmp_path):
    out = run_arithmetic(
        "--out_dir", str(tmp_path), "--levels", "1", "2", "5", "--train", "120", "--test", "30", "--seed", "3"
    )
    assert out.returncode == 0, out.stderr
    train, test = pd.read_parquet(tmp_path / "train.parquet"), pd.read_parquet(tmp_path / "test.parquet")
    assert len(train) == 120 and len(test) == 30
    assert set(train.data_source) == {"arith_l1", "arith_l2", "arith_l5"}
    ids = np.array([e["index"] for e in pd.concat([train, test]).extra_info])
    assert len(set(ids.tolist())) == 150
    questions = [e["question"] for e in pd.concat([train, test]).extra_info]
    assert len(set(questions)) == 150  # no problem in both splits
    for row in train.itertuples():
        q = row.prompt[0]["content"]
        a, op, b = q.removeprefix("What is ").split("?")[0].split()
        assert int(row.reward_model["ground_truth"]) == eval(f"{a}{op}{b}")  # noqa: S307 - trusted test data


def test_arithmetic_data_script_refuses_more_problems_than_a_level_has(tmp_path):
    out = run_arithmetic("--out_dir", str(tmp_path), "--levels", "1", "--train", "200", "--test", "10")
    assert out.returncode != 0 and "levels [1] hold only 90 distinct problems; asked for 200" in out.stderr


def test_arithmetic_levels_share_evenly_where_they_can(tmp_path):
    out = run_arithmetic("--out_dir", str(tmp_path), "--train", "3000", "--test", "200")
    assert out.returncode == 0, out.stderr
    train, test = pd.read_parquet(tmp_path / "train.parquet"), pd.read_parquet(tmp_path / "test.parquet")
    assert test.data_source.value_counts().to_dict() == {f"arith_l{i}": 40 for i in range(1, 6)}
    # one-digit addition has 100 problems and 2-digit x 1-digit 720: they give what they have left
    assert train.data_source.value_counts().to_dict() == {
        "arith_l1": 60,
        "arith_l2": 754,
        "arith_l3": 753,
        "arith_l4": 680,
        "arith_l5": 753,
    }
