#!/usr/bin/env bash
# Re-vendor Vega, Vega-Lite and vega-embed from npm into book/_static/vendor/,
# so the book's interactive charts (attention_lib.presentation) load them from
# the site itself and no page needs the network. The versions are pinned here;
# Vega-Lite must match the schema of the Altair pinned in requirements.txt
# (altair.SCHEMA_VERSION), which this script checks when Altair is installed.
#
#   bash scripts/vendor-vega.sh        # needs npm (Debian: apt-get install npm)
set -euo pipefail
cd "$(dirname "$0")/.."
VEGA=6.4.0
VEGA_LITE=6.4.1
VEGA_EMBED=7.3.0
dest=book/_static/vendor

python=${PYTHON:-$(if [ -x .venv/bin/python ]; then echo .venv/bin/python; else echo python3; fi)}
schema=$("$python" -c "import altair; print(altair.SCHEMA_VERSION)" 2>/dev/null || true)
if [ -n "$schema" ] && [ "$schema" != "v$VEGA_LITE" ]; then
    echo "Altair's Vega-Lite schema is $schema but this script vendors vega-lite $VEGA_LITE:" \
         "change VEGA_LITE to ${schema#v}" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npm install --silent --no-audit --no-fund --ignore-scripts --prefix "$tmp" \
    "vega@$VEGA" "vega-lite@$VEGA_LITE" "vega-embed@$VEGA_EMBED" > /dev/null

rm -rf "$dest"
mkdir -p "$dest"
for pkg in vega vega-lite vega-embed; do
    src="$tmp/node_modules/$pkg"
    cp "$src/build/$pkg.min.js" "$dest/"
    cp "$src/LICENSE" "$dest/LICENSE-$pkg"
done
# vega-embed's UMD build bundles its own dependencies (vega-tooltip,
# vega-themes, ...); keep their licences too.
for dep in vega-tooltip vega-themes vega-interpreter; do
    if [ -f "$tmp/node_modules/$dep/LICENSE" ]; then
        cp "$tmp/node_modules/$dep/LICENSE" "$dest/LICENSE-$dep"
    fi
done
cat > "$dest/README.md" <<MD
# Vendored Vega, Vega-Lite and vega-embed

The book's interactive charts (\`attention_lib.presentation\`) load these three
scripts from the site itself (\`_static/vendor/\`), so no page needs the network.
Written by \`scripts/vendor-vega.sh\`; do not edit by hand.

| file | npm package | version | licence |
| --- | --- | --- | --- |
| \`vega.min.js\` | \`vega\` | $VEGA | BSD-3-Clause (\`LICENSE-vega\`) |
| \`vega-lite.min.js\` | \`vega-lite\` | $VEGA_LITE | BSD-3-Clause (\`LICENSE-vega-lite\`) |
| \`vega-embed.min.js\` | \`vega-embed\` | $VEGA_EMBED | BSD-3-Clause (\`LICENSE-vega-embed\`; it bundles vega-tooltip, vega-themes and vega-interpreter, licences beside it) |

Each file is the package's own minified UMD build (\`build/<name>.min.js\`),
copied unchanged. Vega-Lite $VEGA_LITE is the schema of the pinned Altair
(\`altair.SCHEMA_VERSION\`). To update: change the versions at the top of
\`scripts/vendor-vega.sh\` and run it.
MD
ls -l "$dest"
du -sh "$dest"
