#!/usr/bin/env bash
# Pilot-Commit smoke run on ONE GPU: a few PC steps of a small model on easy arithmetic.
#
#   bash train_scripts/smoke_1gpu.sh [overrides]
#
# Uses SmolLM2-135M-Instruct from the hub (MODEL_PATH=/local/copy to use a folder) and levels 1-2
# of data/process_arithmetic.py, written under the output folder on first use (DATA_DIR to use your
# own train.parquet and test.parquet); see common_1gpu.sh for the environment it reads. Extra Hydra
# overrides are passed through ("$@"). DRY_RUN=1 checks the config on CPU and prints what the run will do
# (SHOW_CONFIG=1: the config too).
set -euo pipefail
source "$(dirname "$0")/common_1gpu.sh"
ARITH_DATA_ARGS=(--levels 1 2 --train 160 --test 32)
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
