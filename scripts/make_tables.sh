#!/usr/bin/env bash
# Rebuilds every table and figure of docs/results/regimes/README.md from the committed logs (CPU, ~7 min):
#   bash scripts/make_tables.sh
# REGIMES_OUT=DIR writes them under DIR instead (tests/docs/test_regime_tables.py checks the committed ones that way).
set -euo pipefail
cd "$(dirname "$0")/.."
# Every `python -m recipe.pc_tools.plan`, `report` and `verdict` below runs in one Python process, the coprocess
# TOOLS: a process per call imported torch and verl each time (~5 s), most of the script's minutes. Each call keeps
# its own arguments, exit status and standard output (through the file $TOOLS_OUT); other `python` commands run as
# they are.
TOOLS_SERVER='
import contextlib, importlib, os, sys, traceback

replies = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # a library writing to fd 1 directly must not end up in a reply

def token():
    data = bytearray()
    while (byte := sys.stdin.buffer.read(1)) != b"\0":
        if not byte:
            sys.exit(0)  # the script is done
        data += byte
    return data.decode()

while True:
    out, module, count = token(), token(), int(token())
    argv = [token() for _ in range(count)]
    with open(out, "w") as stdout, contextlib.redirect_stdout(stdout):
        try:
            tool = importlib.import_module(module)
            sys.argv = [tool.__file__, *argv]
            status = tool.main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        except Exception:
            traceback.print_exc()
            status = 1
    print(status or 0, file=replies, flush=True)
'
coproc TOOLS { exec python -c "$TOOLS_SERVER"; }
# Copies of the coprocess's descriptors: bash closes its own in the subshells of a pipeline (`python ... | grep`).
exec {TOOLS_REQUESTS}>&"${TOOLS[1]}" {TOOLS_REPLIES}<&"${TOOLS[0]}"
TOOLS_OUT=$(mktemp)
trap 'rm -f "$TOOLS_OUT"' EXIT
python() {
  if [ "$1" != -m ] || { [ "$2" != recipe.pc_tools.plan ] && [ "$2" != recipe.pc_tools.report ] && [ "$2" != recipe.pc_tools.verdict ]; }; then
    command python "$@"
    return
  fi
  local status=1
  printf '%s\0' "$TOOLS_OUT" "$2" $(($# - 2)) "${@:3}" >&"$TOOLS_REQUESTS"
  read -r status <&"$TOOLS_REPLIES" || true
  cat "$TOOLS_OUT"
  return "$status"
}
R=${REGIMES_OUT:-docs/results/regimes} D=docs/results/regimes/2026-11-26
C=docs/results/regimes/2026-11-26c E=docs/results/regimes/2026-11-26d  # batch 3; batch 4a
F=docs/results/regimes/2026-11-26e G=docs/results/regimes/2026-11-26f  # batch 11; batch 13
H=docs/results/regimes/2026-11-27 I=docs/results/regimes/2026-11-27b  # batch 14; batch 17
J=docs/results/regimes/2026-11-27c K=docs/results/regimes/2026-11-27d  # batch 15; batch 16
L=docs/results/regimes/2026-11-27e M=docs/results/regimes/2026-11-27f  # batch 18 (partial); its ref seed 2 alone
N=docs/results/regimes/2026-11-27g  # batch 18 again, whole (4 x H100)
P=docs/results/regimes/2026-11-27h  # the pre-registered PC 4+60 against GRPO n=64 (batch20.txt, 4 x H200)
# dapo16_calibrated_s1 reached step 29 in batch 4a and ran again, to step 30, in batch 11: every table uses that run.
CAL_DAPO=("" $F $E)  # the folder of dapo16_calibrated_s<seed>
# Accuracy at equal generated rollouts (at_rollouts.md), added after batch 17 to every folder: at GRPO's cumulative
# rollouts at its steps 10, 20 and 30, 512 or 768 a step (groups of 16, 64), so GRPO's whole budget is the last column.
G16=--at-rollouts=5120,10240,15360 G64=--at-rollouts=7680,15360,23040
MEANS=training/num_gen_batches,actor/grad_norm,actor/ppo_kl,actor/pg_clipfrac,actor/entropy,training/zero_variance_group_frac,filtering_stats/pass_rate,filtering_stats/too_correct_rate,filtering_stats/too_incorrect_rate
# costmodel OUT DUMP B G SPLIT [plan options: --measured KIND=LOG..., --per-step]: the cost model fed with DUMP's
# pass rates (the GRPO run of the same mix and seed) per 10 steps, beside the measured runs; appended to OUT.
costmodel() {
  local out=$1 dump=$2 b=$3 g=$4 split=$5
  shift 5
  python -m recipe.pc_tools.plan check "$dump" --train-batch-size "$b" --gen-batch-size "$g" --pc "$split" --window 10 "$@" >>"$out"
  echo >>"$out"
}
# Accuracy against generated rollouts, seeds aggregated. pc4x12_spread_s2 of batch 2 stopped at step 2 and is left
# out; batch 11 ran it again ($F). pc4x12ref: PC 4+12 under preset=reference (its mini-batch arithmetic), seed 1 from
# batch 11, seed 2 from batch 18 ($N).
# values_table.md: each run's rounds at step 1, when PC's buffer is empty, and its epoch at steps 1 and 30.
STEP1="--values training/num_gen_batches,training/epoch --value-steps 1,30"
python -m recipe.pc_tools.report --seeds --equal-accuracy --means $MEANS --at-steps 5,10,30 $G16 $STEP1 --out $R/default \
  grpo16_s1=$D/grpo16_default_s1/metrics.jsonl grpo16_s2=$D/grpo16_default_s2/metrics.jsonl \
  pc4x12_s1=$D/pc4x12_default_s1/metrics.jsonl pc4x12_s2=$D/pc4x12_default_s2/metrics.jsonl \
  pc4x12ref_s1=$F/pc4x12ref_default_s1/metrics.jsonl pc4x12ref_s2=$N/pc4x12ref_default_s2/metrics.jsonl >/dev/null
python -m recipe.pc_tools.report --seeds --equal-accuracy --means $MEANS --at-steps 5,10,30 $G16 $STEP1 --out $R/spread \
  grpo16_s1=$D/grpo16_spread_s1/metrics.jsonl grpo16_s2=$D/grpo16_spread_s2/metrics.jsonl \
  pc4x12_s1=$D/pc4x12_spread_s1/metrics.jsonl pc4x12_s2=$F/pc4x12_spread_s2/metrics.jsonl >/dev/null
for mix in default spread; do
  # Per-prompt pass rates of the GRPO run (seed 1) by data source, per 10 steps, and their histogram.
  python -m recipe.pc_tools.plan sources $D/grpo16_${mix}_s1/dump.parquet --window 10 --table \
    --histogram $R/pass_rates_grpo16_${mix}_s1.png >$R/$mix/pass_rates_by_source.md
  # The cost model fed with the GRPO run's pass rates (same mix and seed), against the PC run's log.
  : >$R/$mix/costmodel_vs_measured.md
  for seed in 1 2; do
    pc=$D/pc4x12_${mix}_s$seed/metrics.jsonl
    [ "$(grep -c '"training/global_step"' $pc)" -ge 30 ] || pc=$F/pc4x12_${mix}_s$seed/metrics.jsonl
    costmodel $R/$mix/costmodel_vs_measured.md $D/grpo16_${mix}_s$seed/dump.parquet 32 96 4+12 --measured pc:4+12=$pc
  done
done
# PC 4+12 under preset=reference (seed 1 batch 11, seed 2 batch 18) against the same GRPO dump as its improved twin.
costmodel $R/default/costmodel_vs_measured.md $D/grpo16_default_s1/dump.parquet 32 96 4+12 \
  --measured pc:4+12=$F/pc4x12ref_default_s1/metrics.jsonl
costmodel $R/default/costmodel_vs_measured.md $D/grpo16_default_s2/dump.parquet 32 96 4+12 \
  --measured pc:4+12=$N/pc4x12ref_default_s2/metrics.jsonl
# The warm-up: steps 2-10 only (step 1 starts with an empty buffer, which the steady-state model leaves out).
echo "Steps 2-10 only (without the warm-up step):" >>$R/default/costmodel_vs_measured.md
python -m recipe.pc_tools.plan check $D/grpo16_default_s1/dump.parquet --steps 2:10 --train-batch-size 32 --gen-batch-size 96 --pc 4+12 \
  --measured pc:4+12=$D/pc4x12_default_s1/metrics.jsonl >>$R/default/costmodel_vs_measured.md

# Batch 3 (2026-11-26c): groups of 64 on the default mix. PC 8+56 and 4+60 were stopped at steps 4-6 there
# (launch.log) and ran again, to step 30, in batch 15 (2026-11-27c; its four GRPO n=16 riders were stopped at step 10
# to give the groups-of-64 runs their GPUs, launch.log: no table uses them). PC 16+48 with a screen of 4, both seeds,
# ran in batch 16 (2026-11-27d). The target is the peak of GRPO n=64's mean curve (the PC runs' group size).
python -m recipe.pc_tools.report --seeds --equal-accuracy --means $MEANS --at-steps 5,10,20,30 $G64 --out $R/default_g64 \
  grpo64_s1=$C/grpo64_default_s1/metrics.jsonl grpo64_s2=$C/grpo64_default_s2/metrics.jsonl \
  pc16x48_s1=$C/pc16x48_default_s1/metrics.jsonl pc16x48_s2=$C/pc16x48_default_s2/metrics.jsonl \
  pc8x56_s1=$J/pc8x56_default_s1/metrics.jsonl pc8x56_s2=$J/pc8x56_default_s2/metrics.jsonl \
  pc4x60_s1=$J/pc4x60_default_s1/metrics.jsonl pc4x60_s2=$J/pc4x60_default_s2/metrics.jsonl \
  pc16x48screen4_s1=$K/pc16x48screen4_default_s1/metrics.jsonl \
  pc16x48screen4_s2=$K/pc16x48screen4_default_s2/metrics.jsonl >/dev/null
python -m recipe.pc_tools.plan sources $C/grpo64_default_s1/dump.parquet --window 10 --table \
  --histogram $R/pass_rates_grpo64_default_s1.png >$R/default_g64/pass_rates_by_source.md
: >$R/default_g64/costmodel_vs_measured.md
for seed in 1 2; do
  costmodel $R/default_g64/costmodel_vs_measured.md $C/grpo64_default_s$seed/dump.parquet 12 36 16+48,8+56,4+60 \
    --measured pc:16+48=$C/pc16x48_default_s$seed/metrics.jsonl \
    --measured pc:8+56=$J/pc8x56_default_s$seed/metrics.jsonl --measured pc:4+60=$J/pc4x60_default_s$seed/metrics.jsonl
done
# The predictions made before batch 3 ran (README), from the groups-of-16 GRPO dumps, steps 11-30.
for seed in 1 2; do
  python -m recipe.pc_tools.plan predict $D/grpo16_default_s$seed/dump.parquet --steps 11:30 --group-size 64 --train-batch-size 12 \
    --gen-batch-size 36 --pc 16+48,8+56,4+60 >$R/default_g64/preregistered_predictions_s$seed.md
done
# Batch 4a (2026-11-26d, 2 GPUs): groups of 16 on the calibrated mix, GRPO, PC 4+12 and DAPO (DAPO seed 1 from batch
# 11). Target: the peak of GRPO n=16's mean curve.
mkdir -p $R/calibrated
python -m recipe.pc_tools.report --seeds --equal-accuracy --means $MEANS --at-steps 5,10,15,20,25,30 $G16 --out $R/calibrated \
  grpo16_s1=$E/grpo16_calibrated_s1/metrics.jsonl grpo16_s2=$E/grpo16_calibrated_s2/metrics.jsonl \
  pc4x12_s1=$E/pc4x12_calibrated_s1/metrics.jsonl pc4x12_s2=$E/pc4x12_calibrated_s2/metrics.jsonl \
  dapo16_s1=$F/dapo16_calibrated_s1/metrics.jsonl dapo16_s2=$E/dapo16_calibrated_s2/metrics.jsonl >/dev/null
# dapo16_calibrated_s1's two runs of one line (batch 4a to step 29, batch 11), side by side against the same target:
# how far one configuration and seed drifts between runs (README, "A seed fixes the data order, not the run").
target=$(python -c "import csv; print(next(csv.DictReader(open('$R/calibrated/seeds_table.csv')))['target'])")
python -m recipe.pc_tools.report --target "$target" --baseline dapo16_s1_batch11 --at-steps 0,5,10,15,20,25 \
  --values training/num_gen_batches --value-steps 1,2,3,4 --no-plot --out $R/calibrated_dapo_rerun \
  dapo16_s1_batch4a=$E/dapo16_calibrated_s1/metrics.jsonl dapo16_s1_batch11=$F/dapo16_calibrated_s1/metrics.jsonl >/dev/null
python -m recipe.pc_tools.plan sources $E/grpo16_calibrated_s1/dump.parquet --window 10 --table \
  --histogram $R/pass_rates_grpo16_calibrated_s1.png >$R/calibrated/pass_rates_by_source.md
# The cost model fed with the GRPO run's pass rates (same mix and seed), against the PC and DAPO runs' logs.
: >$R/calibrated/costmodel_vs_measured.md
for seed in 1 2; do
  costmodel $R/calibrated/costmodel_vs_measured.md $E/grpo16_calibrated_s$seed/dump.parquet 32 96 4+12 \
    --measured pc:4+12=$E/pc4x12_calibrated_s$seed/metrics.jsonl \
    --measured dapo=${CAL_DAPO[$seed]}/dapo16_calibrated_s$seed/metrics.jsonl
done
# Predictions for the calibrated mix (batches 4 and 6), made before any run on it: the spread mix's GRPO dumps
# (steps 11-30) restricted to the calibrated mix's levels, groups of 16 and of 64.
for seed in 1 2; do
  calibrated="--steps 11:30 --sources arith_l2,arith_l3,arith_l4,arith_l6"
  python -m recipe.pc_tools.plan predict $D/grpo16_spread_s$seed/dump.parquet $calibrated --pc 4+12 >$R/calibrated/preregistered_g16_s$seed.md
  python -m recipe.pc_tools.plan predict $D/grpo16_spread_s$seed/dump.parquet $calibrated --group-size 64 --train-batch-size 12 \
    --gen-batch-size 36 --pc 16+48,8+56,4+60 >$R/calibrated/preregistered_g64_s$seed.md
done
# Predictions for groups of 64 on the calibrated mix (batch 6 and PC 8+56/4+60 there), made after batch 4a and
# before those runs: batch 4a's GRPO n=16 dumps of the calibrated mix, steps 11-30.
for seed in 1 2; do
  python -m recipe.pc_tools.plan predict $E/grpo16_calibrated_s$seed/dump.parquet --steps 11:30 --group-size 64 --train-batch-size 12 \
    --gen-batch-size 36 --pc 16+48,8+56,4+60 >$R/calibrated/preregistered_g64_from_4a_s$seed.md
done
# Predictions for the allocator stages (batches 7 and 8), made before any run: screening and PODS down-sampling
# (the analytic model; skipping is simulated further down), from the default mix's GRPO dumps, steps 11-30.
for seed in 1 2; do
  g16="$D/grpo16_default_s$seed/dump.parquet --steps 11:30 --pc 4+12"
  { python -m recipe.pc_tools.plan predict $g16; python -m recipe.pc_tools.plan predict $g16 --screen-n 2; python -m recipe.pc_tools.plan predict $g16 --downsample-n 24
    python -m recipe.pc_tools.plan predict $g16 --downsample-n 32; } >$R/default/preregistered_stages_s$seed.md
  g64="$C/grpo64_default_s$seed/dump.parquet --steps 11:30 --group-size 64 --train-batch-size 12 --gen-batch-size 36 --pc 16+48"
  { python -m recipe.pc_tools.plan predict $g64; python -m recipe.pc_tools.plan predict $g64 --screen-n 4; } \
    >$R/default_g64/preregistered_stages_s$seed.md
done
# The same comparisons with --per-step (each step predicted from that step's GRPO pass rates, then averaged), a
# revision of the model made after batch 4a's misses (README): every PC and DAPO run, no other inputs changed.
: >$R/default/costmodel_per_step.md
: >$R/spread/costmodel_per_step.md
: >$R/default_g64/costmodel_per_step.md
: >$R/calibrated/costmodel_per_step.md
for seed in 1 2; do
  costmodel $R/default/costmodel_per_step.md $D/grpo16_default_s$seed/dump.parquet 32 96 4+12 --per-step \
    --measured pc:4+12=$D/pc4x12_default_s$seed/metrics.jsonl
  costmodel $R/default_g64/costmodel_per_step.md $C/grpo64_default_s$seed/dump.parquet 12 36 16+48,8+56,4+60 --per-step \
    --measured pc:16+48=$C/pc16x48_default_s$seed/metrics.jsonl \
    --measured pc:8+56=$J/pc8x56_default_s$seed/metrics.jsonl --measured pc:4+60=$J/pc4x60_default_s$seed/metrics.jsonl
  costmodel $R/calibrated/costmodel_per_step.md $E/grpo16_calibrated_s$seed/dump.parquet 32 96 4+12 --per-step \
    --measured pc:4+12=$E/pc4x12_calibrated_s$seed/metrics.jsonl \
    --measured dapo=${CAL_DAPO[$seed]}/dapo16_calibrated_s$seed/metrics.jsonl
done
costmodel $R/spread/costmodel_per_step.md $D/grpo16_spread_s1/dump.parquet 32 96 4+12 --per-step \
  --measured pc:4+12=$D/pc4x12_spread_s1/metrics.jsonl
costmodel $R/spread/costmodel_per_step.md $D/grpo16_spread_s2/dump.parquet 32 96 4+12 --per-step \
  --measured pc:4+12=$F/pc4x12_spread_s2/metrics.jsonl
costmodel $R/default/costmodel_per_step.md $D/grpo16_default_s1/dump.parquet 32 96 4+12 --per-step \
  --measured pc:4+12=$F/pc4x12ref_default_s1/metrics.jsonl
costmodel $R/default/costmodel_per_step.md $D/grpo16_default_s2/dump.parquet 32 96 4+12 --per-step \
  --measured pc:4+12=$N/pc4x12ref_default_s2/metrics.jsonl
# Batches 11, 13 and 14 (2026-11-26e, f, 2026-11-27): groups of 64 on the calibrated mix, GRPO n=64 and PC 16+48 (seed
# 1 in batch 11, seed 2 in batch 13), PC 8+56 (both seeds, batch 13), PC 4+60 (both seeds, batch 14) and PC 16+48 with
# a screen of 4 (seed 1 in batch 14; seed 2 hung there in step 14, launch README, and ran in batch 16, 2026-11-27d).
# Target: the peak of GRPO n=64's mean curve; the cost model fed with the same seed's GRPO n=64 dump, pooled and per
# step.
CAL64=("" $F $G)  # the folder of grpo64_calibrated_s<seed> and pc16x48_calibrated_s<seed>
mkdir -p $R/calibrated_g64
python -m recipe.pc_tools.report --seeds --equal-accuracy --means $MEANS --at-steps 5,10,15,20,25,30 $G64 --out $R/calibrated_g64 \
  grpo64_s1=$F/grpo64_calibrated_s1/metrics.jsonl grpo64_s2=$G/grpo64_calibrated_s2/metrics.jsonl \
  pc16x48_s1=$F/pc16x48_calibrated_s1/metrics.jsonl pc16x48_s2=$G/pc16x48_calibrated_s2/metrics.jsonl \
  pc8x56_s1=$G/pc8x56_calibrated_s1/metrics.jsonl pc8x56_s2=$G/pc8x56_calibrated_s2/metrics.jsonl \
  pc4x60_s1=$H/pc4x60_calibrated_s1/metrics.jsonl pc4x60_s2=$H/pc4x60_calibrated_s2/metrics.jsonl \
  pc16x48screen4_s1=$H/pc16x48screen4_calibrated_s1/metrics.jsonl \
  pc16x48screen4_s2=$K/pc16x48screen4_calibrated_s2/metrics.jsonl >/dev/null
python -m recipe.pc_tools.plan sources $F/grpo64_calibrated_s1/dump.parquet --window 10 --table \
  --histogram $R/pass_rates_grpo64_calibrated_s1.png >$R/calibrated_g64/pass_rates_by_source.md
: >$R/calibrated_g64/costmodel_vs_measured.md
: >$R/calibrated_g64/costmodel_per_step.md
for seed in 1 2; do
  cal64="${CAL64[$seed]}/grpo64_calibrated_s$seed/dump.parquet 12 36 16+48,8+56,4+60
    --measured pc:16+48=${CAL64[$seed]}/pc16x48_calibrated_s$seed/metrics.jsonl
    --measured pc:8+56=$G/pc8x56_calibrated_s$seed/metrics.jsonl
    --measured pc:4+60=$H/pc4x60_calibrated_s$seed/metrics.jsonl"
  costmodel $R/calibrated_g64/costmodel_vs_measured.md $cal64
  costmodel $R/calibrated_g64/costmodel_per_step.md $cal64 --per-step
done
# PC 16+48 with a screen of 4 (seed 1 from batch 14, seed 2 from batch 16) against its own seed's GRPO n=64 dump.
SCREEN4_CAL=("" $H $K)  # the folder of pc16x48screen4_calibrated_s<seed>
for seed in 1 2; do
  screen4="${CAL64[$seed]}/grpo64_calibrated_s$seed/dump.parquet 12 36 16+48 --screen-n 4
    --measured pc:16+48=${SCREEN4_CAL[$seed]}/pc16x48screen4_calibrated_s$seed/metrics.jsonl"
  costmodel $R/calibrated_g64/costmodel_vs_measured.md $screen4
  costmodel $R/calibrated_g64/costmodel_per_step.md $screen4 --per-step
  # The same screen on the default mix (batch 16), against that mix's GRPO n=64 dump of the same seed.
  screen4="$C/grpo64_default_s$seed/dump.parquet 12 36 16+48 --screen-n 4
    --measured pc:16+48=$K/pc16x48screen4_default_s$seed/metrics.jsonl"
  costmodel $R/default_g64/costmodel_vs_measured.md $screen4
  costmodel $R/default_g64/costmodel_per_step.md $screen4 --per-step
done
# Whole-run predictions (--per-step over steps 1-30, the warm-up included) for the groups-of-64 runs not yet made
# (batches 5, 10 and 12), made before them: from each seed's GRPO n=64 dump on the default mix, and from seed 1's on
# the calibrated mix (seed 2's GRPO n=64 ran with them, in batch 13). PC 16+48 on the default mix and seed 1 on the
# calibrated mix had run: those rows are checks, not predictions; the rest were predictions (batch 13 ran PC 16+48
# seed 2 and PC 8+56 on the calibrated mix after them).
whole="--per-step --group-size 64 --train-batch-size 12 --gen-batch-size 36 --pc 16+48,8+56,4+60"
for seed in 1 2; do
  python -m recipe.pc_tools.plan predict $C/grpo64_default_s$seed/dump.parquet $whole >$R/default_g64/preregistered_whole_run_s$seed.md
done
python -m recipe.pc_tools.plan predict $F/grpo64_calibrated_s1/dump.parquet $whole >$R/calibrated_g64/preregistered_whole_run_from_s1.md
# Made after batch 13, before batch 14 and batch 8's default-mix half: PC 4+60 and PC 16+48 with a screen of 4 on
# the calibrated mix from each seed's own GRPO n=64 dump (both ran by then), and the screen of 4 on the default mix.
g64="--per-step --group-size 64 --train-batch-size 12 --gen-batch-size 36"
for seed in 1 2; do
  { python -m recipe.pc_tools.plan predict ${CAL64[$seed]}/grpo64_calibrated_s$seed/dump.parquet $g64 --pc 4+60
    python -m recipe.pc_tools.plan predict ${CAL64[$seed]}/grpo64_calibrated_s$seed/dump.parquet $g64 --pc 16+48 --screen-n 4
  } >$R/calibrated_g64/preregistered_batch14_s$seed.md
  python -m recipe.pc_tools.plan predict $C/grpo64_default_s$seed/dump.parquet $g64 --pc 16+48 --screen-n 4 \
    >$R/default_g64/preregistered_screen4_whole_run_s$seed.md
done
# Is the generation batch a lever? The same per-step model over G = 12 to 48 prompts a round (1 to 4 x the 12 trained).
for seed in 1 2; do
  rows='^\| conf|^\|---|^\| PC'  # the table's header once, then the PC rows of each G
  for gen in 12 18 24 36 48; do
    python -m recipe.pc_tools.plan predict ${CAL64[$seed]}/grpo64_calibrated_s$seed/dump.parquet --per-step --group-size 64 \
      --train-batch-size 12 --gen-batch-size $gen --pc 16+48,8+56,4+60 | grep -E "$rows"
    rows='^\| PC'
  done >$R/calibrated_g64/gen_batch_grid_s$seed.md
done
# How small can the pilot go? The same per-step model for PC 8+56, 4+60 and 2+62 on both mixes (after batch 15; no
# 2+62 run exists): with 2 pilot rollouts only 1 of 2 lands in the band [0.125, 0.75], so rounds rise as pilots shrink.
for seed in 1 2; do
  for mix in default calibrated; do
    dump=$C/grpo64_default_s$seed/dump.parquet
    [ $mix = default ] || dump=${CAL64[$seed]}/grpo64_calibrated_s$seed/dump.parquet
    python -m recipe.pc_tools.plan predict $dump --per-step --group-size 64 --train-batch-size 12 --gen-batch-size 36 \
      --pc 8+56,4+60,2+62 >$R/${mix}_g64/pilot_size_s$seed.md
  done
done
# The same for batch 7's groups-of-16 stages (screening and PODS; skipping has its simulation above), from the default
# mix's GRPO n=16 dumps, steps 1-30, made before batch 13 ran some of them.
for seed in 1 2; do
  g16="$D/grpo16_default_s$seed/dump.parquet --per-step --pc 4+12"
  { python -m recipe.pc_tools.plan predict $g16; python -m recipe.pc_tools.plan predict $g16 --screen-n 2; python -m recipe.pc_tools.plan predict $g16 --downsample-n 24
    python -m recipe.pc_tools.plan predict $g16 --downsample-n 32; } >$R/default/preregistered_stages_whole_run_s$seed.md
done
# Predictions for GRESO skipping (batches 7 and 9), made before those runs: the simulator, 30 steps from an empty
# history, 20 runs pooled, with the run's number of prompts (3000, and batch 9's 480) drawn from the default mix's
# GRPO pass rates (steps 11-30). Fixed pass rates never let a skipped prompt become solvable: optimistic.
for seed in 1 2; do
  for prompts in 3000 480; do
    python -m recipe.pc_tools.plan predict $D/grpo16_default_s$seed/dump.parquet --steps 11:30 --pc 4+12 --simulate 30 --simulate-warmup 0 \
      --simulate-runs 20 --prompts $prompts --skip | sed -n '/^simulated/,/^$/p'
  done >$R/default/preregistered_skip_s$seed.md
done
# Past 30 steps on 480 prompts (seed 1's rates): steps 31-60 and 61-90, where PC with skipping starves (README).
for warmup in 30 60; do
  python -m recipe.pc_tools.plan predict $D/grpo16_default_s1/dump.parquet --steps 11:30 --pc 4+12 --simulate 30 --simulate-warmup $warmup \
    --simulate-runs 10 --prompts 480 --skip | sed -n '/^simulated/,/^$/p'
done >$R/default/skip_after_30_steps_s1.md
# The first ten steps of batch 4a one by one (the warm-up): GRPO's pass rates, and PC's and DAPO's rounds and rates
# beside the per-step model's.
: >$R/calibrated/first_steps.md
for seed in 1 2; do
  { echo "Seed $seed: GRPO n=16's per-prompt pass rates, step by step (all sources)."
    echo
    python -m recipe.pc_tools.plan sources $E/grpo16_calibrated_s$seed/dump.parquet --steps 1:10 --window 1 --table \
      | grep -E '^\| steps |^\|---|\| all \|'
    echo
    echo "Seed $seed: PC 4+12 and DAPO n=16 against the per-step model."
    echo
    python -m recipe.pc_tools.plan check $E/grpo16_calibrated_s$seed/dump.parquet --steps 1:10 --window 1 --per-step \
      --train-batch-size 32 --gen-batch-size 96 --pc 4+12 --measured pc:4+12=$E/pc4x12_calibrated_s$seed/metrics.jsonl \
      --measured dapo=${CAL_DAPO[$seed]}/dapo16_calibrated_s$seed/metrics.jsonl
    echo; } >>$R/calibrated/first_steps.md
done
# Batch 13 (2026-11-26f): the allocator stages (skip, screen, down-sampling) at groups of 16 on the default mix against batch 2's baselines (same launcher,
# mix and seeds): PC 4+12 with a screen of 2, and GRPO n=16 with PODS down-sampling from 32. PC with PODS from 24 was
# stopped at step 11 (launch.log): left out. Batch 14 (2026-11-27): PC 4+12 with GRESO skipping, seed 1 only (seed 2
# hung in step 17; PC with PODS from 24 was stopped again, launch.log). Batch 16 (2026-11-27d): skipping's seed 2 and PC
# with PODS from 24, both seeds. The target is the peak of GRPO n=16's mean curve. Steps 15 and 25 were added to
# --at-steps after batch 16, to set the skipping runs beside their unskipped twins before any prompt was skipped, and
# the sums (sums_table.md): each run's rounds, skipped prompts and generated rollouts before and from step 18, the
# earliest a prompt comes back on 3,000 prompts.
mkdir -p $R/default_stages
python -m recipe.pc_tools.report --seeds --equal-accuracy --baseline grpo16 --means $MEANS --at-steps 0,5,10,15,20,25,30 $G16 \
  --sums training/num_gen_batches,filtering_stats/skipped_count,rollout_stats/num_rollouts_sample \
  --sum-steps 1:17,18:30,1:30 --values filtering_stats/skipped_count,filtering_stats/skip_p_easy \
  --value-steps 17,18,19,20,30 --out $R/default_stages \
  grpo16_s1=$D/grpo16_default_s1/metrics.jsonl grpo16_s2=$D/grpo16_default_s2/metrics.jsonl \
  pc4x12_s1=$D/pc4x12_default_s1/metrics.jsonl pc4x12_s2=$D/pc4x12_default_s2/metrics.jsonl \
  pc4x12screen2_s1=$G/pc4x12screen2_default_s1/metrics.jsonl pc4x12screen2_s2=$G/pc4x12screen2_default_s2/metrics.jsonl \
  grpo16ds32_s1=$G/grpo16ds32_default_s1/metrics.jsonl grpo16ds32_s2=$G/grpo16ds32_default_s2/metrics.jsonl \
  pc4x12skip_s1=$H/pc4x12skip_default_s1/metrics.jsonl pc4x12skip_s2=$K/pc4x12skip_default_s2/metrics.jsonl \
  pc4x12ds24_s1=$K/pc4x12ds24_default_s1/metrics.jsonl pc4x12ds24_s2=$K/pc4x12ds24_default_s2/metrics.jsonl >/dev/null
# The cost model (pooled and per step) fed with the same seed's GRPO n=16 dump, against the stage runs.
: >$R/default_stages/costmodel_vs_measured.md
: >$R/default_stages/costmodel_per_step.md
for seed in 1 2; do
  for per_step in "" --per-step; do
    out=$R/default_stages/costmodel_vs_measured.md
    [ -z "$per_step" ] || out=$R/default_stages/costmodel_per_step.md
    costmodel $out $D/grpo16_default_s$seed/dump.parquet 32 96 4+12 --screen-n 2 $per_step \
      --measured pc:4+12=$G/pc4x12screen2_default_s$seed/metrics.jsonl
    costmodel $out $D/grpo16_default_s$seed/dump.parquet 32 96 4+12 --downsample-n 32 $per_step \
      --measured grpo=$G/grpo16ds32_default_s$seed/metrics.jsonl
    costmodel $out $D/grpo16_default_s$seed/dump.parquet 32 96 4+12 --downsample-n 24 $per_step \
      --measured pc:4+12=$K/pc4x12ds24_default_s$seed/metrics.jsonl
  done
done
# Batch 17 (2026-11-27b): the test of PC 4+60's 0.81x, written down before it ran (README). GRPO n=64 on the
# calibrated mix for 36 steps, seeds 1-3 (stopped in step 36: 35 steps, 26,880 rollouts),
# and PC 4+60's seed 3. Target: the peak of those GRPO runs' mean curve. The 30-step GRPO n=64 runs of seeds 1-2
# (batches 11 and 13: the same lines but the step count) stand beside them as a rerun of the same seeds. Accuracy at
# equal rollouts (at GRPO's validation steps 10, 20, 30 and 35) was added after the run; it is not the test fixed before.
python -m recipe.pc_tools.report --seeds --equal-accuracy --baseline grpo64t36 --means $MEANS --at-steps 5,10,15,20,25,30,35 \
  --at-rollouts 7680,15360,23040,26880 \
  --out $R/calibrated_g64_t36 \
  grpo64t36_s1=$I/grpo64t36_calibrated_s1/metrics.jsonl grpo64t36_s2=$I/grpo64t36_calibrated_s2/metrics.jsonl \
  grpo64t36_s3=$I/grpo64t36_calibrated_s3/metrics.jsonl \
  grpo64_s1=$F/grpo64_calibrated_s1/metrics.jsonl grpo64_s2=$G/grpo64_calibrated_s2/metrics.jsonl \
  pc4x60_s1=$H/pc4x60_calibrated_s1/metrics.jsonl pc4x60_s2=$H/pc4x60_calibrated_s2/metrics.jsonl \
  pc4x60_s3=$I/pc4x60_calibrated_s3/metrics.jsonl \
  pc16x48_s1=$F/pc16x48_calibrated_s1/metrics.jsonl pc16x48_s2=$G/pc16x48_calibrated_s2/metrics.jsonl \
  pc8x56_s1=$G/pc8x56_calibrated_s1/metrics.jsonl pc8x56_s2=$G/pc8x56_calibrated_s2/metrics.jsonl \
  pc16x48screen4_s1=$H/pc16x48screen4_calibrated_s1/metrics.jsonl \
  pc16x48screen4_s2=$K/pc16x48screen4_calibrated_s2/metrics.jsonl >/dev/null
# PC 4+60 seed 3 against its own seed's GRPO dump, over the 30 steps it ran.
seed3="$I/grpo64t36_calibrated_s3/dump.parquet 12 36 4+60 --steps 1:30 --measured pc:4+60=$I/pc4x60_calibrated_s3/metrics.jsonl"
costmodel $R/calibrated_g64/costmodel_vs_measured.md $seed3
costmodel $R/calibrated_g64/costmodel_per_step.md $seed3 --per-step
# Batch 18 (2026-11-27e) stopped at steps 2-16 when its GPU host went away. Its reference-preset seed 2 ran again
# alone on one GPU to step 19 (2026-11-27f), when the session's device time ran out. No run reached 30 steps, so none
# joins a seeds table. Read per run against default/'s target (the peak of GRPO n=16's mean curve, from its CSV): the
# same seed's runs side by side as reruns (GRPO n=16 of batch 1 and the 40-step lines; the two ref seed 2 runs;
# skipping runs against their twins), and the 480-prompt runs' rounds and skipped prompts in their common steps.
target=$(python -c "import csv; print(next(csv.DictReader(open('$R/default/seeds_table.csv')))['target'])")
python -m recipe.pc_tools.report --target "$target" --baseline grpo16_default_s1 --at-steps 0,5,10,15 \
  --sums rollout_stats/num_rollouts_sample,training/num_gen_batches,filtering_stats/skipped_count --sum-steps 1:11,1:13 \
  --values training/num_gen_batches,filtering_stats/skipped_count,exclusion_stats/dataset_size --value-steps 1,2,13 \
  --out $R/batch18_partial \
  grpo16_default_s1=$D/grpo16_default_s1/metrics.jsonl grpo16t40_default_s1=$L/grpo16t40_default_s1/metrics.jsonl \
  grpo16_default_s2=$D/grpo16_default_s2/metrics.jsonl grpo16t40_default_s2=$L/grpo16t40_default_s2/metrics.jsonl \
  pc4x12ref_default_s1=$F/pc4x12ref_default_s1/metrics.jsonl pc4x12ref_default_s2_4gpu=$L/pc4x12ref_default_s2/metrics.jsonl \
  pc4x12ref_default_s2_alone=$M/pc4x12ref_default_s2/metrics.jsonl \
  grpo16_default480_s1=$L/grpo16_default480_s1/metrics.jsonl grpo16skip_default480_s1=$L/grpo16skip_default480_s1/metrics.jsonl \
  grpo16_default480_s2=$L/grpo16_default480_s2/metrics.jsonl grpo16skip_default480_s2=$L/grpo16skip_default480_s2/metrics.jsonl \
  pc4x12_default480_s1=$L/pc4x12_default480_s1/metrics.jsonl pc4x12skip_default480_s1=$L/pc4x12skip_default480_s1/metrics.jsonl \
  pc4x12_default480_s2=$L/pc4x12_default480_s2/metrics.jsonl \
  pc4x12skip_default480_s2=$L/pc4x12skip_default480_s2/metrics.jsonl >/dev/null
# Batch 18 whole (2026-11-27g), read by the rule written before it (README). (c) The 40-step GRPO n=16 runs set a
# second target for the default mix's groups of 16 (the peak of their mean curve); batch 1's 30-step runs of the same
# seeds stand beside them as reruns, with every PC run of default/ and default_stages/.
python -m recipe.pc_tools.report --seeds --equal-accuracy --baseline grpo16t40 --at-steps 10,15,20,25,30,35,40 \
  --at-rollouts 5120,10240,15360,20480 --out $R/default_t40 \
  grpo16t40_s1=$N/grpo16t40_default_s1/metrics.jsonl grpo16t40_s2=$N/grpo16t40_default_s2/metrics.jsonl \
  grpo16_s1=$D/grpo16_default_s1/metrics.jsonl grpo16_s2=$D/grpo16_default_s2/metrics.jsonl \
  pc4x12_s1=$D/pc4x12_default_s1/metrics.jsonl pc4x12_s2=$D/pc4x12_default_s2/metrics.jsonl \
  pc4x12ref_s1=$F/pc4x12ref_default_s1/metrics.jsonl pc4x12ref_s2=$N/pc4x12ref_default_s2/metrics.jsonl \
  pc4x12screen2_s1=$G/pc4x12screen2_default_s1/metrics.jsonl pc4x12screen2_s2=$G/pc4x12screen2_default_s2/metrics.jsonl \
  grpo16ds32_s1=$G/grpo16ds32_default_s1/metrics.jsonl grpo16ds32_s2=$G/grpo16ds32_default_s2/metrics.jsonl \
  pc4x12skip_s1=$H/pc4x12skip_default_s1/metrics.jsonl pc4x12skip_s2=$K/pc4x12skip_default_s2/metrics.jsonl \
  pc4x12ds24_s1=$K/pc4x12ds24_default_s1/metrics.jsonl pc4x12ds24_s2=$K/pc4x12ds24_default_s2/metrics.jsonl >/dev/null
# (b) GRESO skipping on 480 of the default mix's prompts (batch 9's lines): GRPO n=16 and PC 4+12, each with and
# without skipping, against the peak of GRPO n=16's mean curve on those prompts. The rounds, skipped prompts and
# rollouts summed over the steps every run logged (1-13) and over 30; each run's epoch, rounds and pool at a few steps.
python -m recipe.pc_tools.report --seeds --equal-accuracy --baseline grpo16 --means $MEANS --at-steps 0,5,10,15,20,25,30 $G16 \
  --sums training/num_gen_batches,filtering_stats/skipped_count,rollout_stats/num_rollouts_sample,training/unfilled_batch \
  --sum-steps 1:13,14:30,21:30,1:30 \
  --values training/epoch,training/num_gen_batches,training/num_prompt_in_batch,exclusion_stats/dataset_size,filtering_stats/skip_p_hard,filtering_stats/skipped_count \
  --value-steps 1,5,10,11,12,13,15,20,25,29 --out $R/default480 \
  grpo16_s1=$N/grpo16_default480_s1/metrics.jsonl grpo16_s2=$N/grpo16_default480_s2/metrics.jsonl \
  grpo16skip_s1=$N/grpo16skip_default480_s1/metrics.jsonl grpo16skip_s2=$N/grpo16skip_default480_s2/metrics.jsonl \
  pc4x12_s1=$N/pc4x12_default480_s1/metrics.jsonl pc4x12_s2=$N/pc4x12_default480_s2/metrics.jsonl \
  pc4x12skip_s1=$N/pc4x12skip_default480_s1/metrics.jsonl pc4x12skip_s2=$N/pc4x12skip_default480_s2/metrics.jsonl >/dev/null
# Per-prompt pass rates of GRPO n=16 on those prompts, by data source, over its 30 steps.
for seed in 1 2; do
  python -m recipe.pc_tools.plan sources $N/grpo16_default480_s$seed/dump.parquet --window 30 --table >$R/default480/pass_rates_by_source_s$seed.md
done
# The cost model fed with the same seed's GRPO n=16 dump on the 480 prompts, against PC 4+12 without skipping (the
# skipping runs have the simulator's prediction, default/preregistered_skip_s{1,2}.md).
: >$R/default480/costmodel_vs_measured.md
: >$R/default480/costmodel_per_step.md
for seed in 1 2; do
  pc480="$N/grpo16_default480_s$seed/dump.parquet 32 96 4+12 --measured pc:4+12=$N/pc4x12_default480_s$seed/metrics.jsonl"
  costmodel $R/default480/costmodel_vs_measured.md $pc480
  costmodel $R/default480/costmodel_per_step.md $pc480 --per-step
done
# The pre-registered experiment (prereg-pc4x60.md), read by its rule: interpolated mean curves, the accuracy difference
# at 9,216, 18,432 and 27,648 rollouts with bootstrap intervals and exact permutation p-values, and the ratio of
# rollouts to GRPO's peak. A budget a run did not reach is "not reached" for its configuration.
PRE=()
for seed in 4 5 6 7 8; do
  PRE+=(grpo64t36_calibrated_s$seed=$P/grpo64t36_calibrated_s$seed/metrics.jsonl)
  PRE+=(pc4x60t32_calibrated_s$seed=$P/pc4x60t32_calibrated_s$seed/metrics.jsonl)
done
python -m recipe.pc_tools.report --seeds --interpolate --ci --at-rollouts 9216,18432,27648 --baseline grpo64t36_calibrated \
  --means $MEANS --out $R/prereg_pc4x60 "${PRE[@]}" >/dev/null
# The second pre-registration (prereg-pc4x60-equal-budgets.md), read by its rule from the runs that finished all their
# steps (they logged the step they were configured to end at, training/total_training_steps), in whichever folder;
# nothing is read until each arm has 2 finished runs.
FINISHED=()
# Seeds in numeric order (s9 before s10), as the tables list them.
for metrics in $(printf '%s\n' docs/results/regimes/*/{grpo64t36v2304,pc4x60t42v2304}_calibrated_s*/metrics.jsonl | sort -V); do
  [ -f "$metrics" ] || continue
  name=$(basename "$(dirname "$metrics")")
  last=$(grep -o '"training/total_training_steps":[0-9]*' "$metrics" | tail -n 1 | cut -d: -f2 || true)
  if [ -n "$last" ] && grep -q "^{\"step\":$last," "$metrics"; then
    FINISHED+=("$name=$metrics")
  fi
done
if [ "$(printf '%s\n' "${FINISHED[@]}" | grep -c '^grpo')" -ge 2 ] && [ "$(printf '%s\n' "${FINISHED[@]}" | grep -c '^pc')" -ge 2 ]; then
  # The linear reading also draws both arms' mean curves with their 95% intervals, the plot the reading shows.
  for curve in linear pchip; do
    out=$R/prereg_pc4x60_equal_budgets plot=()
    [ $curve = linear ] || out=$out/pchip plot=(--no-plot)
    python -m recipe.pc_tools.report --seeds --interpolate --ci "${plot[@]}" --baseline grpo64t36v2304_calibrated \
      --at-rollouts 9216,18432,27648 --curve $curve --max-gap 0.15 --target 0.40 --interval studentized \
      --equivalence-margin 0.02 --out $out "${FINISHED[@]}" >/dev/null
  done
  # The reading rule applied to both tables: interim until 13 runs a side.
  out=$R/prereg_pc4x60_equal_budgets
  python -m recipe.pc_tools.verdict $out --pchip $out/pchip --budget 27648 --runs 13 --target 0.40 --assumed-sd 0.017 \
    --names PC,GRPO --out $out/verdict.md >/dev/null
fi
ls $R/default $R/spread $R/default_g64 $R/calibrated $R/calibrated_g64 $R/calibrated_g64_t36 $R/default_stages $R/batch18_partial $R/calibrated_dapo_rerun $R/default_t40 $R/default480 $R/prereg_pc4x60
