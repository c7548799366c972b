"""A built site, copied and served on 127.0.0.1, and headless Chromium to visit it.

Shared by the browser checks of the live widgets (``browser_widgets.py``) and
of the training widgets (``browser_training.py``). Each copies the built site
to a scratch folder (a chapter page loads files from all over the site), writes
its own pages there, and visits them in one browser context a width, in which
no request may leave the site and no page may log a console error::

    with open_site(site, chromium, prefix="widgets-") as web:
        (web.work / "book" / "extra.html").write_text(html, encoding="utf8")
        for width in (1280, 390):
            with web.visit(width, problems) as visit:
                page = visit.open("book/extra.html", ".aft-widget.aft-live", timeout=60)
                ...
"""

import argparse
import contextlib
import shutil
import tempfile
from pathlib import Path

from browser_check import CHROMIUM_FLAGS, serve

ROOT = Path(__file__).resolve().parents[1]


class Visit:
    """One browser context: the requests that leave the site (blocked), the console
    errors of its pages, and the model files fetched since the last page opened."""

    def __init__(self, ctx, base):
        self.ctx, self.base = ctx, base
        self.outside, self.errors, self.models = [], [], []
        ctx.route("**/*", self._route)

    def _route(self, r):
        url = r.request.url
        if not url.startswith(self.base):
            self.outside.append(url)
            return r.abort("blockedbyclient")
        if "/_static/models/" in url:
            self.models.append(url)
        return r.continue_()

    def open(self, rel, ready, timeout):
        """A new page at ``rel`` (relative to the site), once ``ready`` (a selector) is on it."""
        page = self.ctx.new_page()
        page.on(
            "console",
            lambda m: self.errors.append(f"{rel}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: self.errors.append(f"{rel}: {e}"))
        self.models.clear()
        page.goto(self.base + rel, wait_until="load", timeout=timeout * 1000)
        page.wait_for_selector(ready, timeout=timeout * 1000)
        return page


class Site:
    """The scratch copy (``work``), its address (``base``) and the browser."""

    def __init__(self, work, base, browser):
        self.work, self.base, self.browser = work, base, browser

    @contextlib.contextmanager
    def visit(self, width, problems, **options):
        """A context ``width`` px wide (a touch screen below 500 px), 900 px high.

        ``options`` go to Playwright's ``new_context`` (``accept_downloads=True``).
        On leaving, each request that left the site and each console error is
        appended to ``problems``.
        """
        ctx = self.browser.new_context(
            viewport={"width": width, "height": 900}, has_touch=width < 500, **options
        )
        visit = Visit(ctx, self.base)
        yield visit
        problems += [f"at {width}px: request left the site: {u}" for u in visit.outside]
        problems += [f"at {width}px: console error: {e}" for e in visit.errors]
        ctx.close()


@contextlib.contextmanager
def open_site(site, chromium, prefix="site-"):
    """Copy the built ``site`` to a scratch folder, serve it, launch Chromium; yield a Site.

    On leaving, the browser and the server are closed and the copy removed.
    """
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        shutil.copytree(site, work, dirs_exist_ok=True)
        (work / "book").mkdir(exist_ok=True)
        server, base = serve(work)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=chromium, args=CHROMIUM_FLAGS, timeout=30000
                )
                yield Site(work, base, browser)
                browser.close()
        finally:
            server.shutdown()
            server.server_close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def accessible_names(widget, fail, controls="input, select, textarea, button"):
    """``fail`` for each of the widget's ``controls`` with no label, aria-label or text."""
    for el in widget.locator(controls).all():
        name = el.evaluate(
            "e => (e.labels && e.labels.length ? e.labels[0].textContent : '') "
            "|| e.getAttribute('aria-label') || e.textContent"
        )
        if not name.strip():
            fail(f"a control has no accessible name: {el.evaluate('e => e.outerHTML')[:80]}")


def sideways(page, fail):
    """``fail`` if the page scrolls sideways (by more than a pixel)."""
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    if overflow > 1:
        fail(f"the page scrolls sideways by {overflow}px")


def arguments(doc, timeout):
    """A parser of the options both checks take (``--site`` and so on); ``doc``: the script's."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--site", default=str(ROOT / "_build" / "html"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--screenshots", default=None)
    parser.add_argument("--timeout", type=float, default=timeout)
    return parser


def verdict(problems, what):
    """Print each problem and the verdict on ``what``; return the exit status (1 if any)."""
    for p in problems:
        print(f"FAIL {p}")
    print(f"{what}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0
