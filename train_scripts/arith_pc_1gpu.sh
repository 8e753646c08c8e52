#!/usr/bin/env bash
# Arithmetic comparison on ONE GPU (docs/results): Pilot-Commit: pilot 96 prompts x 4, commit 32 x 12 (the paper's 1:3 split; groups of 16).
#   bash train_scripts/arith_pc_1gpu.sh [overrides]
# Defaults: SmolLM2-135M-Instruct from the hub (MODEL_PATH for a local copy) and all five levels of
# data/process_arithmetic.py (--train 3000 --test 200), written under the output folder on first use.
set -euo pipefail
source "$(dirname "$0")/common_1gpu.sh"
launch_1gpu arith_pc "${ARITH_SETTINGS[@]}" \
  algorithm.rollout_allocation=pilot_commit \
  data.gen_batch_size=96 \
  algorithm.exploration.n=4 \
  actor_rollout_ref.rollout.n=12 \
  algorithm.mini_batch_unit=group \
  trainer.total_training_steps="${STEPS:-40}" \
  "$@"
