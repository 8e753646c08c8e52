#!/usr/bin/env bash
# GRPO baseline, Qwen3-4B-Base on Polaris-53K, n=64 (8,192 rollouts a step).
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-4B-Base}
NNODES=${NNODES:-4}
launch grpo_qwen3-4b_n64 "$DATA_DIR/polaris_53k/train.parquet" 4096 0 500 $(grpo_args 64) "$@"
