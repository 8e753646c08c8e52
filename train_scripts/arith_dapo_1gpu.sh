#!/usr/bin/env bash
# Arithmetic comparison on ONE GPU (docs/results): DAPO dynamic sampling: rounds of 96 prompts x 16, groups whose acc varies kept until 32.
#   bash train_scripts/arith_dapo_1gpu.sh [overrides]
# Defaults: SmolLM2-135M-Instruct from the hub (MODEL_PATH for a local copy) and all five levels of
# data/process_arithmetic.py (--train 3000 --test 200), written under the output folder on first use.
set -euo pipefail
source "$(dirname "$0")/common_1gpu.sh"
launch_1gpu arith_dapo "${ARITH_SETTINGS[@]}" \
  algorithm.rollout_allocation=dapo \
  data.gen_batch_size=96 \
  actor_rollout_ref.rollout.n=16 \
  algorithm.agg_metric=acc \
  algorithm.max_num_gen_batches=10 \
  trainer.total_training_steps="${STEPS:-40}" \
  "$@"
