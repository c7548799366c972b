#!/usr/bin/env bash
# Prove the "Open in Colab" buttons work without Colab: run every chapter as a
# lone notebook in a kernel that has the reader-side packages but not
# attention_lib, with a fake google.colab module, the repository fetched by
# each chapter's set-up cell from a local snapshot instead of GitHub, and
# `pytest --nbval` executing each one and comparing its outputs with the
# committed ones: a cell that raises, or prints another output, fails with
# nbval's report. Prints the time of each step (see scripts/colab_check.py).
# The pass runs OpenBLAS's Prescott kernels and NumPy
# narrowed to its baseline SIMD on every CPU: every dispatched target the CPU
# has is disabled (X86_V3 on AVX2; X86_V3 X86_V4 AVX512_ICL AVX512_SPR on
# AVX-512), and the narrowing is verified (scripts/cpu_families.py npy_disable).
#
#   bash scripts/check-colab.sh [--fresh] [book/NN_name.ipynb ...]
#   bash scripts/check-colab.sh --share 2/2 --mplbackend agg   # as the test command
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
python=${PYTHON:-python3}
timeout --kill-after=30 1800 "$python" scripts/colab_check.py --python "$python" "$@"
echo "==> colab check: $((SECONDS - t0)) s"
