"""Every train script composes its full Hydra config on CPU (DRY_RUN=1), and the result passes the
PC checks and verl's own config validation for the script's cluster size.

DRY_RUN=1 runs the start-up checks (``main_pc --validate``), which read the data files' footers and look into the
model folder: the tests point DATA_DIR at small stand-in parquets named as the scripts expect, and MODEL_PATH at a
stand-in folder. Most checks run the script with bash up to the trainer's command line and compose and check that in
this process (``support.dry_run``); three run a script's Python process for real (``run_script``): a paper script's
dry run, the one-GPU smoke script's dry run with nothing set, and the message for missing data.
"""

import glob
import os
import re
import subprocess

import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf
from support import (
    PAPER_SCRIPTS,
    TRAIN_SCRIPTS,
    dry_run,
    environment,
    run_script,
    script_call,
    stand_in_data_dir,
    stand_in_model,
    validate_script,
)

from recipe.pc.dry_run import HEADER
from recipe.pc.parallel import check_parallel_sizes
from recipe.pc.settings import PCSettings
from recipe.pc.testing import LOG_PROB, REF, UPDATE, compose_pc_config

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return stand_in_data_dir(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return stand_in_model(tmp_path_factory.mktemp("model"))


def test_every_paper_configuration_has_its_scripts():
    for model in ("qwen2.5-1.5b", "qwen3-4b", "qwen3-8b", "qwen3-14b"):
        assert sum(model in s for s in PAPER_SCRIPTS) == 3, model


def assert_verl_accepts(cfg) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


@pytest.mark.parametrize("script", PAPER_SCRIPTS)
def test_paper_script_composes_and_validates(script, data_dir, tmp_path):
    run = dry_run(script, tmp_path, DATA_DIR=data_dir)
    assert run.problems == []
    cfg = run.resolved()
    settings = PCSettings.from_config(cfg)
    assert settings.method == {"grpo": "grpo", "dapo": "dapo", "pc": "pilot_commit"}[script.split("_")[0]]
    # The default PRESET=reference runs the authors' n=16 in the 4B DAPO script (README table).
    expected_group = 16 if script == "dapo_qwen3-4b_n64.sh" else (128 if "1.5b" in script else 64)
    assert settings.group_size == expected_group
    assert settings.train_batch_size == 128
    dp = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
    check_parallel_sizes(settings, dp, cfg.actor_rollout_ref.actor.ppo_mini_batch_size)
    assert_verl_accepts(cfg)
    assert cfg.data.train_files.startswith(data_dir + "/")
    assert len(cfg.data.val_files) == 7


def test_paper_script_dry_run_in_its_own_process_prints_what_is_composed_here(data_dir, model_dir, tmp_path):
    """The in-process dry runs stand for this one: the same config and the same summary, printed by the script's own
    Python process (cwd: Hydra's run folder goes under tmp_path, not the repository)."""
    env = {"DATA_DIR": data_dir, "MODEL_PATH": model_dir, "NNODES": "2", "NGPUS_PER_NODE": "4", "SHOW_CONFIG": "1"}
    out = run_script("pc_qwen3-4b_p16c48.sh", {"DRY_RUN": "1", **env}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "config checks passed" in out.stderr
    here = dry_run("pc_qwen3-4b_p16c48.sh", tmp_path, **env)
    assert here.problems == []
    printed_config, _ = out.stdout.split(HEADER)
    assert yaml.safe_load(printed_config) == OmegaConf.to_container(here.config)
    assert out.stdout == validate_script("pc_qwen3-4b_p16c48.sh", tmp_path, **env).out


def test_script_environment_and_passthrough_overrides(data_dir, model_dir, tmp_path):
    env = {"DATA_DIR": data_dir, "MODEL_PATH": model_dir, "NNODES": "2", "NGPUS_PER_NODE": "4", "CKPTS_DIR": "/ck"}
    run = dry_run("pc_qwen3-4b_p16c48.sh", tmp_path, **env)
    assert run.problems == []
    cfg = run.config
    assert cfg.actor_rollout_ref.model.path == model_dir
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (2, 4)
    assert cfg.trainer.default_local_dir == "/ck/pc_qwen3-4b_p16c48-reference"
    run = dry_run("pc_qwen3-4b_p16c48.sh", tmp_path, "algorithm.exploration.n=8", DATA_DIR=data_dir)
    assert run.problems == []
    assert run.config.algorithm.exploration.n == 8


@pytest.mark.parametrize("script", sorted(os.path.basename(p) for p in glob.glob(os.path.join(TRAIN_SCRIPTS, "*.s*"))))
def test_shell_syntax(script):
    out = subprocess.run(["bash", "-n", os.path.join(TRAIN_SCRIPTS, script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_cluster_launcher_rejects_unknown_roles_and_needs_a_head_address():
    launcher = os.path.join(TRAIN_SCRIPTS, "ray_cluster.sh")
    bad = subprocess.run(["bash", launcher, "leader"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown role leader" in bad.stderr
    env = {k: v for k, v in os.environ.items() if k != "HEAD_ADDR"}
    worker = subprocess.run(["bash", launcher, "worker"], capture_output=True, text=True, env=env)
    assert worker.returncode != 0 and "HEAD_ADDR" in worker.stderr


@pytest.mark.parametrize(
    "script, method, group",
    [
        ("smoke_1gpu.sh", "pilot_commit", 8),
        ("arith_grpo_1gpu.sh", "grpo", 16),
        ("arith_dapo_1gpu.sh", "dapo", 16),
        ("arith_pc_1gpu.sh", "pilot_commit", 16),
    ],
)
def test_one_gpu_script_composes_and_validates(script, method, group, data_dir, model_dir, tmp_path):
    env = {"DATA_DIR": data_dir, "MODEL_PATH": model_dir, "RAY_TMP": "/tmp/ray_x", "OUT_DIR": str(tmp_path)}
    run = dry_run(script, tmp_path, **env)
    assert run.problems == []
    cfg = run.resolved()
    settings = PCSettings.from_config(cfg)
    assert (settings.method, settings.group_size) == (method, group)
    check_parallel_sizes(settings, 1, cfg.actor_rollout_ref.actor.ppo_mini_batch_size)
    assert_verl_accepts(cfg)
    # RAY_TMP: a side-by-side job on a Ray head of its own (tests/fit/test_side_by_side_ray.py), so the driver only
    # connects: no CPU count, no temp dir of the driver's.
    assert cfg.ray_kwargs.ray_init.num_cpus is None
    assert "_temp_dir" not in cfg.ray_kwargs.ray_init
    assert cfg.data.val_files == data_dir + "/test.parquet"


@pytest.mark.parametrize("script", ["arith_pc_1gpu.sh", "arith_grpo_1gpu.sh"])
def test_one_gpu_scripts_pass_validation_by_rollout_budget_through(script, data_dir, model_dir, tmp_path):
    env = {"DATA_DIR": data_dir, "MODEL_PATH": model_dir, "OUT_DIR": str(tmp_path)}
    run = dry_run(script, tmp_path, "trainer.val_rollout_interval=2304", "trainer.test_freq=-1", **env)
    assert run.problems == []
    assert (run.config.trainer.val_rollout_interval, run.config.trainer.test_freq) == (2304, -1)


def _levels(path: str) -> set:
    return {int(info["level"]) for info in pd.read_parquet(path)["extra_info"]}


def test_smoke_script_runs_with_nothing_set_and_reuses_its_data(tmp_path):
    out_dir = tmp_path / "out"
    first = run_script("smoke_1gpu.sh", {"DRY_RUN": "1", "OUT_DIR": str(out_dir)}, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    # What the run will do, without the config (SHOW_CONFIG unset).
    assert first.stdout.startswith(f"{HEADER} (pilot-commit/smoke_1gpu)\n")
    assert f"  logs        console; file {out_dir / 'metrics.jsonl'}\n" in first.stdout
    data = out_dir / "data"
    assert len(pd.read_parquet(data / "train.parquet")) == 160 and len(pd.read_parquet(data / "test.parquet")) == 32
    assert _levels(str(data / "train.parquet")) == {1, 2}
    assert f"smoke_1gpu: model {SMOL}, data {data}, metrics {out_dir / 'metrics.jsonl'}" in first.stderr
    assert f"actor_rollout_ref.model.path={SMOL} is a hub id: not checked in a dry run" in first.stderr
    assert sorted(os.listdir(out_dir)) == ["data"]  # no half-written temporary folder left beside it

    stamp = os.stat(data / "train.parquet").st_mtime_ns
    second = script_call("smoke_1gpu.sh", tmp_path, DRY_RUN="1", OUT_DIR=str(out_dir))
    assert os.stat(data / "train.parquet").st_mtime_ns == stamp
    cfg = compose_pc_config(second.overrides)
    assert cfg.actor_rollout_ref.model.path == SMOL
    assert (cfg.data.train_files, cfg.data.val_files) == (str(data / "train.parquet"), str(data / "test.parquet"))


def test_arithmetic_scripts_default_to_all_levels_at_comparison_size(tmp_path):
    run = dry_run("arith_pc_1gpu.sh", tmp_path, OUT_DIR=str(tmp_path))
    assert run.config.actor_rollout_ref.model.path == SMOL
    assert len(pd.read_parquet(tmp_path / "data" / "train.parquet")) == 3000
    assert len(pd.read_parquet(tmp_path / "data" / "test.parquet")) == 200
    assert _levels(str(tmp_path / "data" / "train.parquet")) == {1, 2, 3, 4, 5}


def test_dry_run_fails_on_a_bad_key_and_names_it(tmp_path, data_dir):
    run = dry_run("smoke_1gpu.sh", tmp_path, "algorithm.exploration.n=0", OUT_DIR=str(tmp_path), DATA_DIR=data_dir)
    assert any("algorithm.exploration.n=0 must be at least 1" in problem for problem in run.problems), run.problems


@pytest.mark.parametrize(
    "env, message",
    [
        ({"GRADER": "sympy"}, "reward_kwargs.grader='sympy' (GRADER in the scripts)"),
        ({"NGPUS_PER_NODE": "3"}, "does not split over 6 data-parallel ranks"),
        ({"MODEL_PATH": "/nowhere/qwen"}, "actor_rollout_ref.model.path=/nowhere/qwen (MODEL_PATH) does not exist"),
    ],
)
def test_dry_run_of_a_paper_script_names_each_failed_check(env, message, data_dir, tmp_path):
    run = dry_run("pc_qwen3-4b_p16c48.sh", tmp_path, DATA_DIR=data_dir, NNODES="2", **env)
    assert any(message in problem for problem in run.problems), run.problems


def test_dry_run_names_missing_data_files(tmp_path):
    out = run_script("grpo_qwen3-4b_n64.sh", {"DRY_RUN": "1", "DATA_DIR": str(tmp_path)}, cwd=tmp_path)
    assert out.returncode != 0
    # The reference preset (the default) reads the as-authors copies.
    assert f"data.train_files: {tmp_path}/polaris_53k_as_authors/train.parquet" in out.stderr
    assert f"data.val_files: {tmp_path}/math_test_as_authors/aime-2024-nosystem-boxed.parquet" in out.stderr


def test_unreachable_model_stops_before_ray_with_one_line(tmp_path, data_dir, monkeypatch, capsys):
    """A launch (no DRY_RUN) of the smoke script on its one GPU, offline and without the model cached: main_pc's main()
    names it in one line and exits before verl's run_ppo starts Ray."""
    import huggingface_hub.constants
    import torch

    from recipe.pc import main_pc

    call = script_call("smoke_1gpu.sh", tmp_path, OUT_DIR=str(tmp_path), DATA_DIR=data_dir)
    assert not call.validate
    # What HF_HUB_OFFLINE=1 and HF_HOME=<empty> give a fresh process (huggingface_hub reads them on import).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(main_pc, "run_ppo", lambda *args, **kwargs: pytest.fail("run_ppo started"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # the GPU the script is for: no GPU problem
    with environment(call.env), pytest.raises(SystemExit) as stopped:
        main_pc.main(compose_pc_config(call.overrides))
    assert stopped.value.code == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("config error:")]
    assert errors == [
        f"config error: model '{SMOL}' is not in the local Hugging Face cache and cannot be fetched from the hub "
        f"(OfflineModeIsEnabled); download it where there is network (hf download {SMOL} --local-dir DIR) and set "
        "MODEL_PATH=DIR (or actor_rollout_ref.model.path=DIR)"
    ]


def test_smoke_script_at_dp4_is_refused_naming_the_log_prob_micro_size(tmp_path, model_dir):
    env = {"OUT_DIR": str(tmp_path), "MODEL_PATH": model_dir}
    run = dry_run("smoke_1gpu.sh", tmp_path, "trainer.n_gpus_per_node=4", **env)
    assert any(
        p.startswith(f"{LOG_PROB}=32 does not divide data.train_batch_size * group size") for p in run.problems
    ), run.problems
    sizes = [f"{key}=4" for key in (UPDATE, LOG_PROB, REF)]
    assert dry_run("smoke_1gpu.sh", tmp_path, "trainer.n_gpus_per_node=4", *sizes, **env).problems == []
    # The one-GPU default (micro 32) divides its 32-row mini-batches.
    assert dry_run("smoke_1gpu.sh", tmp_path, **env).problems == []


def test_14b_paper_script_validates_on_8_nodes_with_rollout_tp2(tmp_path, data_dir, model_dir):
    run = dry_run("pc_qwen3-14b_p16c48.sh", tmp_path, DATA_DIR=data_dir, MODEL_PATH=model_dir)
    assert run.problems == []
    cfg = run.config
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (8, 8)
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 2
    # Dynamic batch sizes are on (train_scripts/common.sh): no micro size is split by count at any dp size.
    assert cfg.actor_rollout_ref.actor.use_dynamic_bsz is True


def test_a_knapsack_dry_run_of_a_paper_script_names_every_value_to_set_then_says_what_the_run_will_do(
    data_dir, model_dir, tmp_path
):
    """One dry run names every setting the knapsack cannot run in the PC script, each with its value; set as those
    lines say, the next dry run passes and prints its summary (no config: SHOW_CONFIG is unset)."""
    env = {"DATA_DIR": data_dir, "MODEL_PATH": model_dir}
    refused = validate_script("pc_qwen3-4b_p16c48.sh", tmp_path, "algorithm.rollout_allocation=knapsack", **env)
    assert (refused.code, refused.out) == (1, "")
    errors = refused.errors()
    assert [e.split(":")[0] for e in errors] == [
        "actor_rollout_ref.rollout.n=48 must lie in [algorithm.knapsack.min_commit=4, "
        "algorithm.knapsack.max_commit=32], so that uniform sizing is one of the allocations",
        "preset=reference runs the authors' Pilot-Commit; algorithm.rollout_allocation=knapsack is not theirs",
        "algorithm.rollout_allocation=knapsack trains full steps only (its groups differ in size, so an unfilled step "
        "cannot be cut to whole mini-batches by its prompt count)",
        "not checked",
    ]
    # Each line's fix, as the line words it: a Hydra override after "set", the script's PRESET in parentheses.
    overrides = [m.group(1) for e in errors if (m := re.search(r"\bset ([\w.]+=\w+)", e))]
    presets = [m.group(1) for e in errors if (m := re.search(r"\((PRESET=\w+) in the paper scripts", e))]
    assert overrides == ["algorithm.knapsack.max_commit=96", "algorithm.min_train_prompts=128"]
    assert presets == ["PRESET=improved"]
    fixed = validate_script(
        "pc_qwen3-4b_p16c48.sh",
        tmp_path,
        "algorithm.rollout_allocation=knapsack",
        *overrides,
        **env,
        **dict(p.split("=") for p in presets),
    )
    assert fixed.code == 0 and fixed.errors() == [], fixed.err[-2000:]
    assert fixed.err.endswith("config checks passed\n")
    lines = fixed.out.splitlines()
    assert lines[0] == f"{HEADER} (pilot-commit/pc_qwen3-4b_p16c48-improved)" and len(lines) <= 20
    assert lines[2] == (
        "  allocator   knapsack: pilots of 16 (exploration.n) a new prompt; commits of 4 to 96 in steps of 4 "
        "(algorithm.knapsack.*), 48 (rollout.n) on average; groups of 20 to 112"
    )
    assert "  rollouts    at least 12,288 a step (a round of 384 × 16 pilots, 128 × 48 commits)" in lines
