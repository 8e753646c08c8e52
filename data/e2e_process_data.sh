#!/usr/bin/env bash
# Builds every math train and eval parquet of spec §11 under $DATA_DIR (default ~/data) from the hub.
#   DATA_DIR=/path/to/data bash data/e2e_process_data.sh
# DeepMath is written twice, one copy per preset of train_scripts/: deepmath_103k_prefiltered (the authors'
# friendshipkim/DeepMath-103K-filtered, PRESET=reference) and deepmath_103k_filtered (zwhe99/DeepMath-103K
# filtered here, PRESET=improved). PYTHON picks the interpreter.
set -euo pipefail

DATA_DIR="${DATA_DIR:-$HOME/data}"
PYTHON="${PYTHON:-python}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

step() {
  echo "+ $*"
  "$@"
}

step "$PYTHON" "$HERE/process_deepmath.py" --out_dir "$DATA_DIR/deepmath_103k_prefiltered" --prefiltered
step "$PYTHON" "$HERE/process_deepmath.py" --out_dir "$DATA_DIR/deepmath_103k_filtered"
step "$PYTHON" "$HERE/process_polaris.py" --out_dir "$DATA_DIR/polaris_53k"
step "$PYTHON" "$HERE/process_dapo17k.py" --out_dir "$DATA_DIR/dapo_formatted"
for dataset in aime_2024 aime_2025 amc_2023 math_500 minerva_math olympiad_bench; do
  step "$PYTHON" "$HERE/process_eval.py" --dataset "$dataset" --out_dir "$DATA_DIR/math_test"
done
echo "all math data written under $DATA_DIR"
