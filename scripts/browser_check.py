"""Open every page of the built book in headless Chromium and report what a reader would see broken.

The site is served by Python's ``http.server`` on 127.0.0.1 (a free port), and
Chromium is driven over the Chrome DevTools Protocol (a websocket, through the
``websocket-client`` package). Unlike ``chromium --dump-dom``, the protocol
reports every request the page makes, so a failed load is seen, not guessed.

A page fails when:

* a request for a local file (the page, an image, script, stylesheet, font, ...)
  fails or gets an HTTP error;
* the page asks the network for a script, stylesheet, image or font: the site
  must carry its own assets (MathJax is vendored in book/_static/mathjax);
* an ``<img>`` did not decode (``naturalWidth == 0``);
* an equation was not rendered by MathJax, or MathJax reports a TeX error;
* a script throws an uncaught exception;
* an image in the text has no alt text (none, empty, or just its file name);
* it is a chapter (a page in a *numbered* part of ``_toc.yml``) and shows no
  rendered figure (an image at least 50 px wide in a ``<figure>`` or a cell
  output), or lacks a part of the chapter template: an opening "what you will
  learn / what you need" box, a Summary and an Exercises section, a foldable
  solution, a link to the notation page, a link to another chapter, a citation.

For each page it also lists what the page offers a reader (figures, equations,
citations, links to the notation page and to chapters, foldable solutions,
launch and download buttons) and saves a full-page screenshot.

Every wait is bounded: a browser that hangs fails the check instead of CI.

Usage::

    python scripts/browser_check.py --site _build/html --toc _toc.yml --screenshots _build/screenshots
    python scripts/browser_check.py --self-test   # prove the checker catches each fault
"""

import argparse
import base64
import functools
import http.server
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from pathlib import Path

try:
    import websocket  # the websocket-client package (requirements-test.txt)
except ImportError:  # pragma: no cover - said plainly instead of a traceback
    sys.exit("browser_check.py needs the websocket-client package: "
             "pip install -r requirements-test.txt")

REPO = Path(__file__).resolve().parents[1]

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
    "--window-size=1280,900", "--remote-debugging-port=0",
]
ASSET_TYPES = {"Script", "Stylesheet", "Image", "Font", "Media"}
MIN_FIGURE_WIDTH = 50        # px: smaller images are icons, not figures
MAX_SCREENSHOT_HEIGHT = 16000

# Runs in the page once it has loaded: makes lazy images load, waits (bounded)
# for images and for MathJax's first typeset, then describes the page.
INSPECT_PAGE_JS = r"""
(async (timeoutMs) => {
  const sleep = (ms, v) => new Promise(r => setTimeout(() => r(v), ms));
  for (const img of document.images) if (img.loading === 'lazy') img.loading = 'eager';
  const imagesDone = Promise.all(Array.from(document.images, img => img.complete ? null :
      new Promise(r => { img.addEventListener('load', r, {once: true});
                         img.addEventListener('error', r, {once: true}); })));
  const mj = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
  const waited = await Promise.race([
      Promise.all([imagesDone, mj || null]).then(() => 'ok'), sleep(timeoutMs, 'timeout')]);
  const article = document.querySelector('.bd-article') || document.body;
  const isFigure = img => !!img.closest('figure, .cell_output, .output');
  const images = Array.from(document.images, img => ({
      src: img.currentSrc || img.src, width: img.naturalWidth, complete: img.complete,
      alt: img.getAttribute('alt'), inArticle: article.contains(img), figure: isFigure(img)}));
  const maths = Array.from(document.querySelectorAll('.math'));
  const links = Array.from(article.querySelectorAll('a[href]'), a => a.getAttribute('href'));
  const allLinks = Array.from(document.querySelectorAll('a[href]'), a => a.href);
  const hasLink = re => allLinks.some(h => re.test(h));
  const text = el => (el.textContent || '').trim().toLowerCase();
  const admonitionTitles = Array.from(article.querySelectorAll('.admonition-title, summary, .sd-summary-title'), text);
  const headings = Array.from(article.querySelectorAll('h2, h3'), text);
  const firstBox = article.querySelector('.admonition');
  return {
    waited, title: document.title,
    images,
    mathCount: maths.length,
    mathUnrendered: maths.filter(m => !m.querySelector('mjx-container')).length,
    mathErrors: Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'),
                           e => e.getAttribute('data-mjx-error') || text(e)).slice(0, 5),
    citations: article.querySelectorAll('a[href*="references.html#"], a.bibtex, span.bibtex a').length,
    notationLinks: links.filter(h => /(^|\/)notation\.html/.test(h)).length,
    chapterLinks: links.filter(h => /(^|\/)\d\d_[\w-]+\.html/.test(h)).length,
    foldables: article.querySelectorAll('details, .dropdown, .toggle, .toggle-details').length,
    admonitionTitles,
    openingBox: !!firstBox && /learn|need/.test(text(firstBox)),
    summary: headings.some(h => /summary/.test(h)),
    exercises: headings.some(h => /exercise/.test(h)),
    binder: hasLink(/mybinder\.org\/v2\//), colab: hasLink(/colab\.research\.google\.com\//),
    ipynbDownload: hasLink(/_sources\/.*\.ipynb$/), editLink: hasLink(/\/edit\//),
    issueLink: hasLink(/\/issues\/new/),
  };
})
"""


# --------------------------------------------------------------------------
# The site: which pages, and a local server for them


def toc_pages(toc_file):
    """Return ``[(html_path, is_chapter), ...]`` for the pages listed in ``_toc.yml``.

    A chapter is a page in a part marked ``numbered: true``.
    """
    import yaml  # PyYAML comes with jupyter-book

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
    return [(str(Path(f).with_suffix("")) + ".html", ch) for f, ch in pages]


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
# Chromium over the DevTools protocol


class BrowserError(RuntimeError):
    """The browser did not start, answer or finish in time."""


class Browser:
    """A headless Chromium with one websocket to its browser target."""

    def __init__(self, chromium, timeout=30.0):
        if not Path(chromium).exists():
            raise BrowserError(f"no Chromium at {chromium}: run scripts/check-browser.sh, "
                               "which installs Debian's chromium, or pass --chromium PATH")
        self.profile = Path(tempfile.mkdtemp(prefix="browser-check-profile-"))
        self.log = open(self.profile.parent / (self.profile.name + ".log"), "w+b")
        self.proc = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        self.next_id = 0
        self.events = []           # (sessionId, method, params) not yet consumed
        try:
            port_file = self.profile / "DevToolsActivePort"
            deadline = time.monotonic() + timeout
            while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise BrowserError("Chromium did not start (no DevToolsActivePort after "
                                       f"{timeout:.0f} s); its log:\n{self._log_tail()}")
                time.sleep(0.05)
            port, path = port_file.read_text().split()[:2]
            self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}",
                                                  timeout=timeout, suppress_origin=True)
            self.version = self.call("Browser.getVersion", timeout=timeout)["product"]
        except BaseException:
            self.close()
            raise

    def _log_tail(self, n=2000):
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-n:]

    def _receive(self, timeout):
        """One message from the browser, or None if none came within ``timeout`` s."""
        self.ws.settimeout(max(timeout, 0.001))
        try:
            return json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            return None
        except (websocket.WebSocketException, OSError) as exc:
            raise BrowserError(f"lost the connection to Chromium ({exc}); its log:\n"
                               f"{self._log_tail()}") from exc

    def call(self, method, params=None, session=None, timeout=30.0):
        """Send one command and wait (at most ``timeout`` s) for its answer."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError(f"Chromium did not answer {method} within {timeout:.0f} s")
            msg = self._receive(remaining)
            if msg is None:
                continue
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise BrowserError(f"{method} failed: {msg['error'].get('message')}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append((msg.get("sessionId"), msg["method"], msg.get("params", {})))

    def pump(self, timeout):
        """Collect events for up to ``timeout`` s (returns early once one arrives)."""
        msg = self._receive(timeout)
        if msg is not None and "method" in msg:
            self.events.append((msg.get("sessionId"), msg["method"], msg.get("params", {})))

    def take_events(self, session):
        mine = [(m, p) for s, m, p in self.events if s == session]
        self.events = [e for e in self.events if e[0] != session]
        return mine

    def close(self):
        try:
            if getattr(self, "ws", None):
                try:
                    self.ws.send(json.dumps({"id": 0, "method": "Browser.close"}))
                except Exception:
                    pass
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
            self.log.close()
            Path(self.log.name).unlink(missing_ok=True)
            shutil.rmtree(self.profile, ignore_errors=True)


# --------------------------------------------------------------------------
# Checking one page


def check_page(browser, url, base, is_chapter, screenshot=None, timeout=60.0):
    """Load ``url`` in a fresh tab; return ``(problems, report)``.

    ``problems`` is a list of ``(kind, detail)``; ``report`` describes the page.
    """
    started = time.monotonic()
    deadline = started + timeout
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget",
                           {"targetId": target, "flatten": True})["sessionId"]
    problems = []
    requests = {}                  # requestId -> {"url", "type", "status", "error", "done"}
    exceptions = []
    loaded = False

    def absorb():
        nonlocal loaded
        for method, p in browser.take_events(session):
            if method == "Network.requestWillBeSent":
                requests[p["requestId"]] = {"url": p["request"]["url"], "type": p.get("type", ""),
                                            "status": None, "error": None, "done": False}
            elif method == "Network.responseReceived" and p["requestId"] in requests:
                requests[p["requestId"]]["status"] = p["response"]["status"]
                requests[p["requestId"]]["type"] = p.get("type", requests[p["requestId"]]["type"])
            elif method == "Network.loadingFinished" and p["requestId"] in requests:
                requests[p["requestId"]]["done"] = True
            elif method == "Network.loadingFailed" and p["requestId"] in requests:
                r = requests[p["requestId"]]
                r["done"] = True
                r["error"] = p.get("blockedReason") or p.get("errorText") or "failed"
                r["canceled"] = p.get("canceled", False)
            elif method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                desc = (d.get("exception") or {}).get("description") or d.get("text", "")
                exceptions.append(f"{desc.splitlines()[0] if desc else 'exception'} "
                                  f"({d.get('url', '') or 'inline'}:{d.get('lineNumber', 0) + 1})")
            elif method == "Page.loadEventFired":
                loaded = True

    try:
        for domain in ("Network", "Page", "Runtime"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Page.navigate", {"url": url}, session=session)

        # Wait for the load event, then for the network to stay quiet for 0.5 s.
        quiet_since = None
        while True:
            absorb()
            pending = [r["url"] for r in requests.values()
                       if not r["done"] and not r["url"].startswith("data:")]
            now = time.monotonic()
            if loaded and not pending:
                quiet_since = quiet_since or now
                if now - quiet_since >= 0.5:
                    break
            else:
                quiet_since = None
            if now > deadline:
                problems.append(("timeout", f"page did not finish loading within {timeout:.0f} s; "
                                            f"still waiting for {pending[:5]}"))
                break
            browser.pump(0.1)

        remaining_ms = max(1000, int((deadline - time.monotonic()) * 1000))
        result = browser.call("Runtime.evaluate", {
            "expression": f"({INSPECT_PAGE_JS})({min(remaining_ms, 20000)})",
            "awaitPromise": True, "returnByValue": True},
            session=session, timeout=max(5.0, deadline - time.monotonic() + 5))
        if "exceptionDetails" in result:
            raise BrowserError(f"inspecting {url} failed: {result['exceptionDetails']}")
        page = result["result"]["value"]
        absorb()

        if screenshot is not None:
            # Make the viewport as tall as the page (sticky sidebars stay put),
            # then photograph it.
            metrics = browser.call("Page.getLayoutMetrics", session=session)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            height = min(max(int(size["height"]), 900), MAX_SCREENSHOT_HEIGHT)
            browser.call("Emulation.setDeviceMetricsOverride",
                         {"width": 1280, "height": height, "deviceScaleFactor": 1,
                          "mobile": False}, session=session)
            shot = browser.call("Page.captureScreenshot", {"format": "png"},
                                session=session, timeout=60)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
    finally:
        try:
            browser.call("Target.closeTarget", {"targetId": target}, timeout=10)
        except BrowserError:
            pass
        browser.take_events(session)

    # ---- judge what was seen
    for r in requests.values():
        where = r["url"].replace(base, "/", 1) if r["url"].startswith(base) else r["url"]
        kind = (r["type"] or "request").lower()
        if where == "/favicon.ico" and r["type"] == "Other":
            continue               # the browser's own probe when a page names no icon
        if r["url"].startswith(base):
            if r["error"] and not r.get("canceled"):
                problems.append(("failed-request", f"{kind} {where}: {r['error']}"))
            elif r["status"] is not None and r["status"] >= 400:
                problems.append(("failed-request", f"{kind} {where}: HTTP {r['status']}"))
        elif r["url"].startswith(("http:", "https:")) and r["type"] in ASSET_TYPES:
            problems.append(("needs-network", f"{kind} {where}"))
    if page["waited"] != "ok":
        problems.append(("timeout", "images or MathJax still loading after the time limit"))
    for img in page["images"]:
        if img["width"] == 0:
            problems.append(("broken-image", f"{img['src'].replace(base, '/', 1)} did not decode"))
    for img in page["images"]:
        alt = (img["alt"] or "").strip()
        name = img["src"].rsplit("/", 1)[-1]
        if img["inArticle"] and (not alt or alt == name or alt.endswith(name)
                                 or alt.lower().endswith((".png", ".svg", ".jpg", ".jpeg", ".gif"))):
            problems.append(("missing-alt", f"{img['src'].replace(base, '/', 1)} has alt {img['alt']!r}"))
    if page["mathUnrendered"]:
        problems.append(("math-not-rendered",
                         f"{page['mathUnrendered']} of {page['mathCount']} equations not rendered by MathJax"))
    for err in page["mathErrors"]:
        problems.append(("math-error", err))
    for exc in exceptions:
        problems.append(("script-error", exc))
    figures = [i for i in page["images"]
               if i["figure"] and i["inArticle"] and i["width"] >= MIN_FIGURE_WIDTH]
    if is_chapter and not figures:
        problems.append(("no-figure", "chapter page renders no figure"))
    if is_chapter:
        # What every chapter promises a reader (the book's chapter template).
        missing = [what for what, present in [
            ("an opening 'what you will learn / what you need' box", page["openingBox"]),
            ("a Summary section", page["summary"]),
            ("an Exercises section", page["exercises"]),
            ("a foldable solution", page["foldables"] > 0),
            ("a link to the notation page", page["notationLinks"] > 0),
            ("a link to another chapter", page["chapterLinks"] > 0),
            ("a citation", page["citations"] > 0)] if not present]
        if missing:
            problems.append(("chapter-structure", "chapter has no " + ", no ".join(missing)))

    report = {
        "seconds": round(time.monotonic() - started, 2),
        "requests": len(requests),
        "figures": len(figures),
        "figures_with_alt": sum(1 for i in figures if (i["alt"] or "").strip()),
        "equations": page["mathCount"],
        "citations": page["citations"],
        "links_to_notation": page["notationLinks"],
        "links_to_chapters": page["chapterLinks"],
        "foldable_blocks": page["foldables"],
        "admonitions": page["admonitionTitles"],
        "opening_box": page["openingBox"], "summary": page["summary"],
        "exercises": page["exercises"],
        "binder": page["binder"], "colab": page["colab"],
        "ipynb_download": page["ipynbDownload"],
        "edit_link": page["editLink"], "issue_link": page["issueLink"],
    }
    return problems, report


def describe(report):
    yes = lambda flag: "yes" if flag else "no"
    return (f"opening 'what you will learn / need' box {yes(report['opening_box'])}, "
            f"summary {yes(report['summary'])}, exercises {yes(report['exercises'])}; "
            f"{report['figures']} figures ({report['figures_with_alt']} with alt text), "
            f"{report['equations']} equations, {report['citations']} citations, "
            f"{report['links_to_notation']} links to notation, "
            f"{report['links_to_chapters']} links to chapters, "
            f"{report['foldable_blocks']} foldable blocks; "
            f"Binder {yes(report['binder'])}, Colab {yes(report['colab'])}, "
            f".ipynb download {yes(report['ipynb_download'])}, edit {yes(report['edit_link'])}, "
            f"issue {yes(report['issue_link'])}")


def check_site(site, pages, chromium, screenshots=None, timeout=60.0, verbose=True):
    """Check ``pages`` (``[(relative html path, is_chapter)]``) of the site in ``site``.

    Returns ``{page: (problems, report)}``.
    """
    site = Path(site)
    missing = [p for p, _ in pages if not (site / p).is_file()]
    if missing:
        raise SystemExit(f"the built site {site} has no {', '.join(missing)}: "
                         "build the book first (bash scripts/build-book.sh)")
    server, base = serve(site)
    browser = Browser(chromium)
    results = {}
    try:
        if verbose:
            print(f"serving {site} at {base}; {browser.version}")
        for page, is_chapter in pages:
            shot = Path(screenshots) / (page.replace("/", "__").removesuffix(".html") + ".png") \
                if screenshots else None
            problems, report = check_page(browser, base + page, base, is_chapter, shot, timeout)
            results[page] = (problems, report)
            if verbose:
                status = "ok" if not problems else f"{len(problems)} problem(s)"
                label = "chapter" if is_chapter else "page"
                print(f"{page:40s} {label:7s} {report['seconds']:5.1f} s  {status}")
                print(f"    offers: {describe(report)}")
                for kind, detail in problems:
                    print(f"    FAIL [{kind}] {detail}")
    finally:
        browser.close()
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

SELF_TEST_PAGES = {
    # page: (is_chapter, body, expected problem kinds)
    "good.html": (True, CHAPTER_PARTS + """<link rel="stylesheet" href="style.css"><script src="app.js"></script>
        <figure><img src="fig.png" alt="A grey ramp"><figcaption>A figure</figcaption></figure>
        <p>Inline <span class="math notranslate nohighlight">\\(\\alpha_{ij} = \\frac{a}{b}\\)</span>.</p>
        <img src="lazy.png" alt="A lazily loaded ramp" loading="lazy" style="margin-top:3000px">""", set()),
    "chapter_missing_parts.html": (True, """<figure><img src="fig.png" alt="A grey ramp"></figure>
        <h2>Summary</h2>""", {"chapter-structure"}),
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
    "math_unrendered.html": (False, '<span class="math notranslate nohighlight">\\(x\\)</span>',
                             {"math-not-rendered"}),
    "math_error.html": (False, """<span class="math notranslate nohighlight">\\(\\frac{a}\\)</span>""",
                        {"math-error"}),
}


def self_test(chromium):
    """Build a tiny site with one fault per page and check that exactly those faults are found."""
    mathjax = REPO / "book" / "_static" / "mathjax"
    with tempfile.TemporaryDirectory(prefix="browser-check-site-") as tmp:
        site = Path(tmp)
        (site / "fig.png").write_bytes(png_bytes(120, 60))
        (site / "lazy.png").write_bytes(png_bytes(80, 40))
        (site / "corrupt.png").write_bytes(b"this is not a PNG file")
        (site / "style.css").write_text("body { font-family: sans-serif; }\n")
        (site / "app.js").write_text("document.documentElement.dataset.ok = '1';\n")
        shutil.copytree(mathjax, site / "mathjax", ignore=shutil.ignore_patterns("*.md"))
        mathjax_tags = ('<script>window.MathJax = {"options": {"processHtmlClass": "math"}}</script>'
                        '<script defer src="mathjax/tex-chtml-full.js"></script>')
        for name, (_, body, _) in SELF_TEST_PAGES.items():
            head = mathjax_tags if "math" in body and name != "math_unrendered.html" else ""
            (site / name).write_text(f"<!doctype html><html><head><meta charset='utf-8'>"
                                     f"<title>{name}</title>{head}</head><body>"
                                     f"<article class='bd-article'>{body}</article></body></html>")
        pages = [(name, chapter) for name, (chapter, _, _) in SELF_TEST_PAGES.items()]
        results = check_site(site, pages, chromium, verbose=False, timeout=30)

    wrong = []
    for name, (_, _, expected) in SELF_TEST_PAGES.items():
        problems, _ = results[name]
        found = {kind for kind, _ in problems}
        status = "ok" if found == expected else "WRONG"
        print(f"self-test {name:24s} expected {sorted(expected) or 'nothing'}, "
              f"found {sorted(found) or 'nothing'}: {status}")
        if found != expected:
            wrong.append(name)
            for kind, detail in problems:
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
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per page")
    parser.add_argument("--self-test", action="store_true",
                        help="check a tiny hand-made site with known faults instead")
    args = parser.parse_args(argv)

    if args.self_test:
        self_test(args.chromium)
        return 0

    started = time.monotonic()
    pages = toc_pages(args.toc)
    results = check_site(args.site, pages, args.chromium, args.screenshots, args.timeout)
    failed = {p: probs for p, (probs, _) in results.items() if probs}
    print(f"checked {len(pages)} pages ({sum(ch for _, ch in pages)} chapters) "
          f"in {time.monotonic() - started:.1f} s"
          + (f"; screenshots in {args.screenshots}/" if args.screenshots else ""))
    if failed:
        print(f"FAILED: {len(failed)} page(s) with problems: {', '.join(failed)}")
        return 1
    print("every page loads all its assets locally; every chapter shows a figure and the chapter template")
    return 0


if __name__ == "__main__":
    sys.exit(main())
