"""The Hydra config composes on CPU with every PC key, and bad PC values fail with the key named."""

import os
import subprocess
import sys

import pytest
from conftest import ROOT, compose_pc_config

from recipe.pc.settings import PCConfigError, PCSettings

PC_KEYS = [
    "data.gen_batch_size",
    "data.custom_cls.path",
    "reward.reward_manager.name",
    "reward.reward_kwargs.overlong_buffer_cfg.enable",
    "reward.reward_kwargs.overlong_buffer_cfg.len",
    "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor",
    "reward.reward_kwargs.overlong_buffer_cfg.log",
    "algorithm.agg_metric",
    "algorithm.max_num_gen_batches",
    "algorithm.buffer_size",
    "algorithm.buffer_max_off_steps",
    "algorithm.buffer_sampling_method",
    "algorithm.buffer_response_sampling_method",
    "algorithm.diversity_threshold_upper",
    "algorithm.diversity_threshold_lower",
    "algorithm.exclude_threshold_upper",
    "algorithm.exploration.n",
    "algorithm.exploration.n_effective",
    "algorithm.seed",
    "trainer.project_name",
]


def test_entry_point_prints_composed_config_without_gpu():
    out = subprocess.run(
        [sys.executable, "-m", "recipe.pc.main_pc", "--cfg", "job"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    import yaml

    cfg = yaml.safe_load(out.stdout)
    for key in PC_KEYS:
        node = cfg
        for part in key.split("."):
            assert part in node, f"{key} missing from the composed config"
            node = node[part]
    assert cfg["algorithm"]["diversity_threshold_lower"] == 0.125
    assert cfg["algorithm"]["exclude_threshold_upper"] == 1.0
    assert cfg["actor_rollout_ref"]["rollout"]["name"] == "???"  # still stock verl underneath


def test_defaults_read_into_settings():
    settings = PCSettings.from_config(compose_pc_config(["data.train_batch_size=16", "data.seed=3"]))
    assert settings.gen_batch_size == 16 and settings.n_pilot_effective == settings.n_pilot == 8
    assert settings.group_size == 16 and settings.train_rows == 256
    assert settings.seed == 3 and settings.evict_threshold == 1.0


@pytest.mark.parametrize(
    "override, match",
    [
        ("algorithm.diversity_threshold_lower=1.5", "diversity_threshold_lower"),
        ("algorithm.diversity_threshold_upper=-0.1", "diversity_threshold_upper"),
        ("algorithm.diversity_threshold_lower=0.6", "empty band"),
        ("algorithm.exploration.n_effective=9", "n_effective"),
        ("algorithm.exploration.n=0", "exploration.n"),
        ("algorithm.exclude_threshold_upper=0", "exclude_threshold_upper"),
        ("algorithm.buffer_size=4", "buffer_size"),
        ("algorithm.buffer_max_off_steps=-1", "buffer_max_off_steps"),
        ("algorithm.buffer_sampling_method=oldest", "buffer_sampling_method"),
        ("algorithm.buffer_response_sampling_method=all", "buffer_response_sampling_method"),
        ("algorithm.rollout_allocation=ppo", "rollout_allocation"),
        ("algorithm.mini_batch_unit=tokens", "mini_batch_unit"),
    ],
)
def test_bad_values_name_their_key(override, match):
    cfg = compose_pc_config(["data.train_batch_size=16", "algorithm.diversity_threshold_upper=0.5", override])
    with pytest.raises(PCConfigError, match=match):
        PCSettings.from_config(cfg)


def test_parallel_size_checks():
    settings = PCSettings.from_config(compose_pc_config(["data.train_batch_size=16"]))
    settings.check_parallel_sizes(dp_size=8, ppo_mini_batch_size=4)  # 256 rows, mini 32 rows
    with pytest.raises(PCConfigError, match="data-parallel"):
        settings.check_parallel_sizes(dp_size=3, ppo_mini_batch_size=4)
    with pytest.raises(PCConfigError, match="ppo_mini_batch_size=3"):
        settings.check_parallel_sizes(dp_size=1, ppo_mini_batch_size=3)
