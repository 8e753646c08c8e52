"""PilotCommitDataset eviction and the last-integer reward."""

import numpy as np
import pandas as pd
import pytest

from recipe.pc.dataset import PilotCommitDataset
from recipe.pc.rewards.last_integer import compute_score, last_integer
from recipe.pc.testing import compose_pc_config
from recipe.pc.testing.standins import write_prompt_parquet


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


@pytest.mark.parametrize("truth", ["seven", "2.5", 2.5, "", "  ", None, True, [7]])
def test_last_integer_grades_a_truth_that_names_no_integer_as_wrong_never_raising(truth):
    assert compute_score("arith_l1", "7", truth, extra_info={"index": 3}) == {"score": 0.0, "acc": False, "pred": "7"}


@pytest.mark.parametrize("truth", ["7", 7, 7.0, "7.0", " 7 "])
def test_last_integer_reads_an_integer_truth_in_any_form(truth):
    assert compute_score("arith_l1", "so 7", truth)["acc"] is True
    assert last_integer("x" * 100000 + "42") == 42


# Row-level bad data, each graded: (reward_model as stored, what the grader sees). A null entry is a file-level
# struct's null row; the dataset gives it a null ground truth.
BAD_ROWS = [
    (None, None),
    ({"ground_truth": None, "style": "rule"}, None),
    ({"ground_truth": "", "style": "rule"}, ""),
    ({"ground_truth": "  \t", "style": "rule"}, "  \t"),
]


def test_rows_without_a_ground_truth_are_graded_wrong_by_verls_reward_managers(tmp_path, tokenizer):
    """The dataset's rows, bad ones included, through verl 0.9.1's own reward-loop managers
    (verl/experimental/reward_loop/reward_manager/{naive,dapo}.py run_single, which index
    ``reward_model["ground_truth"]``) with the arithmetic scripts' reward: each bad row is graded as wrong, none
    raises; a good row is graded right. (math_reward grades them alike: ``gold_text``.)"""
    import torch
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager.dapo import DAPORewardManager
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    path = write_prompt_parquet(str(tmp_path / "d.parquet"), [0.5] * (len(BAD_ROWS) + 1), first_id=6)
    frame = pd.read_parquet(path)
    frame["reward_model"] = [stored for stored, _ in BAD_ROWS] + [{"ground_truth": "7", "style": "rule"}]
    frame.to_parquet(path)
    rows = [load(path, tokenizer)[i] for i in range(len(BAD_ROWS) + 1)]
    assert [row["reward_model"]["ground_truth"] for row in rows] == [seen for _, seen in BAD_ROWS] + ["7"]

    response_ids = torch.tensor([tokenizer.encode("7")])
    config = compose_pc_config([])
    for manager_cls in (NaiveRewardManager, DAPORewardManager):
        manager = manager_cls(config, tokenizer, compute_score)
        results = []
        for row in rows:
            item = DataProto.from_single_dict(
                {
                    "responses": response_ids,
                    "attention_mask": torch.ones_like(response_ids),
                    "data_source": np.array([row["data_source"]], dtype=object),
                    "reward_model": np.array([row["reward_model"]], dtype=object),
                    "extra_info": np.array([dict(row["extra_info"])], dtype=object),
                }
            )
            results.append(manager.loop.run_until_complete(manager.run_single(item)))
        accs = [r["reward_extra_info"]["acc"] for r in results]
        assert accs == [False] * len(BAD_ROWS) + [True], manager_cls.__name__
        assert results[-1]["reward_score"] > results[0]["reward_score"]


def test_last_integer_compares_a_long_integer_truth_exactly():
    big = "12345678901234567891"  # beyond a float's 53 bits: read through float it would match its neighbours
    assert compute_score("arith_l1", f"so {big}", big)["acc"] is True
    assert compute_score("arith_l1", f"so {int(big) + 1}", big)["acc"] is False
