# One-GPU settings shared by the smoke and arithmetic scripts; sourced, not run directly.
# They work on one H100 without flash-attn: sdpa attention, no remove-padding, a small vLLM share,
# vLLM's V1 model runner (the V2 runner samples with FlashInfer). Log-probs and entropies come from verl's fused
# kernels (actor_rollout_ref.model.use_fused_kernels=true, torch backend): without flash-attn verl's default path loops
# in Python over every token's logits row, which took half of each step. The fused path needs one temperature for the
# whole batch (every PC run has one). Gradient checkpointing is off: a small model has memory to spare, and the
# recomputation cost 0.5-1 s of each update. Override either key at the end of the command line.
#
# Environment (all optional): MODEL_PATH (a local model folder, or a hub id; default
# HuggingFaceTB/SmolLM2-135M-Instruct), DATA_DIR (train.parquet and test.parquet; default $OUT_DIR/data, written by
# data/process_arithmetic.py on first use and reused after), OUT_DIR (logs, default <repo>/outputs/<experiment>),
# STEPS, GPU_MEM_UTIL (vLLM share, default 0.3), RAY_NUM_CPUS (default 12), RAY_TMP (a Ray temp dir of its own, to run
# jobs side by side on one host; the job then also gets a Ray head and job id of its own, as verl names its
# weight-sync socket by the Ray job id: see run_on_own_ray; PC_SLOT_DIR, default /tmp/pc_ray_slots, holds the slot
# locks; that head is a `ray start`, so Ray's token authentication applies as on any cluster:
# scripts/gpu/launch.sh sets RAY_AUTH_MODE=disabled), DRY_RUN=1 (check the config without a GPU, the model not
# fetched, then print what the run will do; SHOW_CONFIG=1 also prints the composed config, PASS_SHARE sets the share of
# pilots in the band its rollout estimate assumes), TRAINER_CMD (the
# command the overrides go to, default `python3 -m recipe.pc.main_pc`; the tests put a stand-in there), PRESET (reference or improved, as in common.sh; it also names
# the experiment, <experiment>-<PRESET>; unset: pc_trainer.yaml's defaults, the improved behaviour, with which the
# arithmetic comparison ran).

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

# run_on_own_ray CMD...: run the trainer command CMD as job 32+k of a Ray head of its own, k being the first free
# host-wide slot (1-32). Why: verl 0.9.1 syncs weights to vLLM over ipc:///tmp/rl-colocate-zmq-<Ray job id>-...sock
# (verl/workers/rollout/vllm_rollout/vllm_rollout.py, zmq_handle), and every fresh Ray cluster numbers its first
# driver 01000000: jobs that each started their own Ray shared one socket, and one hung when two weight syncs met.
# The slot is a flock on $PC_SLOT_DIR/<k> (default /tmp/pc_ray_slots), held by a descriptor that this shell, the
# trainer and the head inherit: it frees itself once they are all gone, even after a SIGKILL (a head left behind
# keeps it, and its ports, until kill_ray_tmp ends it). The slot also gives the head its ports (GCS 10000+420k,
# the node's 410 from there on: clear of 8265 and 10001, below 32768).
run_on_own_ray() (
  local slot_dir=${PC_SLOT_DIR:-/tmp/pc_ray_slots} k fd
  mkdir -p "$slot_dir"
  for ((k = 1; k <= 32; k++)); do
    exec {fd}>>"$slot_dir/$k"
    flock -n "$fd" && break
    exec {fd}>&-
  done
  if [ "$k" -gt 32 ]; then
    echo "no free Ray slot: all 32 lock files in PC_SLOT_DIR=$slot_dir are held by live jobs" >&2
    exit 1
  fi
  local port=$((10000 + 420 * k)) gpus=()
  # One Ray GPU per visible device (none when CUDA_VISIBLE_DEVICES is set empty); one if it is unset.
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then IFS=, read -ra gpus <<<"$CUDA_VISIBLE_DEVICES"; else gpus=(0); fi
  # Set before the head starts, so that a signal during its start-up stops it too (stop finds no node: a no-op).
  trap 'bash "$REPO/train_scripts/ray_cluster.sh" stop >&2' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # Ray's CLI as a module: the offline bundle's `ray` script points at the build machine's interpreter.
  RAY_PORT=$port NODE_PORT_BASE=$((port + 1)) NGPUS_PER_NODE=${#gpus[@]} NUM_CPUS=${RAY_NUM_CPUS:-12} \
    NODE_IP=127.0.0.1 NNODES=1 RAY_CLI=${RAY_CLI:-python3 -m ray.scripts.scripts} WAIT_NODES_S=180 \
    bash "$REPO/train_scripts/ray_cluster.sh" head >&2 || { tail -n 40 "$RAY_TMP/ray_cluster_head.log" >&2; exit 1; }
  export RAY_ADDRESS=127.0.0.1:$port
  # Connect and disconnect until the next driver is job 32+k. The base 32 leaves room for the drivers that
  # ray_cluster.sh's start-up check already ran (one or a few, one each 5 s until the node shows).
  local job
  job=$(python3 - "$RAY_ADDRESS" $((32 + k)) <<'PY'
import sys

import ray

address, target = sys.argv[1], int(sys.argv[2])
while True:
    ray.init(address=address, logging_level="ERROR")
    number = int.from_bytes(bytes.fromhex(ray.get_runtime_context().get_job_id()), "little")
    ray.shutdown()
    if number >= target - 1:
        break
if number != target - 1:
    sys.exit(f"the Ray head at {address} already ran job {number}: the trainer cannot be job {target}")
print(ray.JobID.from_int(target).hex())
PY
  ) || exit 1
  echo "Ray slot $k ($slot_dir/$k): head $RAY_ADDRESS (temp dir $RAY_TMP), the trainer will be job $job" >&2
  local rc=0
  "$@" || rc=$?
  exit "$rc"
)

# launch_1gpu EXPERIMENT [overrides...]
launch_1gpu() {
  local experiment=$1 preset=()
  shift
  if [ -n "${PRESET:-}" ]; then
    if [ ! -f "$REPO/recipe/pc/config/preset/$PRESET.yaml" ]; then
      echo "PRESET=$PRESET: choose reference or improved" >&2
      exit 2
    fi
    preset=("preset=$PRESET")
    experiment=$experiment-$PRESET
  fi
  local out_dir=${OUT_DIR:-$REPO/outputs/$experiment}
  mkdir -p "$out_dir"
  local data_dir=${DATA_DIR:-$out_dir/data}
  if [ -z "${DATA_DIR:-}" ]; then
    ensure_arith_data "$data_dir"
  fi
  # Named by the start-up checks when a data file is missing (recipe/pc/startup_checks.py), as happens with a DATA_DIR given.
  export PC_DATA_HINT="write them with: python3 $REPO/data/process_arithmetic.py --out_dir $data_dir ${ARITH_DATA_ARGS[*]}\
 (or leave DATA_DIR unset: the script writes them under its output folder)"
  export VERL_FILE_LOGGER_PATH=${VERL_FILE_LOGGER_PATH:-$out_dir/metrics.jsonl}
  echo "$experiment: model $MODEL_PATH, data $data_dir, metrics $VERL_FILE_LOGGER_PATH" >&2
  local trainer ray_cpus=ray_kwargs.ray_init.num_cpus="${RAY_NUM_CPUS:-12}"
  read -ra trainer <<<"${TRAINER_CMD:-python3 -m recipe.pc.main_pc}"
  if [ -n "${RAY_TMP:-}" ] && [ -z "${RAY_ADDRESS:-}" ]; then
    # Side by side: a head of its own (its CPU count is the head's; Ray refuses num_cpus from a driver that
    # connects). A dry run composes and checks the same config without starting the head.
    ray_cpus=ray_kwargs.ray_init.num_cpus=null
    [ "${DRY_RUN:-0}" = 1 ] || trainer=(run_on_own_ray "${trainer[@]}")
  fi
  local validate=()
  if [ "${DRY_RUN:-0}" = 1 ]; then
    validate=(--validate)
    [ "${SHOW_CONFIG:-0}" = 1 ] && validate+=(--show-config)
  fi
  "${trainer[@]}" "${validate[@]}" "${preset[@]}" \
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
    actor_rollout_ref.model.enable_gradient_checkpointing=false \
    actor_rollout_ref.model.use_fused_kernels=true \
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
    "$ray_cpus" \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.logger="['console','file']" \
    trainer.save_freq=-1 \
    trainer.total_epochs=100 \
    trainer.experiment_name="$experiment" \
    trainer.default_local_dir="$out_dir/checkpoints" \
    "$@"
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
