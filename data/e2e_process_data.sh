#!/usr/bin/env bash
# Builds every math train and eval parquet of spec §11 under $DATA_DIR (default ~/data) from the hub.
#   DATA_DIR=/path/to/data bash data/e2e_process_data.sh
# DEEPMATH_PREFILTERED=1 reads friendshipkim/DeepMath-103K-filtered (the split the reference trained on)
# instead of filtering zwhe99/DeepMath-103K here; PYTHON picks the interpreter.
set -euo pipefail

DATA_DIR="${DATA_DIR:-$HOME/data}"
PYTHON="${PYTHON:-python}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DEEPMATH_FLAGS=()
if [[ "${DEEPMATH_PREFILTERED:-0}" == "1" ]]; then
  DEEPMATH_FLAGS=(--prefiltered)
fi

step() {
  echo "+ $*"
  "$@"
}

step "$PYTHON" "$HERE/process_deepmath.py" --out_dir "$DATA_DIR/deepmath_103k_filtered" "${DEEPMATH_FLAGS[@]}"
step "$PYTHON" "$HERE/process_polaris.py" --out_dir "$DATA_DIR/polaris_53k"
step "$PYTHON" "$HERE/process_dapo17k.py" --out_dir "$DATA_DIR/dapo_formatted"
for dataset in aime_2024 aime_2025 amc_2023 math_500 minerva_math olympiad_bench; do
  step "$PYTHON" "$HERE/process_eval.py" --dataset "$dataset" --out_dir "$DATA_DIR/math_test"
done
echo "all math data written under $DATA_DIR"
