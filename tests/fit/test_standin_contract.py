"""The stand-ins refuse what verl 0.9.1 refuses on the GPU (recipe/pc/testing/standins.py cites each rule's verl
line)."""

import numpy as np
import pytest
import torch
from verl import DataProto
from verl.utils import tensordict_utils as tu

from recipe.pc.dataset import PilotCommitDataset
from recipe.pc.testing import compose_pc_config
from recipe.pc.testing.standins import (
    ReplicaState,
    StandInActorWorkerGroup,
    StandInAgentLoopManager,
    StandInCheckpointManager,
    StandInRewardLoopManager,
    write_prompt_parquet,
)


def actor_config(micro: int, infer_micro: int):
    return compose_pc_config(
        [
            f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
            f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={infer_micro}",
        ]
    ).actor_rollout_ref


def actor_batch(rows: int, mini_batch_rows: int):
    """A no-padding update_actor input as RayPPOTrainer._update_actor builds it."""
    lengths = torch.arange(rows) % 5 + 2
    ids = torch.nested.nested_tensor_from_jagged(torch.ones(int(lengths.sum()), dtype=torch.long), lengths=lengths)
    data = tu.get_tensordict(
        {
            "input_ids": ids,
            "advantages": torch.zeros(rows, 4),
            "old_log_probs": torch.zeros(rows, 4),
            "response_mask": torch.ones(rows, 4),
            "loss_mask": torch.ones(rows, 4),
            "token_level_scores": torch.zeros(rows, 4),
            "uid": np.array([str(i) for i in range(rows)], dtype=object),
            "index": np.arange(rows),
        }
    )
    tu.assign_non_tensor(data, mini_batch_size=mini_batch_rows, epochs=1)
    return data


def log_prob_batch(rows: int):
    """A compute_log_prob input: the update input before old log-probs exist."""
    data = actor_batch(rows, mini_batch_rows=rows)
    del data["old_log_probs"]
    return data


def test_actor_micro_batches_must_divide_each_ranks_rows():
    """The GPU failure: dp 4, micro 64, 16 rows per rank (workers/engine/utils.py prepare_micro_batches)."""
    replicas = ReplicaState()
    actor = StandInActorWorkerGroup(4, replicas, actor_config(micro=64, infer_micro=8))
    with pytest.raises(AssertionError, match="divisible by force_group_size \\* micro_batch_size_per_gpu"):
        actor.update_actor(actor_batch(64, mini_batch_rows=64))
    actor.compute_log_prob(log_prob_batch(64))  # 16 rows per rank in micro-batches of 8
    assert actor.calls[-1].micro_batches_per_rank == [2, 2, 2, 2]
    with pytest.raises(AssertionError, match="micro_batch_size_per_gpu"):
        StandInActorWorkerGroup(4, replicas, actor_config(micro=4, infer_micro=32)).compute_log_prob(log_prob_batch(64))


def test_actor_splits_ranks_and_mini_batches_like_verl():
    actor = StandInActorWorkerGroup(2, ReplicaState(), actor_config(micro=2, infer_micro=2))
    actor.update_actor(actor_batch(24, mini_batch_rows=8))  # 12 rows a rank, mini-batches of 4, micro 2
    assert actor.calls[-1].micro_batches_per_rank == [[2, 2, 2]] * 2
    with pytest.raises(AssertionError, match="12 % 8"):  # tensordict_utils.make_iterator
        actor.update_actor(actor_batch(24, mini_batch_rows=16))
    with pytest.raises(AssertionError):  # decorator.py dispatch: rows must split over the ranks
        actor.update_actor(actor_batch(23, mini_batch_rows=2))


def test_replica_rules():
    replicas = ReplicaState()
    manager = StandInCheckpointManager(replicas)
    manager.update_weights(0)
    assert replicas.awake and replicas.has_weights
    with pytest.raises(AssertionError, match="update_weights on awake replicas"):
        manager.update_weights(1)
    manager.sleep_replicas()
    manager.wake_up_replicas()  # awake, but a level-2 sleep dropped the weights
    assert replicas.awake and not replicas.has_weights
    with pytest.raises(AssertionError, match="colocated reward model"):
        StandInRewardLoopManager(replicas).compute_rm_score(DataProto())


@pytest.mark.parametrize("colocated", [False, True])
def test_agent_loop_rows_carry_the_real_fields(tmp_path, tokenizer, colocated):
    data = write_prompt_parquet(str(tmp_path / "train.parquet"), [0.5] * 6)
    cfg = compose_pc_config(
        [
            f"data.train_files={data}",
            "data.filter_overlong_prompts=False",
            "actor_rollout_ref.rollout.agent.num_workers=2",
            "actor_rollout_ref.rollout.prompt_length=48",
            "actor_rollout_ref.rollout.response_length=6",
        ]
    )
    rows = PilotCommitDataset(data_files=data, tokenizer=tokenizer, config=cfg.data)
    from verl.utils.dataset.rl_dataset import collate_fn

    prompts = DataProto.from_single_dict(collate_fn([rows[i] for i in range(6)]))
    prompts.non_tensor_batch["uid"] = np.array([str(i) for i in range(6)], dtype=object)
    prompts.meta_info["global_steps"] = 3
    replicas = ReplicaState()
    StandInCheckpointManager(replicas).update_weights(2)
    out = StandInAgentLoopManager(cfg, tokenizer, replicas, colocated_rm=colocated).generate_sequences(prompts)
    fields = set(out.non_tensor_batch)
    assert {"multi_modal_inputs", "turn_scores", "tool_rewards", "min_global_steps", "max_global_steps"} <= fields
    assert list(out.non_tensor_batch["turn_scores"]) == [[]] * 6
    assert set(out.non_tensor_batch["min_global_steps"]) == set(out.non_tensor_batch["max_global_steps"]) == {2}
    assert ("rm_scores" in out.batch.keys()) != colocated
    assert ("index" in fields) == colocated  # inputs are echoed only without reward workers in the loop
    assert {"agent_loop/generate_sequences/min", "agent_loop/slowest/generate_sequences"} <= set(
        out.meta_info["timing"]
    )
