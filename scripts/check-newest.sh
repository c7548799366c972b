#!/usr/bin/env bash
# Run the library's tests and every chapter against the newest releases of
# NumPy, SciPy, Matplotlib and Altair (unpinned; everything else as pinned in
# requirements*.txt), in a scratch virtual environment, so that a release that
# breaks the book is found by us and not by a reader. The weekly workflow
# .github/workflows/newest.yml runs it on the newest Python that has wheels
# for all four (PYTHON=python3.13 there); locally it uses $PYTHON or python3.
#
#   bash scripts/check-newest.sh                 # tests, then every chapter
#   PYTHON=python3.13 bash scripts/check-newest.sh
#   bash scripts/check-newest.sh --keep          # keep the scratch folder
#
# Fails when a test fails or a chapter raises. A chapter whose printed output
# merely differs from the committed one is reported, not failed: a new release
# may legitimately print a digit differently (CONTRIBUTING.md, "Newest releases", says
# how to re-execute the chapters and review the difference).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
keep=0
passthrough=()
for arg in "$@"; do
    case "$arg" in
        --keep) keep=1 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) passthrough+=("$arg") ;;
    esac
done
t0=$SECONDS
tmp=$(mktemp -d -t newest-check-XXXXXX)
if [ "$keep" = 1 ]; then echo "==> scratch folder: $tmp (kept)"; else trap 'rm -rf "$tmp"' EXIT; fi

# requirements.txt and the test tools, with the four packages unpinned.
unpin='s/^(numpy|scipy|matplotlib|altair)[[:space:]]*[=<>~!].*$/\1/I'
sed -E "$unpin" requirements.txt > "$tmp/requirements-newest.txt"
{
    echo "-r requirements-newest.txt"
    grep -E '^(pytest|hypothesis|msgpack)[=<> ]' requirements-test.txt
    echo "nbclient"
} > "$tmp/requirements-newest-test.txt"
echo "==> unpinned: $(grep -E -i '^(numpy|scipy|matplotlib|altair)$' "$tmp/requirements-newest.txt" | tr '\n' ' ')"

echo "==> scratch environment with $("$python" --version 2>&1) ($python)"
"$python" -m venv "$tmp/venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$tmp/venv/bin/python" -m pip install --quiet --upgrade pip
# From the repository root: requirements.txt installs the library with `-e .`.
PIP_DISABLE_PIP_VERSION_CHECK=1 "$tmp/venv/bin/python" -m pip install --quiet \
    -r "$tmp/requirements-newest-test.txt"
echo "==> environment ready ($((SECONDS - t0)) s): $("$tmp/venv/bin/python" -c '
import platform
from importlib.metadata import version
print(f"Python {platform.python_version()}, " + ", ".join(
    f"{n} {version(n)}" for n in ("numpy", "scipy", "matplotlib", "altair")))')"

# Both stages run whatever the first gives, so one run shows everything that broke.
status=0
echo
echo "==> the library's tests (unit, property, golden, doctests) on the newest releases"
OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} "$tmp/venv/bin/python" -m pytest -q \
    -p no:cacheprovider tests attention_lib || status=1

echo
echo "==> every chapter on the newest releases (a cell that raises fails; changed outputs are reported)"
"$python" scripts/binder_check.py --python "$python" --venv "$tmp/venv" \
    --kernel-family native --differences report "${passthrough[@]}" || status=1
if [ "$status" != 0 ]; then
    echo "==> newest-releases check FAILED ($((SECONDS - t0)) s): see above" >&2
    exit 1
fi
echo "==> newest-releases check: ok ($((SECONDS - t0)) s)"
