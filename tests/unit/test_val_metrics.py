"""trainer.val_metrics: mean@N and std@N as verl computes and names them, without its bootstraps; full is verl's."""

import functools

import numpy as np
import pytest
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from recipe.pc.pc_ray_trainer import RayPCTrainer
from recipe.pc.val_metrics import mean_validation_metrics


def validation_scores(seed: int):
    """Scores as verl's _validate gathers them: three sources, 8 samples a prompt, missing acc values (a prompt with 7,
    one with 1, a source with none), a text field (the DAPO manager's parsed answer)."""
    rng = np.random.default_rng(seed)
    sources, uids = [], []
    for p in range(9):
        source = ("arith_l1", "arith_l2", "math")[p % 3]
        sources += [source] * 8
        uids += [f"u{p}"] * 8
    rows = len(uids)
    acc = (rng.random(rows) < 0.4).tolist()
    acc[5] = None  # prompt 0 keeps 7
    acc[9:16] = [None] * 7  # prompt 1 keeps 1: no std
    for p in range(2, 9, 3):  # the "math" prompts have no acc: their core field is the reward
        acc[8 * p : 8 * p + 8] = [None] * 8
    infos = {
        "reward": [1.0 if a else -1.0 for a in acc],  # every row has one
        "acc": acc,
        "pred": [str(rng.integers(0, 3)) for _ in range(rows)],
        "length": rng.integers(1, 64, rows).astype(float).tolist(),
    }
    turns = [np.full(rows // 2, 2), np.full(rows - rows // 2, 2)]
    return np.array(sources, dtype=object), uids, infos, turns


def pc_trainer(val_metrics: str) -> RayPCTrainer:
    trainer = object.__new__(RayPCTrainer)  # only the settings are read
    trainer.pc = type("Settings", (), {"val_metrics": val_metrics})()
    return trainer


@functools.cache
def verl_metrics(seed: int) -> dict:
    """verl 0.9.1's own validation metrics of ``validation_scores(seed)`` (seconds: its bootstraps)."""
    return RayPPOTrainer._val_metrics_update(object(), *validation_scores(seed))


def test_mean_mode_gives_verls_mean_and_std_under_verls_names():
    full = verl_metrics(0)
    mean = pc_trainer("mean")._val_metrics_update(*validation_scores(0))
    bootstrapped = ("best@", "worst@", "maj@")
    expected = {k: v for k, v in full.items() if not any(b in k for b in bootstrapped)}
    assert set(mean) == set(expected)
    for k, v in expected.items():
        assert mean[k] == pytest.approx(v, rel=1e-12, abs=0), k
    # The names the report reads, and the uneven prompt (7 acc values) under its own N, as verl files them.
    assert {"val-core/arith_l1/acc/mean@8", "val-core/math/reward/mean@8", "val-aux/arith_l1/acc/mean@7"} <= set(mean)
    assert "val-aux/arith_l2/acc/mean@1" in mean and not any("std@1" in k or "math/acc" in k for k in mean)
    assert "val-aux/math/length/std@8" in mean and "val-aux/num_turns/mean" in mean
    assert not any("pred" in k for k in mean)
    # What the default leaves out is exactly verl's bootstrapped set.
    assert {k for k in full if k not in mean} == {k for k in full if any(b in k for b in bootstrapped)}
    assert any(k.startswith("val-core/") and "maj@8" in k for k in full)


def test_full_mode_is_verls_own_function():
    assert pc_trainer("full")._val_metrics_update(*validation_scores(0)) == verl_metrics(0)


def test_mean_of_a_source_is_the_mean_over_prompts_of_each_prompts_mean():
    # Two prompts of unequal size: verl averages the per-prompt means, not the pooled samples.
    out = mean_validation_metrics(["s"] * 5, ["a", "a", "b", "b", "b"], {"acc": [1.0, 0.0, 1.0, 1.0, 1.0]})
    assert out["s"]["acc"]["mean@2"] == 0.5 and out["s"]["acc"]["mean@3"] == 1.0
    assert out["s"]["acc"]["std@2"] == 0.5 and "std@1" not in mean_validation_metrics(["s"], ["a"], {"acc": [1.0]})
