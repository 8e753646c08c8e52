"""The one-GPU arithmetic launchers compose the configs they composed before the settings became typed groups with
every default in the YAML (``tests/fixtures/arith_configs/``, written by ``DRY_RUN=1`` before that change): the regime
study's runs keep their meaning. The DAPO launchers' settings are the values DAPO read from verl's DAPO keys before it
read every allocator's."""

import os

import pytest
import yaml
from omegaconf import OmegaConf
from support import FIXTURES, PAPER_SCRIPTS, script_command_line

from recipe.pc.settings import PCSettings
from recipe.pc.testing import compose_pc_config

SNAPSHOTS = os.path.join(FIXTURES, "arith_configs")
DAPO_KEYS = {
    "algorithm.filter_groups.metric": "algorithm.agg_metric",
    "algorithm.filter_groups.max_num_gen_batches": "algorithm.max_num_gen_batches",
}
VERL_DEFAULTS = {"algorithm.filter_groups.metric": "reward", "algorithm.filter_groups.max_num_gen_batches": 0}


def flatten(tree, prefix=""):
    if isinstance(tree, dict):
        return {k: v for key, value in tree.items() for k, v in flatten(value, f"{prefix}{key}.").items()}
    return {prefix[:-1]: tree}


# The knapsack allocator's keys, read only when algorithm.rollout_allocation=knapsack.
KNAPSACK_DEFAULTS = {"unit": 4, "min_commit": 4, "max_commit": 32, "prior_alpha": 1.0, "prior_beta": 1.0}


@pytest.mark.parametrize("method", ["grpo", "dapo", "pc"])
def test_arith_launchers_compose_what_they_composed_before(method, tmp_path):
    env = {"DATA_DIR": "/snapshot/data", "OUT_DIR": "/snapshot/out", "MODEL_PATH": "/snapshot/model"}
    cfg = compose_pc_config(script_command_line(f"arith_{method}_1gpu.sh", tmp_path, **env))
    now = flatten(OmegaConf.to_container(cfg, resolve=False))  # as DRY_RUN printed it: interpolations unresolved
    before = flatten(yaml.safe_load(open(os.path.join(SNAPSHOTS, f"{method}.yaml"))))
    changed = {k for k in before.keys() & now.keys() if before[k] != now[k]}
    # verl's DAPO keys, which DAPO read then, are no longer set (nor read): the keys every allocator reads hold their
    # values.
    for dapo_key, key in DAPO_KEYS.items():
        assert now[key] == before[dapo_key] and now[dapo_key] == VERL_DEFAULTS[dapo_key]
    changed -= set(DAPO_KEYS)
    # Keys added since, at the value that was the behaviour before they existed.
    added = {
        "algorithm.row_order": "verl",
        "algorithm.prompt_filter": None,
        "algorithm.buffer_take_all_order": "ranked",
        "trainer.val_rollout_interval": None,
        "trainer.preset": None,
        **{f"algorithm.knapsack.{k}": v for k, v in KNAPSACK_DEFAULTS.items()},
        # Only mean@N and std@N are logged now (verl's values and names); the bootstrapped best@k/worst@k/maj@k are not.
        "trainer.val_metrics": "mean",
    }
    assert {k: now[k] for k in now.keys() - before.keys()} == added
    assert before.keys() - now.keys() == set()
    # How a step runs, not what it computes: verl's fused log-probs (tests/unit/test_fused_log_probs.py) and no
    # gradient checkpointing (the same gradients, recomputation saved).
    execution = {
        "actor_rollout_ref.model.use_fused_kernels": True,
        "actor_rollout_ref.model.enable_gradient_checkpointing": False,
    }
    assert {k: now[k] for k in execution} == execution
    changed -= set(execution)
    if method == "pc":
        assert changed == set()
    else:  # a baseline's group is rollout.n rollouts: both mini-batch units are the same rows
        assert changed == {"algorithm.mini_batch_unit"} and now["algorithm.mini_batch_unit"] == "group"


@pytest.mark.parametrize("script", [s for s in PAPER_SCRIPTS if s.startswith("dapo_")] + ["arith_dapo_1gpu.sh"])
def test_dapo_launchers_set_the_filter_metric_and_round_limit_they_set_through_verls_dapo_keys(script, tmp_path):
    settings = PCSettings.from_config(compose_pc_config(script_command_line(script, tmp_path)))
    assert (settings.method, settings.agg_metric, settings.max_num_gen_batches) == ("dapo", "acc", 10)
