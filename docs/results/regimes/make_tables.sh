#!/usr/bin/env bash
# Rebuilds every table and figure of docs/results/regimes/README.md from the committed logs (CPU, ~1 min):
#   bash docs/results/regimes/make_tables.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
R=docs/results/regimes D=docs/results/regimes/2026-11-26
MEANS=training/num_gen_batches,actor/grad_norm,actor/ppo_kl,actor/pg_clipfrac,actor/entropy,training/zero_variance_group_frac,filtering_stats/pass_rate
# Accuracy against generated rollouts, seeds aggregated (pc4x12_spread_s2 stopped at step 2: left out).
python -m recipe.pc.report --seeds --means $MEANS --at-steps 5,10,30 --out $R/default \
  grpo16_s1=$D/grpo16_default_s1/metrics.jsonl grpo16_s2=$D/grpo16_default_s2/metrics.jsonl \
  pc4x12_s1=$D/pc4x12_default_s1/metrics.jsonl pc4x12_s2=$D/pc4x12_default_s2/metrics.jsonl >/dev/null
python -m recipe.pc.report --seeds --means $MEANS --at-steps 5,10,30 --out $R/spread \
  grpo16_s1=$D/grpo16_spread_s1/metrics.jsonl grpo16_s2=$D/grpo16_spread_s2/metrics.jsonl \
  pc4x12_s1=$D/pc4x12_spread_s1/metrics.jsonl >/dev/null
for mix in default spread; do
  # Per-prompt pass rates of the GRPO run (seed 1) by data source, per 10 steps, and their histogram.
  python -m recipe.pc.plan $D/grpo16_${mix}_s1/dump --window 10 --by-source \
    --histogram $R/pass_rates_grpo16_${mix}_s1.png >$R/$mix/pass_rates_by_source.md
  # The cost model fed with the GRPO run's pass rates (same mix and seed), against the PC run's log.
  : >$R/$mix/costmodel_vs_measured.md
  for seed in 1 2; do
    pc=$D/pc4x12_${mix}_s$seed/metrics.jsonl
    [ "$(grep -c '"training/global_step"' $pc)" -ge 30 ] || continue
    python -m recipe.pc.plan $D/grpo16_${mix}_s$seed/dump --train-batch-size 32 --gen-batch-size 96 --pc 4+12 \
      --window 10 --measured pc:4+12=$pc >>$R/$mix/costmodel_vs_measured.md
    echo >>$R/$mix/costmodel_vs_measured.md
  done
done
# The warm-up: steps 2-10 only (step 1 starts with an empty buffer, which the steady-state model leaves out).
echo "Steps 2-10 only (without the warm-up step):" >>$R/default/costmodel_vs_measured.md
python -m recipe.pc.plan $D/grpo16_default_s1/dump --steps 2:10 --train-batch-size 32 --gen-batch-size 96 --pc 4+12 \
  --measured pc:4+12=$D/pc4x12_default_s1/metrics.jsonl >>$R/default/costmodel_vs_measured.md
ls $R/default $R/spread
