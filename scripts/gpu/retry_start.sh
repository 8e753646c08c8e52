#!/usr/bin/env bash
# retry_start.sh CMD...: run CMD; if it fails during vLLM's start-up because another engine on the same GPU
# changed its memory use meanwhile ("Error in memory profiling", "No available memory for the cache blocks"), or
# because its own Ray head did not come up (side-by-side runs, train_scripts/common_1gpu.sh), and no training step
# was logged yet, stop this run's own Ray processes and start again, up to
# START_TRIES times (default 3). Any other failure is returned as it is. Each attempt's output is kept in
# $OUT_DIR/attempt_<i>.log and also printed.
set -uo pipefail
source "$(dirname "$0")/ray_tmp.sh"
tries=${START_TRIES:-3}
[[ "$tries" =~ ^[1-9][0-9]*$ ]] || { echo "START_TRIES=$tries: expected a whole number >= 1" >&2; exit 2; }
metrics=${VERL_FILE_LOGGER_PATH:-$OUT_DIR/metrics.jsonl}
for ((i = 1; i <= tries; i++)); do
  "$@" 2>&1 | tee "$OUT_DIR/attempt_$i.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] && exit 0
  grep -qs '"training/global_step"' "$metrics" && exit "$rc"
  # vLLM's memory race, or a side-by-side run's own Ray head that did not come up (common_1gpu.sh).
  grep -q "Error in memory profiling\|No available memory for the cache blocks\|the Ray head stopped\|gave up after WAIT_NODES_S" \
    "$OUT_DIR/attempt_$i.log" || exit "$rc"
  [ "$i" -lt "$tries" ] || break
  echo "$(date +%T) attempt $i failed at start-up; retrying" >&2
  # Only this run's Ray processes: their command lines name its own temp dir.
  [ -n "${RAY_TMP:-}" ] && kill_ray_tmp "$RAY_TMP"
  rm -f "$metrics"
  sleep "${RETRY_SLEEP_S:-$((20 + RANDOM % 40))}"
done
echo "$(date +%T) attempt $i failed at start-up; giving up after $tries" >&2
exit "$rc"
