#!/usr/bin/env bash
# Quick-start command 1: build the book into _build/html.
# Creates (or reuses) the virtual environment .venv and installs requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
ensure_venv requirements.txt
echo "==> exporting all-MiniLM-L6-v2 for the in-browser encoder (not committed)"
python scripts/export_minilm.py
echo "==> exporting SmolLM2-135M-Instruct's GGUF in chunks for the chat widget (not committed)"
python scripts/export_smollm2.py
echo "==> building the book"
jupyter-book build . -W -n
echo "==> done: open _build/html/index.html"
