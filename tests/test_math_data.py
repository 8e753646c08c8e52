"""The math data processors (data/process_*.py) on small local fixtures: no hub access."""

import json
import logging
import os
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, compose_pc_config

# The processors are scripts that import their sibling math_common, so import them the same way.
sys.path.insert(0, os.path.join(ROOT, "data"))
import math_common  # noqa: E402
import process_dapo17k  # noqa: E402
import process_deepmath  # noqa: E402
import process_eval  # noqa: E402
import process_polaris  # noqa: E402

from recipe.pc.dataset import PilotCommitDataset  # noqa: E402

SUFFIX = "\n\nLet's think step by step and output the final answer within \\boxed{}."
NO_DROPS = {"empty_problem": 0, "missing_answer": 0, "duplicate_id": 0, "duplicate_problem": 0}


def write_parquet(path, rows):
    pd.DataFrame(rows).to_parquet(path, index=False)
    return str(path)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def read_rows(path):
    return pd.read_parquet(path).to_dict("records")


def assert_record_schema(path, extra_fields=()):
    """One struct type for the whole file, with the exact spec §11 fields and types."""
    schema = pq.read_schema(path)
    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    assert schema.field("data_source").type == pa.string()
    assert schema.field("prompt").type == pa.list_(message)
    assert schema.field("ability").type == pa.string()
    assert schema.field("reward_model").type == pa.struct([("ground_truth", pa.string()), ("style", pa.string())])
    expected_extra = [
        ("index", pa.int64()),
        ("original_id", pa.string()),
        ("raw_problem", pa.string()),
        ("split", pa.string()),
        ("difficulty", pa.string()),
        *extra_fields,
    ]
    assert schema.field("extra_info").type == pa.struct(expected_extra)
    assert schema.names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]


def assert_prompt(row, problem):
    assert list(row["prompt"]) == [{"role": "system", "content": ""}, {"role": "user", "content": problem + SUFFIX}]
    assert row["extra_info"]["raw_problem"] == problem
    assert row["reward_model"]["style"] == "rule"


# ---------------------------------------------------------------------------------------------------
# math_common


def test_clean_problems_counts_and_logs_every_drop_reason(caplog):
    problems = [
        math_common.SourceProblem(0, " What is 1+1? ", "2", source_id="a"),
        math_common.SourceProblem(1, "   ", "3", source_id="b"),
        math_common.SourceProblem(2, "What is 2+2?", None, source_id="c"),
        math_common.SourceProblem(3, "What is 3+3?", float("nan"), source_id="d"),
        math_common.SourceProblem(4, "What is 4+4?", "  ", source_id="e"),
        math_common.SourceProblem(5, "Another problem", "7", source_id="a"),
        math_common.SourceProblem(6, None, "7", source_id="f"),
        math_common.SourceProblem(7, "What is 5+5?", 10.0, source_id="g"),
    ]
    with caplog.at_level(logging.INFO):
        kept, counts = math_common.clean_problems(problems, "toy")
    assert counts == {"empty_problem": 2, "missing_answer": 3, "duplicate_id": 1, "duplicate_problem": 0}
    assert [(p.position, p.problem, p.answer) for p in kept] == [(0, "What is 1+1?", "2"), (7, "What is 5+5?", "10")]
    assert "toy: dropped 6 of 8 rows (empty_problem=2, missing_answer=3, duplicate_id=1" in caplog.text
    assert "toy: missing_answer at source rows [2, 3, 4]" in caplog.text


def test_clean_problems_without_ids_dedupes_by_problem_text():
    problems = [
        math_common.SourceProblem(0, "Same problem.", "1"),
        math_common.SourceProblem(1, "Same problem.  ", "2"),
        math_common.SourceProblem(2, "Other problem.", "1"),
    ]
    kept, counts = math_common.clean_problems(problems, "toy")
    assert counts == {**NO_DROPS, "duplicate_problem": 1}
    assert [p.position for p in kept] == [0, 2]


def test_answer_to_str_rejects_unknown_types_naming_the_row():
    assert math_common.answer_to_str(27.0, "x") == "27"
    assert math_common.answer_to_str(0.5, "x") == "0.5"
    with pytest.raises(ValueError, match="toy source row 4: answer"):
        math_common.clean_problems([math_common.SourceProblem(4, "p", ["1"])], "toy")


def test_load_rows_from_a_folder_reads_the_split_files_and_names_missing_columns(tmp_path):
    folder = tmp_path / "ds"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", [{"problem": "a", "answer": "1"}])
    write_jsonl(folder / "test.jsonl", [{"problem": "b", "answer": "2"}, {"problem": "c", "answer": "3"}])
    rows = math_common.load_rows("hub/unused", "test", ["problem", "answer"], local_path=str(folder))
    assert rows == [{"problem": "b", "answer": "2"}, {"problem": "c", "answer": "3"}]
    with pytest.raises(ValueError, match=r"missing column\(s\) \['solution'\]"):
        math_common.load_rows("hub/unused", "train", ["problem", "solution"], local_path=str(folder))
    with pytest.raises(FileNotFoundError, match="no data file for split 'validation'"):
        math_common.load_rows(
            "hub/unused", "validation", ["problem"], local_path=str(folder), split_files_required=True
        )
    with pytest.raises(FileNotFoundError, match="does not exist"):
        math_common.load_rows("hub/unused", "train", ["problem"], local_path=str(tmp_path / "nope.parquet"))


def test_write_parquet_refuses_an_empty_dataset(tmp_path):
    with pytest.raises(ValueError, match="no rows left to write"):
        math_common.write_parquet([], str(tmp_path / "empty.parquet"))
    assert not (tmp_path / "empty.parquet").exists()


def test_default_out_dir_follows_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    assert math_common.default_out_dir("polaris_53k") == os.path.join(str(tmp_path), "polaris_53k")
    monkeypatch.delenv("DATA_DIR")
    assert math_common.default_out_dir("x") == os.path.join(os.path.expanduser("~"), "data", "x")


# ---------------------------------------------------------------------------------------------------
# DeepMath

DEEPMATH_ROWS = [
    {"question": "What is 2+2", "final_answer": "4", "difficulty": 3.0},  # gets a period
    {"question": "Is 7 prime?", "final_answer": "Yes", "difficulty": 2.0},  # binary
    {"question": "Compute 3*3.", "final_answer": "9", "difficulty": 5.5},
    {"question": "", "final_answer": "1", "difficulty": 1.0},  # empty problem
    {"question": "Find x:", "final_answer": None, "difficulty": 4.0},  # missing answer
    {"question": "What is 2+2", "final_answer": "4", "difficulty": 3.0},  # duplicate text
    {"question": "Is 2 even?", "final_answer": "$\\text{False}$", "difficulty": 2.0},  # binary, wrapped
    {"question": "Is 1 < 2?", "final_answer": "\\textbf{TRUE}.", "difficulty": 2.0},  # binary, wrapped
    {"question": "Solve x^2 = -1 over R", "final_answer": "No solution", "difficulty": 6.0},
    {"question": "Give a prime!", "final_answer": "2", "difficulty": 1.5},
    {"question": "Let n = 5:", "final_answer": "5", "difficulty": 2.5},
    {"question": "What is 10/2?", "final_answer": "5", "difficulty": 2.0},
    {"question": "What is 6*7?", "final_answer": "42", "difficulty": 2.0},
    {"question": "  What is 1-1?  ", "final_answer": "0", "difficulty": 9.0},
]
DEEPMATH_KEPT = {  # source position -> (problem as prompted, answer, difficulty)
    0: ("What is 2+2.", "4", "3.0/9.0"),
    2: ("Compute 3*3.", "9", "5.5/9.0"),
    8: ("Solve x^2 = -1 over R.", "No solution", "6.0/9.0"),
    9: ("Give a prime!", "2", "1.5/9.0"),
    10: ("Let n = 5:", "5", "2.5/9.0"),
    11: ("What is 10/2?", "5", "2.0/9.0"),
    12: ("What is 6*7?", "42", "2.0/9.0"),
    13: ("What is 1-1?", "0", "9.0/9.0"),
}


@pytest.mark.parametrize(
    "answer, binary",
    [
        ("yes", True),
        ("No", True),
        (" TRUE ", True),
        ("False.", True),
        ("\\text{Yes}", True),
        ("$\\text{no}$", True),
        ("$$\\mathrm{true}$$", True),
        ("\\(\\text{False}\\)", True),
        ("No solution", False),
        ("yes and no", False),
        ("\\text{Yes} or \\text{No}", False),
        ("0", False),
        ("Nope", False),
    ],
)
def test_deepmath_binary_answer_rule(answer, binary):
    assert process_deepmath.is_binary_answer(answer) is binary


def test_deepmath_filters_then_splits_deterministically(tmp_path):
    source = write_parquet(tmp_path / "deepmath.parquet", DEEPMATH_ROWS)
    result = process_deepmath.process_deepmath(str(tmp_path / "out"), local_path=source, test_size=3, seed=7)
    assert result.dropped == {
        "empty_problem": 1,
        "missing_answer": 1,
        "duplicate_id": 0,
        "duplicate_problem": 1,
        "binary_answer": 3,
    }
    assert result.rows == {"train": 5, "test": 3}
    assert result.outputs == {split: str(tmp_path / "out" / f"{split}.parquet") for split in ("train", "test")}
    train, test = read_rows(result.outputs["train"]), read_rows(result.outputs["test"])
    for split, rows in (("train", train), ("test", test)):
        assert_record_schema(result.outputs[split])
        assert [r["extra_info"]["index"] for r in rows] == list(range(len(rows)))
        positions = [int(r["extra_info"]["original_id"]) for r in rows]
        assert positions == sorted(positions)  # source order kept inside each split
        for row, position in zip(rows, positions, strict=True):
            problem, answer, difficulty = DEEPMATH_KEPT[position]
            assert_prompt(row, problem)
            assert row["data_source"] == "deepmath" and row["ability"] == "math"
            assert row["reward_model"]["ground_truth"] == answer
            assert row["extra_info"]["difficulty"] == difficulty
            assert row["extra_info"]["split"] == split
    train_ids = {r["extra_info"]["original_id"] for r in train}
    test_ids = {r["extra_info"]["original_id"] for r in test}
    assert not train_ids & test_ids
    assert train_ids | test_ids == {str(p) for p in DEEPMATH_KEPT}

    again = process_deepmath.process_deepmath(str(tmp_path / "again"), local_path=source, test_size=3, seed=7)
    assert [r["extra_info"]["original_id"] for r in read_rows(again.outputs["test"])] == [
        r["extra_info"]["original_id"] for r in test
    ]


def test_deepmath_refuses_a_test_split_that_leaves_no_train_rows(tmp_path):
    source = write_parquet(tmp_path / "deepmath.parquet", DEEPMATH_ROWS)
    with pytest.raises(ValueError, match="--test_size 8 must be between 1 and 7"):
        process_deepmath.process_deepmath(str(tmp_path / "out"), local_path=source, test_size=8)


def test_deepmath_prefiltered_keeps_its_splits_and_original_index(tmp_path):
    folder = tmp_path / "prefiltered"
    folder.mkdir()
    write_parquet(
        folder / "train-00000-of-00001.parquet",
        [
            {"question": "A?", "final_answer": "1", "difficulty": 4.0, "original_index": 10},
            {"question": "Is B true?", "final_answer": "Yes", "difficulty": 5.0, "original_index": 11},
            {"question": "A again", "final_answer": "1", "difficulty": 4.0, "original_index": 10},
        ],
    )
    write_parquet(
        folder / "test-00000-of-00001.parquet",
        [{"question": "C", "final_answer": "3", "difficulty": 7.0, "original_index": 99}],
    )
    result = process_deepmath.process_deepmath(str(tmp_path / "out"), local_path=str(folder), prefiltered=True)
    assert result.dropped == {**NO_DROPS, "duplicate_id": 1}
    train, test = read_rows(result.outputs["train"]), read_rows(result.outputs["test"])
    assert [(r["extra_info"]["original_id"], r["reward_model"]["ground_truth"]) for r in train] == [
        ("10", "1"),
        ("11", "Yes"),  # already filtered upstream: no binary filter here
    ]
    assert [r["extra_info"]["index"] for r in train] == [0, 1]
    assert_prompt(test[0], "C.")
    assert test[0]["extra_info"] == {
        "index": 0,
        "original_id": "99",
        "raw_problem": "C.",
        "split": "test",
        "difficulty": "7.0/9.0",
    }


def test_deepmath_prefiltered_needs_both_split_files(tmp_path):
    folder = tmp_path / "prefiltered"
    folder.mkdir()
    write_parquet(folder / "train.parquet", [{"question": "A?", "final_answer": "1", "difficulty": 4.0}])
    with pytest.raises(FileNotFoundError, match="no data file for split 'test'"):
        process_deepmath.process_deepmath(str(tmp_path / "out"), local_path=str(folder), prefiltered=True)


# ---------------------------------------------------------------------------------------------------
# Polaris


def test_polaris_copies_problem_answer_and_difficulty(tmp_path):
    source = write_jsonl(
        tmp_path / "polaris.jsonl",
        [
            {"problem": "Find the sum of 1 and 2.", "answer": "3", "difficulty": "7/8"},
            {"problem": "Compute $\\frac{1}{2}+\\frac{1}{3}$", "answer": "\\frac{5}{6}", "difficulty": "2/8"},
            {"problem": "No answer here", "answer": None, "difficulty": "1/8"},
            {"problem": "   ", "answer": "1", "difficulty": "1/8"},
            {"problem": "Find the sum of 1 and 2.", "answer": "3", "difficulty": "7/8"},
            {"problem": "How many primes are below 10?", "answer": 4, "difficulty": None},
        ],
    )
    result = process_polaris.process_polaris(str(tmp_path / "out"), local_path=source)
    assert result.dropped == {"empty_problem": 1, "missing_answer": 1, "duplicate_id": 0, "duplicate_problem": 1}
    assert result.rows == {"train": 3}
    assert result.outputs["train"] == str(tmp_path / "out" / "train.parquet")
    assert_record_schema(result.outputs["train"])
    rows = read_rows(result.outputs["train"])
    expected = [
        ("Find the sum of 1 and 2.", "3", "7/8", "0"),
        ("Compute $\\frac{1}{2}+\\frac{1}{3}$", "\\frac{5}{6}", "2/8", "1"),
        ("How many primes are below 10?", "4", "", "5"),
    ]
    for index, (row, (problem, answer, difficulty, original_id)) in enumerate(zip(rows, expected, strict=True)):
        assert_prompt(row, problem)
        assert row["data_source"] == "polaris_53k" and row["ability"] == "math"
        assert row["reward_model"]["ground_truth"] == answer
        assert row["extra_info"]["index"] == index
        assert (row["extra_info"]["difficulty"], row["extra_info"]["original_id"]) == (difficulty, original_id)
        assert row["extra_info"]["split"] == "train"


# ---------------------------------------------------------------------------------------------------
# DAPO-Math-17k


def dapo_row(problem, answer, uuid):
    content = process_dapo17k.ORIGINAL_PREFIX + "\n\n" + problem + "\n\n" + process_dapo17k.ORIGINAL_SUFFIX
    return {
        "data_source": "math_dapo",
        "prompt": [{"role": "user", "content": content}],
        "ability": "MATH",
        "reward_model": {"ground_truth": answer, "style": "rule-lighteval/MATH_v2"},
        "extra_info": {"index": uuid},
    }


def test_dapo_dedupes_by_original_index_and_rewraps_the_prompt(tmp_path):
    problem_a = "Let $x$ satisfy $x + 1 = 3$.\n\nFind $x$."  # a blank line inside the problem survives
    problem_b = "Find the number of divisors of 12."
    rows = [dapo_row(problem_a, "2", "uuid-a")] * 4 + [dapo_row(problem_b, "6", "uuid-b")] * 3
    rows.insert(2, dapo_row("Problem with no answer.", "", "uuid-c"))
    rows.append({**dapo_row("x", "1", "uuid-d"), "prompt": [{"role": "user", "content": "Just solve: 1+0"}]})
    source = write_parquet(tmp_path / "dapo.parquet", rows)

    result = process_dapo17k.process_dapo(str(tmp_path / "out"), local_path=source)
    assert result.dropped == {**NO_DROPS, "missing_answer": 1, "duplicate_id": 5, "unrecognised_prompt": 1}
    assert result.outputs["train"] == str(tmp_path / "out" / "dapo-math-17k-nosystem-boxed-dedup.parquet")
    assert result.rows == {"train": 2}
    assert_record_schema(result.outputs["train"])
    out = read_rows(result.outputs["train"])
    for index, (row, (problem, answer, uuid)) in enumerate(
        zip(out, [(problem_a, "2", "uuid-a"), (problem_b, "6", "uuid-b")], strict=True)
    ):
        assert_prompt(row, problem)
        assert "Answer:" not in row["prompt"][1]["content"]
        assert row["data_source"] == "math_dapo" and row["ability"] == "MATH"
        assert row["reward_model"] == {"ground_truth": answer, "style": "rule"}
        assert row["extra_info"] == {
            "index": index,
            "original_id": uuid,
            "raw_problem": problem,
            "split": "train",
            "difficulty": "",
        }


def test_dapo_rejects_a_prompt_without_a_user_turn(tmp_path):
    row = {**dapo_row("p", "1", "u"), "prompt": [{"role": "system", "content": "hi"}]}
    source = write_parquet(tmp_path / "dapo.parquet", [row])
    with pytest.raises(ValueError, match="DAPO source row 0: prompt has 0 user turns"):
        process_dapo17k.process_dapo(str(tmp_path / "out"), local_path=source)


# ---------------------------------------------------------------------------------------------------
# Evaluation sets


def check_eval_output(result, name, file_stem, expected, copies):
    """``expected``: (problem, ground truth, original id) per kept problem, in source order."""
    path = result.outputs["test"]
    assert path.endswith(f"{file_stem}-nosystem-boxed.parquet")
    assert_record_schema(path, extra_fields=[("repeat", pa.int64())])
    rows = read_rows(path)
    assert result.rows == {"test": len(expected) * copies} and len(rows) == len(expected) * copies
    for position, row in enumerate(rows):
        copy, index = divmod(position, len(expected))
        problem, answer, original_id = expected[index]
        assert_prompt(row, problem)
        assert row["data_source"] == name and row["ability"] == "MATH"
        assert row["reward_model"]["ground_truth"] == answer
        assert row["extra_info"] == {
            "index": index,
            "original_id": original_id,
            "raw_problem": problem,
            "split": "test",
            "difficulty": "",
            "repeat": copy,
        }
    counts = pd.Series([r["extra_info"]["index"] for r in rows]).value_counts()
    assert set(counts.index) == set(range(len(expected))) and set(counts) == {copies}


def test_aime_2024_is_repeated_32_times_with_one_index_per_problem(tmp_path):
    source = write_parquet(
        tmp_path / "aime90.parquet",
        [
            {"id": "2024-I-1", "problem": "AIME problem one", "expected_answer": "204"},
            {"id": "2024-I-2", "problem": "AIME problem two", "expected_answer": "25"},
            {"id": "2024-I-1", "problem": "AIME problem one (copy)", "expected_answer": "204"},
            {"id": "2024-I-3", "problem": "AIME problem three", "expected_answer": None},
        ],
    )
    result = process_eval.process_aime_2024(str(tmp_path), local_path=source)
    assert result.dropped == {**NO_DROPS, "duplicate_id": 1, "missing_answer": 1}
    expected = [("AIME problem one", "204", "2024-I-1"), ("AIME problem two", "25", "2024-I-2")]
    check_eval_output(result, "aime_2024", "aime-2024", expected, copies=32)


def test_aime_2025_reads_integer_ids_and_answers(tmp_path):
    source = write_jsonl(
        tmp_path / "aime25.jsonl",
        [
            {"id": 0, "problem": "Find the sum of all bases.", "answer": 70},
            {"id": 1, "problem": "", "answer": 588},
            {"id": 2, "problem": "Count the colourings.", "answer": 16},
        ],
    )
    result = process_eval.process_aime_2025(str(tmp_path), local_path=source)
    assert result.dropped == {**NO_DROPS, "empty_problem": 1}
    expected = [("Find the sum of all bases.", "70", "0"), ("Count the colourings.", "16", "2")]
    check_eval_output(result, "aime_2025", "aime-2025", expected, copies=32)


def test_amc_2023_turns_integral_float_answers_into_integers_and_honours_repeat(tmp_path):
    source = write_parquet(
        tmp_path / "amc23.parquet",
        [
            {"id": 0, "question": "AMC question one", "answer": 27.0},
            {"id": 1, "question": "AMC question two", "answer": 0.5},
            {"id": 2, "question": "AMC question three", "answer": float("nan")},
        ],
    )
    result = process_eval.process_amc_2023(str(tmp_path), local_path=source, repeat=3)
    assert result.dropped == {**NO_DROPS, "missing_answer": 1}
    expected = [("AMC question one", "27", "0"), ("AMC question two", "0.5", "1")]
    check_eval_output(result, "amc_2023", "amc-2023", expected, copies=3)


def test_math_500_has_no_ids_so_duplicates_are_found_by_text(tmp_path):
    source = write_jsonl(
        tmp_path / "math500.jsonl",
        [
            {
                "problem": "Convert $(0,3)$ to polar coordinates.",
                "expected_answer": "\\left( 3, \\frac{\\pi}{2} \\right)",
            },
            {"problem": "What is $1+1$?", "expected_answer": "2"},
            {"problem": "What is $1+1$?", "expected_answer": "2"},
        ],
    )
    result = process_eval.process_math_500(str(tmp_path), local_path=source)
    assert result.dropped == {**NO_DROPS, "duplicate_problem": 1}
    expected = [
        ("Convert $(0,3)$ to polar coordinates.", "\\left( 3, \\frac{\\pi}{2} \\right)", "0"),
        ("What is $1+1$?", "2", "1"),
    ]
    check_eval_output(result, "math_500", "math-500", expected, copies=1)


def test_minerva_math_once_each(tmp_path):
    source = write_parquet(
        tmp_path / "minerva.parquet",
        [
            {"question": "Compute the orbital period.", "answer": "4.5e9"},
            {"question": "Find the wavelength.", "answer": ""},
            {"question": "Find the energy in eV.", "answer": "13.6"},
        ],
    )
    result = process_eval.process_minerva_math(str(tmp_path), local_path=source)
    assert result.dropped == {**NO_DROPS, "missing_answer": 1}
    expected = [("Compute the orbital period.", "4.5e9", "0"), ("Find the energy in eV.", "13.6", "2")]
    check_eval_output(result, "minerva_math", "minerva-math", expected, copies=1)


def test_olympiad_bench_takes_the_first_listed_answer_and_spells_its_name_right(tmp_path):
    source = write_jsonl(
        tmp_path / "olympiad.jsonl",
        [
            {"id": 1606, "question": "Find all n.", "final_answer": ["$n=2$", "ignored"]},
            {"id": 1607, "question": "Find m.", "final_answer": []},
            {"id": 1608, "question": "Find k.", "final_answer": ["5"]},
        ],
    )
    result = process_eval.process_olympiad_bench(str(tmp_path), local_path=source)
    assert result.dropped == {**NO_DROPS, "missing_answer": 1}
    expected = [("Find all n.", "$n=2$", "1606"), ("Find k.", "5", "1608")]
    check_eval_output(result, "olympiad_bench", "olympiad-bench", expected, copies=1)


def test_olympiad_bench_names_a_non_list_answer(tmp_path):
    source = write_jsonl(tmp_path / "olympiad.jsonl", [{"id": 1, "question": "Q", "final_answer": "5"}])
    with pytest.raises(ValueError, match="olympiad_bench source row 0, column final_answer: expected a list"):
        process_eval.process_olympiad_bench(str(tmp_path), local_path=source)


def test_eval_repeat_must_be_positive(tmp_path):
    source = write_jsonl(tmp_path / "m.jsonl", [{"question": "Q", "answer": "1"}])
    with pytest.raises(ValueError, match="minerva_math: --repeat must be at least 1"):
        process_eval.process_minerva_math(str(tmp_path), local_path=source, repeat=0)


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


def test_processed_parquet_loads_as_a_pilot_commit_dataset(tmp_path, tokenizer):
    source = write_jsonl(tmp_path / "aime.jsonl", [{"id": i, "problem": f"P{i}", "answer": str(i)} for i in range(3)])
    path = process_eval.process_aime_2025(str(tmp_path), local_path=source, repeat=2).outputs["test"]
    cfg = compose_pc_config([f"data.val_files={path}", "data.filter_overlong_prompts=False"])
    dataset = PilotCommitDataset(data_files=path, tokenizer=tokenizer, config=cfg.data)
    assert dataset.prompt_ids.tolist() == [0, 1, 2, 0, 1, 2]
    assert dataset[4]["index"] == 1


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
    assert len(lines) == 4 + len(process_eval.PROCESSORS)
    assert lines[0].endswith(f"process_deepmath.py --out_dir {tmp_path}/data/deepmath_103k_prefiltered --prefiltered")
    assert lines[1].endswith(f"process_deepmath.py --out_dir {tmp_path}/data/deepmath_103k_filtered")
