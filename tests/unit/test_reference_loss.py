"""The reference preset's loss aggregation (verl 0.5's rule) as a registered verl 0.9.1 policy loss."""

import os

import numpy as np
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


def packing_script() -> dict:
    """scripts/reference_packing.py's functions: what the 'How it differs' page quotes cannot rot."""
    import runpy

    return runpy.run_path(os.path.join(ROOT, "scripts", "reference_packing.py"))


# Two ranks' mini-batches, micro-batches of at most 1,000 tokens. Alone, rank B asks verl 0.5 for 4 micro-batches
# (ceil(3,836 / 1,000)) and verl 0.9.1 for 5; rank A asks for 5 and, balanced on workload, fits only in 6.
RANK_A = [499, 536, 767, 952, 83, 186, 831, 951]
RANK_B = [286, 346, 875, 452, 309, 836, 294, 438]


def test_the_packing_measurement_takes_the_micro_batch_count_over_ranks_as_each_verl_version_does():
    script = packing_script()
    assert [len(parts) for parts in script["packing_05"]([RANK_B], 1000)] == [4]
    assert [len(parts) for parts in script["packing_091"]([RANK_B], 1000)] == [5]
    old, new = script["packing_05"]([RANK_A, RANK_B], 1000), script["packing_091"]([RANK_A, RANK_B], 1000)
    # verl 0.5: the largest count any rank asks for, on every rank, whether or not its micro-batches fit.
    assert [len(parts) for parts in old] == [5, 5]
    # verl 0.9.1: from there, one more on every rank until every micro-batch of every rank fits.
    assert [len(parts) for parts in new] == [6, 6]
    for lengths, parts in zip((RANK_A, RANK_B), new, strict=True):
        assert all(sum(lengths[i] for i in part) <= 1000 for part in parts)
    for parts in old + new:
        assert sorted(i for part in parts for i in part) == list(range(8))


def test_the_packing_measurement_pads_the_last_mini_batch_as_the_trainer_does():
    from verl import DataProto

    from recipe.pc.minibatch import MiniBatchPlan, pad_partial_mini_batch

    script = packing_script()
    # Two ranks of 8 rows: one whole mini-batch of 6 and a partial one of 2, padded with 4 copies.
    lengths = torch.arange(1, 17)
    batch = DataProto.from_dict(
        {"length": lengths, "response_mask": torch.ones(16, 3), "advantages": torch.ones(16, 3)}
    )
    padded = pad_partial_mini_batch(batch, MiniBatchPlan(8, 6, 1, 2), dp_size=2).batch["length"].numpy()
    for rank in range(2):
        tail = lengths[rank * 8 + 6 : rank * 8 + 8].numpy()
        assert script["padded"](tail, 6).tolist() == padded[rank * 12 + 6 : rank * 12 + 12].tolist()
    # Padding rows weigh nothing; the real rows of the last mini-batch weigh their share of a whole one, 2 / 6.
    responses, real = script["padded"](tail, 6), np.r_[True, True, [False] * 4]
    for parts in ([[0, 2, 4], [1, 3, 5]], [[0, 1], [2, 3, 4, 5]], [[0], [1], [2, 3, 4, 5]]):
        weights = script["token_weights"](parts, responses, real, 6)
        assert not weights[~real].any() and (weights * responses).sum() == pytest.approx(2 / 6)


def test_the_packing_measurement_reports_both_mini_batches_and_the_paddings_compute(capsys):
    script = packing_script()
    # The 4B shape's proportions, small: 64 rows a rank = 5 x 12 + 4, the last padded with 8 copies (+12.5% rows).
    argv = ["--ranks", "2", "--rows", "12", "--step-rows", "64", "--max-tokens", "1000", "--prompt", "50"]
    assert script["main"]([*argv, "--response", "50:900", "--draws", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("2 ranks, 64 rows a rank a step in mini-batches of 12 (5 whole, the last of 4 padded")
    shares = [float(x.rstrip("%")) for line in out[3:5] for x in line.strip("| ").split(" | ")[1:]]
    assert len(shares) == 8 and all(0 < share < 200 for share in shares)
    assert out[5].startswith("padding of the last mini-batch: +12.5% rows and +")
    found = script["measure"](2, 12, 64, 1000, 50, (50, 900), draws=3)
    assert {len(values) for values in found.values()} == {6}  # one of each kind per rank and step
    # 8 copies of 4 of the rank's 64 rows: about 12.5% of its tokens on top.
    assert found["padding_tokens"].mean() == pytest.approx(0.125, abs=0.03)
    # A token limit nothing reaches: one micro-batch in each version, the real rows' token mean at their share of a
    # whole mini-batch, so no weight moves.
    found = script["measure"](2, 12, 64, 10**6, 50, (50, 900), draws=1)
    assert all(not found[key].any() for key in ("whole", "whole_token_mean", "last", "last_token_mean"))
