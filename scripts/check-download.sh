#!/usr/bin/env bash
# A chapter as a reader downloads it (the page's download button gives its
# .ipynb) runs in a plain Jupyter, with the library installed and no Jupyter
# Book: a fresh virtual environment gets the project (`pip install -e
# ".[notebooks]"`: the library's own dependencies plus matplotlib and Altair
# for the figures) and a kernel (ipykernel, nbclient), and nothing else; the
# chapter is copied to a folder outside the repository and executed there.
# It fails on any error in any cell (e.g. `No module named 'myst_nb'`).
#
#   bash scripts/check-download.sh [book/NN_name.ipynb ...]   # default: chapter 5
#
# Versions are pinned by requirements.txt (used as constraints), so pip's cache
# serves them: about a minute in all.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
t0=$SECONDS
python=${PYTHON:-python3}
chapters=("$@")
[ ${#chapters[@]} -gt 0 ] || chapters=(book/05_masks.ipynb)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/download-check-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Nothing from this machine's Python or Jupyter set-up may leak in.
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV JUPYTER_CONFIG_DIR JUPYTER_DATA_DIR MPLBACKEND
export PYTHONNOUSERSITE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 JUPYTER_PATH="$tmp/jupyter"
export PATH="$tmp/venv/bin:$PATH"

"$python" -m venv "$tmp/venv"
grep -Ev '^\s*(#|-e|$)' requirements.txt > "$tmp/pins.txt"
"$tmp/venv/bin/python" -m pip install --quiet --no-compile -c "$tmp/pins.txt" -e ".[notebooks]" \
    nbclient ipykernel
if "$tmp/venv/bin/python" -c "import myst_nb" 2> /dev/null; then
    echo "check-download: myst_nb is installed in the fresh environment: the check proves nothing"
    exit 1
fi
# The fresh environment's Python is the only kernel (JUPYTER_PATH is searched first).
mkdir -p "$tmp/jupyter/kernels/python3"
printf '{"argv": ["%s", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "Python 3", "language": "python"}\n' \
    "$tmp/venv/bin/python" > "$tmp/jupyter/kernels/python3/kernel.json"
echo "==> fresh environment without Jupyter Book: $((SECONDS - t0)) s"

mkdir "$tmp/downloads"
for chapter in "${chapters[@]}"; do
    t1=$SECONDS
    cp "$repo/$chapter" "$tmp/downloads/"
    (cd "$tmp/downloads" && timeout --kill-after=15 600 \
        "$tmp/venv/bin/jupyter-execute" --kernel_name=python3 --timeout=600 "$(basename "$chapter")")
    echo "==> $chapter runs as downloaded, without Jupyter Book: $((SECONDS - t1)) s"
done
echo "==> download check: $((SECONDS - t0)) s"
