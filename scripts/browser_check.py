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
  redraw when its first control is moved from the keyboard.

For each page it also prints what the page offers a reader, the bytes it loads,
and the layout measurements, and saves a full-page screenshot.

Every wait is bounded: a browser that hangs fails the check instead of CI.

Usage::

    python scripts/browser_check.py --site _build/html --toc _toc.yml --screenshots _build/screenshots
    python scripts/browser_check.py --self-test   # prove the checker catches each fault
"""

import argparse
import functools
import http.server
import os
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
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio"]
MIN_FIGURE_WIDTH = 50        # px: smaller images are icons, not figures
MAX_SCREENSHOT_HEIGHT = 16000
LAYOUT_WIDTHS = (1280, 1920)
MIN_SIZE_RATIO = 0.8         # rendered / intended width of a figure
MIN_PIXEL_DENSITY = 1.9      # image pixels per CSS pixel of a PNG figure
MAX_CELL_LINES = 20          # lines of a visible code cell
CHART_SELECTOR = ".attention-chart, .vega-embed:not(.attention-chart .vega-embed)"

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
    return [(str(Path(f).with_suffix("")) + ".html", ch,
             (root / Path(f).with_suffix(".ipynb")).is_file()) for f, ch in pages]


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


def check_layout(page, problems):
    """Layout checks at each of LAYOUT_WIDTHS; return one summary line per width."""
    lines = []
    for width in LAYOUT_WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        m = page.evaluate(LAYOUT_JS)
        for text in m["preOver"]:
            problems.append(("overflow", f"{width} px: pre wider than its box: {text!r}"))
        for text in m["eqOver"]:
            problems.append(("overflow", f"{width} px: equation wider than its box: {text!r}"))
        for f in m["figures"]:
            if f["ratio"] < MIN_SIZE_RATIO:
                problems.append(("figure-shrunk", f"{width} px: {f['src']} shown at "
                                 f"{f['ratio']:.2f} of its intended width (< {MIN_SIZE_RATIO})"))
            if not f["svg"] and f["density"] < MIN_PIXEL_DENSITY:
                problems.append(("figure-blurry", f"{width} px: {f['src']} has {f['density']:.2f} "
                                 f"image px per CSS px (< {MIN_PIXEL_DENSITY})"))
        for c in m["cells"]:
            if c["lines"] > MAX_CELL_LINES and width == LAYOUT_WIDTHS[0]:
                problems.append(("long-cell", f"visible code cell of {c['lines']} lines "
                                 f"(> {MAX_CELL_LINES}): {c['text']!r}"))
        longest = max(m["cells"], key=lambda c: c["lines"], default=None)
        ratios = " ".join(f"{f['ratio']:.2f}" + ("" if f["svg"] else f"/x{f['density']:.1f}")
                          for f in m["figures"])
        lines.append(f"{width} px: pre {m['pres']} checked, {len(m['preOver'])} overflow; "
                     f"equations {m['equations']} checked, {len(m['eqOver'])} overflow; "
                     f"figures {len(m['figures'])} (size ratio/px density: {ratios or '-'}); "
                     f"longest visible cell {longest['lines'] if longest else 0} lines")
    page.set_viewport_size({"width": LAYOUT_WIDTHS[0], "height": 900})
    return lines


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
        for j in range(min(marks.count(), 40)):   # the first marks with a box
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
        for selector in ("input[type=range]", "input[type=radio]:checked",
                         "input[type=checkbox]", "select"):   # the control to move
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
            problems.append(("chart-static", f"{name}: moving its {kind} control "
                             "(keyboard) did not change the chart"))
        lines.append(f"{name}: drawn, {tooltip}, {kind} control "
                     f"{'redraws' if before != after else 'changes NOTHING'}")
    return lines


def check_page(context, url, base, is_chapter, is_notebook, screenshot=None,
               timeout=60.0, layout=True):
    """Load ``url`` in a fresh tab; return ``(problems, report)``.

    ``problems`` is a list of ``(kind, detail)``; ``report`` describes the page.
    """
    started = time.monotonic()
    problems, finished, exceptions = [], [], []
    page = context.new_page()
    page.set_default_timeout(timeout * 1000)
    local = lambda u: u.startswith(base)
    where = lambda u: u.replace(base, "/", 1)
    page.on("pageerror", lambda e: exceptions.append(str(e).splitlines()[0]))
    page.on("requestfinished", lambda r: finished.append(r))

    def on_response(r):
        if local(r.url) and r.status >= 400 and where(r.url) != "/favicon.ico":
            problems.append(("failed-request", f"{r.request.resource_type} {where(r.url)}: "
                             f"HTTP {r.status}"))

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
            problems.append(("timeout", f"the network was still busy {timeout / 2:.0f} s after load"))
        info = page.evaluate(INSPECT_PAGE_JS, min(20000, int(timeout * 1000 / 3)))
        if screenshot is not None:   # before the checks below resize, hover and type
            height = page.evaluate("document.documentElement.scrollHeight")
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=screenshot, full_page=True, clip={
                "x": 0, "y": 0, "width": LAYOUT_WIDTHS[0],
                "height": min(max(height, 900), MAX_SCREENSHOT_HEIGHT)})
        report["layout"] = check_layout(page, problems) if layout and is_notebook else []
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
        if img["inArticle"] and (not alt or alt == name or alt.endswith(name) or alt.lower()
                                 .endswith((".png", ".svg", ".jpg", ".jpeg", ".gif"))):
            problems.append(("missing-alt", f"{src} has alt {img['alt']!r}"))
    if info["mathUnrendered"]:
        problems.append(("math-not-rendered", f"{info['mathUnrendered']} of {info['mathCount']} "
                         "equations not rendered by MathJax"))
    problems += [("math-error", err) for err in info["mathErrors"]]
    problems += [("script-error", exc) for exc in exceptions]
    figures = [i for i in info["images"]
               if i["figure"] and i["inArticle"] and i["width"] >= MIN_FIGURE_WIDTH]
    if is_chapter and not figures:
        problems.append(("no-figure", "chapter page renders no figure"))
    if is_chapter:  # what every chapter promises a reader (the book's chapter template)
        missing = [what for what, present in [
            ("an opening 'what you will learn / what you need' box", info["openingBox"]),
            ("a Summary section", info["summary"]), ("an Exercises section", info["exercises"]),
            ("a foldable solution", info["foldables"] > 0),
            ("a link to the notation page", info["notationLinks"] > 0),
            ("a link to another chapter", info["chapterLinks"] > 0),
            ("a citation", info["citations"] > 0)] if not present]
        if missing:
            problems.append(("chapter-structure", "chapter has no " + ", no ".join(missing)))
    yes = lambda flag: "yes" if flag else "no"
    report.update(seconds=time.monotonic() - started, requests=len(finished), offers=(
        f"opening box {yes(info['openingBox'])}, summary {yes(info['summary'])}, "
        f"exercises {yes(info['exercises'])}; {len(figures)} figures, {info['mathCount']} "
        f"equations, {info['citations']} citations, {info['notationLinks']} links to notation, "
        f"{info['chapterLinks']} links to chapters, {info['foldables']} foldable blocks; "
        f"Binder {yes(info['binder'])}, Colab {yes(info['colab'])}, .ipynb download "
        f"{yes(info['ipynbDownload'])}, edit {yes(info['editLink'])}, issue {yes(info['issueLink'])}"))
    return problems, report


LAYOUT_KINDS = {"overflow", "figure-shrunk", "figure-blurry", "long-cell"}


def check_site(site, pages, chromium, screenshots=None, timeout=60.0, verbose=True,
               layout=True, report_only=False):
    """Check ``pages`` (``[(html path, is_chapter, is_notebook)]``) of the site in ``site``.

    Returns ``{page: problems}``; with ``report_only`` layout problems are
    printed but not returned.
    """
    site = Path(site)
    missing = [p for p, _, _ in pages if not (site / p).is_file()]
    if missing:
        raise SystemExit(f"the built site {site} has no {', '.join(missing)}: "
                         "build the book first (bash scripts/build-book.sh)")
    if not Path(chromium).is_file():
        raise SystemExit(f"no Chromium at {chromium}: install Debian's package `chromium` "
                         "(apt-get install chromium; scripts/check-browser.sh does it), "
                         "or pass --chromium PATH")
    server, base = serve(site)
    results = {}
    blocked = {}          # page -> URLs outside the local server it asked for

    def route(r):
        if r.request.url.startswith(base):
            r.continue_()
        else:
            blocked.setdefault(current, []).append(r.request.url)
            r.abort("blockedbyclient")

    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS,
                                         timeout=30000)
            context = browser.new_context(viewport={"width": LAYOUT_WIDTHS[0], "height": 900})
            context.route("**/*", route)
            if verbose:
                print(f"serving {site} at {base}; Chromium {browser.version}")
            for current, is_chapter, is_notebook in pages:
                shot = (Path(screenshots) / (current.replace("/", "__").removesuffix(".html")
                                             + ".png")) if screenshots else None
                problems, report = check_page(context, base + current, base, is_chapter,
                                              is_notebook, shot, timeout, layout)
                problems += [("needs-network", f"blocked request for {u}")
                             for u in blocked.get(current, [])]
                shown = [(k, d, report_only and k in LAYOUT_KINDS) for k, d in problems]
                results[current] = [(k, d) for k, d, warn in shown if not warn]
                if verbose:
                    bad = len(results[current])
                    label = "chapter" if is_chapter else "page"
                    print(f"{current:40s} {label:7s} "
                          + (f"{report['seconds']:5.1f} s {report['requests']:4d} requests "
                             f"{report['bytes']:10,d} bytes  " if report else "")
                          + ("ok" if not bad else f"{bad} problem(s)"))
                    if report:
                        print(f"    offers: {report['offers']}")
                        for line in report["layout"] + report["charts"]:
                            print(f"    {line}")
                    for kind, detail, warn in shown:
                        print(f"    {'REPORT' if warn else 'FAIL'} [{kind}] {detail}")
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return results


# --------------------------------------------------------------------------
# Self-test: a hand-made site with one fault per page


def png_bytes(width, height):
    """A small valid greyscale PNG (a horizontal ramp), made with the standard library."""
    rows = b"".join(b"\x00" + bytes((x * 255 // max(width - 1, 1)) for x in range(width))
                    for _ in range(height))

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


# Everything a chapter must offer besides a figure (see check_page).
CHAPTER_PARTS = """
        <div class="admonition"><p class="admonition-title">In this chapter</p><p>What you will learn</p></div>
        <p>See the <a href="notation.html">notation</a>, <a href="01_intro.html">chapter 1</a>
        and <a href="references.html#id1">[Someone, 2020]</a>.</p>
        <h2>Summary</h2><p>Done.</p><h2>Exercises</h2>
        <details><summary>Solution</summary><p>42</p></details>"""
FIGURE = ('<figure><img src="fig2x.png" style="width: 120px; height: 60px" alt="A grey ramp">'
          '<figcaption>A figure</figcaption></figure>')
CELL = '<div class="cell_input"><pre>{}</pre></div>'

SELF_TEST_PAGES = {
    # page: (is_chapter, body, expected problem kinds); chapters get the layout checks
    "good.html": (True, CHAPTER_PARTS + FIGURE + CELL.format("x = 1\n" * 20) + """
        <link rel="stylesheet" href="style.css"><script src="app.js"></script>
        <p>Inline <span class="math notranslate nohighlight">\\(\\alpha_{ij} = \\frac{a}{b}\\)</span>.</p>
        <img src="lazy.png" alt="A lazily loaded ramp" loading="lazy" style="margin-top:3000px">""", set()),
    "chapter_missing_parts.html": (True, FIGURE + "<h2>Summary</h2>", {"chapter-structure"}),
    "plain_page.html": (False, "<p>Not a chapter: needs no figure.</p>", set()),
    "missing_image.html": (False, """<figure><img src="fig.png" alt="ok"></figure>
        <figure><img src="missing.png" alt="A figure that is not there"></figure>""",
                           {"failed-request", "broken-image"}),
    "corrupt_image.html": (False, """<figure><img src="fig.png" alt="ok"></figure>
        <img src="corrupt.png" alt="Bytes that are not an image">""", {"broken-image"}),
    "missing_script.html": (False, '<script src="missing.js"></script>', {"failed-request"}),
    "missing_stylesheet.html": (False, '<link rel="stylesheet" href="missing.css">', {"failed-request"}),
    "missing_font.html": (False, """<style>@font-face { font-family: Gone; src: url(gone.woff) format('woff'); }
        p { font-family: Gone; }</style><p>Text in a font that is not there.</p>""", {"failed-request"}),
    "no_figure.html": (True, CHAPTER_PARTS + "<p>A chapter without a figure.</p>", {"no-figure"}),
    "no_alt.html": (False, '<figure><img src="fig.png" alt="fig.png"></figure>', {"missing-alt"}),
    "script_error.html": (False, "<script>undefinedFunction();</script>", {"script-error"}),
    "needs_network.html": (False, '<script src="https://cdn.invalid/lib.js"></script>', {"needs-network"}),
    "fetches_network.html": (False, "<script>fetch('https://example.invalid/data.json')"
                             ".catch(() => {});</script>", {"needs-network"}),
    "math_unrendered.html": (False, '<span class="math notranslate nohighlight">\\(x\\)</span>',
                             {"math-not-rendered"}),
    "math_error.html": (False, """<span class="math notranslate nohighlight">\\(\\frac{a}\\)</span>""",
                        {"math-error"}),
    "overflowing_pre.html": (True, CHAPTER_PARTS + FIGURE + CELL.format("y = " + "1 + " * 200),
                             {"overflow"}),
    "shrunk_figure.html": (True, CHAPTER_PARTS + '<figure style="width:600px">'
                           '<img src="wide2x.png" width="1000" style="max-width:100%" '
                           'alt="A wide ramp squeezed into a narrow column"></figure>',
                           {"figure-shrunk"}),
    "blurry_figure.html": (True, CHAPTER_PARTS + '<figure><img src="fig.png" '
                           'alt="A ramp with one pixel per CSS pixel"></figure>', {"figure-blurry"}),
    "long_cell.html": (True, CHAPTER_PARTS + FIGURE + CELL.format("x = 1\n" * 25), {"long-cell"}),
}


def chart_page(spec, vendor="_static/vendor/"):
    """A page with one chart, rendered as attention_lib.interactive.show renders it."""
    sys.path.insert(0, str(REPO))
    from attention_lib.interactive import chart_html

    return chart_html(type("Spec", (), {"to_dict": lambda self: spec})(), static_path=vendor)


def chart_spec(mark="bar", tooltip=True, height="datum.v * k"):
    """A three-bar Vega-Lite chart whose slider ``k`` feeds ``height``."""
    return {"$schema": "https://vega.github.io/schema/vega-lite/v6.json",
            "data": {"values": [{"x": 0, "v": 1}, {"x": 1, "v": 2}, {"x": 2, "v": 3}]},
            "params": [{"name": "k", "value": 1,
                        "bind": {"input": "range", "min": 1, "max": 5, "step": 1}}],
            "transform": [{"calculate": height, "as": "h"}],
            "mark": {"type": mark, "tooltip": tooltip},
            "encoding": {"x": {"field": "x", "type": "ordinal"},
                         "y": {"field": "h", "type": "quantitative", "scale": {"domain": [0, 20]}}}}


CHART_PAGES = {
    # page: (spec, vendored scripts' folder, expected problem kinds)
    "chart_good.html": (chart_spec(), "_static/vendor/", set()),
    "chart_broken.html": (chart_spec(mark="nonsense"), "_static/vendor/", {"chart-not-rendered"}),
    "chart_no_tooltip.html": (chart_spec(tooltip=False), "_static/vendor/", {"chart-no-tooltip"}),
    "chart_static.html": (chart_spec(height="datum.v"), "_static/vendor/", {"chart-static"}),
    "chart_not_vendored.html": (chart_spec(), "_static/missing/",
                                {"failed-request", "needs-network", "chart-not-rendered"}),
}


def self_test(chromium):
    """Build a tiny site with one fault per page and check that exactly those faults are found."""
    mathjax = REPO / "book" / "_static" / "mathjax"
    with tempfile.TemporaryDirectory(prefix="browser-check-site-") as tmp:
        site = Path(tmp)
        (site / "fig.png").write_bytes(png_bytes(120, 60))
        (site / "fig2x.png").write_bytes(png_bytes(240, 120))
        (site / "wide2x.png").write_bytes(png_bytes(2000, 100))
        (site / "lazy.png").write_bytes(png_bytes(80, 40))
        (site / "corrupt.png").write_bytes(b"this is not a PNG file")
        (site / "style.css").write_text("body { font-family: sans-serif; }\n")
        (site / "app.js").write_text("document.documentElement.dataset.ok = '1';\n")
        shutil.copytree(mathjax, site / "mathjax", ignore=shutil.ignore_patterns("*.md"))
        mathjax_tags = ('<script>window.MathJax = {"options": {"processHtmlClass": "math"}}</script>'
                        '<script defer src="mathjax/tex-chtml-full.js"></script>')
        shutil.copytree(REPO / "book" / "_static" / "vendor", site / "_static" / "vendor")
        for name, (spec, vendor, expected) in CHART_PAGES.items():
            SELF_TEST_PAGES[name] = (False, chart_page(spec, vendor), expected)
        for name, (_, body, _) in SELF_TEST_PAGES.items():
            head = mathjax_tags if "math" in body and name != "math_unrendered.html" else ""
            (site / name).write_text(f"<!doctype html><html><head><meta charset='utf-8'>"
                                     f"<title>{name}</title>{head}</head><body>"
                                     f"<article class='bd-article'>{body}</article></body></html>")
        pages = [(name, chapter, chapter) for name, (chapter, _, _) in SELF_TEST_PAGES.items()]
        results = check_site(site, pages, chromium, verbose=False, timeout=60)

    wrong = []
    for name, (_, _, expected) in SELF_TEST_PAGES.items():
        found = {kind for kind, _ in results[name]}
        status = "ok" if found == expected else "WRONG"
        print(f"self-test {name:26s} expected {sorted(expected) or 'nothing'}, "
              f"found {sorted(found) or 'nothing'}: {status}")
        if found != expected:
            wrong.append(name)
            for kind, detail in results[name]:
                print(f"    [{kind}] {detail}")
    if wrong:
        raise SystemExit(f"browser check self-test failed on {', '.join(wrong)}: "
                         "the checker does not see what it should")
    print(f"browser check self-test: all {len(SELF_TEST_PAGES)} cases behave as expected")


# --------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", default="_build/html", help="built HTML folder")
    parser.add_argument("--toc", default="_toc.yml", help="the book's _toc.yml")
    parser.add_argument("--screenshots", default=None, help="folder for one PNG per page")
    parser.add_argument("--chromium", default=DEFAULT_CHROMIUM,
                        help="Chromium executable (default $CHROMIUM or /usr/bin/chromium)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per page")
    parser.add_argument("--no-layout", action="store_true",
                        help="skip the layout checks (overflow, figure size, cell length)")
    parser.add_argument("--report-only", action="store_true",
                        help="print the layout checks' failures without failing on them")
    parser.add_argument("--self-test", action="store_true",
                        help="check a tiny hand-made site with known faults instead")
    args = parser.parse_args(argv)

    if args.self_test:
        self_test(args.chromium)
        return 0

    started = time.monotonic()
    pages = toc_pages(args.toc)
    results = check_site(args.site, pages, args.chromium, args.screenshots, args.timeout,
                         layout=not args.no_layout, report_only=args.report_only)
    failed = [p for p, problems in results.items() if problems]
    print(f"checked {len(pages)} pages ({sum(ch for _, ch, _ in pages)} chapters, "
          f"{sum(nb for _, _, nb in pages)} notebooks) in {time.monotonic() - started:.1f} s"
          + (f"; screenshots in {args.screenshots}/" if args.screenshots else "")
          + ("; layout checks REPORT ONLY" if args.report_only else ""))
    if failed:
        print(f"FAILED: {len(failed)} page(s) with problems: {', '.join(failed)}")
        return 1
    print("every page loads all its assets locally; every chapter shows a figure and the "
          "chapter template" + ("" if args.no_layout or args.report_only else
                                "; nothing overflows, figures are sharp and full size"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
