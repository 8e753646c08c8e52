# Sourced by the GPU-check scripts; defines kill_ray_tmp DIR: SIGKILL every process whose command line names the
# Ray temp dir DIR (a run's own raylet, GCS and workers) and no other: the name must end there, so /tmp/ray_pc_s1
# leaves /tmp/ray_pc_s10 alone. A function, not a script: a script's own command line would name DIR and match.
kill_ray_tmp() {
  pkill -KILL -f "${1:?kill_ray_tmp: a Ray temp dir}([/ ]|\$)" || true
}
