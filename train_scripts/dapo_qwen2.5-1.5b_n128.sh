#!/usr/bin/env bash
# DAPO dynamic sampling, Qwen2.5-Math-1.5B on DeepMath-103K, n=128, rounds of 384 prompts (49,152
# rollouts a round). total_training_steps (1000) counts generation rounds under PRESET=reference, as
# the authors' DAPO did, and optimizer steps under PRESET=improved (algorithm.dapo_step_unit).
set -euo pipefail
source "$(dirname "$0")/common.sh"
MODEL_PATH=${MODEL_PATH:-friendshipkim/Qwen2.5-Math-1.5B}
NNODES=${NNODES:-2}
launch dapo_qwen2.5-1.5b_n128 "$DEEPMATH_TRAIN" 8192 4096 1000 $(dapo_args 128) "$@"
