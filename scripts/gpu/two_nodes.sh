#!/usr/bin/env bash
# The two-node check: a Ray head (GPU 0) and a worker (GPU 1) on this host, each its own node with its own ports and
# temp dir, started by train_scripts/ray_cluster.sh; the PC smoke script trains across them with trainer.nnodes=2
# trainer.n_gpus_per_node=1. Twice: 4 steps with a checkpoint every 2, then a fresh pair of nodes that resumes from
# step 4 and trains to step 6. Each phase writes its metrics to the path it configures (metrics_first.jsonl,
# metrics_resumed.jsonl under OUT_DIR), and the console shows the PC state summaries at each save and at the resume.
# Read it with: python -m recipe.pc_tools.gpu_check resume OUT_DIR
set -uo pipefail
MODEL=$1 DATA=$2
shift 2
unset RAY_TMP
# The offline bundle's `ray` script points at the build machine's interpreter: run Ray's CLI as a module.
export RAY_CLI="python3 -m ray.scripts.scripts"

# across_two_nodes PHASE PORT STEPS [OVERRIDES...]: one training run over a fresh head and worker, stopped at the end.
across_two_nodes() {
  local phase=$1 port=$2 steps=$3 rc
  shift 3
  CUDA_VISIBLE_DEVICES=1 NODE_IP=127.0.0.1 HEAD_ADDR=127.0.0.1 RAY_PORT=$port NODE_PORT_BASE=$((port + 500)) \
    RAY_TMP=/tmp/rc_worker_$phase NGPUS_PER_NODE=1 NUM_CPUS=6 DETACH=1 bash train_scripts/ray_cluster.sh worker &
  CUDA_VISIBLE_DEVICES=0 NODE_IP=127.0.0.1 NNODES=2 RAY_PORT=$port RAY_TMP=/tmp/rc_head_$phase NGPUS_PER_NODE=1 \
    NUM_CPUS=6 MODEL_PATH=$MODEL DATA_DIR=$DATA STEPS=$steps VERL_FILE_LOGGER_PATH=$OUT_DIR/metrics_$phase.jsonl \
    bash train_scripts/ray_cluster.sh head train_scripts/smoke_1gpu.sh \
    trainer.nnodes=2 trainer.n_gpus_per_node=1 ray_kwargs.ray_init.num_cpus=null trainer.save_freq=2 "$@"
  rc=$?
  echo "$phase: exit code $rc"
  RAY_TMP=/tmp/rc_worker_$phase bash train_scripts/ray_cluster.sh stop
  return "$rc"
}

across_two_nodes first 7200 4 trainer.resume_mode=disable "$@" || exit $?
across_two_nodes resumed 7300 6 trainer.resume_mode=auto "$@"
rc=$?
ps aux | grep -c "[r]aylet" | sed 's/^/raylets still running on the host (other runs): /'
exit "$rc"
