#!/usr/bin/env bash
# Pilot-Commit, Qwen3-14B-Base on Polaris-53K: pilot 16 x 384 + commit 48 x 128 (12,288 rollouts a
# round). The authors shipped no 14B script: nodes, steps (500, from the paper's GRPO curve),
# response length and the pilot/commit split (p16c48) follow the 4B run; our choice. Rollout tensor
# parallel 2 is our choice for memory.
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-14B-Base}
NNODES=${NNODES:-8}
export ROLLOUT_TP=${ROLLOUT_TP:-2}
launch pc_qwen3-14b_p16c48 "$DATA_DIR/polaris_53k/train.parquet" 4096 0 500 $(pc_args 16 48 random) "$@"
