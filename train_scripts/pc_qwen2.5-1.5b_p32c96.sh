#!/usr/bin/env bash
# Pilot-Commit, Qwen2.5-Math-1.5B on DeepMath-103K: pilot 32 x 384 prompts + commit 96 x 128 (24,576
# rollouts a round).
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-friendshipkim/Qwen2.5-Math-1.5B}
NNODES=${NNODES:-2}
launch pc_qwen2.5-1.5b_p32c96 "$DEEPMATH_TRAIN" 8192 4096 1000 $(pc_args 32 96 max_variance) "$@"
