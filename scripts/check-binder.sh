#!/usr/bin/env bash
# Prove the Binder launch buttons work without Binder: build a fresh virtual
# environment from requirements.txt alone (as Binder does, from the repository
# root), then execute every chapter notebook listed in _toc.yml with its own
# folder as working directory. Fails on any error; prints the time of each step.
#
#   bash scripts/check-binder.sh [book/NN_name.ipynb ...] [--kernel-family F] [--no-compare]
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
# Python 3.11, as runtime.txt asks Binder for (override with PYTHON=...).
python=${PYTHON:-python3}
timeout --kill-after=30 1800 "$python" scripts/binder_check.py --python "$python" "$@"
echo "==> binder check: $((SECONDS - t0)) s"
