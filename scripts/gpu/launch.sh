#!/usr/bin/env bash
# Starts the multi-GPU checks and the regime study's batch files on one GPU host, each run detached with its own
# Ray head. Run from the repository root, with the GPU stack importable from /tmp/site (vLLM, Ray, verl) and the
# SmolLM2-135M-Instruct GGUF at /tmp/smollm2.gguf; SMOLLM2_TO_HF names the script that turns it into a Hugging Face folder.
#
#   bash scripts/gpu/launch.sh setup     # models and data (~1 min)
#   bash scripts/gpu/launch.sh checks    # the multi-GPU checks, detached, 60 s apart; logs under /tmp/runs/<run>/
#   bash scripts/gpu/launch.sh tp2 NAME  # the rollout-TP-2 GRPO check alone, logs under /tmp/runs/NAME/
#   bash scripts/gpu/launch.sh tp2-learn # PC and GRPO at rollout TP 2 and TP 1 on a model that learns (4 GPUs)
#   bash scripts/gpu/launch.sh tp2-learn pc  # one pair alone (pc or grpo), on GPUs 0 and 1 of a 2-GPU host
#   bash scripts/gpu/launch.sh reference # the reference preset's update at data-parallel 2 (GPUs 0 and 1)
#   bash scripts/gpu/launch.sh two-nodes # two Ray nodes on GPUs 0 and 1: 4 steps, then a resume to step 6
#   bash scripts/gpu/launch.sh dp8       # a paper script at data-parallel 8, reference preset, scaled down (8 GPUs)
#   bash scripts/gpu/launch.sh batch docs/results/regimes/batch3.txt [NAME...]  # a regime batch file (or its
#                                            named lines), run i on GPU i mod the GPU count (GPUS="3" or "0 2": cycle
#                                            over those GPUs only); batch-plan lists them
#                                            (DRY_RUN=1: print what would start, start nothing)
#   bash scripts/gpu/launch.sh bench [PLAN]  # the step benchmark (scripts/gpu/bench_plan.txt): the second
#                                            pre-registration's lines for BENCH_STEPS steps (default 5), phase by phase;
#                                            a phase's runs share a GPU, phases on one GPU run one after another
#                                            (DRY_RUN=1: print the phases and runs, start nothing); read the logs with
#                                            python -m recipe.pc_tools.bench $RUNS
#   bash scripts/gpu/launch.sh stop "WHY" NAME...   # stop runs (and their Ray processes), noted in launch.log
#   bash scripts/gpu/launch.sh collect   # a tarball of the logs into $OUT
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
export VLLM_USE_FLASHINFER_SAMPLER=0 RAY_AUTH_MODE=disabled
RUNS=${RUNS:-/tmp/runs}
source scripts/gpu/ray_tmp.sh
M=/tmp/models/smollm2 TINY=/tmp/models/tiny_qwen2 EVEN=/tmp/models/smollm2_even D=/tmp/data
STAGGER=${STAGGER:-25}
# Every run is restarted (up to 3 times) if vLLM's start-up fails because another engine on its GPU changed
# its memory use meanwhile; the resume check retries its own first run (a restart would resume instead).
RETRY="scripts/gpu/retry_start.sh bash"

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
  date +%s.%N >"$RUNS/$name/launched_at"  # a run's start-up and length are read against it
  echo "$(date +%T) start $name on GPUs $gpus at commit ${PC_COMMIT:-unknown}: $*" | tee -a "$RUNS/launch.log"
  CUDA_VISIBLE_DEVICES=$gpus RAY_TMP=/tmp/ray_$name OUT_DIR=$RUNS/$name GPU_MEM_UTIL=${MEM:-0.07} RAY_NUM_CPUS=${CPUS:-5} \
    setsid nohup bash -c 'echo "pilot-commit at commit $0"; exec "$@"' "${PC_COMMIT:-unknown}" bash $RETRY -c "$*" \
    >"$RUNS/$name/log.txt" 2>&1 </dev/null &
  echo $! >"$RUNS/$name/pid"
  sleep "$STAGGER"
}

# bench_phase GPU PHASE PLAN: start PHASE's runs of the bench plan on GPU, BENCH_GAP (60) s apart (two engines starting on one
# GPU at once race for its memory), then wait until all of them have exited.
bench_phase() {
  local gpu=$1 phase=$2 plan=$3 name line fixes mix script overrides extra names=()
  while read -r p name line fixes; do
    case "$p" in '' | '#'*) continue ;; esac
    [ "$p" = "$phase" ] || continue
    read -r _ mix script overrides < <(awk -v l="$line" '$1 == l' "$BENCH_LINES") || true
    [ -n "$script" ] || { echo "bench: no line $line in $BENCH_LINES" >&2; exit 2; }
    case "$fixes" in
      on) extra="" ;;
      off) extra="$BENCH_OFF" ;;
      *) echo "bench: fixes must be on or off, not '$fixes' ($name)" >&2; exit 2 ;;
    esac
    [ ${#names[@]} -eq 0 ] || { [ "${DRY_RUN:-0}" = 1 ] && echo "wait ${BENCH_GAP:-60} s" || sleep "${BENCH_GAP:-60}"; }
    MEM=0.10 STAGGER=0 run "$name" "$gpu" MODEL_PATH=$M DATA_DIR=$D/$mix \
      bash train_scripts/$script $overrides trainer.total_training_steps=${BENCH_STEPS:-5} $extra \
      trainer.rollout_data_dir=$RUNS/$name/dump
    names+=("$name")
  done <"$plan"
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "wait for ${names[*]} to exit"
    return
  fi
  for name in "${names[@]}"; do
    while kill -0 "$(cat "$RUNS/$name/pid")" 2>/dev/null; do sleep 5; done
  done
}

case "${1:?setup | checks | batch FILE [NAME...] | batch-plan FILE [NAME...] | bench [PLAN] | tp2 | tp2-learn [pc|grpo] | reference | two-nodes | dp8 | stop WHY NAME... | collect}" in
  setup)
    python3 "${SMOLLM2_TO_HF:-/tmp/smollm2_to_hf.py}" "$M" --gguf /tmp/smollm2.gguf --tiny "$TINY"
    # SmolLM2's 9 query and 3 key-value heads do not split over 2 GPUs; zero heads added make 12 and 4.
    python3 scripts/gpu/pad_heads.py "$M" "$EVEN" --kv-heads 4
    python3 data/process_arithmetic.py --out_dir $D/smoke --levels 1 2 --train 160 --test 32
    python3 data/process_arithmetic.py --out_dir $D/tiny --levels 1 --train 40 --test 16
    python3 data/process_arithmetic.py --out_dir $D/spread --mix spread --train 3000 --test 200
    python3 data/process_arithmetic.py --out_dir $D/default --mix default --train 3000 --test 200
    python3 data/process_arithmetic.py --out_dir $D/calibrated --mix calibrated --train 3000 --test 200
    nvidia-smi --query-gpu=index,name,memory.total --format=csv
    ;;
  batch-plan)
    # The runs `batch FILE [NAME...]` would start, one line each: NAME GPU MIX SCRIPT OVERRIDES. Names given pick
    # those lines of FILE (a name not in FILE is an error, before anything starts); run i goes on the i-th GPU, mod
    # their count, of GPUS (default: all NGPUS, which defaults to the GPUs nvidia-smi lists). GPUS keeps a host's
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
    # a 25 s gap once cost a failed start and a 3-minute restart; 80 s between runs on a GPU cost none). Runs already on a GPU from an earlier call are not known here: start a second call after the gap.
    # The runs of a study log the commit they ran at (the host's copy of the tree has no .git to ask).
    [ "${DRY_RUN:-0}" = 1 ] || [ -n "${PC_COMMIT:-}" ] || { echo "batch: set PC_COMMIT to the commit being run" >&2; exit 2; }
    plan=$(bash "$REPO/scripts/gpu/launch.sh" batch-plan "${@:2}")
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
  bench | bench-gpu)
    # The step benchmark. PLAN lines are PHASE NAME LINE FIXES: LINE names a line of BENCH_LINES (default the second
    # pre-registration's batch file), FIXES is on (the scripts as they are) or off (BENCH_OFF: verl's log-prob loop,
    # its bootstrapped validation metrics and gradient checkpointing, as the lines ran before). Phase i goes on GPU i
    # mod the GPU count; one detached queue a GPU runs its phases in order, so each phase has its GPU to itself.
    plan=${2:-scripts/gpu/bench_plan.txt}
    export BENCH_LINES=${BENCH_LINES:-docs/results/regimes/batch21.txt}
    export BENCH_OFF="actor_rollout_ref.model.use_fused_kernels=false trainer.val_metrics=full actor_rollout_ref.model.enable_gradient_checkpointing=true"
    export CPUS=5
    if [ "$1" = bench-gpu ]; then  # the queue of one GPU: bench-gpu PLAN GPU PHASE...
      gpu=$3
      for phase in "${@:4}"; do bench_phase "$gpu" "$phase" "$plan"; done
      exit 0
    fi
    [ "${DRY_RUN:-0}" = 1 ] || [ -n "${PC_COMMIT:-}" ] || { echo "bench: set PC_COMMIT to the commit being run" >&2; exit 2; }
    ngpus=${NGPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
    [ "$ngpus" -ge 1 ] 2>/dev/null || { echo "no GPUs (set NGPUS)" >&2; exit 2; }
    phases=$(awk '$1 !~ /^#/ && NF && !seen[$1]++ {print $1}' "$plan")
    [ -n "$phases" ] || { echo "bench: no phase in $plan" >&2; exit 2; }
    mkdir -p "$RUNS"
    declare -A queue
    i=0
    for phase in $phases; do
      queue[$((i % ngpus))]+=" $phase"
      i=$((i + 1))
    done
    for gpu in $(printf '%s\n' "${!queue[@]}" | sort -n); do
      echo "GPU $gpu: phases${queue[$gpu]}"
      if [ "${DRY_RUN:-0}" = 1 ]; then
        for phase in ${queue[$gpu]}; do bench_phase "$gpu" "$phase" "$plan"; done
      else
        setsid nohup bash "$REPO/scripts/gpu/launch.sh" bench-gpu "$plan" "$gpu" ${queue[$gpu]} \
          >"$RUNS/bench_gpu$gpu.log" 2>&1 </dev/null &
      fi
    done
    ;;
  stop)
    # Stop runs started by run(): the process group of its launcher, then whatever still names its Ray temp dir
    # (the raylet and GCS; the name must match whole: stopping pc_s1 leaves pc_s10 alone). Ray workers and their
    # vLLM engines exit with the raylet; their GPU memory was free 20 s after a stop when measured.
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
    # The PPO update at rollout TP 2 alone, for a host whose GPUs are otherwise idle.
    mkdir -p $RUNS
    micro="actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"
    micro="$micro actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"
    CPUS=14 STAGGER=1 run ${2:-grpo_tp2} 0,1,2,3 MODEL_PATH=$TINY DATA_DIR=$D/smoke STEPS=3 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
      actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 algorithm.rollout_allocation=grpo data.gen_batch_size=8
    ;;
  tp2-learn)
    # Trained weights through rollout TP 2, on a model that earns rewards: SmolLM2 with zero heads added (the same
    # function), PC and GRPO on the calibrated mix at rollout TP 2 (one replica of 2 GPUs) and TP 1 (two replicas),
    # FSDP over the same 2 GPUs, the same seed, verl's rollout/actor probability difference logged. The PC pair runs
    # on GPUs 0,1 and the GRPO pair on 2,3; `tp2-learn pc` or `tp2-learn grpo` runs that pair alone on GPUs 0,1. The
    # TP 1 run of a pair shares its GPUs with the TP 2 run, started after it (60 s with both pairs, 30 s with one).
    # Read it with
    #   python -m recipe.pc_tools.gpu_check tp2 --pair pc $RUNS/pc_tp1_learn $RUNS/pc_tp2_learn \
    #     --pair grpo $RUNS/grpo_tp1_learn $RUNS/grpo_tp2_learn
    pair=${2:-both}
    case "$pair" in
      both) gpus=(0,1 2,3) ;;
      pc | grpo) gpus=(0,1 0,1) ;;
      *) echo "tp2-learn: no pair '$pair' (pc, grpo, or none for both)" >&2; exit 2 ;;
    esac
    mkdir -p $RUNS
    export CPUS=8 STAGGER=${STAGGER_CHECKS:-30}
    learn="trainer.n_gpus_per_node=2 trainer.test_freq=-1"  # rollout.calculate_log_probs is on by default
    for tp in 2 1; do
      [ "$pair" = grpo ] || run pc_tp${tp}_learn ${gpus[0]} MODEL_PATH=$EVEN DATA_DIR=$D/calibrated STEPS=20 \
        bash train_scripts/arith_pc_1gpu.sh $learn actor_rollout_ref.rollout.tensor_model_parallel_size=$tp
      [ "$pair" = pc ] || run grpo_tp${tp}_learn ${gpus[1]} MODEL_PATH=$EVEN DATA_DIR=$D/calibrated STEPS=20 \
        bash train_scripts/arith_grpo_1gpu.sh $learn actor_rollout_ref.rollout.tensor_model_parallel_size=$tp
    done
    ;;
  reference)
    # The reference preset's update at data-parallel 2: pilot 2 + commit 6 on 8 prompts, mini-batches of 2 x 6 rows,
    # so each rank's 32 rows are 5 whole mini-batches and its tail a partial one. Read it with
    #   python -m recipe.pc_tools.gpu_check reference $RUNS/pc_reference
    mkdir -p $RUNS
    micro="actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"
    CPUS=8 STAGGER=1 run pc_reference 0,1 PRESET=reference MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=6 \
      bash train_scripts/smoke_1gpu.sh $micro trainer.n_gpus_per_node=2 algorithm.exploration.n=2 \
      actor_rollout_ref.rollout.n=6 actor_rollout_ref.actor.ppo_mini_batch_size=2
    ;;
  two-nodes)
    # Two Ray nodes on this host (head on GPU 0, worker on GPU 1), alone on those GPUs: its second phase starts
    # minutes after the first, and an engine starting beside another fails vLLM's memory profiling. Not restarted by
    # retry_start.sh, whose restart would run the first phase again. Read it with
    #   python -m recipe.pc_tools.gpu_check resume $RUNS/two_nodes
    mkdir -p $RUNS
    micro="actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"
    CPUS=14 STAGGER=1 RETRY="" run two_nodes 0,1 bash scripts/gpu/two_nodes.sh $M $D/smoke $micro
    ;;
  dp8)
    # The 4B paper script at data-parallel 8 with the reference preset, scaled down by overrides only: SmolLM2 on the
    # calibrated mix, 16 prompts a step (the paper's 128 : 32 : 384 as 16 : 4 : 48), so each rank's 128 rows are 5
    # mini-batches of 24 and a partial one of 8, as at the paper's 32 ranks. 4 steps with a checkpoint every 2, then
    # the same command resumes to step 6. Read it with
    #   python -m recipe.pc_tools.gpu_check reference $RUNS/pc_dp8 && python -m recipe.pc_tools.gpu_check resume $RUNS/pc_dp8
    mkdir -p $RUNS
    small="data.train_files=$D/calibrated/train.parquet data.val_files=$D/calibrated/test.parquet"
    small="$small data.train_batch_size=16 data.gen_batch_size=48 actor_rollout_ref.actor.ppo_mini_batch_size=4"
    small="$small data.max_response_length=256"
    small="$small reward.custom_reward_function.path=pkg://recipe.pc.rewards.last_integer"
    small="$small actor_rollout_ref.model.use_remove_padding=false +actor_rollout_ref.model.override_config.attn_implementation=sdpa"
    small="$small actor_rollout_ref.rollout.gpu_memory_utilization=0.3 'trainer.logger=[console,file]'"
    small="$small trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=2"
    small="$small trainer.default_local_dir=$RUNS/pc_dp8/checkpoints"
    phase() {  # NAME STEPS RESUME_MODE: one run of the script, then its exit code on the console
      echo "VERL_FILE_LOGGER_PATH=$RUNS/pc_dp8/metrics_$1.jsonl NNODES=1 NGPUS_PER_NODE=8 MODEL_PATH=$M PRESET=reference" \
        "bash train_scripts/pc_qwen3-4b_p16c48.sh $small trainer.total_training_steps=$2 trainer.resume_mode=$3;" \
        "echo $1: exit code \$?"
    }
    CPUS=30 STAGGER=1 RETRY="" run pc_dp8 0,1,2,3,4,5,6,7 "$(phase first 4 disable); $(phase resumed 6 auto)"
    ;;
  checks)
    # The multi-GPU checks. verl asks 3 Ray CPUs per GPU (CPUS=14 for 4 GPUs); the micro-batch sizes must divide
    # each rank's rows (verl/workers/engine/utils.py prepare_micro_batches), so 4 here; engines that start on one
    # GPU at the same moment fail vLLM's memory profiling, so starts are 60 s apart.
    mkdir -p $RUNS
    export CPUS=14 STAGGER=${STAGGER_CHECKS:-60}
    micro="actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"
    micro="$micro actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"
    # Data-parallel 4 with a generation batch that needs padding (3 agent workers, 15 pilot prompts).
    run pc_dp4 0,1,2,3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=5 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.agent.num_workers=3 data.gen_batch_size=15
    # Resume after SIGKILL of the driver once step 4's checkpoint is complete.
    RETRY="" CPUS=5 run resume 1 bash scripts/gpu/resume_check.sh $M $D/tiny $micro
    # The reference preset with a partial last mini-batch (64 rows in mini-batches of 12: 5 + 1 partial).
    CPUS=5 run ref_partial 3 MODEL_PATH=$M DATA_DIR=$D/smoke STEPS=4 bash train_scripts/smoke_1gpu.sh $micro \
      preset=reference algorithm.exploration.n=2 actor_rollout_ref.rollout.n=6 actor_rollout_ref.actor.ppo_mini_batch_size=2
    # Rollout tensor parallel 2 (two replicas of two GPUs) with the 14B script's layout (FSDP over all GPUs).
    run pc_tp2 0,1,2,3 MODEL_PATH=$TINY DATA_DIR=$D/smoke STEPS=3 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
      actor_rollout_ref.actor.ulysses_sequence_parallel_size=1
    # The same layout with GRPO, which trains every group: the PPO update at TP 2 runs even on the random model.
    run grpo_tp2 0,1,2,3 MODEL_PATH=$TINY DATA_DIR=$D/smoke STEPS=3 bash train_scripts/smoke_1gpu.sh $micro \
      trainer.n_gpus_per_node=4 actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
      actor_rollout_ref.actor.ulysses_sequence_parallel_size=1 algorithm.rollout_allocation=grpo data.gen_batch_size=8
    # Data-parallel 2, two vLLM replicas, padded generation batch; PC and GRPO.
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
    # The rollout dumps without their prompt and response text (what recipe.pc_tools.plan and the histograms read);
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
    # verl's weight-sync socket and hang.
    for f in $RUNS/*/log.txt; do
      [ -f "$f" ] && echo "$(basename "$(dirname "$f")"): $(grep -ao 'Ray slot [0-9]* .*' "$f" | tail -n 1 | cut -c1-160)"
    done
    tail -n 3 $RUNS/*/log.txt 2>/dev/null | cut -c1-300 || true
    nvidia-smi --query-gpu=index,memory.used --format=csv
    ;;
esac
