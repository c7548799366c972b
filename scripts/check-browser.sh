#!/usr/bin/env bash
# Open every page of the built site in a real browser (headless Chromium,
# driven by Playwright: scripts/browser_check.py lists every check) and fail
# when a page has a broken local image, script, stylesheet or font, asks the
# network for anything, lacks a figure or the chapter template, when something
# overflows, a figure is shrunk or blurry, a visible code cell is too long, an
# interactive chart does not draw, show a tooltip or redraw, the console logs an
# error, or axe-core finds a critical or serious accessibility problem; then
# again on an emulated 390-px phone, where nothing may scroll sideways, tables
# fit or scroll in their own box, charts fit the column and figure text is at
# least 8 CSS px (or enlarged to it on a tap). Needs a built _build/html
# (scripts/build-book.sh); writes one screenshot per page to _build/screenshots/.
#
#   bash scripts/check-browser.sh                  # self-test of the checker, then the site
#   bash scripts/check-browser.sh --site DIR       # check another built site
#   bash scripts/check-browser.sh --self-test-only # just prove the checker (no built site needed)
#   AXE_VERSION=latest bash scripts/check-browser.sh   # the newest axe-core on npm (the
#                                                      # weekly newest-releases workflow)
#
# Installs Debian's chromium with apt-get when /usr/bin/chromium is missing,
# and npm's axe-core into build/axe (pinned below; $AXE_VERSION overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
self_test_only=0
if [ "${1:-}" = "--self-test-only" ]; then self_test_only=1; shift; fi

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
    echo "==> $CHROMIUM is missing: installing Debian's chromium with apt-get"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        chromium fonts-dejavu-core > /dev/null
    echo "==> installed $("$CHROMIUM" --version 2>/dev/null) ($((SECONDS - t0)) s)"
fi

# axe-core (npm), which browser_check.py injects into every page for the
# accessibility check: installed once into build/axe (git-ignored), pinned.
AXE_VERSION=${AXE_VERSION:-4.11.0}
if [ "$AXE_VERSION" = latest ]; then
    AXE_VERSION=$(npm view axe-core version)
    echo "==> axe-core: the newest on npm is $AXE_VERSION"
fi
axe_dir=build/axe/node_modules/axe-core
if ! grep -qs "\"version\": \"$AXE_VERSION\"" "$axe_dir/package.json"; then
    echo "==> installing axe-core $AXE_VERSION with npm into build/axe"
    npm install --silent --no-save --no-audit --no-fund --no-package-lock \
        --prefix build/axe "axe-core@$AXE_VERSION" > /dev/null
fi
export AXE_JS="$PWD/$axe_dir/axe.min.js"

# run-tests.sh puts .venv/bin first on PATH; the checker needs playwright
# (requirements-test.txt), which drives the Chromium above, never a browser
# build of its own.
python=${PYTHON:-$(if [ -x .venv/bin/python ]; then echo .venv/bin/python; else echo python3; fi)}

echo "==> $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM"), axe-core $AXE_VERSION"
if [ "$self_test_only" = 1 ]; then
    timeout --kill-after=15 300 "$python" scripts/browser_check.py --chromium "$CHROMIUM" --self-test
    echo "==> browser self-test: $((SECONDS - t0)) s"
    exit 0
fi

# First prove the checker can fail: a tiny hand-made site with one good page
# and one page for each fault it must catch. Most of its time is spent waiting
# for faults to time out, so it runs beside the check of the book, in a browser
# of its own, and its verdict is read before the book's.
# It shares the two cores with the book's two shards, so it is allowed as long
# as they are (alone it takes about 2 minutes; beside them it took over 5).
t1=$SECONDS
self_log=$(mktemp)
timeout --kill-after=15 900 "$python" scripts/browser_check.py --chromium "$CHROMIUM" \
    --self-test > "$self_log" 2>&1 &
self_pid=$!

# Then the book itself, in two processes side by side (every other page of the
# table of contents each: --shard), one per core. (Every wait inside is bounded
# too; `timeout` is the backstop.) The layout checks (overflow, figure size and
# sharpness, cell length) fail the check. LAYOUT_REPORT_ONLY=--report-only prints
# their findings without failing, for a branch whose chapters are still being
# rewritten. BROWSER_SCREENSHOTS=0 skips the full-page screenshots (the test
# command does: a screenshot of a 16,000-px page costs seconds and CI does not
# look at them); they go to _build/screenshots/ otherwise.
# axe's colour rules run at 1280 px; BROWSER_PHONE_CONTRAST=1 runs them on the phone
# too (the weekly workflow does; they are most of axe's time on a page).
LAYOUT_REPORT_ONLY=${LAYOUT_REPORT_ONLY-}
shots=(--screenshots _build/screenshots)
if [ "${BROWSER_SCREENSHOTS:-1}" = 0 ]; then shots=(); fi
contrast=()
if [ "${BROWSER_PHONE_CONTRAST:-0}" = 1 ]; then contrast=(--phone-contrast); fi
site_pids=()
for k in 1 2; do
    timeout --kill-after=15 900 "$python" scripts/browser_check.py --chromium "$CHROMIUM" \
        --site _build/html --toc _toc.yml --shard "$k/2" "${shots[@]}" "${contrast[@]}" \
        ${LAYOUT_REPORT_ONLY:+"$LAYOUT_REPORT_ONLY"} "$@" > "$self_log.site$k" 2>&1 &
    site_pids+=($!)
done
site_rc=0
for pid in "${site_pids[@]}"; do wait "$pid" || site_rc=$?; done
self_rc=0
wait "$self_pid" || self_rc=$?
cat "$self_log"
if [ "$self_rc" -ne 0 ]; then
    cat "$self_log.site1" "$self_log.site2"
    rm -f "$self_log" "$self_log.site1" "$self_log.site2"
    echo "==> browser self-test FAILED (exit $self_rc): the checker cannot be trusted"
    exit "$self_rc"
fi
cat "$self_log.site1" "$self_log.site2"
rm -f "$self_log" "$self_log.site1" "$self_log.site2"
echo "==> browser self-test and check of the site (two shards), side by side: $((SECONDS - t1)) s (total with install: $((SECONDS - t0)) s)"
if [ "$site_rc" -ne 0 ]; then exit "$site_rc"; fi

# The live model widgets (attention_lib.widget_html): each loads its model on first use,
# writes or translates for a typed prompt, draws a heat map, reacts to a slider, and
# answers bad input with a message, at 1280 and 390 px (scripts/browser_widgets.py);
# the training widgets of chapters 9 and 11 train in the page until the induction head
# forms and the held-out loss falls (scripts/browser_training.py): minutes on a busy machine.
t1=$SECONDS
timeout --kill-after=15 2400 "$python" scripts/browser_widgets.py --chromium "$CHROMIUM" \
    --site _build/html --screenshots _build/screenshots
echo "==> browser check of the widgets: $((SECONDS - t1)) s"

# SmolLM2's chat widget (widget-smollm2.mjs, issue 55): nothing fetched before the button, the
# 98 MB model loaded from its checked chunks, the library's greedy reply to a chat message, the
# attention map drawn, a head switched off, the presets, the keyboard alone, axe-core, a message
# longer than the context cropped as the library crops, Stop, the second visit from Cache
# Storage, at 1280 and 390 px; then a damaged, a truncated and a mismatched download refused,
# and no WebAssembly SIMD said (scripts/browser_smollm2.py; exports the chunks first when the
# build has not).
t1=$SECONDS
timeout --kill-after=15 900 "$python" scripts/browser_smollm2.py --chromium "$CHROMIUM" \
    --screenshots _build/screenshots
echo "==> browser check of the SmolLM2 widget: $((SECONDS - t1)) s"
