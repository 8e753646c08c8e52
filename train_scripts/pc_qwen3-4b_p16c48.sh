#!/usr/bin/env bash
# Pilot-Commit, Qwen3-4B-Base on Polaris-53K: pilot 16 x 384 + commit 48 x 128 (12,288 rollouts a
# round).
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-4B-Base}
NNODES=${NNODES:-4}
launch pc_qwen3-4b_p16c48 "$DATA_DIR/polaris_53k/train.parquet" 4096 0 500 $(pc_args 16 48 random) "$@"
