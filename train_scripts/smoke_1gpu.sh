#!/usr/bin/env bash
# Pilot-Commit smoke run on ONE GPU: a few PC steps of a small model on easy arithmetic.
#
#   MODEL_PATH=/path/to/SmolLM2-135M-Instruct DATA_DIR=/path/to/arithmetic bash train_scripts/smoke_1gpu.sh [overrides]
#
# DATA_DIR must hold train.parquet and test.parquet (data/process_arithmetic.py writes them); see
# common_1gpu.sh for the environment it reads. Extra Hydra overrides are passed through ("$@").
set -euo pipefail
source "$(dirname "$0")/common_1gpu.sh"
STEPS=${STEPS:-4}
launch_1gpu smoke_1gpu \
  data.train_batch_size=8 \
  data.gen_batch_size=16 \
  data.max_response_length=32 \
  algorithm.exploration.n=4 \
  actor_rollout_ref.rollout.n=4 \
  algorithm.buffer_max_off_steps=2 \
  actor_rollout_ref.actor.ppo_mini_batch_size=8 \
  trainer.val_before_train=false \
  trainer.test_freq="$STEPS" \
  trainer.total_training_steps="$STEPS" \
  "$@"
