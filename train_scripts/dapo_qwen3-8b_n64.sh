#!/usr/bin/env bash
# DAPO dynamic sampling, Qwen3-8B-Base on Polaris-53K, n=64 under both presets, rounds of 384
# prompts (24,576 rollouts a round); only the authors' 4B script ran n=16 (see dapo_qwen3-4b_n64.sh).
# The authors shipped no 8B script: nodes, steps (500, from the paper's GRPO curve), response length
# and the pilot/commit split (p16c48) follow the 4B run; our choice.
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-8B-Base}
NNODES=${NNODES:-4}
launch dapo_qwen3-8b_n64 "$DATA_DIR/polaris_53k/train.parquet" 4096 0 500 $(dapo_args 64) "$@"
