"""Open every page of the built book in headless Chromium and report what a reader would see broken.

The site is served by Python's ``http.server`` on 127.0.0.1 (a free port) and
Chromium is driven by Playwright for Python, which sees every request a page
makes. Every request that is not for the local server is blocked (a route
handler) and counted as a failure: the site must carry its own assets (MathJax
and Vega are vendored in book/_static).

A page fails when:

* a request for a local file (the page, an image, script, stylesheet, font, ...)
  fails or gets an HTTP error;
* the page asks the network for anything (blocked, and reported);
* an ``<img>`` did not decode (``naturalWidth == 0``);
* an equation was not rendered by MathJax, or MathJax reports a TeX error;
* a script throws an uncaught exception;
* an image in the text has no alt text (none, empty, or just its file name);
* it is a chapter (a page in a *numbered* part of ``_toc.yml``) and shows no
  rendered figure (an image at least 50 px wide in a ``<figure>`` or a cell
  output), or lacks a part of the chapter template: an opening "what you will
  learn / what you need" box, a Summary and an Exercises section, a foldable
  solution, a link to the notation page, a link to another chapter, a citation;
* (layout checks, on every notebook page, at 1280 and 1920 px wide) a visible
  ``pre`` (code or output) or display equation is wider than its box; a figure
  is shown at under 80% of its intended width (its CSS width, as myst-nb sets
  it for a retina PNG, or else its natural width), or a PNG figure has fewer than
  1.9 image pixels per CSS pixel (blurry on HiDPI screens); a visible code
  cell has more than 20 lines;
* (interactive charts: containers ``.attention-chart`` or ``.vega-embed``) a
  chart draws nothing, shows no tooltip when a mark is hovered, or does not
  redraw when its first control is moved from the keyboard;
* the browser console logs an error (a failed request is reported once, above);
* axe-core (``scripts/check-browser.sh`` installs npm's ``axe-core``) finds a
  critical or serious accessibility violation, at 1280 px or on a phone.

Every page is also opened on an emulated phone (390 px wide, device scale 3,
touch, mobile viewport) and every check above runs again there, except the
1280/1920-px layout checks, which are replaced by what a phone needs (on every
page, not just notebooks):

* the page scrolls sideways (its content is wider than the screen; the
  outermost elements that stick out are named);
* a table is cut off or sticks out of the text column, instead of fitting or
  scrolling inside its own box;
* an interactive chart is wider than the text column;
* text in a figure is smaller than 8 CSS px as shown (the smallest text of a
  matplotlib PNG is written into it by ``attention_lib.presentation.plotting``; of an SVG,
  read from its glyphs), unless the figure can be enlarged (the "Enlarge
  figure" button of book/_static/figure-zoom.js) to a size where it is not.
  A PNG figure that does not record its smallest text fails: re-execute its
  chapter.

For each page it also prints what the page offers a reader, the bytes it loads,
and the layout measurements, and saves a full-page screenshot.

Every wait is bounded: a browser that hangs fails the check instead of CI.

Usage::

    python scripts/browser_check.py --site _build/html --toc _toc.yml --screenshots _build/screenshots
    python scripts/browser_check.py --self-test   # prove the checker catches each fault

``--axe PATH`` names axe-core's ``axe.min.js`` (default ``$AXE_JS``, else
``build/axe/node_modules/axe-core/axe.min.js``, where check-browser.sh puts it).
"""

import argparse
import functools
import http.server
import os
import re
import shutil
import struct
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - said plainly instead of a traceback
    sys.exit("browser_check.py needs Playwright for Python: pip install -r requirements-test.txt")

REPO = Path(__file__).resolve().parents[1]

# Playwright normally downloads a browser build of its own (`playwright
# install`); these machines cannot (they reach only package registries), so it
# drives Debian's Chromium through executable_path instead.
DEFAULT_CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
]
MIN_FIGURE_WIDTH = 50  # px: smaller images are icons, not figures
MAX_SCREENSHOT_HEIGHT = 16000
LAYOUT_WIDTHS = (1280, 1920)
MIN_SIZE_RATIO = 0.8  # rendered / intended width of a figure
MIN_PIXEL_DENSITY = 1.9  # image pixels per CSS pixel of a PNG figure
MAX_CELL_LINES = 20  # lines of a visible code cell
CHART_SELECTOR = ".attention-chart, .vega-embed:not(.attention-chart .vega-embed)"
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 3,
    "is_mobile": True,
    "has_touch": True,
}
PHONE_WIDTH = PHONE["viewport"]["width"]
MIN_FIGURE_TEXT_PX = 8  # CSS px of the smallest text in a figure, as shown
AXE_IMPACTS = ("critical", "serious")  # axe-core findings that fail a page
DEFAULT_AXE = os.environ.get(
    "AXE_JS",
    str(
        Path(__file__).resolve().parents[1]
        / "build"
        / "axe"
        / "node_modules"
        / "axe-core"
        / "axe.min.js"
    ),
)
# The PNG text chunk in which attention_lib.presentation.plotting records a figure's smallest text.
PNG_TEXT_KEY = "Smallest text px"

# Runs in the page once it has loaded: makes lazy images load, waits (bounded)
# for images and for MathJax's first typeset, then describes the page.
INSPECT_PAGE_JS = r"""
async (timeoutMs) => {
  const sleep = (ms, v) => new Promise(r => setTimeout(() => r(v), ms));
  for (const img of document.images) if (img.loading === 'lazy') img.loading = 'eager';
  const imagesDone = Promise.all(Array.from(document.images, img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r, {once: true});
                         img.addEventListener('error', r, {once: true}); })));
  const mj = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
  const waited = await Promise.race([
      Promise.all([imagesDone, mj || null]).then(() => 'ok'), sleep(timeoutMs, 'timeout')]);
  const article = document.querySelector('.bd-article') || document.body;
  const images = Array.from(document.images, img => ({
      src: img.currentSrc || img.src, width: img.naturalWidth, alt: img.getAttribute('alt'),
      inArticle: article.contains(img), figure: !!img.closest('figure, .cell_output, .output')}));
  const maths = Array.from(document.querySelectorAll('.math'));
  const links = Array.from(article.querySelectorAll('a[href]'), a => a.getAttribute('href'));
  const allLinks = Array.from(document.querySelectorAll('a[href]'), a => a.href);
  const hasLink = re => allLinks.some(h => re.test(h));
  const text = el => (el.textContent || '').trim().toLowerCase();
  const headings = Array.from(article.querySelectorAll('h2, h3'), text);
  const firstBox = article.querySelector('.admonition');
  return {
    waited, images,
    mathCount: maths.length,
    mathUnrendered: maths.filter(m => !m.querySelector('mjx-container')).length,
    mathErrors: Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'),
                           e => e.getAttribute('data-mjx-error') || text(e)).slice(0, 5),
    citations: article.querySelectorAll('a[href*="references.html#"], a.bibtex, span.bibtex a').length,
    notationLinks: links.filter(h => /(^|\/)notation\.html/.test(h)).length,
    chapterLinks: links.filter(h => /(^|\/)\d\d_[\w-]+\.html/.test(h)).length,
    foldables: article.querySelectorAll('details, .dropdown, .toggle, .toggle-details').length,
    openingBox: !!firstBox && /learn|need/.test(text(firstBox)),
    summary: headings.some(h => /summary/.test(h)),
    exercises: headings.some(h => /exercise/.test(h)),
    binder: hasLink(/mybinder\.org\/v2\//), colab: hasLink(/colab\.research\.google\.com\//),
    ipynbDownload: hasLink(/_sources\/.*\.ipynb$/), editLink: hasLink(/\/edit\//),
    issueLink: hasLink(/\/issues\/new/),
  };
}
"""

# Measures what a reader sees at the current width: horizontal overflow of
# visible pre blocks and display equations, figure sizes, code cell lengths.
LAYOUT_JS = r"""
async () => {
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const article = document.querySelector('.bd-article') || document.body;
  const shown = el => el.checkVisibility();
  const snippet = el => (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60);
  const over = el => el.scrollWidth > el.clientWidth + 1;
  const pres = [...article.querySelectorAll('pre')].filter(shown);
  const eqs = new Set([...article.querySelectorAll('div.math')]);
  for (const m of article.querySelectorAll('mjx-container[display="true"]'))
    eqs.add(m.closest('div.math') || m);
  const equations = [...eqs].filter(shown);
  const eqOver = el => over(el) || [...el.querySelectorAll('mjx-container')].some(over);
  const figures = [...article.querySelectorAll('.cell_output img, figure img')]
    .filter(img => shown(img) && img.naturalWidth >= 50 && !img.closest('.attention-chart'))
    .map(img => {
      const rendered = img.getBoundingClientRect().width;
      // myst-nb sizes a retina PNG (metadata width) with style="width: Npx"
      const set = /px$/.test(img.style.width) ? parseFloat(img.style.width)
                                              : parseFloat(img.getAttribute('width'));
      const intended = set > 0 ? set : img.naturalWidth;
      const src = img.currentSrc || img.src;
      const svg = /\.svg($|[?#])|^data:image\/svg/i.test(src);
      return {src: src.startsWith('data:') ? src.slice(0, 30) + '...' : src.split('/').pop(),
              ratio: rendered / intended, density: img.naturalWidth / rendered, svg};
    });
  const cells = [...article.querySelectorAll('.cell_input pre')].filter(shown)
    .map(pre => ({lines: pre.textContent.replace(/\n+$/, '').split('\n').length, text: snippet(pre)}));
  return {
    pres: pres.length, preOver: pres.filter(over).map(snippet),
    equations: equations.length, eqOver: equations.filter(eqOver).map(snippet),
    figures, cells,
  };
}
"""

# Unfolds every folded block of the article (hidden code cells: <details>; the
# solutions' dropdowns: sphinx-togglebutton), measures the code boxes that only
# then show, and folds them again: a folded box a reader opens must not scroll
# sideways either.
UNFOLD_JS = r"""
async () => {
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const article = document.querySelector('.bd-article') || document.body;
  const shown = el => el.checkVisibility();
  const before = new Set([...article.querySelectorAll('pre')].filter(shown));
  const opened = [...article.querySelectorAll('details:not([open])')];
  for (const d of opened) d.open = true;
  const pressed = [...article.querySelectorAll('button.toggle-button[aria-expanded="false"]')];
  for (const b of pressed) b.click();
  await frame();
  const snippet = el => (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60);
  const folded = [...article.querySelectorAll('pre')].filter(el => shown(el) && !before.has(el));
  const scrolls = folded.filter(el => el.scrollWidth > el.clientWidth + 1)
    .map(el => ({text: snippet(el), by: el.scrollWidth - el.clientWidth}));
  for (const b of pressed) b.click();
  for (const d of opened) d.open = false;
  await frame();
  return {folded: folded.length, scrolls};
}
"""

# Measures what a phone shows (run at PHONE_WIDTH): what sticks out of the
# screen, tables, charts and figures against the text column.
PHONE_LAYOUT_JS = r"""
async (width) => {
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const article = document.querySelector('.bd-article') || document.body;
  // the text column: the article's content box, inside its padding
  const box = article.getBoundingClientRect(), style = getComputedStyle(article);
  const column = {left: box.left + parseFloat(style.paddingLeft),
                  right: box.right - parseFloat(style.paddingRight)};
  const shown = el => el.checkVisibility();
  const snippet = el => (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 50);
  const describe = el => el.tagName.toLowerCase()
    + (el.id ? '#' + el.id : '') + (el.classList.length ? '.' + [...el.classList].join('.') : '')
    + (snippet(el) ? ' ' + JSON.stringify(snippet(el)) : '');
  const clips = el => { const o = getComputedStyle(el).overflowX; return o !== 'visible'; };
  const clipped = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement)
      if (clips(a)) return true;
    return false;
  };
  // What sticks out of the screen to the right (the page cannot scroll to the
  // left) and is not inside a box that scrolls or clips, nor fixed to the
  // screen (the theme's sidebars wait off-screen until they are opened).
  const fixed = el => {
    for (let a = el; a && a !== document.body; a = a.parentElement)
      if (getComputedStyle(a).position === 'fixed') return true;
    return false;
  };
  const out = new Set();
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('.figure-zoom-overlay, script, style, noscript')) continue;
    if (!el.checkVisibility({visibilityProperty: true})) continue;
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 1 && !clipped(el) && !fixed(el)) out.add(el);
  }
  const outermost = [...out].filter(el => !out.has(el.parentElement)).map(describe);
  const tables = [...article.querySelectorAll('table')].filter(shown).map(t => {
    let box = t.parentElement;
    while (box && box !== article && !clips(box)) box = box.parentElement;
    const b = (box && box !== article ? box : t).getBoundingClientRect();
    const scrolls = box && box !== article
                    && ['auto', 'scroll'].includes(getComputedStyle(box).overflowX);
    return {text: snippet(t), width: t.getBoundingClientRect().width, boxLeft: b.left,
            boxRight: b.right, inBox: !!(box && box !== article), scrolls: !!scrolls,
            cutOff: !!(box && box !== article && !scrolls && t.scrollWidth > box.clientWidth + 1)};
  });
  const charts = [...article.querySelectorAll('.attention-chart, .vega-embed')]
    .filter(c => shown(c) && !c.parentElement.closest('.attention-chart, .vega-embed')).map(c => {
      const view = c.querySelector('canvas, svg.marks') || c;
      const r = view.getBoundingClientRect();
      return {name: c.id || snippet(c), left: r.left, right: r.right, width: r.width};
    });
  const figures = [...article.querySelectorAll('.cell_output img, figure img')]
    .filter(img => shown(img) && img.naturalWidth >= 50 && !img.closest('.attention-chart'))
    .map(img => {
      const set = /px$/.test(img.style.width) ? parseFloat(img.style.width)
                                              : parseFloat(img.getAttribute('width'));
      const button = img.figureZoomButton;
      const box = img.getBoundingClientRect();
      return {src: img.currentSrc || img.src, rendered: box.width,
              aspect: (box.width / box.height) / (img.naturalWidth / img.naturalHeight),
              natural: img.naturalWidth, intended: set > 0 ? set : img.naturalWidth,
              zoomable: !!(button && shown(button) && !button.hidden)};
    });
  return {scrollWidth: document.documentElement.scrollWidth, outermost, tables, charts, figures,
          column: {left: column.left, right: column.right}};
}
"""

# Opens the figure-zoom overlay of the n-th zoomable figure and measures its image.
ZOOM_JS = r"""
async (src) => {
  const img = [...document.querySelectorAll('.bd-article .cell_output img, .bd-article figure img')]
    .find(i => (i.currentSrc || i.src) === src && i.figureZoomButton && !i.figureZoomButton.hidden);
  if (!img) return null;
  img.figureZoomButton.click();
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const big = document.querySelector('.figure-zoom-overlay img');
  const width = big ? big.getBoundingClientRect().width : 0;
  const pageWidth = document.documentElement.scrollWidth;
  document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}));
  return {width, pageWidth, closed: !document.querySelector('.figure-zoom-overlay')};
}
"""

AXE_RUN_JS = r"""
async (skip) => {
  // every rule, the experimental ones too (label-content-name-mismatch is one), but
  // those in `skip` (the phone's pass leaves out colour contrast: see run_axe)
  const rules = Object.fromEntries(axe.getRules(['experimental'])
                                   .map(r => [r.ruleId, {enabled: true}]));
  for (const id of skip) rules[id] = {enabled: false};
  // preload: false: no stylesheets fetched again (axe resolves their @imports
  // against the wrong base and asks the server for /basic.css).
  // MathJax's box for a TeX error (mjx-merror, red on yellow: 3.7:1) is left out:
  // the math-error check already fails its page, and axe's verdict on its colours
  // changes with the browser (axe 4.11 under Chromium 156 calls it a serious
  // color-contrast violation, earlier pairs left it undecided).
  const result = await axe.run({exclude: [['mjx-merror']]},
                               {resultTypes: ['violations'], rules, preload: false});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.length, target: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
}
"""


# --------------------------------------------------------------------------
# The site: which pages, and a local server for them


def toc_pages(toc_file):
    """Return ``[(html_path, is_chapter, is_notebook), ...]`` for the pages in ``_toc.yml``.

    A chapter is a page in a part marked ``numbered: true``; a notebook page is
    one whose source is an ``.ipynb`` next to ``_toc.yml``.
    """
    import yaml  # PyYAML comes with jupyter-book

    root = Path(toc_file).resolve().parent
    toc = yaml.safe_load(Path(toc_file).read_text(encoding="utf-8"))
    pages = [(toc["root"], False)]

    def walk(entries, numbered):
        for entry in entries or []:
            if "file" in entry:
                pages.append((entry["file"], numbered))
            walk(entry.get("sections"), numbered)

    for part in toc.get("parts", []):
        walk(part.get("chapters"), bool(part.get("numbered")))
    walk(toc.get("chapters"), False)
    return [
        (
            str(Path(f).with_suffix("")) + ".html",
            ch,
            (root / Path(f).with_suffix(".ipynb")).is_file(),
        )
        for f, ch in pages
    ]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # the browser reports failures itself
        pass


def serve(directory):
    """Serve ``directory`` on 127.0.0.1 at a free port; return (server, base URL)."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


# --------------------------------------------------------------------------
# Checking one page


def check_layout(page, problems, site=None, base=None):
    """Layout checks at each of LAYOUT_WIDTHS; return one summary line per width."""
    lines = []
    for width in LAYOUT_WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        m = page.evaluate(LAYOUT_JS)
        text = ""
        if site is not None and width == LAYOUT_WIDTHS[0]:
            figures = page.evaluate(PHONE_LAYOUT_JS, width)["figures"]
            text = "; " + check_figure_text(page, figures, site, base, f"{width} px", problems)
        for text in m["preOver"]:
            problems.append(("overflow", f"{width} px: pre wider than its box: {text!r}"))
        for text in m["eqOver"]:
            problems.append(("overflow", f"{width} px: equation wider than its box: {text!r}"))
        for f in m["figures"]:
            if f["ratio"] < MIN_SIZE_RATIO:
                problems.append(
                    (
                        "figure-shrunk",
                        f"{width} px: {f['src']} shown at "
                        f"{f['ratio']:.2f} of its intended width (< {MIN_SIZE_RATIO})",
                    )
                )
            if not f["svg"] and f["density"] < MIN_PIXEL_DENSITY:
                problems.append(
                    (
                        "figure-blurry",
                        f"{width} px: {f['src']} has {f['density']:.2f} "
                        f"image px per CSS px (< {MIN_PIXEL_DENSITY})",
                    )
                )
        for c in m["cells"]:
            if c["lines"] > MAX_CELL_LINES and width == LAYOUT_WIDTHS[0]:
                problems.append(
                    (
                        "long-cell",
                        f"visible code cell of {c['lines']} lines "
                        f"(> {MAX_CELL_LINES}): {c['text']!r}",
                    )
                )
        folded = ""
        if width == LAYOUT_WIDTHS[0]:
            u = page.evaluate(UNFOLD_JS)
            for box in u["scrolls"]:
                problems.append(
                    (
                        "code-scrolls",
                        f"{width} px: a folded code box scrolls sideways by {box['by']} px "
                        f"when unfolded: {box['text']!r}",
                    )
                )
            folded = f"; folded boxes {u['folded']} unfolded, {len(u['scrolls'])} scroll"
        longest = max(m["cells"], key=lambda c: c["lines"], default=None)
        ratios = " ".join(
            f"{f['ratio']:.2f}" + ("" if f["svg"] else f"/x{f['density']:.1f}")
            for f in m["figures"]
        )
        lines.append(
            f"{width} px: pre {m['pres']} checked, {len(m['preOver'])} overflow; "
            f"equations {m['equations']} checked, {len(m['eqOver'])} overflow; "
            f"figures {len(m['figures'])} (size ratio/px density: {ratios or '-'}); "
            f"longest visible cell {longest['lines'] if longest else 0} lines{folded}{text}"
        )
    page.set_viewport_size({"width": LAYOUT_WIDTHS[0], "height": 900})
    return lines


# --------------------------------------------------------------------------
# Figures' smallest text, read from the files the site serves


def figure_text(path):
    """Return ``(smallest text, full width)`` of a figure file in the same units, or None.

    A PNG drawn by ``attention_lib.presentation.plotting`` records its smallest text, in
    image pixels, in a text chunk (``PNG_TEXT_KEY``); the full width is the
    image's. A matplotlib SVG draws text as glyphs scaled by font size / 100
    (or names a font-size); the full width is its viewBox's.
    """
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        width, pos, size = struct.unpack(">I", data[16:20])[0], 8, None
        while pos + 8 <= len(data):
            length, tag = struct.unpack(">I4s", data[pos : pos + 8])
            if tag == b"tEXt":
                key, _, value = data[pos + 8 : pos + 8 + length].partition(b"\0")
                if key.decode("latin-1") == PNG_TEXT_KEY:
                    size = float(value)
            if tag == b"IEND":
                break
            pos += 12 + length
        return (size, width) if size else None
    text = data.decode("utf-8", "replace")
    view = re.search(r'viewBox="\s*[-\d.]+[\s,]+[-\d.]+[\s,]+([\d.]+)', text)
    sizes = [float(s) * 100 for s in re.findall(r"scale\(([\d.]+) -[\d.]+\)", text)]
    sizes += [float(s) for s in re.findall(r'font-size[:=]\s*"?([\d.]+)(?:px)?', text)]
    return (min(sizes), float(view.group(1))) if view and sizes else None


def check_figure_text(page, figures, site, base, label, problems):
    """Smallest text of each figure as shown (or, if it can be enlarged, as enlarged)."""
    smallest, unknown = [], 0
    for f in figures:
        src = f["src"]
        name = src.split("/")[-1] if not src.startswith("data:") else src[:30] + "..."
        if abs(f["aspect"] - 1) > 0.03:
            problems.append(
                (
                    "figure-distorted",
                    f"{label}: {name} is shown "
                    f"{f['aspect']:.2f} times as wide, for its height, as drawn",
                )
            )
        if not src.startswith(base):
            continue
        measured = figure_text(Path(site) / src[len(base) :].split("?")[0].split("#")[0])
        if measured is None:
            if name.lower().endswith(".png"):
                unknown += 1
                problems.append(
                    (
                        "figure-text-unknown",
                        f"{label}: {name} does not record its "
                        "smallest text: re-execute its chapter "
                        "(attention_lib.presentation.plotting.use_book_style "
                        "writes it)",
                    )
                )
            continue
        size, full = measured
        shown = size * f["rendered"] / full
        if shown >= MIN_FIGURE_TEXT_PX:
            smallest.append(shown)
            continue
        zoom = page.evaluate(ZOOM_JS, src) if f["zoomable"] else None
        if zoom is None:
            problems.append(
                (
                    "figure-text-small",
                    f"{label}: {name}: smallest text "
                    f"{shown:.1f} CSS px (< {MIN_FIGURE_TEXT_PX}) and it cannot be "
                    "enlarged",
                )
            )
            smallest.append(shown)
            continue
        enlarged = size * zoom["width"] / full
        smallest.append(enlarged)
        sideways = zoom["pageWidth"] > page.viewport_size["width"] + 1
        if enlarged < MIN_FIGURE_TEXT_PX or not zoom["closed"] or sideways:
            problems.append(
                (
                    "figure-text-small",
                    f"{label}: {name}: smallest text {shown:.1f} "
                    f"CSS px, enlarged {enlarged:.1f} CSS px "
                    f"(needs {MIN_FIGURE_TEXT_PX}); "
                    f"overlay closed by Escape: {zoom['closed']}, page width while "
                    f"open {zoom['pageWidth']} px",
                )
            )
    text = f"figure text >= {min(smallest):.1f} CSS px" if smallest else "no figure text measured"
    return text + (f", {unknown} unknown" if unknown else "")


def check_phone_layout(page, site, base, problems):
    """What a phone shows at PHONE_WIDTH; returns one summary line."""
    label = f"{PHONE_WIDTH} px"
    m = page.evaluate(PHONE_LAYOUT_JS, PHONE_WIDTH)
    if m["scrollWidth"] > PHONE_WIDTH + 1:
        problems.append(
            (
                "sideways-scroll",
                f"{label}: the page is {m['scrollWidth']} px wide; "
                "sticking out: " + "; ".join(m["outermost"][:5]),
            )
        )
    col = m["column"]
    for t in m["tables"]:
        sticks_out = t["boxRight"] > col["right"] + 1 or t["boxLeft"] < col["left"] - 1
        if (
            t["cutOff"]
            or (t["inBox"] and t["boxRight"] > PHONE_WIDTH + 1)
            or (not t["inBox"] and sticks_out)
        ):
            problems.append(
                (
                    "table-cut-off",
                    f"{label}: table {t['text']!r} ({t['width']:.0f} px) "
                    "neither fits the column nor scrolls inside its own box",
                )
            )
    for c in m["charts"]:
        if c["right"] > col["right"] + 1 or c["left"] < col["left"] - 1:
            problems.append(
                (
                    "chart-too-wide",
                    f"{label}: chart {c['name']!r} is {c['width']:.0f} "
                    f"px wide, the column {col['right'] - col['left']:.0f} px",
                )
            )
    text = check_figure_text(page, m["figures"], site, base, label, problems)
    column = col["right"] - col["left"]
    scrolling = sum(t["scrolls"] and t["width"] > column + 1 for t in m["tables"])
    return (
        f"{label}: page {m['scrollWidth']} px wide; {len(m['tables'])} tables "
        f"({scrolling} scroll in their box); {len(m['charts'])} charts; "
        f"{len(m['figures'])} figures, {text}"
    )


# Rules the phone's pass leaves out unless asked for them (--phone-contrast; the weekly
# workflow asks): those that judge colours. Colour contrast is most of axe's time on a
# chapter (about 3 of 4 s: it asks the browser for the colours behind every piece of text;
# link-in-text-block, a link's colour against its sentence's, about 0.9 s), and the book's
# colours are those of one stylesheet at every width: the desktop's pass judges them.
# (Width-dependent rules, target-size and the rest, run on both.)
PHONE_SKIPS_AXE_RULES = ("color-contrast", "link-in-text-block")


def run_axe(page, axe_source, label, problems, skip=()):
    """axe-core's violations on the page (every rule but ``skip``); critical and serious
    ones are problems."""
    page.add_script_tag(content=axe_source)
    found = page.evaluate(AXE_RUN_JS, list(skip))
    for v in found:
        if v["impact"] in AXE_IMPACTS:
            example = v["target"][0] if v["target"] else "?"
            problems.append(
                (
                    f"axe-{v['impact']}",
                    f"{label}: {v['id']} on {v['nodes']} element(s): {v['help']} (e.g. {example})",
                )
            )
    minor = sorted({f"{v['id']} ({v['impact']})" for v in found if v["impact"] not in AXE_IMPACTS})
    return (
        f"{label}: axe {sum(v['impact'] in AXE_IMPACTS for v in found)} critical/serious"
        + (f", other: {', '.join(minor)}" if minor else "")
        + (f" (not run: {', '.join(skip)})" if skip else "")
    )


def check_charts(page, problems):
    """Each chart must draw, show a tooltip on hover and redraw when its first control moves."""
    charts = page.locator(CHART_SELECTOR)
    lines = []
    for i in range(charts.count()):
        chart = charts.nth(i)
        name = chart.get_attribute("id") or f"chart {i + 1}"
        view = chart.locator("canvas, svg.marks").first
        try:
            view.wait_for(state="visible", timeout=10000)
        except PlaywrightError:
            problems.append(("chart-not-rendered", f"{name}: no canvas or svg after 10 s"))
            continue
        chart.scroll_into_view_if_needed()
        marks = chart.locator("g.role-mark > path, g.role-mark > rect")
        hovered = False
        for j in range(min(marks.count(), 40)):  # the first marks with a box
            box = marks.nth(j).bounding_box()
            if box and box["width"] > 2 and box["height"] > 2:
                page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
                hovered = True
                break
        try:
            if not hovered:
                raise PlaywrightError("no mark to hover")
            page.locator("#vg-tooltip-element.visible").wait_for(state="visible", timeout=3000)
            tooltip = "tooltip ok"
        except PlaywrightError:
            problems.append(("chart-no-tooltip", f"{name}: no tooltip when a mark is hovered"))
            tooltip = "no tooltip"
        page.mouse.move(0, 0)
        for selector in (
            "input[type=range]",
            "input[type=radio]:checked",
            "input[type=checkbox]",
            "select",
        ):  # the control to move
            control = chart.locator(".vega-bindings " + selector).first
            if control.count():
                break
        else:
            lines.append(f"{name}: drawn, {tooltip}, no controls")
            continue
        page.wait_for_timeout(300)
        before = view.screenshot()
        control.focus()
        kind = control.get_attribute("type") or "select"
        page.keyboard.press({"checkbox": "Space", "select": "ArrowDown"}.get(kind, "ArrowRight"))
        page.wait_for_timeout(500)
        after = view.screenshot()
        if before == after:
            problems.append(
                (
                    "chart-static",
                    f"{name}: moving its {kind} control (keyboard) did not change the chart",
                )
            )
        lines.append(
            f"{name}: drawn, {tooltip}, {kind} control "
            f"{'redraws' if before != after else 'changes NOTHING'}"
        )
    return lines


def check_page(
    context,
    url,
    base,
    is_chapter,
    is_notebook,
    screenshot=None,
    timeout=60.0,
    layout=True,
    phone=False,
    site=None,
    axe_source=None,
    axe_skip=(),
):
    """Load ``url`` in a fresh tab; return ``(problems, report)``.

    ``problems`` is a list of ``(kind, detail)``; ``report`` describes the page.
    With ``phone`` the context is the emulated phone (PHONE) and the phone's
    layout checks replace the desktop ones.
    """
    started = time.monotonic()
    problems, finished, exceptions, console = [], [], [], []
    page = context.new_page()
    page.set_default_timeout(timeout * 1000)
    # Every page as on a reader's first visit: nothing stored by an earlier page
    # (the theme's colour mode, for one, lives in localStorage).
    page.add_init_script("try { localStorage.clear(); sessionStorage.clear(); } catch (e) {}")
    local = lambda u: u.startswith(base)
    where = lambda u: u.replace(base, "/", 1)
    page.on("pageerror", lambda e: exceptions.append(str(e).splitlines()[0]))
    # A failed request logs "Failed to load resource"; it is reported once, below.
    page.on(
        "console",
        lambda m: (
            console.append(m.text.splitlines()[0] if m.text else "")
            if m.type == "error" and not m.text.startswith("Failed to load resource")
            else None
        ),
    )
    page.on("requestfinished", lambda r: finished.append(r))
    # requests in flight, as the page sees them (started, neither finished nor failed)
    in_flight = {}
    page.on("request", lambda r: in_flight.__setitem__(id(r), r.url))
    page.on("requestfinished", lambda r: in_flight.pop(id(r), None))
    page.on("requestfailed", lambda r: in_flight.pop(id(r), None))

    def on_response(r):
        if local(r.url) and r.status >= 400 and where(r.url) != "/favicon.ico":
            problems.append(
                ("failed-request", f"{r.request.resource_type} {where(r.url)}: HTTP {r.status}")
            )

    def on_failed(r):
        if local(r.url) and r.failure != "net::ERR_ABORTED":
            problems.append(("failed-request", f"{r.resource_type} {where(r.url)}: {r.failure}"))

    page.on("response", on_response)
    page.on("requestfailed", on_failed)
    report = {}
    try:
        page.goto(url, wait_until="load")
        try:
            page.wait_for_load_state("networkidle", timeout=timeout * 500)
        except PlaywrightError:
            # Chromium can stay "busy" with no request of the page in flight: it
            # leaves a web font's load pending for ever on a page whose MathJax
            # reports an error (Chromium 156, on the desktop and on the phone;
            # the self-test's math_error page, under load). Only a request that
            # is really still in flight is a fault, and it is named. (Not on the
            # phone: the same requests were judged on the desktop.)
            pending = sorted(set(in_flight.values()))
            if pending and not phone:
                problems.append(
                    (
                        "timeout",
                        f"the network was still busy {timeout / 2:.0f} s after load: "
                        + ", ".join(where(u) for u in pending[:3]),
                    )
                )
        info = page.evaluate(INSPECT_PAGE_JS, min(20000, int(timeout * 1000 / 3)))
        viewport = page.viewport_size
        if screenshot is not None:  # before the checks below resize, hover and type
            height = page.evaluate("document.documentElement.scrollHeight")
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(
                path=screenshot,
                full_page=True,
                clip={
                    "x": 0,
                    "y": 0,
                    "width": viewport["width"],
                    "height": min(max(height, viewport["height"]), MAX_SCREENSHOT_HEIGHT),
                },
            )
        label = f"{viewport['width']} px"
        report["axe"] = [run_axe(page, axe_source, label, problems, axe_skip)] if axe_source else []
        if phone:
            report["layout"] = [check_phone_layout(page, site, base, problems)] if layout else []
        else:
            report["layout"] = (
                check_layout(page, problems, site, base) if layout and is_notebook else []
            )
        report["charts"] = check_charts(page, problems)
        report["bytes"] = sum(max(r.sizes()["responseBodySize"], 0) for r in finished)
    except PlaywrightError as exc:
        problems.append(("timeout", f"{where(url)}: {str(exc).splitlines()[0]}"))
        return problems, None
    finally:
        page.close()

    # ---- judge what was seen
    if info["waited"] != "ok":
        problems.append(("timeout", "images or MathJax still loading after the time limit"))
    for img in info["images"]:
        src = where(img["src"])
        if img["width"] == 0:
            problems.append(("broken-image", f"{src} did not decode"))
        alt, name = (img["alt"] or "").strip(), img["src"].rsplit("/", 1)[-1]
        if img["inArticle"] and (
            not alt
            or alt == name
            or alt.endswith(name)
            or alt.lower().endswith((".png", ".svg", ".jpg", ".jpeg", ".gif"))
        ):
            problems.append(("missing-alt", f"{src} has alt {img['alt']!r}"))
    if info["mathUnrendered"]:
        problems.append(
            (
                "math-not-rendered",
                f"{info['mathUnrendered']} of {info['mathCount']} "
                "equations not rendered by MathJax",
            )
        )
    problems += [("math-error", err) for err in info["mathErrors"]]
    problems += [("script-error", exc) for exc in exceptions]
    problems += [("console-error", text) for text in console]
    figures = [
        i
        for i in info["images"]
        if i["figure"] and i["inArticle"] and i["width"] >= MIN_FIGURE_WIDTH
    ]
    if is_chapter and not figures:
        problems.append(("no-figure", "chapter page renders no figure"))
    if is_chapter:  # what every chapter promises a reader (the book's chapter template)
        missing = [
            what
            for what, present in [
                ("an opening 'what you will learn / what you need' box", info["openingBox"]),
                ("a Summary section", info["summary"]),
                ("an Exercises section", info["exercises"]),
                ("a foldable solution", info["foldables"] > 0),
                ("a link to the notation page", info["notationLinks"] > 0),
                ("a link to another chapter", info["chapterLinks"] > 0),
                ("a citation", info["citations"] > 0),
            ]
            if not present
        ]
        if missing:
            problems.append(("chapter-structure", "chapter has no " + ", no ".join(missing)))
    yes = lambda flag: "yes" if flag else "no"
    report.update(
        seconds=time.monotonic() - started,
        requests=len(finished),
        offers=(
            f"opening box {yes(info['openingBox'])}, summary {yes(info['summary'])}, "
            f"exercises {yes(info['exercises'])}; {len(figures)} figures, {info['mathCount']} "
            f"equations, {info['citations']} citations, {info['notationLinks']} links to notation, "
            f"{info['chapterLinks']} links to chapters, {info['foldables']} foldable blocks; "
            f"Binder {yes(info['binder'])}, Colab {yes(info['colab'])}, .ipynb download "
            f"{yes(info['ipynbDownload'])}, edit {yes(info['editLink'])}, issue {yes(info['issueLink'])}"
        ),
    )
    return problems, report


# Folded code boxes allowed to scroll sideways at 1280 px when unfolded
# ({page: [start of the box's text, ...]}): reported, not failed. Empty since
# issue 37 rewrapped the last ones: every folded box must fit. An entry whose
# box no longer scrolls is reported as no longer needed, to be deleted.
KNOWN_CODE_SCROLLS = {}


def allowed_code_scroll(page, detail):
    """Whether a code-scrolls finding on ``page`` is one of KNOWN_CODE_SCROLLS."""
    return any(start in detail for start in KNOWN_CODE_SCROLLS.get(page, ()))


LAYOUT_KINDS = {
    "overflow",
    "code-scrolls",
    "figure-shrunk",
    "figure-blurry",
    "long-cell",
    "sideways-scroll",
    "table-cut-off",
    "chart-too-wide",
    "figure-text-small",
    "figure-text-unknown",
    "figure-distorted",
}


def check_site(
    site,
    pages,
    chromium,
    screenshots=None,
    timeout=60.0,
    verbose=True,
    layout=True,
    report_only=False,
    axe=DEFAULT_AXE,
    phone=True,
    phone_contrast=False,
):
    """Check ``pages`` (``[(html path, is_chapter, is_notebook)]``) of the site in ``site``.

    Each page is checked at 1280 px (and 1920 px) and, with ``phone``, again
    on the emulated phone. Returns ``{page: problems}``; with ``report_only``
    layout problems are printed but not returned. ``axe`` is the path of
    axe-core's ``axe.min.js`` (None: no accessibility check); on the phone it
    leaves out :data:`PHONE_SKIPS_AXE_RULES` unless ``phone_contrast``.
    """
    site = Path(site)
    missing = [p for p, _, _ in pages if not (site / p).is_file()]
    if missing:
        raise SystemExit(
            f"the built site {site} has no {', '.join(missing)}: "
            "build the book first (bash scripts/build-book.sh)"
        )
    if not Path(chromium).is_file():
        raise SystemExit(
            f"no Chromium at {chromium}: install Debian's package `chromium` "
            "(apt-get install chromium; scripts/check-browser.sh does it), "
            "or pass --chromium PATH"
        )
    axe_source = None
    if axe:
        if not Path(axe).is_file():
            raise SystemExit(
                f"no axe-core at {axe}: npm install --prefix build/axe "
                "axe-core (scripts/check-browser.sh does it), or pass --axe PATH"
            )
        axe_source = Path(axe).read_text(encoding="utf-8")
    server, base = serve(site)
    results = {}
    blocked = {}  # page -> URLs outside the local server it asked for

    def route(r):
        if r.request.url.startswith(base):
            r.continue_()
        else:
            blocked.setdefault(current, []).append(r.request.url)
            r.abort("blockedbyclient")

    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium, args=CHROMIUM_FLAGS, timeout=30000
            )
            context = browser.new_context(viewport={"width": LAYOUT_WIDTHS[0], "height": 900})
            context.route("**/*", route)
            contexts = [(context, False, "")]
            if phone:
                phone_context = browser.new_context(**PHONE)
                phone_context.route("**/*", route)
                contexts.append((phone_context, True, f"@{PHONE_WIDTH}"))
            if verbose:
                print(
                    f"serving {site} at {base}; Chromium {browser.version}; "
                    f"axe-core {'on' if axe_source else 'OFF'}; "
                    f"phone {'on' if phone else 'OFF'}"
                )
            for current, is_chapter, is_notebook in pages:
                problems, reports = [], []
                for ctx, on_phone, suffix in contexts:
                    shot = (
                        (
                            Path(screenshots)
                            / (current.replace("/", "__").removesuffix(".html") + suffix + ".png")
                        )
                        if screenshots
                        else None
                    )
                    found, rep = check_page(
                        ctx,
                        base + current,
                        base,
                        is_chapter,
                        is_notebook,
                        shot,
                        timeout,
                        layout,
                        on_phone,
                        site,
                        axe_source,
                        PHONE_SKIPS_AXE_RULES if on_phone and not phone_contrast else (),
                    )
                    # the phone's findings that the desktop already reported are left out
                    seen = {(k, re.sub(r"^\d+ px: ", "", d)) for k, d in problems}
                    where = f"{PHONE_WIDTH} px: " if on_phone else ""
                    problems += [
                        (k, d if d.startswith(f"{PHONE_WIDTH} px") else where + d)
                        for k, d in found
                        if (k, re.sub(r"^\d+ px: ", "", d)) not in seen
                    ]
                    reports.append(rep)
                # one report: the desktop's, with the phone's lines added
                report = reports[0]
                if report and len(reports) > 1 and reports[1]:
                    report["seconds"] += reports[1]["seconds"]
                    for key in ("axe", "layout", "charts"):
                        report[key] = report[key] + [
                            f"{PHONE_WIDTH} px: {line}"
                            if not line.startswith(f"{PHONE_WIDTH} px")
                            else line
                            for line in reports[1][key]
                        ]
                problems = list(dict.fromkeys(problems))
                problems += [
                    ("needs-network", f"blocked request for {u}")
                    for u in dict.fromkeys(blocked.get(current, []))
                ]
                shown = [
                    (
                        k,
                        d,
                        (report_only and k in LAYOUT_KINDS)
                        or (k == "code-scrolls" and allowed_code_scroll(current, d)),
                    )
                    for k, d in problems
                ]
                stale = [
                    start
                    for start in KNOWN_CODE_SCROLLS.get(current, ())
                    if not any(k == "code-scrolls" and start in d for k, d in problems)
                ]
                results[current] = [(k, d) for k, d, warn in shown if not warn]
                if verbose:
                    bad = len(results[current])
                    label = "chapter" if is_chapter else "page"
                    print(
                        f"{current:40s} {label:7s} "
                        + (
                            f"{report['seconds']:5.1f} s {report['requests']:4d} requests "
                            f"{report['bytes']:10,d} bytes  "
                            if report
                            else ""
                        )
                        + ("ok" if not bad else f"{bad} problem(s)")
                    )
                    if report:
                        print(f"    offers: {report['offers']}")
                        for line in report["axe"] + report["layout"] + report["charts"]:
                            print(f"    {line}")
                    for kind, detail, warn in shown:
                        print(f"    {'REPORT' if warn else 'FAIL'} [{kind}] {detail}")
                    for start in stale:
                        print(
                            "    NOTE [code-scrolls] no longer scrolls: delete its entry "
                            f"{start!r} from KNOWN_CODE_SCROLLS"
                        )
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return results


# --------------------------------------------------------------------------
# Self-test: a hand-made site with one fault per page


def png_bytes(width, height, smallest_text=None):
    """A small valid greyscale PNG (a horizontal ramp), made with the standard library.

    ``smallest_text`` (image px) is recorded as attention_lib.presentation.plotting records it.
    """
    rows = b"".join(
        b"\x00" + bytes((x * 255 // max(width - 1, 1)) for x in range(width)) for _ in range(height)
    )

    def chunk(tag, data):
        return (
            struct.pack(">I", len(data))
            + tag
            + data
            + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    text = (
        chunk(b"tEXt", PNG_TEXT_KEY.encode("latin-1") + b"\0" + f"{smallest_text}".encode())
        if smallest_text
        else b""
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + text
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


# Everything a chapter must offer besides a figure (see check_page).
CHAPTER_PARTS = """
        <div class="admonition"><p class="admonition-title">In this chapter</p><p>What you will learn</p></div>
        <p>See the <a href="notation.html">notation</a>, <a href="01_intro.html">chapter 1</a>
        and <a href="references.html#id1">[Someone, 2020]</a>.</p>
        <h2>Summary</h2><p>Done.</p><h2>Exercises</h2>
        <details><summary>Solution</summary><p>42</p></details>"""
FIGURE = (
    '<figure><img src="fig2x.png" style="width: 120px; height: 60px" alt="A grey ramp">'
    "<figcaption>A figure</figcaption></figure>"
)
CELL = '<div class="cell_input"><pre>{}</pre></div>'

SELF_TEST_PAGES = {
    # page: (is_chapter, body, expected problem kinds); chapters get the layout checks
    "good.html": (
        True,
        CHAPTER_PARTS
        + FIGURE
        + CELL.format("x = 1\n" * 20)
        + '<details class="hide above-input"><summary>Show code</summary>'
        + CELL.format("y = 2  # folded, and short enough")
        + "</details>"
        + """
        <link rel="stylesheet" href="style.css"><script src="app.js"></script>
        <p>Inline <span class="math notranslate nohighlight">\\(\\alpha_{ij} = \\frac{a}{b}\\)</span>.</p>
        <img src="lazy.png" alt="A lazily loaded ramp" loading="lazy" style="margin-top:3000px">""",
        set(),
    ),
    "chapter_missing_parts.html": (True, FIGURE + "<h2>Summary</h2>", {"chapter-structure"}),
    "plain_page.html": (False, "<p>Not a chapter: needs no figure.</p>", set()),
    "missing_image.html": (
        False,
        """<figure><img src="fig.png" alt="ok"></figure>
        <figure><img src="missing.png" alt="A figure that is not there"></figure>""",
        {"failed-request", "broken-image"},
    ),
    "corrupt_image.html": (
        False,
        """<figure><img src="fig.png" alt="ok"></figure>
        <img src="corrupt.png" alt="Bytes that are not an image">""",
        {"broken-image"},
    ),
    "missing_script.html": (False, '<script src="missing.js"></script>', {"failed-request"}),
    "missing_stylesheet.html": (
        False,
        '<link rel="stylesheet" href="missing.css">',
        {"failed-request"},
    ),
    "missing_font.html": (
        False,
        """<style>@font-face { font-family: Gone; src: url(gone.woff) format('woff'); }
        p { font-family: Gone; }</style><p>Text in a font that is not there.</p>""",
        {"failed-request"},
    ),
    "no_figure.html": (True, CHAPTER_PARTS + "<p>A chapter without a figure.</p>", {"no-figure"}),
    "no_alt.html": (False, '<figure><img src="fig.png" alt="fig.png"></figure>', {"missing-alt"}),
    "script_error.html": (False, "<script>undefinedFunction();</script>", {"script-error"}),
    "needs_network.html": (
        False,
        '<script src="https://cdn.invalid/lib.js"></script>',
        {"needs-network"},
    ),
    "fetches_network.html": (
        False,
        "<script>fetch('https://example.invalid/data.json').catch(() => {});</script>",
        {"needs-network"},
    ),
    "folded_code_scrolls.html": (
        True,
        CHAPTER_PARTS
        + FIGURE
        + '<details class="hide above-input"><summary>Show code</summary>'
        + CELL.format("z = " + "2 * " * 200)
        + "</details>",
        {"code-scrolls"},
    ),
    "math_unrendered.html": (
        False,
        '<span class="math notranslate nohighlight">\\(x\\)</span>',
        {"math-not-rendered"},
    ),
    # MathJax draws a TeX error red on yellow (3.7:1, below WCAG's 4.5:1): axe 4.11
    # under Chromium 156 reports a serious color-contrast finding on its mjx-utext,
    # which older pairs left undecided. The checker leaves the error box out of
    # axe's run (AXE_RUN_JS), so this page shows one fault, the TeX error, whatever
    # the versions. (Restyling the box instead kept Chromium's network busy for
    # ever on this page: a renderer font load that never ends.)
    "math_error.html": (
        False,
        """<span class="math notranslate nohighlight">\\(\\frac{a}\\)</span>""",
        {"math-error"},
    ),
    # MathJax's error box as it draws it (red on yellow), made by hand: axe would
    # call its text a serious color-contrast violation; the check leaves it to math-error
    "math_error_box.html": (
        False,
        '<mjx-merror data-mjx-error="Missing argument for \\frac" '
        'style="display: inline-block; color: red; background-color: yellow">'
        "<mjx-utext>Missing argument for \\frac</mjx-utext></mjx-merror>",
        {"math-error"},
    ),
    # (no stylesheet: on a phone the long line and the wide figure below also
    # make their pages scroll sideways)
    "overflowing_pre.html": (
        True,
        CHAPTER_PARTS + FIGURE + CELL.format("y = " + "1 + " * 200),
        {"overflow", "sideways-scroll"},
    ),
    "shrunk_figure.html": (
        True,
        CHAPTER_PARTS + '<figure style="width:600px">'
        '<img src="wide2x.png" width="1000" style="max-width:100%" '
        'alt="A wide ramp squeezed into a narrow column"></figure>',
        {"figure-shrunk", "sideways-scroll"},
    ),
    "blurry_figure.html": (
        True,
        CHAPTER_PARTS + '<figure><img src="fig.png" '
        'alt="A ramp with one pixel per CSS pixel"></figure>',
        {"figure-blurry"},
    ),
    "long_cell.html": (True, CHAPTER_PARTS + FIGURE + CELL.format("x = 1\n" * 25), {"long-cell"}),
    "console_error.html": (
        False,
        "<script>console.error('Got invalid theme mode');</script>",
        {"console-error"},
    ),
    "axe_critical.html": (
        False,
        "<p>A button without a name:</p><button></button>",
        {"axe-critical"},
    ),
    "axe_serious.html": (
        False,
        "<p>A control whose name hides its visible text:</p>"
        '<button aria-label="Colour">Theme</button>',
        {"axe-serious"},
    ),
    "sideways.html": (
        False,
        '<p><code style="white-space: nowrap">' + "x" * 80 + "</code></p>",
        {"sideways-scroll"},
    ),
    "table_scrolls.html": (
        False,
        '<div style="overflow-x: auto" tabindex="0"><table><tr>'
        + "<td>a_wide_cell_that_does_not_break</td>" * 4
        + "</tr></table></div>",
        set(),
    ),
    "table_cut_off.html": (
        False,
        '<div style="overflow: hidden"><table><tr>'
        + "<td>a_wide_cell_that_does_not_break</td>" * 4
        + "</tr></table></div>",
        {"table-cut-off"},
    ),
    "figure_text_small.html": (
        False,
        '<figure><img src="small_text.png" style="width: 600px; '
        'max-width: 100%" alt="A ramp with tiny labels"></figure>',
        {"figure-text-small"},
    ),
    "figure_text_zoom.html": (
        False,
        '<link rel="stylesheet" href="custom.css">'
        '<script src="figure-zoom.js"></script><figure>'
        '<img src="small_text.png" style="width: 600px; max-width: 100%" '
        'alt="A ramp with labels too small on a phone"></figure>',
        set(),
    ),
    "figure_distorted.html": (
        False,
        '<figure><img src="fig2x.png" style="width: 120px; '
        'height: 120px" alt="A ramp drawn twice as high as it is"></figure>',
        {"figure-distorted"},
    ),
    "figure_text_unknown.html": (
        False,
        '<figure><img src="unknown_text.png" '
        'style="width: 120px" alt="A ramp that records no text size">'
        "</figure>",
        {"figure-text-unknown"},
    ),
}


def chart_page(spec, vendor="_static/vendor/"):
    """A page with one chart, rendered as attention_lib.presentation.show renders it."""
    sys.path.insert(0, str(REPO))
    from attention_lib.presentation import chart_html

    return chart_html(type("Spec", (), {"to_dict": lambda self: spec})(), static_path=vendor)


def chart_spec(mark="bar", tooltip=True, height="datum.v * k"):
    """A three-bar Vega-Lite chart whose slider ``k`` feeds ``height``."""
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "data": {"values": [{"x": 0, "v": 1}, {"x": 1, "v": 2}, {"x": 2, "v": 3}]},
        "params": [
            {"name": "k", "value": 1, "bind": {"input": "range", "min": 1, "max": 5, "step": 1}}
        ],
        "transform": [{"calculate": height, "as": "h"}],
        "mark": {"type": mark, "tooltip": tooltip},
        "encoding": {
            "x": {"field": "x", "type": "ordinal"},
            "y": {"field": "h", "type": "quantitative", "scale": {"domain": [0, 20]}},
        },
    }


CHART_PAGES = {
    # page: (spec, vendored scripts' folder, expected problem kinds)
    "chart_good.html": (chart_spec(), "_static/vendor/", set()),
    "chart_broken.html": (chart_spec(mark="nonsense"), "_static/vendor/", {"chart-not-rendered"}),
    "chart_no_tooltip.html": (chart_spec(tooltip=False), "_static/vendor/", {"chart-no-tooltip"}),
    "chart_static.html": (chart_spec(height="datum.v"), "_static/vendor/", {"chart-static"}),
    "chart_not_vendored.html": (
        chart_spec(),
        "_static/missing/",
        {"failed-request", "needs-network", "chart-not-rendered"},
    ),
    "chart_too_wide.html": (
        dict(chart_spec(), width=600),
        "_static/vendor/",
        {"chart-too-wide", "sideways-scroll"},
    ),
}


# What produces each verdict, for the self-test's report of a verdict it did not expect.
VERDICT_SOURCES = {
    "failed-request": "a local request that failed or got an HTTP error (on_response/on_failed)",
    "needs-network": "a request outside the local server (the route handler)",
    "broken-image": "an <img> with naturalWidth 0 (INSPECT_PAGE_JS)",
    "missing-alt": "an <img> in the article without real alt text",
    "math-not-rendered": "a .math element without an mjx-container",
    "math-error": "MathJax's mjx-merror / data-mjx-error elements",
    "script-error": "an uncaught exception (pageerror)",
    "console-error": "console.error on the page",
    "no-figure": "a chapter without a figure of 50 px or more",
    "chapter-structure": "the chapter template's parts (INSPECT_PAGE_JS)",
    "overflow": "a visible pre or equation wider than its box (LAYOUT_JS)",
    "code-scrolls": "a code cell, unfolded, that scrolls sideways at 1280 px (LAYOUT_JS)",
    "figure-shrunk": "a figure below 80% of its intended width",
    "figure-blurry": "a PNG figure below 1.9 image px per CSS px",
    "long-cell": "a visible code cell longer than 20 lines",
    "sideways-scroll": "the page wider than the 390-px phone (PHONE_LAYOUT_JS)",
    "table-cut-off": "a table neither fitting nor scrolling in its own box",
    "chart-too-wide": "a chart wider than the phone's column",
    "chart-not-rendered": "a chart without canvas or svg after 10 s",
    "chart-no-tooltip": "no Vega tooltip on hovering a mark",
    "chart-static": "a chart unchanged when its first control moves",
    "figure-text-small": "figure text under 8 CSS px that cannot be enlarged enough",
    "figure-text-unknown": "a PNG figure that does not record its smallest text",
    "figure-distorted": "a figure shown at another aspect ratio than drawn",
    "timeout": "a page, its images or MathJax still loading at the time limit",
}


def verdict_source(kind, detail):
    """The rule or check behind one verdict: axe-core's rule id for an axe finding."""
    if kind.startswith("axe-"):
        rule = re.search(r"(?:^|: )([a-z][\w-]*) on \d+ element", detail)
        return (
            f"axe-core rule {rule.group(1) if rule else '?'} ({kind.removeprefix('axe-')} impact)"
        )
    return VERDICT_SOURCES.get(kind, "?")


def verdict_diff(name, expected, problems):
    """One line per verdict of fixture ``name`` that was not expected, or expected and missing."""
    found = {kind for kind, _ in problems}
    lines = []
    for kind, detail in problems:
        if kind not in expected:
            lines.append(f"{name}: EXTRA {kind} from {verdict_source(kind, detail)}: {detail}")
    for kind in sorted(expected - found):
        lines.append(
            f"{name}: MISSING {kind}: {VERDICT_SOURCES.get(kind, '?')} did not fire; "
            f"found instead: {sorted(found) or 'nothing'}"
        )
    return lines


def browser_version(chromium):
    """``chromium --version``'s text, or '?'."""
    import subprocess

    try:
        out = subprocess.run(
            [chromium, "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.strip().removeprefix("Chromium ").split(" ")[0] or "?"


def axe_version(axe):
    """The version of the axe-core at ``axe`` (its package.json, or the script's own text)."""
    if not axe:
        return "off"
    package = Path(axe).parent / "package.json"
    try:
        import json

        return json.loads(package.read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        text = Path(axe).read_text(encoding="utf-8", errors="replace")[:4000]
        found = re.search(r"axe v(\d+\.\d+\.\d+)", text)
        return found.group(1) if found else "?"


def self_test(chromium, axe=DEFAULT_AXE):
    """Build a tiny site with one fault per page and check that exactly those faults are found."""
    mathjax = REPO / "book" / "_static" / "mathjax"
    with tempfile.TemporaryDirectory(prefix="browser-check-site-") as tmp:
        site = Path(tmp)
        (site / "fig.png").write_bytes(png_bytes(120, 60, smallest_text=12))
        (site / "fig2x.png").write_bytes(png_bytes(240, 120, smallest_text=24))
        (site / "wide2x.png").write_bytes(png_bytes(2000, 100, smallest_text=200))
        (site / "lazy.png").write_bytes(png_bytes(80, 40, smallest_text=12))
        # 600 px wide, 9-px text: about 5 px in a phone's column, 9 px enlarged
        (site / "small_text.png").write_bytes(png_bytes(1200, 100, smallest_text=18))
        (site / "unknown_text.png").write_bytes(png_bytes(240, 120))
        shutil.copy(REPO / "book" / "_static" / "figure-zoom.js", site / "figure-zoom.js")
        shutil.copy(REPO / "book" / "_static" / "custom.css", site / "custom.css")
        (site / "corrupt.png").write_bytes(b"this is not a PNG file")
        (site / "style.css").write_text("body { font-family: sans-serif; }\n")
        (site / "app.js").write_text("document.documentElement.dataset.ok = '1';\n")
        shutil.copytree(mathjax, site / "mathjax", ignore=shutil.ignore_patterns("*.md"))
        mathjax_tags = (
            '<script>window.MathJax = {"options": {"processHtmlClass": "math"}}</script>'
            '<script defer src="mathjax/tex-chtml-full.js"></script>'
        )
        shutil.copytree(REPO / "book" / "_static" / "vendor", site / "_static" / "vendor")
        for name, (spec, vendor, expected) in CHART_PAGES.items():
            SELF_TEST_PAGES[name] = (False, chart_page(spec, vendor), expected)
        for name, (_, body, _) in SELF_TEST_PAGES.items():
            head = mathjax_tags if "math" in body and name != "math_unrendered.html" else ""
            (site / name).write_text(
                f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
                "<meta name='viewport' content='width=device-width, "
                f"initial-scale=1'><title>{name}</title>{head}</head><body>"
                f"<article class='bd-article'>{body}</article></body></html>"
            )
        pages = [(name, chapter, chapter) for name, (chapter, _, _) in SELF_TEST_PAGES.items()]
        results = check_site(site, pages, chromium, verbose=False, timeout=120, axe=axe)
    versions = f"Chromium {browser_version(chromium)}, axe-core {axe_version(axe)}"
    print(f"browser check self-test under {versions}")

    wrong = []
    for name, (_, _, expected) in SELF_TEST_PAGES.items():
        found = {kind for kind, _ in results[name]}
        status = "ok" if found == expected else "WRONG"
        print(
            f"self-test {name:26s} expected {sorted(expected) or 'nothing'}, "
            f"found {sorted(found) or 'nothing'}: {status}"
        )
        if found != expected:
            for line in verdict_diff(name, expected, results[name]):
                print(f"    {line}")
                wrong.append(line)
    if wrong:
        print(
            f"browser check self-test: {len(wrong)} verdict(s) differ, under {versions}:\n  "
            + "\n  ".join(wrong)
        )
        raise SystemExit(
            "browser check self-test failed: the checker does not see what it should "
            "(each line above names the fixture, the verdict and the rule or check behind it)"
        )
    print(f"browser check self-test: all {len(SELF_TEST_PAGES)} cases behave as expected")


# --------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", default="_build/html", help="built HTML folder")
    parser.add_argument("--toc", default="_toc.yml", help="the book's _toc.yml")
    parser.add_argument("--screenshots", default=None, help="folder for one PNG per page")
    parser.add_argument(
        "--chromium",
        default=DEFAULT_CHROMIUM,
        help="Chromium executable (default $CHROMIUM or /usr/bin/chromium)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per page")
    parser.add_argument(
        "--axe",
        default=DEFAULT_AXE,
        help="axe-core's axe.min.js (default $AXE_JS or build/axe/...)",
    )
    parser.add_argument(
        "--no-phone", action="store_true", help="skip the second pass on an emulated 390-px phone"
    )
    parser.add_argument(
        "--phone-contrast",
        action="store_true",
        help="run axe's colour rules on the phone too (default: at 1280 px only; "
        "$BROWSER_PHONE_CONTRAST=1 in scripts/check-browser.sh)",
    )
    parser.add_argument(
        "--no-layout",
        action="store_true",
        help="skip the layout checks (overflow, figure size, cell length)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="print the layout checks' failures without failing on them",
    )
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="check a tiny hand-made site with known faults instead",
    )
    parser.add_argument(
        "--shard",
        default="1/1",
        metavar="K/N",
        help="check only the K-th of every N pages of the table of contents (1/2 and 2/2 "
        "in two processes check every page on two cores; scripts/check-browser.sh)",
    )
    args = parser.parse_args(argv)
    shard = re.fullmatch(r"([1-9]\d*)/([1-9]\d*)", args.shard)
    if not shard or int(shard[1]) > int(shard[2]):
        parser.error(f"--shard must be K/N with 1 <= K <= N, got {args.shard!r}")

    if args.self_test:
        self_test(args.chromium, args.axe)
        return 0

    started = time.monotonic()
    pages = toc_pages(args.toc)[int(shard[1]) - 1 :: int(shard[2])]
    results = check_site(
        args.site,
        pages,
        args.chromium,
        args.screenshots,
        args.timeout,
        layout=not args.no_layout,
        report_only=args.report_only,
        axe=args.axe,
        phone=not args.no_phone,
        phone_contrast=args.phone_contrast,
    )
    failed = [p for p, problems in results.items() if problems]
    print(
        (f"shard {args.shard}: " if args.shard != "1/1" else "")
        + f"checked {len(pages)} pages ({sum(ch for _, ch, _ in pages)} chapters, "
        f"{sum(nb for _, _, nb in pages)} notebooks) in {time.monotonic() - started:.1f} s"
        + (f"; screenshots in {args.screenshots}/" if args.screenshots else "")
        + ("; layout checks REPORT ONLY" if args.report_only else "")
    )
    if failed:
        print(f"FAILED: {len(failed)} page(s) with problems: {', '.join(failed)}")
        return 1
    print(
        "every page loads all its assets locally; every chapter shows a figure and the "
        "chapter template"
        + (
            ""
            if args.no_layout or args.report_only
            else "; nothing overflows, figures are sharp and full size"
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
