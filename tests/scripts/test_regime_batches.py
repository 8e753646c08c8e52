"""The regime batch files (docs/results/regimes/batch*.txt) that scripts/gpu/launch.sh starts on a GPU host:
every line composes and passes the start-up checks on CPU (DRY_RUN=1, in-process: ``support.dry_run``), so a lease
is not spent on a typo, and each configuration is the one its name says (group size, pilot split, 4 updates a step,
seed, mix)."""

import glob
import os
import re

import pytest
from support import ROOT, dry_run, write_parquet_rows

from recipe.pc.allocation import DownsampleSettings
from recipe.pc.settings import PCSettings
from recipe.pc.stages.skip import SkipSettings

BATCHES = sorted(glob.glob(os.path.join(ROOT, "docs", "results", "regimes", "batch*.txt")))
# ALGO<n>[x<commit>][ref][screen<k> | skip | ds<generated>][t<steps>][v<rollouts>][e<epochs>]_<mix>[<prompts>]_s<seed>:
# ALGO is grpo, dapo, pc or knap (the knapsack: its pilot and mean commit), screen, skip and ds are the allocator
# stages, t<steps> a run longer than the study's 30 steps (trainer.total_training_steps), v<rollouts> validation by
# rollout budget (trainer.val_rollout_interval), e<epochs> a cap on the epochs other than the launcher's 100
# (trainer.total_epochs), a number after the mix a subset of its training prompts (data.train_max_samples).
NAME = re.compile(
    r"^(?P<algo>grpo|dapo|pc|knap)(?P<a>\d+)(?:x(?P<b>\d+))?(?P<ref>ref)?"
    r"(?:screen(?P<screen>\d+)|(?P<skip>skip)|ds(?P<ds>\d+))?(?:t(?P<steps>\d+))?(?:v(?P<val>\d+))?(?:e(?P<epochs>\d+))?"
    r"_(?P<mix>[a-z]+)(?P<subset>\d+)?_s(?P<seed>\d+)$"
)


def batch_lines(unique: bool = True) -> list[tuple[str, str, str, list[str]]]:
    """Every run line of every batch file; ``unique``: a rerun (the same line in a later file) once."""
    lines = []
    for path in BATCHES:
        for line in open(path):
            if line.strip() and not line.startswith("#"):
                name, mix, script, *overrides = line.split()
                if not unique or (name, mix, script, overrides) not in lines:
                    lines.append((name, mix, script, overrides))
    return lines


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixes")
    for mix in {mix for _, mix, _, _ in batch_lines()}:
        for name in ("train.parquet", "test.parquet"):
            write_parquet_rows(root / mix / name)  # the start-up checks read the files' footers
    return root


def test_batch_files_exist_and_a_name_is_one_run():
    """A name is one configuration: unique within a file, and in two files only as the same line (a rerun)."""
    assert BATCHES
    for path in BATCHES:
        names = [line.split()[0] for line in open(path) if line.strip() and not line.startswith("#")]
        assert len(names) == len(set(names)), path
    names = [name for name, *_ in batch_lines()]
    assert len(names) == len(set(names)), "a name is used for two different lines"
    assert len(batch_lines(unique=False)) > len(batch_lines())  # batch5.txt reruns batch3.txt's stopped runs


@pytest.mark.parametrize("name,mix,script,overrides", batch_lines(), ids=[line[0] for line in batch_lines()])
def test_each_run_composes_as_its_name_says(name, mix, script, overrides, data_root, tmp_path):
    from data.process_arithmetic import MIXES

    assert mix in MIXES, f"{name}: mix {mix!r} is not a --mix of data/process_arithmetic.py"
    # launch.sh starts every line with STEPS=30 and the mix's data folder.
    run = dry_run(script, tmp_path, *overrides, DATA_DIR=str(data_root / mix), OUT_DIR=str(tmp_path), STEPS="30")
    assert run.problems == [], f"{name}: {run.problems}"
    cfg = run.config
    settings = PCSettings.from_config(cfg)
    want = NAME.match(name)
    form = "ALGO<n>[x<commit>][ref][screen<k>|skip|ds<n>][t<steps>][v<rollouts>][e<epochs>]_<mix>[<prompts>]_s<seed>"
    assert want, f"{name}: not {form}"
    assert cfg.data.get("train_max_samples", -1) == (int(want["subset"]) if want["subset"] else -1)
    assert want["mix"] == mix, f"{name}: its name says mix {want['mix']!r}, its line {mix!r}"
    assert settings.method == {"grpo": "grpo", "dapo": "dapo", "pc": "pilot_commit", "knap": "knapsack"}[want["algo"]]
    if want["algo"] in ("pc", "knap"):
        assert (settings.pilot.n, settings.n_commit) == (int(want["a"]), int(want["b"]))
    assert settings.group_size == int(want["a"]) + int(want["b"] or 0)
    # The stages are on exactly where the name says (screening, GRESO skipping, PODS down-sampling).
    assert settings.pilot.screen_n == (int(want["screen"]) if want["screen"] else None)
    assert settings.group(SkipSettings).enable == bool(want["skip"])
    assert settings.group(DownsampleSettings).n == (int(want["ds"]) if want["ds"] else None)
    assert cfg.data.seed == int(want["seed"]) and cfg.data.train_files.startswith(str(data_root / mix))
    # launch.sh starts every line with STEPS=30; a line's own trainer.total_training_steps comes later and wins.
    assert cfg.trainer.total_training_steps == (int(want["steps"]) if want["steps"] else 30)
    assert cfg.trainer.total_epochs == (int(want["epochs"]) if want["epochs"] else 100)
    assert cfg.trainer.get("val_rollout_interval") == (int(want["val"]) if want["val"] else None)
    # Equal updates a step for every method: 4 PPO mini-batches of the trained prompts. The
    # reference-preset line is the labelled exception: mini-batches of ppo_mini_batch_size x n_commit rows.
    mini = cfg.actor_rollout_ref.actor.ppo_mini_batch_size
    if not want["ref"]:
        assert cfg.data.train_batch_size == 4 * mini
    else:
        rows, per_mini = settings.train_batch_size * settings.group_size, mini * settings.n_commit
        assert (rows // per_mini, rows % per_mini) == (5, 32)  # 5 whole and 1 partial: 6 optimizer steps
    # "ref" in the name, and only there: the reference preset (its mini-batch arithmetic), labelled so.
    assert cfg.trainer.get("preset") == ("reference" if want["ref"] else None)
    assert cfg.algorithm.partial_mini_batch == bool(want["ref"])
    if want["algo"] in ("pc", "knap"):  # for GRPO and DAPO the two units are the same rows
        assert cfg.algorithm.mini_batch_unit == ("rollout_n" if want["ref"] else "group")
