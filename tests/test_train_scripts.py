"""Every train script composes its full Hydra config on CPU (DRY_RUN=1), and the result passes the
PC checks and verl's own config validation for the script's cluster size.

DRY_RUN=1 also runs the start-up checks (``main_pc --validate``), which need the data files to exist:
the tests point DATA_DIR at a folder of empty stand-in files named as the scripts expect.
"""

import glob
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from conftest import ROOT
from omegaconf import OmegaConf

from recipe.pc.parallel import check_parallel_sizes
from recipe.pc.settings import PCSettings

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct"
VENV_PATH = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """Empty stand-ins for every parquet a train script names under $DATA_DIR (the checks test existence)."""
    root = tmp_path_factory.mktemp("data")
    for script in glob.glob(os.path.join(ROOT, "train_scripts", "*.sh")):
        with open(script) as f:
            for rel in re.findall(r"\$DATA_DIR/([\w./-]+\.parquet)", f.read()):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).touch()
    # common.sh picks the DeepMath folder by preset ($DATA_DIR/$DEEPMATH_DIR/...): both copies.
    for folder in ("deepmath_103k_prefiltered", "deepmath_103k_filtered"):
        for name in ("train.parquet", "test.parquet"):
            (root / folder).mkdir(exist_ok=True)
            (root / folder / name).touch()
    for name in ("train.parquet", "test.parquet"):
        (root / name).touch()
    return str(root)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("model"))


def run_script(
    script: str,
    env_extra: dict,
    *args: str,
    drop=("MODEL_PATH", "DATA_DIR", "OUT_DIR", "VERL_FILE_LOGGER_PATH", "RAY_TMP"),
):
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update({"PATH": VENV_PATH, **env_extra})
    path = os.path.join(ROOT, "train_scripts", script)
    return subprocess.run(["bash", path, *args], capture_output=True, text=True, env=env, timeout=300)


PAPER_SCRIPTS = sorted(
    os.path.basename(p)
    for p in glob.glob(os.path.join(ROOT, "train_scripts", "*.sh"))
    if os.path.basename(p).split("_")[0] in ("grpo", "dapo", "pc")
)


def compose(script: str, env_extra: dict, *args: str) -> dict:
    out = run_script(script, {"DRY_RUN": "1", **env_extra}, *args)
    assert out.returncode == 0, out.stderr[-3000:]
    return yaml.safe_load(out.stdout)


def test_every_paper_configuration_has_its_scripts():
    for model in ("qwen2.5-1.5b", "qwen3-4b", "qwen3-8b", "qwen3-14b"):
        assert sum(model in s for s in PAPER_SCRIPTS) == 3, model


@pytest.mark.parametrize("script", PAPER_SCRIPTS)
def test_paper_script_composes_and_validates(script, data_dir):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    cfg = OmegaConf.create(compose(script, {"DATA_DIR": data_dir}))
    OmegaConf.resolve(cfg)
    settings = PCSettings.from_config(cfg)
    assert settings.method == {"grpo": "grpo", "dapo": "dapo", "pc": "pilot_commit"}[script.split("_")[0]]
    # The default PRESET=reference runs the authors' n=16 in the 4B DAPO script (README table).
    expected_group = 16 if script == "dapo_qwen3-4b_n64.sh" else (128 if "1.5b" in script else 64)
    assert settings.group_size == expected_group
    assert settings.train_batch_size == 128
    dp = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
    check_parallel_sizes(settings, dp, cfg.actor_rollout_ref.actor.ppo_mini_batch_size)
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert cfg.data.train_files.startswith(data_dir + "/")
    assert len(cfg.data.val_files) == 7


def test_script_environment_and_passthrough_overrides(data_dir, model_dir):
    cfg = compose(
        "pc_qwen3-4b_p16c48.sh",
        {"DATA_DIR": data_dir, "MODEL_PATH": model_dir, "NNODES": "2", "NGPUS_PER_NODE": "4", "CKPTS_DIR": "/ck"},
    )
    assert cfg["actor_rollout_ref"]["model"]["path"] == model_dir
    assert (cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"]) == (2, 4)
    assert cfg["trainer"]["default_local_dir"] == "/ck/pc_qwen3-4b_p16c48-reference"
    cfg = compose("pc_qwen3-4b_p16c48.sh", {"DATA_DIR": data_dir}, "algorithm.exploration.n=8")
    assert cfg["algorithm"]["exploration"]["n"] == 8


@pytest.mark.parametrize(
    "script", sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "train_scripts", "*.s*")))
)
def test_shell_syntax(script):
    out = subprocess.run(["bash", "-n", os.path.join(ROOT, "train_scripts", script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_cluster_launcher_rejects_unknown_roles_and_needs_a_head_address():
    launcher = os.path.join(ROOT, "train_scripts", "ray_cluster.sh")
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
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    env = {"DATA_DIR": data_dir, "MODEL_PATH": model_dir, "RAY_TMP": "/tmp/ray_x", "OUT_DIR": str(tmp_path)}
    cfg = OmegaConf.create(compose(script, env))
    OmegaConf.resolve(cfg)
    settings = PCSettings.from_config(cfg)
    assert (settings.method, settings.group_size) == (method, group)
    check_parallel_sizes(settings, 1, cfg.actor_rollout_ref.actor.ppo_mini_batch_size)
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    # RAY_TMP: a side-by-side job on a Ray head of its own (tests/test_side_by_side_ray.py), so the driver only
    # connects: no CPU count, no temp dir of the driver's.
    assert cfg.ray_kwargs.ray_init.num_cpus is None
    assert "_temp_dir" not in cfg.ray_kwargs.ray_init
    assert cfg.data.val_files == data_dir + "/test.parquet"


def _levels(path: str) -> set:
    return {int(info["level"]) for info in pd.read_parquet(path)["extra_info"]}


def test_smoke_script_runs_with_nothing_set_and_reuses_its_data(tmp_path):
    out_dir = tmp_path / "out"
    first = run_script("smoke_1gpu.sh", {"DRY_RUN": "1", "OUT_DIR": str(out_dir)})
    assert first.returncode == 0, first.stderr[-3000:]
    cfg = yaml.safe_load(first.stdout)
    data = out_dir / "data"
    assert cfg["actor_rollout_ref"]["model"]["path"] == SMOL
    assert cfg["data"]["train_files"] == str(data / "train.parquet")
    assert cfg["data"]["val_files"] == str(data / "test.parquet")
    assert len(pd.read_parquet(data / "train.parquet")) == 160 and len(pd.read_parquet(data / "test.parquet")) == 32
    assert _levels(str(data / "train.parquet")) == {1, 2}
    assert f"smoke_1gpu: model {SMOL}, data {data}, metrics {out_dir / 'metrics.jsonl'}" in first.stderr
    assert f"actor_rollout_ref.model.path={SMOL} is a hub id: not checked in a dry run" in first.stderr
    assert sorted(os.listdir(out_dir)) == ["data"]  # no half-written temporary folder left beside it

    stamp = os.stat(data / "train.parquet").st_mtime_ns
    second = run_script("smoke_1gpu.sh", {"DRY_RUN": "1", "OUT_DIR": str(out_dir)})
    assert second.returncode == 0, second.stderr[-3000:]
    assert os.stat(data / "train.parquet").st_mtime_ns == stamp


def test_arithmetic_scripts_default_to_all_levels_at_comparison_size(tmp_path):
    out = run_script("arith_pc_1gpu.sh", {"DRY_RUN": "1", "OUT_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert yaml.safe_load(out.stdout)["actor_rollout_ref"]["model"]["path"] == SMOL
    assert len(pd.read_parquet(tmp_path / "data" / "train.parquet")) == 3000
    assert len(pd.read_parquet(tmp_path / "data" / "test.parquet")) == 200
    assert _levels(str(tmp_path / "data" / "train.parquet")) == {1, 2, 3, 4, 5}


def test_dry_run_fails_on_a_bad_key_and_names_it(tmp_path, data_dir):
    out = run_script(
        "smoke_1gpu.sh", {"DRY_RUN": "1", "OUT_DIR": str(tmp_path), "DATA_DIR": data_dir}, "algorithm.exploration.n=0"
    )
    assert out.returncode != 0
    assert "config error: algorithm.exploration.n=0 must be at least 1" in out.stderr


@pytest.mark.parametrize(
    "env, message",
    [
        ({"GRADER": "sympy"}, "reward_kwargs.grader='sympy' (GRADER in the scripts)"),
        ({"NGPUS_PER_NODE": "3"}, "does not split over 6 data-parallel ranks"),
        ({"MODEL_PATH": "/nowhere/qwen"}, "actor_rollout_ref.model.path=/nowhere/qwen (MODEL_PATH) does not exist"),
    ],
)
def test_dry_run_of_a_paper_script_names_each_failed_check(env, message, data_dir):
    out = run_script("pc_qwen3-4b_p16c48.sh", {"DRY_RUN": "1", "DATA_DIR": data_dir, "NNODES": "2", **env})
    assert out.returncode != 0 and message in out.stderr, out.stderr[-3000:]


def test_dry_run_names_missing_data_files(tmp_path):
    out = run_script("grpo_qwen3-4b_n64.sh", {"DRY_RUN": "1", "DATA_DIR": str(tmp_path)})
    assert out.returncode != 0
    # The reference preset (the default) reads the as-authors copies.
    assert f"data.train_files: {tmp_path}/polaris_53k_as_authors/train.parquet" in out.stderr
    assert f"data.val_files: {tmp_path}/math_test_as_authors/aime-2024-nosystem-boxed.parquet" in out.stderr


def test_unreachable_model_stops_before_ray_with_one_line(tmp_path, data_dir):
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "OUT_DIR": str(tmp_path), "DATA_DIR": data_dir}
    out = run_script("smoke_1gpu.sh", env, drop=("MODEL_PATH", "DATA_DIR", "OUT_DIR", "HF_HUB_CACHE"))
    assert out.returncode != 0
    errors = [line for line in out.stderr.splitlines() if line.startswith("config error:")]
    assert errors == [
        f"config error: model '{SMOL}' is not in the local Hugging Face cache and cannot be fetched from the hub "
        f"(OfflineModeIsEnabled); download it where there is network (hf download {SMOL} --local-dir DIR) and set "
        "MODEL_PATH=DIR (or actor_rollout_ref.model.path=DIR)"
    ]
    assert "ray init kwargs" not in out.stdout + out.stderr
