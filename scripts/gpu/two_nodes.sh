#!/usr/bin/env bash
# The two-node check: a Ray head (GPU 0) and a worker (GPU 1) on this host, each its own node with its own
# ports and temp dir, started by train_scripts/ray_cluster.sh; the PC smoke script trains across them with
# trainer.nnodes=2 trainer.n_gpus_per_node=1; the head stops its node when the script ends, then the worker is stopped.
set -uo pipefail
MODEL=$1 DATA=$2
shift 2
unset RAY_TMP
# The offline bundle's `ray` script points at the build machine's interpreter: run Ray's CLI as a module.
export RAY_CLI="python3 -m ray.scripts.scripts"
CUDA_VISIBLE_DEVICES=1 NODE_IP=127.0.0.1 HEAD_ADDR=127.0.0.1 RAY_PORT=7200 NODE_PORT_BASE=7700 \
  RAY_TMP=/tmp/rc_worker NGPUS_PER_NODE=1 NUM_CPUS=6 DETACH=1 bash train_scripts/ray_cluster.sh worker &
CUDA_VISIBLE_DEVICES=0 NODE_IP=127.0.0.1 NNODES=2 RAY_PORT=7200 RAY_TMP=/tmp/rc_head NGPUS_PER_NODE=1 NUM_CPUS=6 \
  MODEL_PATH=$MODEL DATA_DIR=$DATA STEPS=4 \
  bash train_scripts/ray_cluster.sh head train_scripts/smoke_1gpu.sh \
  trainer.nnodes=2 trainer.n_gpus_per_node=1 ray_kwargs.ray_init.num_cpus=null "$@"
rc=$?
echo "head exit code $rc"
RAY_TMP=/tmp/rc_worker bash train_scripts/ray_cluster.sh stop
ps aux | grep -c "[r]aylet" | sed 's/^/raylets still running on the host (other runs): /'
exit "$rc"
