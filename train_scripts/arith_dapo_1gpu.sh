#!/usr/bin/env bash
# Arithmetic comparison on ONE GPU (docs/results): DAPO dynamic sampling: rounds of 96 prompts x 16, groups whose acc varies kept until 32.
#   MODEL_PATH=... DATA_DIR=... bash train_scripts/arith_dapo_1gpu.sh [overrides]
# DATA_DIR from: python data/process_arithmetic.py --out_dir DIR --train 3000 --test 200
set -euo pipefail
source "$(dirname "$0")/common_1gpu.sh"
launch_1gpu arith_dapo "${ARITH_SETTINGS[@]}" \
  algorithm.rollout_allocation=dapo \
  data.gen_batch_size=96 \
  actor_rollout_ref.rollout.n=16 \
  algorithm.filter_groups.metric=acc \
  algorithm.filter_groups.max_num_gen_batches=10 \
  trainer.total_training_steps="${STEPS:-40}" \
  "$@"
