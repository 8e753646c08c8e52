"""The reference's PPO mini-batch arithmetic through the real fit() (algorithm.partial_mini_batch=true).

The paper's shapes, scaled down with the same ratios (prompts per step : prompts per mini-batch = 4 : 1,
pilot : commit = 1 : 3), so that each rank's rows are 16/3 mini-batches, as on the GPUs:
- 1.5B: 128 prompts x (32 + 96) on 16 ranks, mini-batches 32 x 96  ->  4 x (2 + 6) on 2 ranks, 1 x 6;
- 4B:   128 prompts x (16 + 48) on 32 ranks, mini-batches 32 x 48  ->  4 x (4 + 12) on 4 ranks, 1 x 12.
Either way a step is 5 whole mini-batches and one partial one of a third of the rows, in ONE update_actor call (one
LR-scheduler step); the reference loss (``recipe.pc.reference_loss``, tested on its own) weights the partial one by its
real rows. GRPO at the same group size keeps its 4.
"""

import numpy as np
import pytest
import torch
from support import env_file_logger
from verl import DataProto

from recipe.pc import metric_names as names
from recipe.pc.minibatch import MiniBatchPlan, pad_partial_mini_batch
from recipe.pc.settings import PCConfigError
from recipe.pc.testing import build_trainer, step_records
from recipe.pc_tools.gpu_check import REFERENCE_UPDATE

STEPS = 3
SHAPES = {"1.5b": dict(dp=2, n_pilot=2, n_commit=6), "4b": dict(dp=4, n_pilot=4, n_commit=12)}
PROBS = [0.5] * 48  # every pilot has spread and passes the band often


def run(tmp_path, tokenizer, dp, extra, trainer_cls=None):
    log = env_file_logger(tmp_path)
    kwargs = {"trainer_cls": trainer_cls} if trainer_cls else {}
    trainer = build_trainer(
        tmp_path,
        tokenizer,
        probs=PROBS,
        dp_size=dp,
        extra=[
            "data.train_batch_size=4",
            "actor_rollout_ref.actor.ppo_mini_batch_size=1",
            f"trainer.total_training_steps={STEPS}",
            "trainer.total_epochs=20",
            *extra,
        ],
        **kwargs,
    )
    sent = []
    update = trainer._update_actor

    def spy(batch):  # the step's rows and advantages as the trainer hands them to the update
        sent.append(batch.batch["advantages"].clone())
        return update(batch)

    trainer._update_actor = spy
    trainer.fit()
    updates = [c for c in trainer.actor_rollout_wg.calls if c.kind == "update_actor"]
    return updates, sent, step_records(log)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_reference_step_runs_five_whole_and_one_partial_mini_batch_at_each_ranks_tail(
    shape, tmp_path, tokenizer, caplog
):
    caplog.set_level("INFO", logger="recipe.pc")
    dp, n_pilot, n_commit = SHAPES[shape]["dp"], SHAPES[shape]["n_pilot"], SHAPES[shape]["n_commit"]
    updates, sent, steps = run(
        tmp_path,
        tokenizer,
        dp,
        [
            "preset=reference",
            f"algorithm.exploration.n={n_pilot}",
            f"actor_rollout_ref.rollout.n={n_commit}",
        ],
    )
    assert len(updates) == len(sent) == len(steps) == STEPS  # one update_actor call (one LR step) per step
    rows = 4 * (n_pilot + n_commit)
    per_rank, mini = rows // dp, n_commit // dp  # mini-batch: 1 prompt x n_commit rows
    full, partial = divmod(per_rank, mini)
    assert (full, 3 * partial) == (5, mini)
    for call, original in zip(updates, sent, strict=True):
        assert call.mini_batch_rows == n_commit and call.num_rows == dp * 6 * mini
        for rank in range(dp):
            got = call.advantages[rank * 6 * mini : (rank + 1) * 6 * mini]
            tokens = call.loss_tokens[rank * 6 * mini : (rank + 1) * 6 * mini]
            own = original[rank * per_rank : (rank + 1) * per_rank]
            # The rank's rows in order, unscaled (the loss weights them); its tail is the partial mini-batch, then
            # padding that adds no loss tokens and no advantage.
            assert torch.equal(got[:per_rank], own)
            assert (tokens[:per_rank] > 0).all() and (tokens[per_rank:] == 0).all()
            assert (got[per_rank:] == 0).all()
    for s in steps:
        assert s[names.PPO_MINI_BATCHES] == s[names.OPTIMIZER_STEPS] == 6
        assert s[names.PARTIAL_MINI_BATCH_WEIGHT] == pytest.approx(1 / 3)
    # The start of the log names the rules that ran (a GPU log is read for this line).
    assert f"update: pilot_commit, policy loss pc_reference (token-mean), {rows} rows a step in reference row " in (
        caplog.text
    )
    mini_line = (
        f"over {dp} ranks, mini-batches of {n_commit} rows (rollout_n), {mini} a rank, a partial last mini-batch of "
    )
    assert mini_line in caplog.text
    assert f"{partial} rows a rank" in caplog.text
    assert all(words in caplog.text for words in REFERENCE_UPDATE)  # what the GPU check reads


def test_the_reference_preset_weights_by_verl_05s_loss_and_spreads_rows_as_verl_05(tmp_path, tokenizer):
    env_file_logger(tmp_path)
    trainer = build_trainer(tmp_path, tokenizer, dp_size=2, extra=["preset=reference"])
    assert trainer.config.actor_rollout_ref.actor.policy_loss.loss_mode == "pc_reference"
    lengths = torch.tensor([9, 2, 7, 7, 1, 3, 8, 4])
    batch = DataProto.from_dict(
        tensors={
            "attention_mask": (torch.arange(10)[None, :] < lengths[:, None]).long(),
            "row": torch.arange(len(lengths)),
        }
    )
    metrics = {}
    trainer._balance_batch(batch, metrics)
    order = batch.batch["row"].view(2, -1)
    # Two ranks of four rows each, the sequence lengths balanced, each rank's rows in batch order.
    assert torch.equal(order, order.sort(dim=1).values)
    assert sorted(order.flatten().tolist()) == list(range(8))
    assert abs(int(lengths[order[0]].sum()) - int(lengths[order[1]].sum())) <= 1
    assert metrics  # verl's balance statistics are logged too
    improved = (
        build_trainer(tmp_path / "improved", tokenizer, dp_size=2) if (tmp_path / "improved").mkdir() is None else None
    )
    shuffled = DataProto.from_dict(tensors={k: v.clone() for k, v in batch.batch.items()})
    shuffled.batch["row"] = torch.arange(len(lengths))
    shuffled.batch["attention_mask"] = (torch.arange(10)[None, :] < lengths[:, None]).long()
    improved._balance_batch(shuffled, {})
    ranks = shuffled.batch["row"].view(2, -1)
    assert not torch.equal(ranks, ranks.sort(dim=1).values)  # verl's own order: shortest rows at both ends


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_grpo_keeps_four_whole_mini_batches_under_the_reference_preset(shape, tmp_path, tokenizer):
    dp, group = SHAPES[shape]["dp"], SHAPES[shape]["n_pilot"] + SHAPES[shape]["n_commit"]
    updates, sent, steps = run(
        tmp_path,
        tokenizer,
        dp,
        [
            "preset=reference",
            "algorithm.rollout_allocation=grpo",
            "data.gen_batch_size=4",
            f"actor_rollout_ref.rollout.n={group}",
        ],
    )
    assert len(updates) == STEPS
    for call, original in zip(updates, sent, strict=True):
        assert call.num_rows == 4 * group and torch.equal(call.advantages, original)  # no padding, no scaling
    assert all(s[names.OPTIMIZER_STEPS] == 4 and s[names.PARTIAL_MINI_BATCH_WEIGHT] == 1 for s in steps)


def test_improved_preset_takes_grpo_s_four_updates(tmp_path, tokenizer):
    updates, sent, steps = run(
        tmp_path,
        tokenizer,
        2,
        [
            "preset=improved",
            "algorithm.exploration.n=2",
            "actor_rollout_ref.rollout.n=6",
        ],
    )
    assert all(torch.equal(call.advantages, original) for call, original in zip(updates, sent, strict=True))
    assert all(s[names.OPTIMIZER_STEPS] == 4 for s in steps)


@pytest.mark.parametrize(
    "override, message",
    [
        ("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean", "loss_agg_mode=token-mean"),
        ("actor_rollout_ref.actor.shuffle=true", "shuffle=false"),
        ("actor_rollout_ref.actor.use_kl_loss=true", "use_kl_loss=false"),
        ("actor_rollout_ref.actor.entropy_coeff=0.01", "entropy_coeff=0"),
        ("actor_rollout_ref.actor.policy_loss.loss_mode=vanilla", "loss_mode=pc_reference"),
    ],
)
def test_partial_mini_batch_refuses_settings_that_would_misweight_it(override, message, tmp_path, tokenizer):
    loss = "actor_rollout_ref.actor.policy_loss.loss_mode=pc_reference"
    with pytest.raises(PCConfigError, match=message):
        build_trainer(tmp_path, tokenizer, extra=["algorithm.partial_mini_batch=true", loss, override])


def test_each_ranks_tail_is_its_partial_mini_batch_padded_with_rows_that_carry_nothing():
    dp, per_rank, mini = 2, 16, 6  # 2 whole mini-batches of 6 and a partial one of 4 rows per rank
    batch = DataProto.from_dict(
        tensors={
            "response_mask": torch.ones(dp * per_rank, 3, dtype=torch.long),
            "advantages": torch.arange(dp * per_rank, dtype=torch.float)[:, None].expand(-1, 3).clone(),
            "row": torch.arange(dp * per_rank),
        }
    )
    plan = MiniBatchPlan(per_rank, mini, per_rank // mini, per_rank % mini)
    padded = pad_partial_mini_batch(batch, plan, dp)
    assert len(padded) == dp * 3 * mini
    for rank in range(dp):
        chunk = padded[rank * 3 * mini : (rank + 1) * 3 * mini]
        own = np.arange(rank * per_rank, (rank + 1) * per_rank)
        # The rank's rows in batch order, so its partial mini-batch is its last 4 rows; then 2 copies of them.
        assert chunk.batch["row"].tolist() == [*own, *own[-4:][:2]]
        assert torch.equal(chunk.batch["advantages"][:per_rank], batch.batch["advantages"][own])  # unscaled
        assert (chunk.batch["response_mask"][per_rank:] == 0).all() and (
            chunk.batch["advantages"][per_rank:] == 0
        ).all()
