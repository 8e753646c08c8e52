#!/usr/bin/env bash
# Start or join the Ray cluster a multi-node run trains on, then (on the head) run a train script.
#
#   on the head node:    bash train_scripts/ray_cluster.sh head [train_script.sh [overrides...]]
#   on every other node: HEAD_ADDR=<head ip> bash train_scripts/ray_cluster.sh worker
#   on each node:        bash train_scripts/ray_cluster.sh stop     (stops only what this script started there)
#
# The head waits until NNODES nodes (default 1) have joined before it starts the script, which then
# connects to this cluster through RAY_ADDRESS (do not also set ray_kwargs.ray_init.num_cpus), and
# stops its own node when the script ends (KEEP_CLUSTER=1 keeps it up).
#
# Environment: RAY_PORT (GCS port, default 6379); RAY_TMP (this node's Ray temp dir, default
# /tmp/ray_cluster_<port>; the pid file of the node lives there); NODE_PORT_BASE (the first of the 410
# ports this node's own processes use, default RAY_PORT + 1; give each node on one host its own range, and keep
# it clear of 8265 and 10001, which Ray reserves for the dashboard and client server);
# NGPUS_PER_NODE (default 8); NUM_CPUS (default: Ray's count); NODE_IP (the head's default: 127.0.0.1
# when NNODES=1, else the host's first address; a worker's default: Ray's choice); RAY_CLI (default
# `ray`; e.g. "python3 -m ray.scripts.scripts" where the `ray` script is not on PATH or not runnable);
# WAIT_NODES_S (how long the head waits for the nodes, default 1800; WAIT_HEAD_S likewise for a worker).
set -euo pipefail
RAY_PORT=${RAY_PORT:-6379}
NGPUS_PER_NODE=${NGPUS_PER_NODE:-8}
NNODES=${NNODES:-1}
RAY_TMP=${RAY_TMP:-/tmp/ray_cluster_$RAY_PORT}
base=${NODE_PORT_BASE:-$((RAY_PORT + 1))}
pidfile() { echo "$RAY_TMP/ray_cluster_$1.pid"; }

# "<alive nodes> <GPUs available>": the GPUs come from the resource view verl checks before it places workers.
cluster_state() {
  python3 - <<'PY'
import ray

ray.init(logging_level="ERROR")
alive = sum(1 for node in ray.nodes() if node["Alive"])
gpus = sum(r.get("GPU", 0) for r in ray._private.state.available_resources_per_node().values())
print(alive, int(gpus))
ray.shutdown()
PY
}

# start_node ROLE ARGS...: `ray start --block` in a session of its own, so that stopping it stops every
# process it started (raylet, GCS, workers) and no other Ray process on the machine.
start_node() {
  local role=$1
  shift
  mkdir -p "$RAY_TMP"
  local pf
  pf=$(pidfile "$role")
  if [ -f "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null; then
    echo "a Ray $role started by this script is already running (pid $(cat "$pf"), $pf)" >&2
    exit 1
  fi
  # Fixed, per-node port ranges: two nodes (or two clusters) on one host never collide.
  local ports=(
    --node-manager-port=$((base)) --object-manager-port=$((base + 1))
    --dashboard-agent-listen-port=$((base + 2)) --dashboard-agent-grpc-port=$((base + 3))
    --metrics-export-port=$((base + 4)) --runtime-env-agent-port=$((base + 5))
    --min-worker-port=$((base + 10)) --max-worker-port=$((base + 409))
  )
  local cpus=()
  [ -n "${NUM_CPUS:-}" ] && cpus=(--num-cpus="$NUM_CPUS")
  local ip=()
  [ -n "${NODE_IP:-}" ] && ip=(--node-ip-address="$NODE_IP")
  local cli
  read -ra cli <<<"${RAY_CLI:-ray}"
  setsid "${cli[@]}" start "$@" "${ports[@]}" "${cpus[@]}" "${ip[@]}" --num-gpus="$NGPUS_PER_NODE" \
    --temp-dir="$RAY_TMP" --disable-usage-stats --block >"$RAY_TMP/ray_cluster_$role.log" 2>&1 &
  echo $! >"$pf"
  echo "Ray $role starting (pid $!, log $RAY_TMP/ray_cluster_$role.log)"
}

stop_nodes() {
  local stopped=0 pf pid
  for pf in "$RAY_TMP"/ray_cluster_*.pid; do
    [ -f "$pf" ] || continue
    pid=$(cat "$pf")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM -- "-$pid" 2>/dev/null || true
      for _ in $(seq 15); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
      stopped=$((stopped + 1))
    fi
    # The node's whole session (its process group included), also when the leader is gone already: Ray's agents
    # (renamed ray::DashboardAgent, ...) live there and held the node's ports for up to 90 s after the raylet died.
    pkill -KILL -s "$pid" 2>/dev/null || true
    # A SIGKILL takes effect a moment later on a busy host: return once the session is empty (at most 10 s).
    for _ in $(seq 50); do pgrep -s "$pid" >/dev/null || break; sleep 0.2; done
    rm -f "$pf"
  done
  echo "stopped $stopped Ray node(s) started from $RAY_TMP"
}

# A node counts once it is alive AND its GPUs show in the resource view: right after a node joins, verl's
# resource check can still see 0 available GPUs and refuse to start.
wait_for() {
  local want=$1 gpus=$(($1 * NGPUS_PER_NODE)) tries=0 state deadline=$((SECONDS + ${WAIT_NODES_S:-1800}))
  while true; do
    if ! kill -0 "$(cat "$(pidfile head)")" 2>/dev/null; then
      echo "the Ray head stopped; see $RAY_TMP/ray_cluster_head.log" >&2
      exit 1
    fi
    state=$(cluster_state 2>/dev/null || echo "0 0")
    if [ "${state% *}" -ge "$want" ] && [ "${state#* }" -ge "$gpus" ]; then break; fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "gave up after WAIT_NODES_S=${WAIT_NODES_S:-1800} s: $state of $want node(s) / $gpus GPUs" >&2
      stop_nodes
      exit 1
    fi
    tries=$((tries + 1))
    if [ $((tries % 6)) = 0 ]; then echo "waiting for $want Ray node(s) with $gpus GPUs (now: $state) ..."; fi
    sleep 5
  done
}

role=${1:?usage: ray_cluster.sh head [script [overrides...]] | worker | stop}
shift || true

case "$role" in
  head)
    if [ -z "${NODE_IP:-}" ]; then
      if [ "$NNODES" = 1 ]; then NODE_IP=127.0.0.1; else NODE_IP=$(hostname -I | awk '{print $1}'); fi
    fi
    start_node head --head --port="$RAY_PORT" --include-dashboard=false --ray-client-server-port=$((base + 6))
    export RAY_ADDRESS="$NODE_IP:$RAY_PORT"
    wait_for "$NNODES"
    if [ $# -gt 0 ]; then
      script=$1
      shift
      rc=0
      # RAY_TMP is this node's; the script's driver only connects (a one-GPU launcher would pass it to ray.init).
      RAY_TMP= NNODES=$NNODES NGPUS_PER_NODE=$NGPUS_PER_NODE bash "$script" "$@" || rc=$?
      [ "${KEEP_CLUSTER:-0}" = 1 ] || stop_nodes
      exit "$rc"
    fi
    ;;
  worker)
    : "${HEAD_ADDR:?set HEAD_ADDR to the address of the head node}"
    # Under a scheduler the workers may start before the head: wait for its GCS port (WAIT_HEAD_S, default 600).
    python3 - "$HEAD_ADDR" "$RAY_PORT" "${WAIT_HEAD_S:-600}" <<'PY' || { echo "no Ray head at $HEAD_ADDR:$RAY_PORT" >&2; exit 1; }
import socket, sys, time

host, port, deadline = sys.argv[1], int(sys.argv[2]), time.time() + float(sys.argv[3])
while True:
    try:
        socket.create_connection((host, port), timeout=2).close()
        break
    except OSError:
        if time.time() > deadline:
            sys.exit(1)
        time.sleep(2)
PY
    start_node worker --address="$HEAD_ADDR:$RAY_PORT"
    if [ "${DETACH:-0}" != 1 ]; then wait "$(cat "$(pidfile worker)")"; fi
    ;;
  stop)
    stop_nodes
    ;;
  *)
    echo "unknown role $role (head | worker | stop)" >&2
    exit 2
    ;;
esac
