#!/usr/bin/env bash
# GRPO baseline (DAPO minus dynamic sampling), Qwen2.5-Math-1.5B on DeepMath-103K, n=128, 2x8 GPUs:
# 16,384 rollouts a step.
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-friendshipkim/Qwen2.5-Math-1.5B}
NNODES=${NNODES:-2}
launch grpo_qwen2.5-1.5b_n128 "$DEEPMATH_TRAIN" 8192 4096 1000 $(grpo_args 128) "$@"
