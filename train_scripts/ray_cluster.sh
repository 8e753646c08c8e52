#!/usr/bin/env bash
# Start or join the Ray cluster a multi-node run trains on, then (on the head) run a train script.
#
#   on the head node:    bash train_scripts/ray_cluster.sh head [train_script.sh [overrides...]]
#   on every other node: HEAD_ADDR=<head ip> bash train_scripts/ray_cluster.sh worker
#   anywhere:            bash train_scripts/ray_cluster.sh stop
#
# The head waits until NNODES nodes (default 1) have joined before it starts the script, which then
# connects to this cluster through RAY_ADDRESS (do not also set ray_kwargs.ray_init.num_cpus).
set -euo pipefail
RAY_PORT=${RAY_PORT:-6379}
NGPUS_PER_NODE=${NGPUS_PER_NODE:-8}
NNODES=${NNODES:-1}
alive_nodes() {
  python3 - <<'PY'
import ray

ray.init(logging_level="ERROR")
print(sum(1 for node in ray.nodes() if node["Alive"]))
PY
}

role=${1:?usage: ray_cluster.sh head [script [overrides...]] | worker | stop}
shift || true

case "$role" in
  head)
    ray start --head --port="$RAY_PORT" --num-gpus="$NGPUS_PER_NODE" --disable-usage-stats
    export RAY_ADDRESS="127.0.0.1:$RAY_PORT"
    until [ "$(alive_nodes)" -ge "$NNODES" ]; do
      echo "waiting for $NNODES nodes to join ..."; sleep 10
    done
    if [ $# -gt 0 ]; then
      script=$1; shift
      NNODES=$NNODES NGPUS_PER_NODE=$NGPUS_PER_NODE bash "$script" "$@"
    fi
    ;;
  worker)
    : "${HEAD_ADDR:?set HEAD_ADDR to the address of the head node}"
    ray start --address="$HEAD_ADDR:$RAY_PORT" --num-gpus="$NGPUS_PER_NODE" --disable-usage-stats --block
    ;;
  stop)
    ray stop --force
    ;;
  *) echo "unknown role $role (head | worker | stop)" >&2; exit 2 ;;
esac
