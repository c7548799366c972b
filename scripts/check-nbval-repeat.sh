#!/usr/bin/env bash
# Prove the committed notebook outputs do not depend on timing, load or the
# allocator: re-run nbval over every notebook in book/ N more times while a
# background process keeps one core busy and allocates and frees memory of
# random sizes. Fails at the first mismatch (or error), naming the pass.
#
#   bash scripts/check-nbval-repeat.sh               # N = $NBVAL_REPEAT or 1
#   bash scripts/check-nbval-repeat.sh --repeat 10   # the manual 10-times run
#   bash scripts/check-nbval-repeat.sh --repeat 3 book/05_masks.ipynb
#   bash scripts/check-nbval-repeat.sh --no-load     # without the background load
#
# Then one more pass with MPLBACKEND=agg in the environment (as on many CI
# machines and servers), on two chapters that draw figures: a chapter that does
# not set `%matplotlib inline` itself draws nothing there and fails (issue 38).
# Every chapter sets it, which tests/test_notebook_backend.py checks; this pass
# proves it matters. MPLBACKEND_CHAPTERS overrides the two; empty skips the pass.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${NBVAL_REPEAT:-1}
load=1
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --repeat) repeat="$2"; shift 2 ;;
        --repeat=*) repeat="${1#--repeat=}"; shift ;;
        --no-load) load=0; shift ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) targets+=("$1"); shift ;;
    esac
done
case "$repeat" in ''|*[!0-9]*) echo "--repeat needs a whole number, got '$repeat'" >&2; exit 2 ;; esac
[ ${#targets[@]} -gt 0 ] || targets=(book)
python=${PYTHON_FOR_TESTS:-python}

load_pid=""
stop_load() {
    if [ -n "$load_pid" ]; then
        kill "$load_pid" 2>/dev/null || true
        wait "$load_pid" 2>/dev/null || true
    fi
}
trap stop_load EXIT
if [ "$load" = 1 ]; then
    # Busy one core: allocate and free arrays of 8 B to 64 MB, touch them, and
    # spin in Python between. Exits by itself if this script dies (orphaned).
    "$python" -c '
import os, random, sys
parent = os.getppid()
rng = random.Random(0)
while os.getppid() == parent:
    block = bytearray(rng.randrange(8, 64 << 20))
    block[::4096] = b"x" * len(block[::4096])
    sum(i * i for i in range(rng.randrange(1000, 200000)))
    del block
' &
    load_pid=$!
    echo "==> background load: process $load_pid (spins and allocates)"
fi

# One BLAS thread. With the load process busy on one of two cores, OpenBLAS's
# second thread waits for a core and the first spins on it: chapter 3 and the alignment appendix
# took 154 s under load with two threads and 23 s with one (measured here).
# The Binder check compares the outputs again with BLAS's default threads, the
# Colab check with one, so both thread counts are covered.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
echo "==> BLAS threads for this pass: $OPENBLAS_NUM_THREADS"

# Say which CPU kernels this pass runs on: the Binder and Colab checks force
# other families (scripts/cpu_families.py), so together the three passes show
# that no committed output depends on the CPU.
"$python" scripts/cpu_families.py | sed 's/^/==> /' \
    || echo "==> (could not tell which CPU kernels: scripts/cpu_families.py failed)"

t0=$SECONDS
for i in $(seq 1 "$repeat"); do
    t=$SECONDS
    if ! "$python" -m pytest -q -p no:cacheprovider --nbval --nbval-current-env "${targets[@]}"; then
        echo "==> nbval pass $i of $repeat under load FAILED: an output depends on timing, load or memory" >&2
        exit 1
    fi
    echo "==> nbval pass $i of $repeat under load: ok ($((SECONDS - t)) s)"
done
echo "==> nbval repeated $repeat time(s) under load: ok ($((SECONDS - t0)) s)"

agg_chapters=${MPLBACKEND_CHAPTERS-book/appendix_tutorial_numbers.ipynb book/05_masks.ipynb}
if [ -n "$agg_chapters" ]; then
    t=$SECONDS
    # shellcheck disable=SC2086  # a list of paths
    if ! MPLBACKEND=agg "$python" -m pytest -q -p no:cacheprovider --nbval --nbval-current-env $agg_chapters; then
        echo "==> nbval with MPLBACKEND=agg FAILED: a chapter draws nothing without %matplotlib inline" >&2
        exit 1
    fi
    echo "==> nbval with MPLBACKEND=agg ($agg_chapters): ok ($((SECONDS - t)) s)"
fi
