#!/usr/bin/env bash
# The GPU checks of issues #13 (data-parallel 2, two Ray nodes on one host, resume after SIGKILL), #15
# (data-parallel 4, rollout tensor-parallel 2), #11 (reference preset with a partial mini-batch) and a
# batch of the regime study (#9), all on one 4-GPU host at once. Run from the repo root on the device,
# after host_install.sh unpacked the bundle to /tmp/site and the SmolLM2 GGUF was joined at /tmp/smollm2.gguf.
#
#   bash docs/gpu-checks/launch.sh setup     # models and data (~1 min)
#   bash docs/gpu-checks/launch.sh checks    # the multi-GPU checks, detached, 60 s apart; logs under /tmp/runs/<run>/
#   bash docs/gpu-checks/launch.sh regime    # #9's first regime batch (4 runs of 30 steps, one GPU each)
#   bash docs/gpu-checks/launch.sh batch2    # 8 regime runs (2 a GPU) and the checks still missing, 20-30 s apart
#   bash docs/gpu-checks/launch.sh tp2 NAME  # the rollout-TP-2 GRPO check alone, logs under /tmp/runs/NAME/
#   bash docs/gpu-checks/launch.sh batch docs/results/regimes/batch3.txt [NAME...]  # a regime batch file (or its
#                                            named lines), run i on GPU i mod the GPU count (GPUS="3" or "0 2": cycle
#                                            over those GPUs only); batch-plan lists them
#                                            (DRY_RUN=1: print what would start, start nothing)
#   bash docs/gpu-checks/launch.sh stop "WHY" NAME...   # stop runs (and their Ray processes), noted in launch.log
#   bash docs/gpu-checks/launch.sh collect   # a tarball of the logs into $OUT
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
export VLLM_USE_FLASHINFER_SAMPLER=0 RAY_AUTH_MODE=disabled
RUNS=${RUNS:-/tmp/runs}
source docs/gpu-checks/ray_tmp.sh
M=/tmp/models/smollm2 TINY=/tmp/models/tiny_qwen2 D=/tmp/data
STAGGER=${STAGGER:-25}
# Every run is restarted (up to 3 times) if vLLM's start-up fails because another engine on its GPU changed
# its memory use meanwhile; the resume check retries its own first run (a restart would resume instead).
RETRY="docs/gpu-checks/retry_start.sh bash"

# run NAME GPUS CMD...: a detached run pinned to GPUS with its own Ray temp dir and output folder. With RAY_TMP set,
# common_1gpu.sh also gives the run a Ray head and job id of its own: verl names its weight-sync socket by the Ray
# job id (verl/workers/rollout/vllm_rollout/vllm_rollout.py), and runs that each started a fresh Ray were all job
# 01000000, shared that socket and hung when two weight syncs met.
# DRY_RUN=1: only the "start" line, on stdout (what would start, and where).
run() {
  local name=$1 gpus=$2
  shift 2
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "start $name on GPUs $gpus: $*"
    return
  fi
  mkdir -p "$RUNS/$name"
  echo "$(date +%T) start $name on GPUs $gpus at commit ${PC_COMMIT:-unknown}: $*" | tee -a "$RUNS/launch.log"
  CUDA_VISIBLE_DEVICES=$gpus RAY_TMP=/tmp/ray_$name OUT_DIR=$RUNS/$name GPU_MEM_UTIL=${MEM:-0.07} RAY_NUM_CPUS=${CPUS:-5} \
    setsid nohup bash -c 'echo "pilot-commit at commit $0"; exec "$@"' "${PC_COMMIT:-unknown}" bash $RETRY -c "$*" \
    >"$RUNS/$name/log.txt" 2>&1 </dev/null &
  echo $! >"$RUNS/$name/pid"
  sleep "$STAGGER"
}

case "${1:?setup | checks | regime | batch2 | batch FILE [NAME...] | batch-plan FILE [NAME...] | tp2 | stop WHY NAME... | collect}" in
  setup)
    python3 /tmp/smollm2_to_hf.py "$M" --gguf /tmp/smollm2.gguf --tiny "$TINY"
    python3 data/process_arithmetic.py --out_dir $D/smoke --levels 1 2 --train 160 --test 32
    python3 data/process_arithmetic.py --out_dir $D/tiny --levels 1 --train 40 --test 16
    python3 data/process_arithmetic.py --out_dir $D/spread --mix spread --train 3000 --test 200
    python3 data/process_arithmetic.py --out_dir $D/default --mix default --train 3000 --test 200
    python3 data/process_arithmetic.py --out_dir $D/calibrated --mix calibrated --train 3000 --test 200
    nvidia-smi --query-gpu=index,name,memory.total --format=csv
    ;;
  regime)
    # #9's first batch: spread mix, groups of 16, 30 steps, 2 seeds, every generated rollout dumped.
    mkdir -p $RUNS
    for seed in 1 2; do
      run grpo16_spread_s$seed $((seed - 1)) MODEL_PATH=$M DATA_DIR=$D/spread STEPS=30 bash train_scripts/arith_grpo_1gpu.sh \
        data.seed=$seed trainer.rollout_data_dir=$RUNS/grpo16_spread_s$seed/dump
      run pc4x12_spread_s$seed $((seed + 1)) MODEL_PATH=$M DATA_DIR=$D/spread STEPS=30 bash train_scripts/arith_pc_1gpu.sh \
        data.seed=$seed trainer.rollout_data_dir=$RUNS/pc4x12_spread_s$seed/dump
    done
    ;;
  batch2)
    # Session 2026-11-26 b: #9's groups-of-16 comparison on both mixes (GRPO n = 16 and PC 4 + 12, seeds 1 and 2,
    # 30 steps, every generated rollout dumped; one GRPO and one PC run per GPU), then the GPU checks still missing
    # (#13: two Ray nodes, resume after SIGKILL, GRPO at dp 2; #15: the PPO update at rollout TP 2).
    mkdir -p $RUNS
    export STAGGER=20 CPUS=5
    gpu=0
    for algo in grpo16 pc4x12; do
      script=arith_grpo_1gpu.sh
      [ $algo = pc4x12 ] && script=arith_pc_1gpu.sh
      for mix in default spread; do
        for seed in 1 2; do
          name=${algo}_${mix}_s$seed
          MEM=0.10 run $name $((gpu % 4)) MODEL_PATH=$M DATA_DIR=$D/$mix STEPS=30 bash train_scripts/$script \
            data.seed=$seed trainer.rollout_data_dir=$RUNS/$name/dump
          gpu=$((gpu + 1))
        done
      done
    done
    micro="actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"
    micro="$micro actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"
    export STAGGER=30
    CPUS=14 run two_nodes 0,1 bash docs/gpu-checks/two_nodes.sh $M $D/smoke $micro
    RETRY="" run resume 2 bash docs/gpu-checks/resume_check.sh $M $D/tiny $micro
    CPUS=14 run grpo_tp2 0,1,2,3 MODEL_PATH=$TINY DATA_DIR=$D/smoke STEPS=3 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
      actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 algorithm.rollout_allocation=grpo data.gen_batch_size=8
    CPUS=14 run grpo_dp2 2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=6 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=2 actor_rollout_ref.rollout.agent.num_workers=3 \
      algorithm.rollout_allocation=grpo data.gen_batch_size=8
    ;;
  batch-plan)
    # The runs `batch FILE [NAME...]` would start, one line each: NAME GPU MIX SCRIPT OVERRIDES. Names given pick
    # those lines of FILE (a name not in FILE is an error, before anything starts); run i goes on the i-th GPU, mod
    # their count, of GPUS (default: all NGPUS, which defaults to the GPUs nvidia-smi lists). GPUS keeps a lease's
    # runs apart: groups-of-64 runs alone on some GPUs, the groups-of-16 runs packed on the others.
    file=${2:?a batch file, e.g. docs/results/regimes/batch3.txt}
    shift 2
    ngpus=${NGPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
    [ "$ngpus" -ge 1 ] 2>/dev/null || { echo "no GPUs (set NGPUS)" >&2; exit 2; }
    read -r -a gpus <<<"${GPUS:-$(seq -s ' ' 0 $((ngpus - 1)))}"
    [ ${#gpus[@]} -ge 1 ] || { echo "GPUS is empty" >&2; exit 2; }
    for g in "${gpus[@]}"; do
      [[ $g =~ ^[0-9]+$ ]] && [ "$g" -lt "$ngpus" ] || { echo "GPUS: no GPU $g on this host (0 to $((ngpus - 1)))" >&2; exit 2; }
    done
    # Names compare whole, as strings (a name is not a pattern).
    names=$(awk '$1 !~ /^#/ && NF {print $1}' "$file")
    for want in "$@"; do
      grep -qxF -- "$want" <<<"$names" || { echo "no run $want in $file" >&2; exit 2; }
    done
    # The wanted names read from a here-string, not piped from printf: under pipefail, grep -q exiting at a match
    # before printf had written every name killed printf with SIGPIPE and skipped the line (on a loaded machine).
    wanted=$(printf '%s\n' "$@")
    i=0
    while read -r name mix script overrides; do
      case "$name" in '' | '#'*) continue ;; esac
      if [ $# -gt 0 ] && ! grep -qxF -- "$name" <<<"$wanted"; then continue; fi
      echo "$name ${gpus[$((i % ${#gpus[@]}))]} $mix $script${overrides:+ $overrides}"
      i=$((i + 1))
    done <"$file"
    [ "$i" -gt 0 ] || { echo "no run in $file" >&2; exit 2; }
    ;;
  batch)
    # A regime batch file (docs/results/regimes/batch*.txt), or the named lines of it, as batch-plan lists them:
    # 30 steps (a line's own trainer.total_training_steps comes after STEPS and wins), every generated rollout
    # dumped. Started in waves of one run a GPU: engines on different GPUs do not race, so a wave starts within
    # seconds, and a run whose GPU already got one in this wave waits WAVE_GAP and opens the next (the same-GPU race:
    # in batch 4a a 25 s gap cost one run a failed start and a 3-minute restart; batch 3's 80 s between runs on a GPU
    # cost none). Runs already on a GPU from an earlier call are not known here: start a second call after the gap.
    # The runs of a study log the commit they ran at (the host's copy of the tree has no .git to ask).
    [ "${DRY_RUN:-0}" = 1 ] || [ -n "${PC_COMMIT:-}" ] || { echo "batch: set PC_COMMIT to the commit being run" >&2; exit 2; }
    plan=$(bash "$REPO/docs/gpu-checks/launch.sh" batch-plan "${@:2}")
    mkdir -p $RUNS
    export CPUS=5
    wave=" "
    while read -r name gpu mix script overrides; do
      if [[ $wave == *" $gpu "* ]]; then
        [ "${DRY_RUN:-0}" = 1 ] && echo "wait ${WAVE_GAP:-60} s" || sleep "${WAVE_GAP:-60}"
        wave=" "
      fi
      wave+="$gpu "
      MEM=0.10 STAGGER=2 run "$name" "$gpu" MODEL_PATH=$M DATA_DIR=$D/$mix STEPS=30 \
        bash train_scripts/$script $overrides trainer.rollout_data_dir=$RUNS/$name/dump
    done <<<"$plan"
    ;;
  stop)
    # Stop runs started by run(): the process group of its launcher, then whatever still names its Ray temp dir
    # (the raylet and GCS; the name must match whole: stopping pc_s1 leaves pc_s10 alone). Ray workers and their
    # vLLM engines exit with the raylet: in session 2026-11-26c their GPU memory was free 20 s after a stop.
    # The reason goes into launch.log.
    why=${2:?stop WHY NAME...}
    shift 2
    for name in "${@:?stop WHY NAME...}"; do
      [ -f "$RUNS/$name/pid" ] || { echo "no run $name under $RUNS" >&2; exit 2; }
      kill -TERM -- "-$(cat "$RUNS/$name/pid")" 2>/dev/null || true
      sleep 2
      kill_ray_tmp "/tmp/ray_$name"
      echo "$(date +%T) stopped $name: $why" | tee -a "$RUNS/launch.log"
    done
    ;;
  tp2)
    # #15's PPO update at rollout TP 2, started alone (again) once the GPUs are quieter.
    mkdir -p $RUNS
    micro="actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"
    micro="$micro actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"
    CPUS=14 STAGGER=1 run ${2:-grpo_tp2} 0,1,2,3 MODEL_PATH=$TINY DATA_DIR=$D/smoke STEPS=3 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
      actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 algorithm.rollout_allocation=grpo data.gen_batch_size=8
    ;;
  checks)
    # The multi-GPU checks. verl asks 3 Ray CPUs per GPU (CPUS=14 for 4 GPUs); the micro-batch sizes must divide
    # each rank's rows (verl/workers/engine/utils.py prepare_micro_batches), so 4 here; engines that start on one
    # GPU at the same moment fail vLLM's memory profiling, so starts are 60 s apart.
    mkdir -p $RUNS
    export CPUS=14 STAGGER=${STAGGER_CHECKS:-60}
    micro="actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"
    micro="$micro actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"
    # #13: two Ray nodes on this host (head on GPU 0, worker on GPU 1), started by ray_cluster.sh.
    run two_nodes 0,1 bash docs/gpu-checks/two_nodes.sh $M $D/smoke $micro
    # #15: data-parallel 4 with a generation batch that needs padding (3 agent workers, 15 pilot prompts).
    run pc_dp4 0,1,2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=5 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.agent.num_workers=3 data.gen_batch_size=15
    # #13: resume after SIGKILL of the driver once step 4's checkpoint is complete.
    RETRY="" CPUS=5 run resume 1 bash docs/gpu-checks/resume_check.sh $M $D/tiny $micro
    # #11: the reference preset with a partial last mini-batch (64 rows in mini-batches of 12: 5 + 1 partial).
    CPUS=5 run ref_partial 3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=4 bash train_scripts/smoke_1gpu.sh $micro \
      preset=reference algorithm.exploration.n=2 actor_rollout_ref.rollout.n=6 actor_rollout_ref.actor.ppo_mini_batch_size=2
    # #15: rollout tensor parallel 2 (two replicas of two GPUs) with the 14B script's layout (FSDP over all GPUs).
    run pc_tp2 0,1,2,3 MODEL_PATH=$TINY DATA_DIR=$D/smoke STEPS=3 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
      actor_rollout_ref.actor.ulysses_sequence_parallel_size=1
    # The same layout with GRPO, which trains every group: the PPO update at TP 2 runs even on the random model.
    run grpo_tp2 0,1,2,3 MODEL_PATH=$TINY DATA_DIR=$D/smoke STEPS=3 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
      actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 algorithm.rollout_allocation=grpo data.gen_batch_size=8
    # #13: data-parallel 2, two vLLM replicas, padded generation batch; PC and GRPO.
    run pc_dp2 2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=6 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=2 actor_rollout_ref.rollout.agent.num_workers=3 data.gen_batch_size=15
    run grpo_dp4 0,1,2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=5 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.agent.num_workers=3 \
      algorithm.rollout_allocation=grpo data.gen_batch_size=8
    run grpo_dp2 2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=6 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=2 actor_rollout_ref.rollout.agent.num_workers=3 \
      algorithm.rollout_allocation=grpo data.gen_batch_size=8
    ;;
  collect)
    out=${OUT:?}
    tar -C $RUNS -czf "$out/runs.tgz" --exclude='checkpoints' --exclude='dump' --exclude='*.pt' --exclude='*.safetensors' . 2>/dev/null || true
    # The rollout dumps without their prompt and response text (what recipe.pc.plan and the histograms read);
    # the full text only when it is small enough to come back.
    python3 - "$RUNS" "$out" <<'PY'
import glob, json, os, sys, tarfile, io
runs, out = sys.argv[1:]
with tarfile.open(os.path.join(out, "dumps.tgz"), "w:gz") as tar:
    for path in sorted(glob.glob(os.path.join(runs, "*", "dump", "*.jsonl"))):
        rows = []
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a row being written
            r.pop("input", None), r.pop("output", None)
            rows.append(json.dumps(r))
        data = ("\n".join(rows) + "\n").encode()
        info = tarfile.TarInfo(os.path.relpath(path, runs))
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
print("dumps.tgz", os.path.getsize(os.path.join(out, "dumps.tgz")), "bytes")
PY
    if [ "${FULL_DUMPS:-0}" = 1 ]; then
      tar -C $RUNS -cJf "$out/dumps_full.txz" $(cd $RUNS && ls -d */dump) 2>/dev/null || true
      ls -l "$out"
    fi
    for f in $RUNS/*/metrics.jsonl; do
      [ -f "$f" ] && echo "$(basename "$(dirname "$f")"): $(grep -c '"training/global_step"' "$f") steps"
    done
    # Each run's Ray job id (common_1gpu.sh's side-by-side slot): runs alive at once must all differ, or they share
    # verl's weight-sync socket (batch 14's two hangs).
    for f in $RUNS/*/log.txt; do
      [ -f "$f" ] && echo "$(basename "$(dirname "$f")"): $(grep -ao 'Ray slot [0-9]* .*' "$f" | tail -n 1 | cut -c1-160)"
    done
    tail -n 3 $RUNS/*/log.txt | cut -c1-300
    nvidia-smi --query-gpu=index,memory.used --format=csv
    ;;
esac
