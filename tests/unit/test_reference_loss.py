"""The reference preset's loss aggregation (verl 0.5's rule) as a registered verl 0.9.1 policy loss."""

import os

import pytest
import torch
from support import ROOT
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.workers.config import FSDPActorConfig

from recipe.pc import reference_loss

# One rank's mini-batch of 6 rows, split into micro-batches of very unequal token counts; row 5 is padding.
LENGTHS = [1, 2, 1, 7, 8, 0]
MICRO = [[0, 1, 2], [3, 4, 5]]
ADVANTAGES = [1.0, -0.5, 2.0, -1.0, 0.5, 0.0]
WIDTH = 8


def actor_config(dp_size: int, mini_rows: int, total_tokens: int) -> FSDPActorConfig:
    config = FSDPActorConfig(
        strategy="fsdp",
        rollout_n=1,
        ppo_mini_batch_size=1,
        use_dynamic_bsz=True,
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
    )
    # What verl's ppo_loss puts there before it calls the policy loss (verl/workers/utils/losses.py).
    config.global_batch_info.update(
        dp_size=dp_size, batch_num_tokens=total_tokens, global_batch_size=mini_rows, loss_scale_factor=None
    )
    return config


def mini_batch():
    mask = torch.tensor([[1.0] * n + [0.0] * (WIDTH - n) for n in LENGTHS])
    advantages = torch.tensor(ADVANTAGES)[:, None].expand(-1, WIDTH).clone()
    old = torch.linspace(-2.0, -0.5, len(LENGTHS) * WIDTH).reshape(len(LENGTHS), WIDTH)
    return mask, advantages, old


def summed_gradient(loss_mode: str, dp_size: int = 1) -> torch.Tensor:
    """The gradient of the mini-batch's loss with respect to the log-probs, micro-batch by micro-batch."""
    mask, advantages, old = mini_batch()
    log_prob = old.clone().requires_grad_(True)  # ratio 1: inside the clip range, gradient -A per token
    config = actor_config(dp_size, mini_rows=len(LENGTHS) * dp_size, total_tokens=int(mask.sum()) * dp_size)
    loss_fn = get_policy_loss_fn(loss_mode)
    for rows in MICRO:
        loss, _ = loss_fn(old[rows], log_prob[rows], advantages[rows], mask[rows], "token-mean", config)
        loss.backward()
    return log_prob.grad


def verl_05_gradient() -> torch.Tensor:
    """By hand: each micro-batch's token mean, weighted by its real rows over the rank's mini-batch rows (5 real of
    a nominal 6: the padding row counts in the nominal size, not in the weight)."""
    mask, advantages, _ = mini_batch()
    grad = torch.zeros_like(mask)
    for rows in MICRO:
        real = sum(LENGTHS[r] > 0 for r in rows)
        tokens = mask[rows].sum()
        grad[rows] = -advantages[rows] * mask[rows] / tokens * real / len(LENGTHS)
    return grad


def test_the_gradient_is_verl_05s_row_weighted_micro_batch_token_means():
    torch.testing.assert_close(summed_gradient(reference_loss.LOSS_MODE), verl_05_gradient(), atol=1e-6, rtol=0)


def test_and_it_differs_from_verl_091s_token_mean_over_the_mini_batch():
    mask, advantages, _ = mini_batch()
    token_mean = -advantages * mask / mask.sum()  # vanilla with global_batch_info: one mean over all tokens
    torch.testing.assert_close(summed_gradient("vanilla"), token_mean, atol=1e-6, rtol=0)
    assert (summed_gradient(reference_loss.LOSS_MODE) - token_mean).abs().max() > 1e-3


def test_ranks_are_averaged_by_fsdp_so_the_per_rank_loss_does_not_depend_on_their_number():
    torch.testing.assert_close(
        summed_gradient(reference_loss.LOSS_MODE, dp_size=4), verl_05_gradient(), atol=1e-6, rtol=0
    )


def test_only_token_mean_is_reproduced():
    mask, advantages, old = mini_batch()
    with pytest.raises(ValueError, match="token-mean"):
        reference_loss.micro_batch_weighted_loss(
            old, old, advantages, mask, "seq-mean-token-mean", actor_config(1, 6, 19)
        )


def test_the_packing_measurement_runs_and_packs_as_each_verl_version_does():
    """scripts/reference_packing.py, at a tiny shape: what the 'How it differs' page quotes cannot rot."""
    import runpy

    script = runpy.run_path(os.path.join(ROOT, "scripts", "reference_packing.py"))
    lengths = [900, 150, 700, 400, 820, 130, 640, 300]
    old, new = script["packing_05"](lengths, 1000), script["packing_091"](lengths, 1000)
    assert len(old) == -(-sum(lengths) // 1000)  # verl 0.5: the fewest micro-batches that fit on average
    assert all(sum(lengths[i] for i in part) <= 1000 for part in new)  # verl 0.9.1: every one fits
    assert sorted(i for part in old for i in part) == sorted(i for part in new for i in part) == list(range(8))
    (p_mean, p_max), (t_mean, t_max) = script["measure"](8, 1000, 50, (50, 900), draws=5)
    assert 0 < p_mean <= p_max < 2 and 0 < t_mean <= t_max < 2
