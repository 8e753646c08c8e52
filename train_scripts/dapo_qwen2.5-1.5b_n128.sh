#!/usr/bin/env bash
# DAPO dynamic sampling, Qwen2.5-Math-1.5B on DeepMath-103K, n=128, rounds of 384 prompts (49,152
# rollouts a round). total_training_steps counts optimizer steps here, unlike verl's DAPO recipe.
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-friendshipkim/Qwen2.5-Math-1.5B}
NNODES=${NNODES:-2}
launch dapo_qwen2.5-1.5b_n128 "$DATA_DIR/deepmath_103k_filtered/train.parquet" 8192 4096 1000 $(dapo_args 128) "$@"
