#!/usr/bin/env bash
# Second restart of the short checks. Found by the first two launches: (1) verl's engine splits each rank's
# rows into micro-batches of *_micro_batch_size_per_gpu and asserts they divide (verl/workers/engine/utils.py
# prepare_micro_batches): the one-GPU launcher's 64 does not divide 16 rows per rank at dp 4, nor a mini-batch of
# 12 or 32 rows, so these runs use 4; (2) vLLM engines that profile memory while another engine starts on the same
# GPU fail ("init_snapshot.free_memory >= free_gpu_memory"), so starts are 45 s apart.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
for name in pc_dp4 grpo_dp4 pc_tp2 pc_dp2 grpo_dp2 ref_partial resume two_nodes; do
  pid=$(cat /tmp/runs/$name/pid 2>/dev/null) && kill -KILL -- "-$pid" 2>/dev/null
  pkill -KILL -f "/tmp/ray_$name" 2>/dev/null
  mv /tmp/runs/$name /tmp/runs/${name}_try2 2>/dev/null
done
sleep 3
export CPUS=14 STAGGER=45
# shellcheck source=/dev/null
source <(sed -n '/^export PYTHONPATH/,/^}/p' docs/gpu-checks/launch.sh)
M=/tmp/models/smollm2 TINY=/tmp/models/tiny_qwen2 D=/tmp/data
MICRO="actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"
run two_nodes 0,1 bash docs/gpu-checks/two_nodes.sh $M $D/smoke $MICRO
run pc_dp4 0,1,2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=5 bash train_scripts/smoke_1gpu.sh $MICRO \
  trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.agent.num_workers=3 data.gen_batch_size=15
CPUS=5 run resume 1 bash docs/gpu-checks/resume_check.sh $M $D/tiny $MICRO
CPUS=5 run ref_partial 3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=4 bash train_scripts/smoke_1gpu.sh $MICRO preset=reference \
  algorithm.exploration.n=2 actor_rollout_ref.rollout.n=6 actor_rollout_ref.actor.ppo_mini_batch_size=2
run pc_tp2 0,1,2,3 MODEL_PATH=$TINY DATA_DIR=$D/smoke STEPS=3 bash train_scripts/smoke_1gpu.sh $MICRO \
  trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
  actor_rollout_ref.actor.ulysses_sequence_parallel_size=1
run pc_dp2 2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=6 bash train_scripts/smoke_1gpu.sh $MICRO \
  trainer.n_gpus_per_node=2 actor_rollout_ref.rollout.agent.num_workers=3 data.gen_batch_size=15
run grpo_dp4 0,1,2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=5 bash train_scripts/smoke_1gpu.sh $MICRO \
  trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.agent.num_workers=3 \
  algorithm.rollout_allocation=grpo data.gen_batch_size=8
run grpo_dp2 2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=6 bash train_scripts/smoke_1gpu.sh $MICRO \
  trainer.n_gpus_per_node=2 actor_rollout_ref.rollout.agent.num_workers=3 \
  algorithm.rollout_allocation=grpo data.gen_batch_size=8
