#!/usr/bin/env bash
# DAPO dynamic sampling, Qwen3-4B-Base on Polaris-53K, n=64, rounds of 384 prompts (24,576 rollouts
# a round). The reference's 4B script used n=16 despite its name; this uses 64.
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-4B-Base}
NNODES=${NNODES:-4}
launch dapo_qwen3-4b_n64 "$DATA_DIR/polaris_53k/train.parquet" 4096 0 500 $(dapo_args 64) "$@"
