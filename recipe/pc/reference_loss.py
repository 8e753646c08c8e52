"""verl 0.5's loss aggregation, for the reference preset, as a policy loss registered with verl 0.9.1.

The authors' runs (verl 0.5) took each micro-batch's own token mean of the clipped PPO loss and weighted it by the
micro-batch's rows over a whole mini-batch's rows on that rank, ``ppo_mini_batch_size * rollout.n / ranks``. A
mini-batch's gradient was so a row-weighted mean of micro-batch token means, and a partial last mini-batch counted
by its rows against a whole one (about a third in the paper's configurations). verl 0.9.1 instead divides every
micro-batch's token sum by the token count of the whole mini-batch.

``actor.policy_loss.loss_mode=pc_reference`` (set by ``preset=reference``) computes verl's own clipped loss
(``compute_policy_loss_vanilla``, dual clip included) and aggregates it the 0.5 way. Only real rows count: rows whose
``response_mask`` is all zero are the padding that fills a rank's partial mini-batch up to a whole one for verl 0.9.1.
Ranks are averaged by FSDP in both versions, so the per-rank loss is the same.

verl imports this module in every process, the Ray workers included, through ``VERL_USE_EXTERNAL_MODULES``
(``recipe.pc.main_pc`` sets it); importing it registers the loss.
"""

from __future__ import annotations

import torch
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, register_policy_loss

LOSS_MODE = "pc_reference"
MODULE = __name__


@register_policy_loss(LOSS_MODE)
def micro_batch_weighted_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config=None,
    rollout_is_weights: torch.Tensor | None = None,
):
    """One micro-batch's clipped PPO loss: its token mean times its real rows over a whole mini-batch's rows."""
    if loss_agg_mode != "token-mean":
        raise ValueError(f"policy_loss.loss_mode={LOSS_MODE} reproduces verl 0.5's token-mean, not {loss_agg_mode!r}")
    info = config.global_batch_info
    dp_size, mini_rows = info.get("dp_size", 1), info.get("global_batch_size")
    if not mini_rows:
        raise ValueError(
            f"policy_loss.loss_mode={LOSS_MODE} needs the mini-batch size verl passes as global_batch_size"
        )
    # "token-sum" makes verl's loss return this rank's token sum times dp_size (its rule for summing over ranks).
    token_sum, metrics = compute_policy_loss_vanilla(
        old_log_prob, log_prob, advantages, response_mask, "token-sum", config, rollout_is_weights
    )
    mask = response_mask.bool()
    real_rows = mask.any(dim=-1).sum()
    token_mean = token_sum / dp_size / mask.sum().clamp(min=1)
    return token_mean * real_rows / (mini_rows / dp_size), metrics
