#!/usr/bin/env bash
# Builds every math train and eval parquet the paper scripts read, under $DATA_DIR (default ~/data), from the hub.
#   DATA_DIR=/path/to/data bash data/e2e_process_data.sh
# Every set is written twice: cleaned here (PRESET=improved of train_scripts/) and as the authors'
# processors write it (--as-authors, folders ending in _as_authors; PRESET=reference). See --help.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: [DATA_DIR=DIR] [PYTHON=python] bash data/e2e_process_data.sh

Downloads and writes every math train and eval parquet the paper scripts read, cleaned here (PRESET=improved):
  DIR/deepmath_103k_filtered/{train,test}.parquet   (zwhe99/DeepMath-103K filtered here)
  DIR/deepmath_103k_prefiltered/{train,test}.parquet (the authors' friendshipkim/DeepMath-103K-filtered,
                                                     cleaned here)
  DIR/polaris_53k/train.parquet                     (data/process_polaris.py)
  DIR/dapo_formatted/dapo-math-17k-nosystem-boxed-dedup.parquet (data/process_dapo17k.py)
  DIR/math_test/<benchmark>-nosystem-boxed.parquet  (data/process_eval.py, six benchmarks)
and as the authors' processors write them (--as-authors: no row stripped or dropped but what they
drop, their index values; PRESET=reference):
  DIR/deepmath_103k_prefiltered_as_authors/{train,test}.parquet
  DIR/polaris_53k_as_authors/train.parquet
  DIR/dapo_formatted_as_authors/dapo-math-17k-nosystem-boxed-dedup.parquet
  DIR/math_test_as_authors/<benchmark>-nosystem-boxed.parquet (OlympiadBench as oylmpiad-bench-..., sic)
Each processor prints how many of the authors' rows its cleaning changes, per reason.

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
# The authors' rows, for PRESET=reference.
step "$PYTHON" "$HERE/process_deepmath.py" --as-authors --out_dir "$DATA_DIR/deepmath_103k_prefiltered_as_authors"
step "$PYTHON" "$HERE/process_polaris.py" --as-authors --out_dir "$DATA_DIR/polaris_53k_as_authors"
step "$PYTHON" "$HERE/process_dapo17k.py" --as-authors --out_dir "$DATA_DIR/dapo_formatted_as_authors"
for dataset in aime_2024 aime_2025 amc_2023 math_500 minerva_math olympiad_bench; do
  step "$PYTHON" "$HERE/process_eval.py" --as-authors --dataset "$dataset" --out_dir "$DATA_DIR/math_test_as_authors"
done
echo "all math data written under $DATA_DIR"
