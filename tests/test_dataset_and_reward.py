"""PilotCommitDataset eviction, the last-integer reward, and the arithmetic data script."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, compose_pc_config
from pc_standins import write_prompt_parquet

from recipe.pc.dataset import PilotCommitDataset
from recipe.pc.rewards.last_integer import compute_score, last_integer


def load(path, tokenizer):
    cfg = compose_pc_config([f"data.train_files={path}", "data.filter_overlong_prompts=False"])
    return PilotCommitDataset(data_files=path, tokenizer=tokenizer, config=cfg.data)


def test_eviction_shrinks_length_and_indexing(tmp_path, tokenizer):
    path = write_prompt_parquet(str(tmp_path / "d.parquet"), [0.5] * 6, first_id=100)
    ds = load(path, tokenizer)
    assert len(ds) == 6 and ds.prompt_ids.tolist() == list(range(100, 106))
    assert ds.evict([101, 104, 999]) == 2
    assert len(ds) == 4 and ds.num_rows_total == 6
    assert [ds[i]["index"] for i in range(len(ds))] == [100, 102, 103, 105]
    assert ds.evicted_ids == {101, 104, 999}
    assert ds.evict([]) == 0


def test_rows_without_prompt_id_are_named(tmp_path, tokenizer):
    path = write_prompt_parquet(str(tmp_path / "d.parquet"), [0.5] * 3)
    frame = pd.read_parquet(path)
    frame.at[1, "extra_info"] = {"index": None, "success_prob": 0.5}
    frame.to_parquet(path)
    with pytest.raises(ValueError, match=r"rows \[1\] have no extra_info.index"):
        load(path, tokenizer)


@pytest.mark.parametrize(
    "response, truth, acc, pred",
    [
        ("3 + 4 = 7", "7", True, "7"),
        ("The answer is 1,234.", "1234", True, "1234"),
        ("It is -5", "-5", True, "-5"),
        ("12 then 13", "12", False, "13"),
        ("no digits here", "4", False, ""),
        ("", "0", False, ""),
    ],
)
def test_last_integer_reward(response, truth, acc, pred):
    result = compute_score("arith_l1", response, truth)
    assert result == {"score": 1.0 if acc else 0.0, "acc": acc, "pred": pred}


def test_last_integer_reward_rejects_non_integer_truth():
    with pytest.raises(ValueError, match="not an integer"):
        compute_score("arith_l1", "7", "seven", extra_info={"index": 3})
    assert last_integer("x" * 100000 + "42") == 42


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
