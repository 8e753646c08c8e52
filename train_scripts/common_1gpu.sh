# One-GPU settings shared by the smoke and arithmetic scripts; sourced, not run directly.
# They work on one H100 without flash-attn: sdpa attention, no remove-padding, a small vLLM share,
# vLLM's V1 model runner (the V2 runner samples with FlashInfer).
#
# Environment (all optional): MODEL_PATH (a local model folder, or a hub id; default
# HuggingFaceTB/SmolLM2-135M-Instruct), DATA_DIR (train.parquet and test.parquet; default
# $OUT_DIR/data, written by data/process_arithmetic.py on first use and reused after), OUT_DIR (logs,
# default <repo>/outputs/<experiment>), STEPS, GPU_MEM_UTIL (vLLM share, default 0.3),
# RAY_NUM_CPUS (default 12), RAY_TMP (a Ray temp dir of its own, to run two jobs side by side),
# DRY_RUN=1 (print the composed config and check it, without a GPU; the model is not fetched).

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODEL_PATH=${MODEL_PATH:-HuggingFaceTB/SmolLM2-135M-Instruct}
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 RAY_DEDUP_LOGS=0 WANDB_MODE=${WANDB_MODE:-disabled} TOKENIZERS_PARALLELISM=false
export VLLM_USE_V2_MODEL_RUNNER=${VLLM_USE_V2_MODEL_RUNNER:-0}

# Arguments of data/process_arithmetic.py for the default data folder (the smoke run sets its own).
ARITH_DATA_ARGS=(--train 3000 --test 200)

# ensure_arith_data DIR: write the arithmetic parquets into DIR unless both are already there.
ensure_arith_data() {
  local dir=$1
  [ -f "$dir/train.parquet" ] && [ -f "$dir/test.parquet" ] && return 0
  # Written beside DIR and moved in whole, so an interrupted run never leaves a half-written folder.
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  python3 "$REPO/data/process_arithmetic.py" --out_dir "$tmp" "${ARITH_DATA_ARGS[@]}" >&2
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  mv "$tmp" "$dir"
}

# launch_1gpu EXPERIMENT [overrides...]
launch_1gpu() {
  local experiment=$1
  shift
  local out_dir=${OUT_DIR:-$REPO/outputs/$experiment}
  mkdir -p "$out_dir"
  local data_dir=${DATA_DIR:-$out_dir/data}
  if [ -z "${DATA_DIR:-}" ]; then
    ensure_arith_data "$data_dir"
  fi
  export VERL_FILE_LOGGER_PATH=${VERL_FILE_LOGGER_PATH:-$out_dir/metrics.jsonl}
  echo "$experiment: model $MODEL_PATH, data $data_dir, metrics $VERL_FILE_LOGGER_PATH" >&2
  local extra=()
  [ -n "${RAY_TMP:-}" ] && extra+=("+ray_kwargs.ray_init._temp_dir=$RAY_TMP")
  local validate=()
  [ "${DRY_RUN:-0}" = 1 ] && validate=(--validate)
  python3 -m recipe.pc.main_pc "${validate[@]}" \
    data.train_files="$data_dir/train.parquet" \
    data.val_files="$data_dir/test.parquet" \
    data.max_prompt_length=128 \
    data.filter_overlong_prompts=false \
    data.dataloader_num_workers=0 \
    data.seed=1 \
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
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.mode=async \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.enforce_eager=true \
    actor_rollout_ref.rollout.gpu_memory_utilization="${GPU_MEM_UTIL:-0.3}" \
    actor_rollout_ref.rollout.agent.num_workers=1 \
    actor_rollout_ref.rollout.val_kwargs.temperature=1.0 \
    actor_rollout_ref.rollout.val_kwargs.do_sample=true \
    ray_kwargs.ray_init.num_cpus="${RAY_NUM_CPUS:-12}" \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.logger="['console','file']" \
    trainer.save_freq=-1 \
    trainer.total_epochs=100 \
    trainer.experiment_name="$experiment" \
    trainer.default_local_dir="$out_dir/checkpoints" \
    "$@" "${extra[@]}"
}

# Settings of the arithmetic comparison (docs/results): 32 prompts x 16 rollouts per step, lr 1e-5,
# 64-token responses, validation every 5 steps on the test prompts x 4 samples.
ARITH_SETTINGS=(
  data.train_batch_size=32
  data.max_response_length=64
  actor_rollout_ref.actor.ppo_mini_batch_size=8
  actor_rollout_ref.rollout.val_kwargs.n=4
  trainer.val_before_train=true
  trainer.test_freq=5
)
