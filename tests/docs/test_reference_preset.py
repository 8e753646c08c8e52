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
from omegaconf import OmegaConf
from support import PAPER_SCRIPTS, ROOT, TRAIN_SCRIPTS, script_command_line

from recipe.pc.parallel import check_parallel_sizes
from recipe.pc.settings import PCSettings
from recipe.pc.testing import compose_pc_config

PRESETS = ("reference", "improved")
SECTION = "## How it differs from the authors' release"


def readme_rows() -> list[list[str]]:
    text = open(os.path.join(ROOT, "docs", "reference-preset.md"), encoding="utf-8").read()
    section = text[text.index(SECTION) :].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]  # header and rule
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def plain(cell: str) -> str:
    return re.sub(r"`([^`]*)`", r"\1", cell).strip()


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
    "algorithm.buffer_take_all_order": lambda cfg, s: cfg.algorithm.buffer_take_all_order,
    "data.seed": lambda cfg, s: "null" if cfg.data.seed is None else str(cfg.data.seed),
    "reward.custom_reward_function.reward_kwargs.grader (ground truths)": _grader,
}
# "path:line" or "path:first-last", lines separated by ", ": where in the authors' release a row's behaviour is.
CITATION = re.compile(r"`[\w./-]+\.(py|sh|yaml):\d+(-\d+)?(, \d+(-\d+)?)*`")


def behaviour_rows():
    return [row for row in readme_rows() if row[-1] == "behaviour choice"]


def test_readme_table_has_one_checked_key_per_behaviour_row_and_bug_fixes_hold_in_both_presets():
    rows = readme_rows()
    assert rows and all(len(row) == 6 for row in rows), [row for row in rows if len(row) != 6]
    keys = [plain(row[2]) for row in behaviour_rows()]
    assert sorted(keys) == sorted(ROW_VALUES)
    for row in rows:
        if row[-1] != "behaviour choice":
            assert row[3] == row[4], f"a {row[-1]} must hold under both presets: {row[0]}"
        else:
            assert row[3] != row[4], row[0]


def test_every_row_names_the_authors_file_and_lines_it_follows_or_departs_from():
    for row in readme_rows():
        rest = re.sub(r"\([^)]*\)", "", CITATION.sub("", row[1]))  # a note in brackets may follow a citation
        assert CITATION.search(row[1]) and not rest.strip(", "), row[0]


@pytest.mark.parametrize("script", PAPER_SCRIPTS)
def test_paper_script_sets_every_table_row_under_both_presets(script, tmp_path):
    configs = {preset: compose(script, preset, tmp_path) for preset in PRESETS}
    for row in behaviour_rows():
        key = plain(row[2])
        for preset, column in zip(PRESETS, (row[3], row[4]), strict=True):
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
        ["bash", os.path.join(TRAIN_SCRIPTS, "pc_qwen3-4b_p16c48.sh")], capture_output=True, text=True, env=env
    )
    assert run.returncode == 2 and "PRESET=faithful: choose reference or improved" in run.stderr


def _epochs(sampler, epochs: int = 2) -> list[list[int]]:
    """The row order of each epoch: verl's StatefulDataLoader draws each epoch's indices from a fresh iterator of the
    sampler until it is exhausted (ray_trainer.py, _create_dataloader), as the authors' verl 0.5 did."""
    return [list(sampler) for _ in range(epochs)]


def test_the_reference_preset_shuffles_the_first_epoch_as_the_authors_sampler():
    import torch
    from torch.utils.data import RandomSampler
    from verl.trainer.ppo.utils import create_rl_sampler

    dataset = list(range(200))
    reference, improved = (compose_pc_config([f"preset={preset}"]) for preset in PRESETS)
    # The authors' main_ppo.py: torch's own RandomSampler on a generator seeded with data.get("seed", 1).
    authors = _epochs(RandomSampler(dataset, generator=torch.Generator().manual_seed(1)))
    ours = _epochs(create_rl_sampler(reference.data, dataset))
    assert ours[0] == authors[0]
    # Later epochs differ, as docs/reference-preset.md says: torch's sampler drew a second permutation at each epoch
    # end and threw it away; verl 0.9.1's (torchdata's, which can resume) draws one.
    permutations = torch.Generator().manual_seed(1)
    first, second, third = (torch.randperm(200, generator=permutations).tolist() for _ in range(3))
    assert (ours[0], ours[1], authors[1]) == (first, second, third)
    # The buffer's seed follows data.seed under the reference preset.
    assert (PCSettings.from_config(reference).seed, PCSettings.from_config(improved).seed) == (1, 0)
