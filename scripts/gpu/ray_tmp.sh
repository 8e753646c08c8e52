# Sourced by the GPU-check scripts; defines kill_ray_tmp DIR: SIGKILL every process whose command line names the
# Ray temp dir DIR (a run's own raylet, GCS and workers) and no other: the name must end there, so /tmp/ray_pc_s1
# leaves /tmp/ray_pc_s10 alone. A function, not a script: a script's own command line would name DIR and match.
kill_ray_tmp() {
  local dir=${1:?kill_ray_tmp: a Ray temp dir}
  # A head started by train_scripts/ray_cluster.sh (side-by-side runs): its whole session, the agents included,
  # whose renamed command lines do not name DIR and which otherwise held the head's ports for up to 90 s.
  if [ -f "$dir/ray_cluster_head.pid" ]; then pkill -KILL -s "$(cat "$dir/ray_cluster_head.pid")" || true; fi
  pkill -KILL -f "$dir([/ ]|\$)" || true
}
