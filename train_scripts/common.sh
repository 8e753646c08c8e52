# Settings shared by the paper's runs (spec 7.2); sourced by the per-run scripts, not run directly.
#
# Environment (all optional):
#   MODEL_PATH       model folder or hub id (each script sets its paper default)
#   DATA_DIR         where data/e2e_process_data.sh wrote the parquets (default ~/data)
#   CKPTS_DIR        checkpoint root (default <repo>/checkpoints)
#   NNODES           nodes (each script sets its paper default)
#   NGPUS_PER_NODE   GPUs per node (default 8)
#   PRESET           reference (default): the authors' run semantics wherever verl 0.9.1 allows |
#                    improved: our behaviour choices (recipe/pc/config/preset/*.yaml; README table)
#   GRADER           reference | math_verify | math_dapo: overrides the preset's grader of recipe.pc.rewards.math_reward
#   DRY_RUN=1        run the start-up checks instead of training (no GPU needed): PC keys, verl's config
#                    checks, parallel sizes, reward and its grader's packages, data files and their rows, model
#                    folder; then print what the run will do: GPUs, rollouts a step and in all, validation and
#                    checkpoints, their disk, logs
#   SHOW_CONFIG=1    with DRY_RUN=1: print the composed config first
#   PASS_SHARE       with DRY_RUN=1: the share of pilots in the band its rollout estimate assumes (default 0.25)
#   TRAINER_CMD      the command the overrides go to (default `python3 -m recipe.pc.main_pc`; tests put a stand-in)
# Extra Hydra overrides given to a script are appended last, so they win.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA_DIR=${DATA_DIR:-$HOME/data}
CKPTS_DIR=${CKPTS_DIR:-$REPO/checkpoints}
NGPUS_PER_NODE=${NGPUS_PER_NODE:-8}
PRESET=${PRESET:-reference}
# The data files of each preset, as data/e2e_process_data.sh writes them. reference: the rows the authors'
# processors write (data/process_*.py --as-authors: nothing stripped or dropped, their index values; DeepMath
# from their pre-filtered copy). improved: the rows cleaned here (DeepMath filtered here, own test split).
case "$PRESET" in
  reference)
    DEEPMATH_DIR=deepmath_103k_prefiltered_as_authors
    DEEPMATH_TRAIN="$DATA_DIR/deepmath_103k_prefiltered_as_authors/train.parquet"
    POLARIS_TRAIN="$DATA_DIR/polaris_53k_as_authors/train.parquet"
    VAL_LIST=(
      "$DATA_DIR/math_test_as_authors/aime-2024-nosystem-boxed.parquet"
      "$DATA_DIR/math_test_as_authors/aime-2025-nosystem-boxed.parquet"
      "$DATA_DIR/math_test_as_authors/amc-2023-nosystem-boxed.parquet"
      "$DATA_DIR/math_test_as_authors/math-500-nosystem-boxed.parquet"
      "$DATA_DIR/deepmath_103k_prefiltered_as_authors/test.parquet"
      "$DATA_DIR/math_test_as_authors/minerva-math-nosystem-boxed.parquet"
      "$DATA_DIR/math_test_as_authors/oylmpiad-bench-nosystem-boxed.parquet"  # their spelling
    ) ;;
  improved)
    DEEPMATH_DIR=deepmath_103k_filtered
    DEEPMATH_TRAIN="$DATA_DIR/deepmath_103k_filtered/train.parquet"
    POLARIS_TRAIN="$DATA_DIR/polaris_53k/train.parquet"
    VAL_LIST=(
      "$DATA_DIR/math_test/aime-2024-nosystem-boxed.parquet"
      "$DATA_DIR/math_test/aime-2025-nosystem-boxed.parquet"
      "$DATA_DIR/math_test/amc-2023-nosystem-boxed.parquet"
      "$DATA_DIR/math_test/math-500-nosystem-boxed.parquet"
      "$DATA_DIR/deepmath_103k_filtered/test.parquet"
      "$DATA_DIR/math_test/minerva-math-nosystem-boxed.parquet"
      "$DATA_DIR/math_test/olympiad-bench-nosystem-boxed.parquet"
    ) ;;
  *) echo "PRESET=$PRESET: choose reference or improved" >&2; exit 2 ;;
esac
GRADER_OVERRIDE=()
[ -n "${GRADER:-}" ] && GRADER_OVERRIDE=("++reward.custom_reward_function.reward_kwargs.grader=$GRADER")
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
# Named by the start-up checks when a data file is missing (recipe/pc/startup_checks.py).
export PC_DATA_HINT="write them with: DATA_DIR=$DATA_DIR bash $REPO/data/e2e_process_data.sh"

MAX_PROMPT_LENGTH=2048
# Validated on all seven sets in every run, as the reference did (the DeepMath test split too).
VAL_FILES="[$(printf "'%s'," "${VAL_LIST[@]}")"
VAL_FILES="${VAL_FILES%,}]"

# launch EXPERIMENT TRAIN_FILE MAX_RESPONSE_LENGTH OVERLONG_LEN TOTAL_STEPS [overrides...]
# OVERLONG_LEN > 0 turns on DAPO's soft overlong penalty over the last OVERLONG_LEN tokens (factor 1.0).
launch() {
  local experiment=$1 train_file=$2 max_response=$3 overlong_len=$4 total_steps=$5
  shift 5
  # The scripts name Polaris by its folder of PRESET=improved; the preset's copy replaces it.
  [ "$train_file" = "$DATA_DIR/polaris_53k/train.parquet" ] && train_file=$POLARIS_TRAIN
  local max_tokens=$((MAX_PROMPT_LENGTH + max_response))
  local overlong_enable=false
  [ "$overlong_len" -gt 0 ] && overlong_enable=true
  local cfg_flag=() trainer
  if [ "${DRY_RUN:-0}" = 1 ]; then
    cfg_flag=(--validate)
    [ "${SHOW_CONFIG:-0}" = 1 ] && cfg_flag+=(--show-config)
  fi
  read -ra trainer <<<"${TRAINER_CMD:-python3 -m recipe.pc.main_pc}"
  # The preset is selected first, so every override below (and the script's own) wins over it.
  "${trainer[@]}" \
    preset="$PRESET" \
    data.train_files="$train_file" \
    data.val_files="$VAL_FILES" \
    data.prompt_key=prompt \
    data.truncation=left \
    data.max_prompt_length=$MAX_PROMPT_LENGTH \
    data.max_response_length="$max_response" \
    data.train_batch_size=128 \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=false \
    algorithm.kl_ctrl.kl_coef=0.0 \
    actor_rollout_ref.model.path="$MODEL_PATH" \
    actor_rollout_ref.model.use_remove_padding=true \
    actor_rollout_ref.model.enable_gradient_checkpointing=true \
    actor_rollout_ref.actor.use_kl_loss=false \
    actor_rollout_ref.actor.kl_loss_coef=0.0 \
    actor_rollout_ref.actor.clip_ratio_low=0.2 \
    actor_rollout_ref.actor.clip_ratio_high=0.28 \
    actor_rollout_ref.actor.clip_ratio_c=10.0 \
    actor_rollout_ref.actor.loss_agg_mode=token-mean \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.actor.grad_clip=1.0 \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.optim.lr_warmup_steps=10 \
    actor_rollout_ref.actor.optim.weight_decay=0.1 \
    actor_rollout_ref.actor.optim.lr_scheduler_type=constant \
    actor_rollout_ref.actor.ppo_mini_batch_size=32 \
    actor_rollout_ref.actor.use_dynamic_bsz=true \
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$max_tokens \
    actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=$max_tokens \
    actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=$max_tokens \
    actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 \
    actor_rollout_ref.actor.fsdp_config.fsdp_size=-1 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.mode=async \
    actor_rollout_ref.rollout.tensor_model_parallel_size="${ROLLOUT_TP:-1}" \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
    actor_rollout_ref.rollout.enable_chunked_prefill=true \
    actor_rollout_ref.rollout.max_num_batched_tokens=$max_tokens \
    actor_rollout_ref.rollout.max_num_seqs=1024 \
    actor_rollout_ref.rollout.temperature=1.0 \
    actor_rollout_ref.rollout.top_p=1.0 \
    actor_rollout_ref.rollout.top_k=-1 \
    actor_rollout_ref.rollout.val_kwargs.temperature=1.0 \
    actor_rollout_ref.rollout.val_kwargs.top_p=0.7 \
    actor_rollout_ref.rollout.val_kwargs.top_k=-1 \
    actor_rollout_ref.rollout.val_kwargs.do_sample=true \
    actor_rollout_ref.rollout.val_kwargs.n=1 \
    reward.reward_manager.name=dapo \
    reward.custom_reward_function.path=pkg://recipe.pc.rewards.math_reward \
    reward.custom_reward_function.name=compute_score \
    reward.reward_kwargs.overlong_buffer_cfg.enable=$overlong_enable \
    reward.reward_kwargs.overlong_buffer_cfg.len="$overlong_len" \
    reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0 \
    trainer.logger="['console','wandb']" \
    trainer.project_name=pilot-commit \
    trainer.experiment_name="$experiment-$PRESET" \
    trainer.nnodes="$NNODES" \
    trainer.n_gpus_per_node="$NGPUS_PER_NODE" \
    trainer.val_before_train=true \
    trainer.test_freq=5 \
    trainer.save_freq=20 \
    trainer.total_epochs=100 \
    trainer.total_training_steps="$total_steps" \
    trainer.default_local_dir="$CKPTS_DIR/$experiment-$PRESET" \
    "${GRADER_OVERRIDE[@]}" "$@" "${cfg_flag[@]}"
}

# Method presets (spec 7.2/7.3). Each takes the group size (or pilot and commit counts) and leaves
# the rest to the script's own overrides.
grpo_args() {  # N
  echo "algorithm.rollout_allocation=grpo data.gen_batch_size=128 actor_rollout_ref.rollout.n=$1"
}
dapo_args() {  # N
  echo "algorithm.rollout_allocation=dapo data.gen_batch_size=384 actor_rollout_ref.rollout.n=$1" \
    "algorithm.agg_metric=acc algorithm.max_num_gen_batches=10"
}
pc_args() {  # N_PILOT N_COMMIT BUFFER_SAMPLING
  # PPO mini-batch arithmetic comes from the preset: reference = 32 x n_commit rows with a partial
  # last one (6 updates per step), improved = whole groups (GRPO's 4).
  echo "algorithm.rollout_allocation=pilot_commit data.gen_batch_size=384" \
    "algorithm.exploration.n=$1 actor_rollout_ref.rollout.n=$2 algorithm.buffer_sampling_method=$3" \
    "algorithm.diversity_threshold_upper=0.25 algorithm.diversity_threshold_lower=0.125" \
    "algorithm.exclude_threshold_upper=1.0 algorithm.buffer_max_off_steps=4 algorithm.max_num_gen_batches=10"
}

