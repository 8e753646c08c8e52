"""PRESET=reference | improved: every paper script, composed under both presets, sets each behaviour row of
docs/reference-preset.md's "How it differs from the authors' release" table to that row's value.

The scripts run for real up to the trainer's command line; a stand-in ``python3`` records that command
line, and Hydra composes it in-process (the same composition ``--cfg job`` prints, without a process
start per script).
"""

import inspect
import os
import re
import subprocess

import pytest
from conftest import ROOT, compose_pc_config
from omegaconf import OmegaConf
from test_train_scripts import PAPER_SCRIPTS

from recipe.pc.parallel import check_parallel_sizes
from recipe.pc.settings import PCSettings

PRESETS = ("reference", "improved")
SECTION = "## How it differs from the authors' release"


def readme_rows() -> list[list[str]]:
    text = open(os.path.join(ROOT, "docs", "reference-preset.md"), encoding="utf-8").read()
    section = text[text.index(SECTION) :].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]  # header and rule
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def plain(cell: str) -> str:
    return re.sub(r"`([^`]*)`", r"\1", cell).strip()


def script_command_line(script: str, tmp_path, **env_extra) -> list[str]:
    """The Hydra overrides the script hands to ``python3 -m recipe.pc.main_pc`` (PRESET, GRADER unset unless given)."""
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "python3"
    shim.write_text('#!/bin/sh\nprintf "%s\\0" "$@" > "$ARGS_OUT"\n')
    shim.chmod(0o755)
    out = tmp_path / f"{script}.args"
    env = {k: v for k, v in os.environ.items() if k not in ("PRESET", "GRADER")}
    env.update(PATH=f"{shim_dir}{os.pathsep}{os.environ['PATH']}", DATA_DIR="/data/pc", ARGS_OUT=str(out))
    env.update(env_extra)
    run = subprocess.run(["bash", os.path.join(ROOT, "train_scripts", script)], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    args = out.read_text().split("\0")[:-1]
    assert args[:2] == ["-m", "recipe.pc.main_pc"], args[:2]
    return args[2:]


def compose(script: str, preset: str, tmp_path):
    cfg = compose_pc_config(script_command_line(script, tmp_path, PRESET=preset))
    OmegaConf.resolve(cfg)
    return cfg


def _deepmath_folder(cfg, script):
    if "1.5b" not in script:
        return None
    folder = cfg.data.train_files.split("/")[-2]
    # The DeepMath test split validated on comes from the same copy as the train split.
    assert f"/data/pc/{folder}/test.parquet" in cfg.data.val_files
    return folder


def _polaris_folder(cfg, script):
    return None if "1.5b" in script else cfg.data.train_files.split("/")[-2]


def _grader(cfg, script):
    """The grader the reward function runs: the preset's, or math_reward's own default."""
    from recipe.pc.rewards import math_reward

    default = inspect.signature(math_reward.compute_score).parameters["grader"].default
    return cfg.reward.custom_reward_function.reward_kwargs.get("grader", default)


# README key cell -> the composed value it names for one script (None: the row does not apply to it).
ROW_VALUES = {
    "algorithm.mini_batch_unit": lambda cfg, s: cfg.algorithm.mini_batch_unit,
    "algorithm.partial_mini_batch": lambda cfg, s: str(cfg.algorithm.partial_mini_batch).lower(),
    "actor_rollout_ref.actor.policy_loss.loss_mode": lambda cfg, s: cfg.actor_rollout_ref.actor.policy_loss.loss_mode,
    "algorithm.row_order": lambda cfg, s: cfg.algorithm.row_order,
    "reward.custom_reward_function.reward_kwargs.grader": _grader,
    "data.train_files (1.5B scripts)": _deepmath_folder,
    "data.train_files (Polaris scripts)": _polaris_folder,
    "data.val_files": lambda cfg, s: cfg.data.val_files[0].split("/")[-2],
    "algorithm.dapo_step_unit": lambda cfg, s: cfg.algorithm.dapo_step_unit,
    "actor_rollout_ref.rollout.n (4B DAPO)": lambda cfg, s: (
        str(cfg.actor_rollout_ref.rollout.n) if s == "dapo_qwen3-4b_n64.sh" else None
    ),
    "algorithm.carry_over_epoch": lambda cfg, s: str(cfg.algorithm.carry_over_epoch).lower(),
    "algorithm.buffer_tie_order": lambda cfg, s: cfg.algorithm.buffer_tie_order,
}


def behaviour_rows():
    return [row for row in readme_rows() if row[-1] == "behaviour choice"]


def test_readme_table_has_one_checked_key_per_behaviour_row_and_bug_fixes_hold_in_both_presets():
    rows = readme_rows()
    assert rows and all(len(row) == 5 for row in rows), [row for row in rows if len(row) != 5]
    keys = [plain(row[1]) for row in behaviour_rows()]
    assert sorted(keys) == sorted(ROW_VALUES)
    for row in rows:
        if row[-1] != "behaviour choice":
            assert row[2] == row[3], f"a {row[-1]} must hold under both presets: {row[0]}"
        else:
            assert row[2] != row[3], row[0]


@pytest.mark.parametrize("script", PAPER_SCRIPTS)
def test_paper_script_sets_every_table_row_under_both_presets(script, tmp_path):
    configs = {preset: compose(script, preset, tmp_path) for preset in PRESETS}
    for row in behaviour_rows():
        key = plain(row[1])
        for preset, column in zip(PRESETS, (row[2], row[3]), strict=True):
            value = ROW_VALUES[key](configs[preset], script)
            if value is not None:
                assert value == plain(column), f"{script} PRESET={preset}: {key} = {value}, README says {column}"
    for preset, cfg in configs.items():
        assert cfg.trainer.preset == preset
        assert cfg.trainer.experiment_name == f"{script[:-3]}-{preset}"
        settings = PCSettings.from_config(cfg)
        dp = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
        check_parallel_sizes(settings, dp, cfg.actor_rollout_ref.actor.ppo_mini_batch_size)


def test_reference_pc_steps_split_into_five_full_and_one_third_mini_batch(tmp_path):
    """The arithmetic the table's first rows describe, for the two shipped PC shapes."""
    from recipe.pc.minibatch import mini_batch_plan

    for script, dp in (("pc_qwen2.5-1.5b_p32c96.sh", 16), ("pc_qwen3-4b_p16c48.sh", 32)):
        cfg = compose(script, "reference", tmp_path)
        settings = PCSettings.from_config(cfg)
        plan = mini_batch_plan(settings, dp, cfg.actor_rollout_ref.actor.ppo_mini_batch_size)
        assert (plan.full, plan.partial_rows * 3) == (5, plan.mini_rows_per_rank), script
        assert plan.partial_weight == pytest.approx(1 / 3)


def test_default_preset_is_reference_and_grader_env_overrides_it(tmp_path):
    overrides = script_command_line("pc_qwen3-4b_p16c48.sh", tmp_path)
    assert "preset=reference" in overrides
    cfg = compose_pc_config(script_command_line("pc_qwen3-4b_p16c48.sh", tmp_path, GRADER="math_dapo"))
    assert (cfg.trainer.preset, cfg.reward.custom_reward_function.reward_kwargs.grader) == ("reference", "math_dapo")


def test_unknown_preset_is_refused_before_start_up(tmp_path):
    env = {**os.environ, "PRESET": "faithful", "DATA_DIR": "/d", "DRY_RUN": "1"}
    run = subprocess.run(
        ["bash", os.path.join(ROOT, "train_scripts", "pc_qwen3-4b_p16c48.sh")], capture_output=True, text=True, env=env
    )
    assert run.returncode == 2 and "PRESET=faithful: choose reference or improved" in run.stderr


@pytest.mark.parametrize("tie_order, expected", [("oldest_first", [5, 6, 7]), ("newest_first", [9, 8, 7])])
def test_max_variance_tie_order_among_equal_std_and_step(tie_order, expected):
    import numpy as np

    from recipe.pc.replay_buffer import PilotReplayBuffer

    buffer = PilotReplayBuffer(100, "max_variance", "first_n", np.random.default_rng(0), tie_order=tie_order)
    buffer.add(1, None, np.array([1.0, 1.0, 1.0, 0.0]), step=4)  # newest step but less spread: ranked last
    for pid in (5, 6, 7, 8, 9):  # equal std and step, added in this order
        buffer.add(pid, None, np.array([1.0, 0.0, 1.0, 0.0]), step=3)
    assert [d.entry.prompt_id for d in buffer.sample(3, 4)] == expected


def test_unknown_tie_order_is_refused_naming_the_key():
    from conftest import compose_pc_config as compose_cfg

    from recipe.pc.settings import PCConfigError

    with pytest.raises(PCConfigError, match="algorithm.buffer_tie_order='older'"):
        PCSettings.from_config(compose_cfg(["algorithm.buffer_tie_order=older"]))
    with pytest.raises(PCConfigError, match="algorithm.dapo_step_unit='rounds'"):
        PCSettings.from_config(compose_cfg(["algorithm.dapo_step_unit=rounds"]))


@pytest.mark.parametrize("unit", ["round", "update"])
def test_dapo_total_training_steps_counts_rounds_or_updates(unit, tmp_path, tokenizer):
    from pc_standins import env_file_logger, step_records
    from test_trainer_fit import B, build_trainer

    budget = 7
    log = env_file_logger(tmp_path)
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        # Rounds of B prompts: dropped zero-spread groups make most steps take several rounds.
        extra=[
            "algorithm.rollout_allocation=dapo",
            f"data.gen_batch_size={B}",
            f"algorithm.dapo_step_unit={unit}",
            f"trainer.total_training_steps={budget}",
        ],
    )
    trainer.fit()
    rounds = [s["training/num_gen_batches"] for s in step_records(log)]
    assert sum(rounds) == trainer.counters.total_sampling_rounds
    if unit == "update":
        assert len(rounds) == budget
    else:
        # The run ends with the first step completed in or after round `budget`, as the reference's DAPO.
        assert sum(rounds) >= budget > sum(rounds[:-1])
        assert len(rounds) < budget
