#!/usr/bin/env bash
# Prove the Binder launch buttons work without Binder: build a fresh virtual
# environment from requirements.txt alone (as Binder does, from the repository
# root), register it as the only python3 kernel, then run `pytest --nbval` on
# every chapter notebook listed in _toc.yml (each with its own folder as working
# directory) on OpenBLAS's Sandybridge kernels: a cell that raises, or prints
# another output than the committed one, fails with nbval's report. Prints the
# time of each step (see scripts/binder_check.py).
#
#   bash scripts/check-binder.sh [book/NN_name.ipynb ...] [--kernel-family F] [--no-compare]
#   bash scripts/check-binder.sh --share 1/2 --blas-threads 1 --mplbackend agg   # as the test command
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
# Python 3.11, as runtime.txt asks Binder for (override with PYTHON=...).
python=${PYTHON:-python3}
timeout --kill-after=30 1800 "$python" scripts/binder_check.py --python "$python" "$@"
echo "==> binder check: $((SECONDS - t0)) s"
