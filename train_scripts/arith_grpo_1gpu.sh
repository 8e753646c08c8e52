#!/usr/bin/env bash
# Arithmetic comparison on ONE GPU (docs/results): GRPO: one round of 32 prompts x 16 rollouts per step (512 rollouts).
#   bash train_scripts/arith_grpo_1gpu.sh [overrides]
# Defaults: SmolLM2-135M-Instruct from the hub (MODEL_PATH for a local copy) and all five levels of
# data/process_arithmetic.py (--train 3000 --test 200), written under the output folder on first use.
set -euo pipefail
source "$(dirname "$0")/common_1gpu.sh"
launch_1gpu arith_grpo "${ARITH_SETTINGS[@]}" \
  algorithm.rollout_allocation=grpo \
  data.gen_batch_size=32 \
  actor_rollout_ref.rollout.n=16 \
  trainer.total_training_steps="${STEPS:-40}" \
  "$@"
