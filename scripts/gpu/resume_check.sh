#!/usr/bin/env bash
# The resume check: a PC smoke run on 40 level-1 prompts (an epoch ends, with evictions, before step 4),
# checkpoints every 2 steps, 8 steps. The driver is SIGKILLed as soon as step 4's PC state is written;
# then the same command resumes (resume_mode=auto) and must finish. Both logs print the PC state summary
# at each save and at the resume, so the state at step 4 can be compared line by line.
set -uo pipefail
source "$(dirname "$0")/ray_tmp.sh"
MODEL=$1 DATA=$2
shift 2
out=$OUT_DIR
args=(trainer.save_freq=2 algorithm.exclude_threshold_upper=0.75 trainer.test_freq=4 "$@")
launch() {
  MODEL_PATH=$MODEL DATA_DIR=$DATA STEPS=8 VERL_FILE_LOGGER_PATH=$out/metrics_$1.jsonl \
    setsid bash train_scripts/smoke_1gpu.sh "${args[@]}" >"$out/run_$1.log" 2>&1 &
  echo $!
}
# verl writes its "latest" marker last, after our PC state and the actor shards: step 4 is complete then.
latest=$out/checkpoints/latest_checkpointed_iteration.txt
state=$out/checkpoints/global_step_4/pilot_commit_state.pt
for try in 1 2 3; do
  pid=$(launch first)
  until [ "$(cat "$latest" 2>/dev/null)" = 4 ] || ! kill -0 "$pid" 2>/dev/null; do sleep 0.5; done
  [ "$(cat "$latest" 2>/dev/null)" = 4 ] && break
  # Died before step 4: retry only a failed vLLM start-up (another engine on the GPU), with a clean slate.
  grep -q "Error in memory profiling\|No available memory for the cache blocks" "$out/run_first.log" || exit 1
  cp "$out/run_first.log" "$out/run_first_failed_$try.log"
  kill_ray_tmp "${RAY_TMP:?}"
  rm -rf "$out/checkpoints" "$out/metrics_first.jsonl"
  [ "$try" -lt 3 ] || break
  echo "first run failed at vLLM start-up (try $try); starting it again" >&2
  sleep $((20 + RANDOM % 40))
done
# Not "resumed" otherwise: the resumed run would start from scratch and look like a finished check.
[ "$(cat "$latest" 2>/dev/null)" = 4 ] || { echo "the first run never reached step 4's checkpoint in 3 tries" >&2; exit 1; }
sleep 1  # the summary line is logged right after the save
driver=$(pgrep -f "recipe.pc.main_pc" -s "$pid" | head -1)
echo "killing driver $driver (session $pid) at $(date +%T); state present: $([ -f "$state" ] && echo yes)"
kill -KILL "$driver" 2>/dev/null
sleep 5
kill -KILL -- "-$pid" 2>/dev/null
sleep 5
kill_ray_tmp "${RAY_TMP:?}"  # this run's Ray processes only, never other runs'
sleep 2
pid=$(launch resumed)
while kill -0 "$pid" 2>/dev/null; do sleep 2; done  # not our child (started in a subshell): poll
echo "resumed run finished: $(grep -c '"training/global_step"' "$out/metrics_resumed.jsonl") steps logged"
grep -h "saved PC state\|resumed PC state" "$out"/run_*.log | sed 's/.*\(saved\|resumed\)/\1/'
