#!/usr/bin/env bash
# Builds every math train and eval parquet of spec §11 under $DATA_DIR (default ~/data) from the hub.
#   DATA_DIR=/path/to/data bash data/e2e_process_data.sh
# DeepMath is written twice, one copy per preset of train_scripts/ (see --help).
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: [DATA_DIR=DIR] [PYTHON=python] bash data/e2e_process_data.sh

Downloads and writes every math train and eval parquet of spec §11:
  DIR/deepmath_103k_prefiltered/{train,test}.parquet (the authors' friendshipkim/DeepMath-103K-filtered;
                                                     PRESET=reference)
  DIR/deepmath_103k_filtered/{train,test}.parquet   (zwhe99/DeepMath-103K filtered here; PRESET=improved)
  DIR/polaris_53k/train.parquet                     (data/process_polaris.py)
  DIR/dapo_formatted/dapo-math-17k-nosystem-boxed-dedup.parquet (data/process_dapo17k.py)
  DIR/math_test/<benchmark>-nosystem-boxed.parquet  (data/process_eval.py, six benchmarks)

Environment:
  DATA_DIR              output root (default: ~/data)
  PYTHON                interpreter that runs the processors (default: python)

It takes no arguments; each processor's own options are in `python data/process_<name>.py --help`.
USAGE
}

case "${1:-}" in
  -h | --help)
    usage
    exit 0
    ;;
  "") ;;
  *)
    echo "e2e_process_data.sh: unexpected argument '$1' (it takes none; see --help)" >&2
    exit 2
    ;;
esac

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
