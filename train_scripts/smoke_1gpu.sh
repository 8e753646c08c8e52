#!/usr/bin/env bash
# Pilot-Commit smoke run on ONE GPU: a few PC steps of a small model on easy arithmetic.
#
#   MODEL_PATH=/path/to/SmolLM2-135M-Instruct DATA_DIR=/path/to/arithmetic bash train_scripts/smoke_1gpu.sh [overrides]
#
# DATA_DIR must hold train.parquet and test.parquet (data/process_arithmetic.py writes them).
# Settings avoid flash-attn (sdpa, no remove-padding) and keep vLLM small, so an H100 without
# flash-attn runs it. Extra Hydra overrides are passed through ("$@").
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
: "${MODEL_PATH:?set MODEL_PATH to a Hugging Face model folder}"
: "${DATA_DIR:?set DATA_DIR to a folder with train.parquet and test.parquet}"
OUT_DIR=${OUT_DIR:-$repo/outputs/smoke}
STEPS=${STEPS:-4}
mkdir -p "$OUT_DIR"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 RAY_DEDUP_LOGS=0 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
# vLLM 0.24's V2 model runner samples with FlashInfer, which a host without flash-attn/flashinfer lacks.
export VLLM_USE_V2_MODEL_RUNNER=${VLLM_USE_V2_MODEL_RUNNER:-0}
export VERL_FILE_LOGGER_PATH=${VERL_FILE_LOGGER_PATH:-$OUT_DIR/metrics.jsonl}

python3 -m recipe.pc.main_pc \
  data.train_files="$DATA_DIR/train.parquet" \
  data.val_files="$DATA_DIR/test.parquet" \
  data.train_batch_size=8 \
  data.gen_batch_size=16 \
  data.max_prompt_length=128 \
  data.max_response_length=32 \
  data.filter_overlong_prompts=false \
  data.dataloader_num_workers=0 \
  data.seed=1 \
  algorithm.exploration.n=4 \
  actor_rollout_ref.rollout.n=4 \
  algorithm.diversity_threshold_lower=0.125 \
  algorithm.diversity_threshold_upper=0.25 \
  algorithm.exclude_threshold_upper=1.0 \
  algorithm.buffer_max_off_steps=2 \
  algorithm.use_kl_in_reward=false \
  reward.custom_reward_function.path=pkg://recipe.pc.rewards.last_integer \
  reward.custom_reward_function.name=compute_score \
  reward.num_workers=1 \
  actor_rollout_ref.model.path="$MODEL_PATH" \
  +actor_rollout_ref.model.override_config.attn_implementation=sdpa \
  actor_rollout_ref.model.use_remove_padding=false \
  actor_rollout_ref.model.enable_gradient_checkpointing=true \
  actor_rollout_ref.actor.optim.lr=1e-5 \
  actor_rollout_ref.actor.use_kl_loss=false \
  actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.actor.ppo_mini_batch_size=8 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.enforce_eager=true \
  actor_rollout_ref.rollout.gpu_memory_utilization=${GPU_MEM_UTIL:-0.3} \
  actor_rollout_ref.rollout.agent.num_workers=1 \
  actor_rollout_ref.rollout.val_kwargs.temperature=1.0 \
  actor_rollout_ref.rollout.val_kwargs.do_sample=true \
  ray_kwargs.ray_init.num_cpus=${RAY_NUM_CPUS:-12} \
  trainer.n_gpus_per_node=1 \
  trainer.nnodes=1 \
  trainer.logger="['console','file']" \
  trainer.val_before_train=false \
  trainer.test_freq="$STEPS" \
  trainer.save_freq=-1 \
  trainer.total_training_steps="$STEPS" \
  trainer.total_epochs=10 \
  trainer.experiment_name=smoke_1gpu \
  "$@"
