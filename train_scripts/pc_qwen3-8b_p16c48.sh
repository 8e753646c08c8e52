#!/usr/bin/env bash
# Pilot-Commit, Qwen3-8B-Base on Polaris-53K: pilot 16 x 384 + commit 48 x 128 (12,288 rollouts a
# round). The authors shipped no 8B script: nodes, steps (500, from the paper's GRPO curve),
# response length and the pilot/commit split (p16c48) follow the 4B run; our choice.
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-8B-Base}
NNODES=${NNODES:-4}
launch pc_qwen3-8b_p16c48 "$DATA_DIR/polaris_53k/train.parquet" 4096 0 500 $(pc_args 16 48 random) "$@"
