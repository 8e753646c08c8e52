#!/usr/bin/env bash
# Restart the multi-GPU checks of launch.sh with enough Ray CPUs: verl's resource pool asks for 3 CPUs per GPU,
# so a 4-GPU run needs at least 12 (the first launch gave every run 5 and the multi-GPU ones waited forever).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
for name in pc_dp4 grpo_dp4 pc_tp2 pc_dp2 grpo_dp2; do
  pid=$(cat /tmp/runs/$name/pid 2>/dev/null) && kill -KILL -- "-$pid" 2>/dev/null
  pkill -KILL -f "/tmp/ray_$name" 2>/dev/null
  mv /tmp/runs/$name /tmp/runs/${name}_cpu_starved 2>/dev/null
done
sleep 3
export CPUS=14 STAGGER=20
# shellcheck source=/dev/null
source <(sed -n '/^export PYTHONPATH/,/^}/p' docs/gpu-checks/launch.sh)
M=/tmp/models/smollm2 TINY=/tmp/models/tiny_qwen2 D=/tmp/data
run pc_dp4 0,1,2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=5 bash train_scripts/smoke_1gpu.sh \
  trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.agent.num_workers=3 data.gen_batch_size=15
run grpo_dp4 0,1,2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=5 bash train_scripts/smoke_1gpu.sh \
  trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.agent.num_workers=3 \
  algorithm.rollout_allocation=grpo data.gen_batch_size=8
run pc_tp2 0,1,2,3 MODEL_PATH=$TINY DATA_DIR=$D/smoke STEPS=3 bash train_scripts/smoke_1gpu.sh \
  trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
  actor_rollout_ref.actor.ulysses_sequence_parallel_size=1
run pc_dp2 0,1 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=6 bash train_scripts/smoke_1gpu.sh \
  trainer.n_gpus_per_node=2 actor_rollout_ref.rollout.agent.num_workers=3 data.gen_batch_size=15
run grpo_dp2 2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=6 bash train_scripts/smoke_1gpu.sh \
  trainer.n_gpus_per_node=2 actor_rollout_ref.rollout.agent.num_workers=3 \
  algorithm.rollout_allocation=grpo data.gen_batch_size=8
