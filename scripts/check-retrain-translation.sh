#!/usr/bin/env bash
# Retrain the translation chapter's two models from scratch, with the exact commands
# recorded in data/checkpoints/translation/manifest.json, and check that their
# greedy BLEU on the test split is within the manifest's retrain_tolerance_bleu of
# the committed one.
#
#   bash scripts/check-retrain-translation.sh        # about the manifest's wall time, per model
#
# Training is seeded and repeatable bit for bit on one machine; across CPUs the
# BLAS kernels round float32 differently, so a retrained model is a different
# model of the same quality: the evaluation is compared, not the bits.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
if [ ! -x "$python" ]; then
    # shellcheck source=scripts/_venv.sh
    source scripts/_venv.sh
    ensure_venv requirements-test.txt
fi
manifest=data/checkpoints/translation/manifest.json
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for model in transformer rnnsearch; do
    args=$("$python" -c "import json, sys; c = json.load(open('$manifest'))['models']['$model']['command']; print(c.split('attention_lib.train.translation', 1)[1])")
    echo "==> retraining $model:$args"
    # shellcheck disable=SC2086
    "$python" -m attention_lib.train.translation $args --out "$out" > "$out/$model.log"
done
"$python" - "$manifest" "$out/manifest.json" <<'PY'
import json
import sys

committed = json.load(open(sys.argv[1], encoding="utf8"))
retrained = json.load(open(sys.argv[2], encoding="utf8"))["models"]
tol = committed["retrain_tolerance_bleu"]
failures = []
for name, old in committed["models"].items():
    a = old["evaluation"]["greedy"]["all"]["bleu"]
    b = retrained[name]["evaluation"]["greedy"]["all"]["bleu"]
    print(f"   {name}: greedy BLEU {b:.2f} (committed {a:.2f}, tolerance {tol})")
    if abs(a - b) > tol:
        failures.append(f"{name}: greedy BLEU {b:.2f} vs committed {a:.2f}")
if failures:
    sys.exit("retrained models differ from the committed table:\n  " + "\n  ".join(failures))
print("==> the retrained models match the committed table")
PY
