"""The math data processors (data/process_*.py) on small local fixtures: no hub access."""

import logging
import os
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import DEEPMATH_ROWS, ROOT, fixture, plain_rows, read_rows, write_jsonl, write_parquet

from recipe.pc.testing import compose_pc_config

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


def assert_record_schema(path, extra_fields=()):
    """One struct type for the whole file, with the exact fields of math_common's record schema and types."""
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
# --as-authors: the rows the authors' processors (databricks/pilot-commit data/process_*.py) write, and
# the per-reason count of the rows our default cleaning changes. Sources: tests/fixtures/data/. Every
# expected authors' row below is written by hand from their code: nothing stripped or dropped (DAPO
# keeps the first row of every original index), index = position in their output, raw answers.

ZERO_COUNTS = {
    reason: 0
    for reason in (
        "added",
        "answer_text",
        "answer_type",
        "index",
        "order",
        "problem_text",
        "ability",
        "data_source",
        "difficulty",
        "extra_keys",
        "original_id",
        "split",
        "system_prompt",
    )
}


def authored(data_source, ability, problem, answer, index, original_id, split, difficulty):
    """A row in the authors' record layout (their key order; the values are the test's)."""
    return {
        "data_source": data_source,
        "prompt": [{"content": "", "role": "system"}, {"content": problem + SUFFIX, "role": "user"}],
        "ability": ability,
        "reward_model": {"ground_truth": answer, "style": "rule"},
        "extra_info": {
            "index": index,
            "original_id": original_id,
            "raw_problem": problem,
            "split": split,
            "difficulty": difficulty,
        },
    }


def comparison_of(result, which, **nonzero):
    """The comparison of split ``which``, checked to hold exactly ``nonzero`` and zero for every other reason."""
    comparison = result.comparisons[which]
    assert comparison.error is None, comparison.error
    assert comparison.counts == {**ZERO_COUNTS, **nonzero}
    return comparison


POLARIS_AUTHORS = [  # (problem, answer, difficulty) of every source row, as stored
    ("Find the sum of 1 and 2.", "3", "7/8"),
    ("  Compute 2+2.\n", " 4 ", "2/8 "),
    ("   ", "1", "1/8"),
    ("No answer here", "  ", "1/8"),
    ("Find the sum of 1 and 2.", "3", "7/8"),
    ("How many primes are below 10?", "4", "3/8"),
]


def test_polaris_as_authors_keeps_every_row_as_stored(tmp_path):
    result = process_polaris.process_polaris(str(tmp_path), local_path=fixture("polaris.jsonl"), as_authors=True)
    assert result.dropped == {} and result.rows == {"train": 6}
    expected = [
        authored("polaris_53k", "math", problem, answer, index, "", "train", difficulty)
        for index, (problem, answer, difficulty) in enumerate(POLARIS_AUTHORS)
    ]
    assert plain_rows(result.outputs["train"]) == expected


def test_polaris_default_rows_and_their_difference_from_the_authors(tmp_path):
    result = process_polaris.process_polaris(str(tmp_path), local_path=fixture("polaris.jsonl"))
    assert result.dropped == {"empty_problem": 1, "missing_answer": 1, "duplicate_id": 0, "duplicate_problem": 1}
    rows = plain_rows(result.outputs["train"])
    assert [
        (r["extra_info"]["raw_problem"], r["reward_model"]["ground_truth"], r["extra_info"]["index"]) for r in rows
    ] == [
        ("Find the sum of 1 and 2.", "3", 0),
        ("Compute 2+2.", "4", 1),
        ("How many primes are below 10?", "4", 2),
    ]
    comparison = comparison_of(
        result,
        "train",
        **{"dropped:duplicate_problem": 1, "dropped:empty_problem": 1, "dropped:missing_answer": 1},
        problem_text=1,  # row 1, stripped
        answer_text=1,  # row 1, stripped
        index=1,  # row 5: index 2 here, 5 theirs
        original_id=3,  # "" theirs, the source position here
        difficulty=1,  # row 1, stripped
    )
    assert (comparison.authors_rows, comparison.our_rows, comparison.changed_rows) == (6, 3, 5)
    assert comparison.count("dropped") == 3
    # The same counts whichever rows are written.
    again = process_polaris.process_polaris(str(tmp_path / "a"), local_path=fixture("polaris.jsonl"), as_authors=True)
    assert again.comparisons["train"] == comparison


DEEPMATH_AUTHORS = {  # split -> (problem as prompted, answer, original_id, difficulty) of every row
    "train": [
        ("What is 2+2?", "4", "10", "3.0/9.0"),
        ("What is 3+3.", "6", "11", "4.0/9.0"),
        ("What is 4+4? .", "8", "12", "4.5/9.0"),  # nothing stripped before the period check
        (".", "1", "13", "1.0/9.0"),  # an empty question gets its period and stays
        ("Find x.", " 7 ", "14", "2.0/9.0"),
        ("What is 2+2?", "4", "10", "3.0/9.0"),  # a repeated original_index stays
        ("Is 9 a square?", "Yes", "16", "2.0/9.0"),
        ("  Count the ways:", "", "17", "5.0/9.0"),  # an empty answer stays
    ],
    "test": [("C.", "3", "99", "7.0/9.0"), ("D\n.", "5", "100", "6.0/9.0")],
}


def test_deepmath_as_authors_keeps_both_prefiltered_splits_as_their_processor(tmp_path):
    source = fixture("deepmath_prefiltered")
    result = process_deepmath.process_deepmath(str(tmp_path), local_path=source, as_authors=True)
    assert result.dropped == {} and result.rows == {"train": 8, "test": 2}
    for split, rows in DEEPMATH_AUTHORS.items():
        expected = [
            authored("deepmath", "math", problem, answer, index, original_id, split, difficulty)
            for index, (problem, answer, original_id, difficulty) in enumerate(rows)
        ]
        assert plain_rows(result.outputs[split]) == expected


def test_deepmath_prefiltered_default_counts_against_the_authors(tmp_path):
    source = fixture("deepmath_prefiltered")
    result = process_deepmath.process_deepmath(str(tmp_path), local_path=source, prefiltered=True)
    assert result.dropped == {"empty_problem": 1, "missing_answer": 1, "duplicate_id": 1, "duplicate_problem": 0}
    train = plain_rows(result.outputs["train"])
    assert [(r["extra_info"]["raw_problem"], r["reward_model"]["ground_truth"]) for r in train] == [
        ("What is 2+2?", "4"),
        ("What is 3+3.", "6"),
        ("What is 4+4?", "8"),
        ("Find x.", "7"),
        ("Is 9 a square?", "Yes"),
    ]
    train_cmp = comparison_of(
        result,
        "train",
        **{"dropped:duplicate_id": 1, "dropped:empty_problem": 1, "dropped:missing_answer": 1},
        problem_text=1,  # row 2: "What is 4+4?" here, "What is 4+4? ." theirs
        answer_text=1,  # row 4
        index=2,  # rows 4 and 6 move up
    )
    assert (train_cmp.authors_rows, train_cmp.our_rows, train_cmp.changed_rows) == (8, 5, 6)
    test_cmp = comparison_of(result, "test", problem_text=1)
    assert (test_cmp.authors_rows, test_cmp.our_rows, test_cmp.changed_rows) == (2, 2, 1)


def test_deepmath_as_authors_needs_the_original_index_column_they_read(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    for split in ("train", "test"):
        write_jsonl(folder / f"{split}.jsonl", [{"question": "Q?", "final_answer": "1", "difficulty": 1.0}])
    with pytest.raises(ValueError, match="no original_index column"):
        process_deepmath.process_deepmath(str(tmp_path / "a"), local_path=str(folder), as_authors=True)
    result = process_deepmath.process_deepmath(str(tmp_path / "o"), local_path=str(folder), prefiltered=True)
    assert "the authors' processing fails on this source" in result.comparisons["train"].error
    assert result.rows == {"train": 1, "test": 1}


def test_amc_as_authors_keeps_float_answers_as_text_and_every_row_in_each_copy(tmp_path):
    source = fixture("amc23.jsonl")
    result = process_eval.process_amc_2023(str(tmp_path), local_path=source, repeat=2, as_authors=True)
    assert result.outputs["test"] == str(tmp_path / "amc-2023-nosystem-boxed.parquet")
    once = [
        authored("amc_2023", "MATH", "AMC one", "27.0", 0, "0", None, ""),
        authored("amc_2023", "MATH", "AMC two ", "0.5", 1, "1", None, ""),
        authored("amc_2023", "MATH", "AMC three", "None", 2, "2", None, ""),  # str() of the missing answer
        authored("amc_2023", "MATH", "AMC two again", "3.0", 3, "1", None, ""),  # a repeated id stays
    ]
    assert plain_rows(result.outputs["test"]) == once + once


def test_amc_default_counts_every_copy_against_the_authors(tmp_path):
    result = process_eval.process_amc_2023(str(tmp_path), local_path=fixture("amc23.jsonl"), repeat=2)
    comparison = comparison_of(
        result,
        "test",
        **{"dropped:duplicate_id": 2, "dropped:missing_answer": 2},
        answer_text=2,  # "27" here, "27.0" theirs, in both copies
        problem_text=2,  # "AMC two" stripped here
        split=4,  # "test" here, None theirs
        extra_keys=4,  # extra_info.repeat here
    )
    assert (comparison.authors_rows, comparison.our_rows, comparison.changed_rows) == (8, 4, 8)


def test_aime_2025_as_authors_keeps_integer_answers_as_integers(tmp_path):
    source = fixture("aime25.jsonl")
    result = process_eval.process_aime_2025(str(tmp_path), local_path=source, repeat=1, as_authors=True)
    assert plain_rows(result.outputs["test"]) == [
        authored("aime_2025", "MATH", "Find the sum of all bases.", 70, 0, "0", None, ""),
        authored("aime_2025", "MATH", "Count the colourings.", 16, 1, "1", None, ""),
    ]
    assert pq.read_schema(result.outputs["test"]).field("reward_model").type.field("ground_truth").type == pa.int64()
    comparison_of(result, "test", answer_type=2, split=2, extra_keys=2)


def test_math_500_as_authors_keeps_repeated_problems_and_empty_ids(tmp_path):
    source = fixture("math500.jsonl")
    result = process_eval.process_math_500(str(tmp_path), local_path=source, as_authors=True)
    assert plain_rows(result.outputs["test"]) == [
        authored("math_500", "MATH", "What is $1+1$?", "2", 0, "", None, ""),
        authored("math_500", "MATH", "What is $1+1$?", "2", 1, "", None, ""),
        authored("math_500", "MATH", "Simplify $\\sqrt{8}$.", "2\\sqrt{2}", 2, "", None, ""),
    ]
    comparison = comparison_of(
        result, "test", **{"dropped:duplicate_problem": 1}, index=1, original_id=2, split=2, extra_keys=2
    )
    assert comparison.changed_rows == 2


def test_olympiad_bench_as_authors_uses_their_spelling_and_raw_first_answer(tmp_path):
    source = fixture("olympiad.jsonl")
    result = process_eval.process_olympiad_bench(str(tmp_path), local_path=source, as_authors=True)
    assert result.outputs["test"] == str(tmp_path / "oylmpiad-bench-nosystem-boxed.parquet")
    assert plain_rows(result.outputs["test"]) == [
        authored("oylmpiad_bench", "MATH", "Find all n.", "$n=2$", 0, "1606", None, ""),
        authored("oylmpiad_bench", "MATH", "Find k.", " 5 ", 1, "1607", None, ""),
    ]
    comparison_of(result, "test", answer_text=1, data_source=2, split=2, extra_keys=2)


def test_an_empty_answer_list_stops_the_authors_olympiad_processor_not_ours(tmp_path):
    source = write_jsonl(tmp_path / "ob.jsonl", [{"id": 1, "question": "Q", "final_answer": []}, OLYMPIAD_OK])
    with pytest.raises(ValueError, match=r"olympiad_bench source row 0, column final_answer: answer \[\] has no"):
        process_eval.process_olympiad_bench(str(tmp_path / "a"), local_path=source, as_authors=True)
    result = process_eval.process_olympiad_bench(str(tmp_path / "o"), local_path=source)
    assert result.rows == {"test": 1}
    assert "the authors' processing fails on this source" in result.comparisons["test"].error


OLYMPIAD_OK = {"id": 2, "question": "Find k.", "final_answer": ["5"]}

DAPO_PREFIX_WITH_F = process_dapo17k.ORIGINAL_PREFIX + "\nProblem F."  # one newline: their prefix text stays


def test_dapo_as_authors_keeps_the_first_row_of_every_original_index_as_is(tmp_path):
    result = process_dapo17k.process_dapo(str(tmp_path), local_path=fixture("dapo.jsonl"), as_authors=True)
    assert result.dropped == {"duplicate_id": 2}
    assert plain_rows(result.outputs["train"]) == [
        authored("math_dapo", "MATH", "Problem A.", "2", 0, "uuid-a", None, ""),
        authored("math_dapo", "MATH", "Problem C.", "", 1, "uuid-c", None, ""),  # first copy, empty answer
        authored("math_dapo", "MATH", "Just solve: 1+0", "1", 2, "uuid-d", None, ""),  # no wrapper: kept
        authored("math_dapo", "MATH", "Problem E.", " 7", 3, "uuid-e", None, ""),
        authored("math_dapo", "MATH", DAPO_PREFIX_WITH_F, "8", 4, "uuid-f", None, ""),
        authored("math_dapo", "MATH", "Problem B.", "6", 5, "uuid-b", None, ""),
    ]


def test_dapo_default_counts_against_the_authors(tmp_path):
    result = process_dapo17k.process_dapo(str(tmp_path), local_path=fixture("dapo.jsonl"))
    assert result.dropped == {**NO_DROPS, "missing_answer": 1, "duplicate_id": 1, "unrecognised_prompt": 1}
    rows = plain_rows(result.outputs["train"])
    assert [(r["extra_info"]["raw_problem"], r["reward_model"]["ground_truth"]) for r in rows] == [
        ("Problem A.", "2"),
        ("Problem C.", "5"),  # the second copy of uuid-c: the first has no answer
        ("Problem E.", "7"),
        ("Problem F.", "8"),
        ("Problem B.", "6"),
    ]
    comparison = comparison_of(
        result,
        "train",
        **{"dropped:missing_answer": 1, "dropped:unrecognised_prompt": 1},
        added=1,  # source row 3, which they drop as a repeat of uuid-c
        answer_text=1,  # " 7" theirs
        problem_text=1,  # their prefix text left in "Problem F."
        index=3,  # E, F and B move up by one
        split=4,
    )
    assert (comparison.authors_rows, comparison.our_rows, comparison.changed_rows) == (6, 5, 5)


def test_dapo_as_authors_takes_a_stored_raw_problem_over_the_prompt(tmp_path):
    row = {**dapo_row("Prompt problem.", "3", "u1"), "extra_info": {"index": "u1", "raw_problem": "  Stored. "}}
    source = write_parquet(tmp_path / "dapo.parquet", [row])
    result = process_dapo17k.process_dapo(str(tmp_path / "a"), local_path=source, as_authors=True)
    assert plain_rows(result.outputs["train"]) == [authored("math_dapo", "MATH", "Stored.", "3", 0, "u1", None, "")]
    comparison_of(result, "train", problem_text=1, split=1)


def test_compare_with_authors_counts_rows_out_of_their_order():
    def keyed(position, index):
        record = math_common.authors_record("d", "MATH", f"P{position}", "1", index, "", None, "")
        return (position, 0), record

    authors = [keyed(0, 0), keyed(1, 1), keyed(2, 2)]
    ours = [keyed(1, 0), keyed(0, 1), keyed(2, 2)]
    comparison = math_common.compare_with_authors(ours, authors, {})
    assert comparison.counts == {**ZERO_COUNTS, "order": 2, "index": 2}
    assert comparison.changed_rows == 2


def test_as_authors_val_files_load_together_as_a_pilot_commit_dataset(tmp_path, tokenizer):
    """The reference preset's validation list: as-authors files of several sets in one dataset."""
    paths = [
        process_eval.process_math_500(str(tmp_path), local_path=fixture("math500.jsonl"), as_authors=True),
        process_deepmath.process_deepmath(
            str(tmp_path / "dm"), local_path=fixture("deepmath_prefiltered"), as_authors=True
        ),
        process_eval.process_olympiad_bench(str(tmp_path), local_path=fixture("olympiad.jsonl"), as_authors=True),
    ]
    files = [paths[0].outputs["test"], paths[1].outputs["test"], paths[2].outputs["test"]]
    cfg = compose_pc_config([f"data.val_files=[{','.join(files)}]", "data.filter_overlong_prompts=False"])
    dataset = PilotCommitDataset(data_files=files, tokenizer=tokenizer, config=cfg.data)
    assert dataset.prompt_ids.tolist() == [0, 1, 2, 0, 1, 0, 1]
    assert dataset[4]["index"] == 1


def test_processed_parquet_loads_as_a_pilot_commit_dataset(tmp_path, tokenizer):
    source = write_jsonl(tmp_path / "aime.jsonl", [{"id": i, "problem": f"P{i}", "answer": str(i)} for i in range(3)])
    path = process_eval.process_aime_2025(str(tmp_path), local_path=source, repeat=2).outputs["test"]
    cfg = compose_pc_config([f"data.val_files={path}", "data.filter_overlong_prompts=False"])
    dataset = PilotCommitDataset(data_files=path, tokenizer=tokenizer, config=cfg.data)
    assert dataset.prompt_ids.tolist() == [0, 1, 2, 0, 1, 2]
    assert dataset[4]["index"] == 1
