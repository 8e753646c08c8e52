"""PilotCommitDataset eviction and the last-integer reward."""

import pandas as pd
import pytest
from pc_standins import write_prompt_parquet
from support import compose_pc_config

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
