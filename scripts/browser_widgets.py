"""The live model widgets in a real browser (headless Chromium, driven by Playwright).

Called by ``scripts/check-browser.sh`` after the site check. For every widget
(``attention_lib.widget_html``) on the built site's pages, and on a scratch
page holding one widget per exported model (so the widgets are checked even
before a chapter carries them), at 1280 and at 390 px wide:

- before the first click no model weights are fetched (they load on first use);
- bad input (an empty prompt, 10,000 pasted characters, characters outside
  the vocabulary, emoji) gives a message inside the widget and no console error;
- a typed prompt is continued (or translated): tokens appear, and a heat map of
  where the heads looked is drawn (non-blank canvas);
- the heat map has its legend (one colour scale, weight 0 to 1) and the layer
  and head selects say, before the model loads, that they wait for it;
- the next-token bar shows the last step's candidates and reshapes while the
  temperature slider moves; moving a slider (temperature) changes the output;
- an error clears what the widget showed before (no stale output beside it);
- the keyboard alone reaches and presses the button and a generated token;
- the head switches (issue 53), by keyboard: layer 1's head 0 switched off
  writes another text, named in the status and marked in layer 1's heat map;
  "All heads on" writes the text of before again;
- no word of the generated text is broken across two lines;
- nothing scrolls sideways, every control has an accessible name, and no
  request leaves the local server;
- the encoder (chapter 14, ``check_encoder``): the download size is shown before
  the download; empty or blank text gives a message; a sentence typed and sent
  with the keyboard alone shows its word pieces and a heat map, which another
  layer and head redraw; two paraphrases are more similar than two unrelated
  sentences; a long sentence is cut, with a message.

Writes a screenshot of each widget at each width into ``--screenshots``.

    python scripts/browser_widgets.py --site _build/html [--chromium /usr/bin/chromium]
    python scripts/browser_widgets.py --only 14_minilm     # chapter 14's encoder only
"""

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from browser_site import (  # noqa: E402  (scripts/ is on the path: run as a script)
    accessible_names,
    arguments,
    open_site,
    sideways,
    verdict,
)
from browser_training import check_training_widget  # noqa: E402  (training widgets: data-train)
from browser_training import scratch_page as training_page  # noqa: E402

WIDTHS = (1280, 390)
BAD_INPUTS = {
    "empty": "",
    "10,000 characters": "Once upon a time, there was a girl. " * 278,
    "emoji": "Hello 🙂🚀",
    "outside the vocabulary": "Ça coûte 5 € — naïve café",
}


def scratch_page(site):
    """A page (not in the book) with one widget per exported model, under ``book/``."""
    from attention_lib import widget_html
    from attention_lib.presentation.widgets import WIDGETS

    models = [n for n in WIDGETS if (Path(site) / "_static" / "models" / f"{n}.json").is_file()]
    body = "\n".join(f"<h2>{n}</h2>\n" + widget_html(n).data for n in models)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>Widgets</title></head><body><main style="max-width: 820px; margin: auto; '
        f'padding: 8px"><h1>The live widgets</h1>\n{body}\n</main></body></html>\n'
    )


def canvas_ink(widget):
    """How many pixels of the widget's heat map are not blank."""
    return widget.locator("canvas.aft-heatmap").evaluate("""c => {
        if (!c.width || !c.height) return 0;
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; }""")


# Generated tokens whose line starts inside a word: a letter token at the start of
# a line (its box below the one before) right after another letter token.
BROKEN_WORDS_JS = r"""
out => {
  const spans = [...out.querySelectorAll('.aft-token')];
  const broken = [];
  for (let i = 1; i < spans.length; i++) {
    const a = spans[i - 1], b = spans[i];
    if (!/[\p{L}\p{N}]$/u.test(a.textContent) || !/^[\p{L}\p{N}]/u.test(b.textContent)) continue;
    const ra = a.getClientRects(), rb = b.getClientRects();
    if (!ra.length || !rb.length) continue;
    if (rb[0].top > ra[ra.length - 1].top + 2) broken.push(a.textContent + '|' + b.textContent);
  }
  return broken;
}
"""


def check_encoder(page, widget, label, problems, shots, width, timeout):
    """Drive chapter 14's encoder widget (widget-encoder.mjs); append problems."""
    fail = lambda what: problems.append(f"{label} at {width}px: {what}")  # noqa: E731
    handle = widget.element_handle()
    boxes = widget.locator("textarea")
    status = widget.locator(".aft-status")
    for el in widget.locator("select, textarea, button.aft-go").all():
        name = el.evaluate("e => e.labels && e.labels.length ? e.labels[0].textContent : ''")
        if not name.strip() and el.evaluate("e => e.tagName") != "BUTTON":
            fail(f"a control has no label: {el.evaluate('e => e.outerHTML')[:80]}")
    if "MB" not in status.inner_text():
        fail(f"the download size is not shown before the download: {status.inner_text()!r}")
    for sel in widget.locator("select[disabled]").all():
        if "once the model has loaded" not in sel.inner_text():
            fail("a select waits for the model without saying so")

    def run(first, second, keyboard=False):
        widget.evaluate("w => { delete w.dataset.state; delete w.dataset.similarity }")
        boxes.nth(0).fill(first)
        boxes.nth(1).fill(second)
        if keyboard:  # Tab from the last box to the button (past any enabled select), Enter
            boxes.nth(1).focus()
            button = widget.locator("button.aft-go")
            for _ in range(3):
                page.keyboard.press("Tab")
                if button.evaluate("b => b === document.activeElement"):
                    break
            else:
                fail("three Tabs from the second box do not reach the Encode button")
            page.keyboard.press("Enter")
        else:
            widget.locator("button.aft-go").click()
        page.wait_for_function(
            "w => w.dataset.state === 'done' || w.querySelector('.aft-error')",
            arg=handle,
            timeout=timeout * 1000,
        )
        ok = widget.evaluate("w => w.dataset.state === 'done'")
        sim = widget.get_attribute("data-similarity")
        return ok, None if sim is None else float(sim)

    for bad in ("", "   \t\n  "):
        if run(bad, "A cat.")[0]:
            fail(f"{bad!r} was encoded, with no message")
    if widget.locator(".aft-pieces .aft-token").count() or canvas_ink(widget):
        fail("an error left the last tokens or heat map on show")
    started = time.perf_counter()  # the first use: download, SHA-256, parse, two sentences
    ok, close = run(
        "A man is playing a guitar on the stage.", "Someone performs music with a guitar.", True
    )
    first_use = time.perf_counter() - started
    if not ok:
        fail(f"no encoding with the keyboard: {status.inner_text()}")
    pieces = widget.locator(".aft-pieces .aft-token").all_inner_texts()
    if pieces[:2] != ["[CLS]", "a"] or pieces[-1] != "[SEP]" or "guitar" not in pieces:
        fail(f"unexpected word pieces: {pieces}")
    if canvas_ink(widget) < 50:
        fail("no attention heat map")
    if "layer 5" not in widget.locator("select").nth(0).inner_text():
        fail("layers are not numbered from 0 to 5")
    if "head 11" not in widget.locator("select").nth(1).inner_text():
        fail("heads are not numbered from 0 to 11")
    before = widget.locator("canvas.aft-heatmap").get_attribute("aria-label")
    widget.locator("select").nth(0).select_option("4")
    widget.locator("select").nth(1).select_option("7")
    after = widget.locator("canvas.aft-heatmap").get_attribute("aria-label")
    if after == before or "Layer 4, head 7" not in after or canvas_ink(widget) < 50:
        fail("choosing another layer and head did not redraw the map")
    if "scale" not in after:
        fail("the heat map does not describe its colour scale")
    ok, far = run("A man is playing a guitar on the stage.", "The stock market fell sharply today.")
    if not ok or close is None or far is None or not close > far:
        fail(f"paraphrases {close} are not more similar than unrelated sentences {far}")
    ok, _ = run("one two three " * 40, "")
    if not ok or "cut" not in status.inner_text():
        fail(f"a long sentence was not cut with a message: {status.inner_text()!r}")
    if run("", "")[0] or widget.locator(".aft-similarity").inner_text().strip():
        fail("an error left the last similarity on show")
    ok, _ = run("The weather is lovely today.", "It is so sunny outside!")
    sideways(page, fail)
    if shots:
        widget.screenshot(path=str(Path(shots) / f"widget-{label}-{width}.png"))
    print(
        f"{label} at {width}px: first use {first_use:.1f} s (download included), then "
        f"{widget.get_attribute('data-map-ms')} ms to the first map; similarity of "
        f"paraphrases {close}, of unrelated sentences {far}"
    )


def check_widget(page, widget, label, problems, shots, width, timeout):
    """Drive one widget; append (label, problem) to problems."""
    kind = widget.get_attribute("data-kind")
    if kind == "encoder":
        return check_encoder(page, widget, label, problems, shots, width, timeout)
    model = widget.get_attribute("data-model")
    fail = lambda what: problems.append(f"{label} at {width}px: {what}")
    widget.scroll_into_view_if_needed()
    handle = widget.element_handle()
    for sel in widget.locator("select[disabled]").all():
        if "once the model has loaded" not in sel.inner_text():
            fail("a select waits for the model without saying so")
    if kind != "translator":
        widget.locator("input[type=number]").nth(1).fill("12")  # short runs for bad input
    text = widget.locator("textarea")
    button = widget.locator("button.aft-go")
    status = widget.locator(".aft-status")
    accessible_names(widget, fail, "input, select, textarea, button.aft-go")

    def run(prompt):
        widget.evaluate("w => { delete w.dataset.state }")
        text.fill(prompt)
        status.evaluate("s => s.textContent = ''")
        button.click()
        page.wait_for_function(
            """w => w.dataset.state === 'done' || w.querySelector('.aft-error')""",
            arg=handle,
            timeout=timeout * 1000,
        )
        return widget.evaluate("w => w.dataset.state === 'done'")

    if kind == "translator":
        if run(""):
            fail("an empty sentence was translated, with no message")
        for what in ("10,000 characters", "emoji"):
            run(BAD_INPUTS[what])  # translated (cut, or byte-level), or a message
        if not run("I like green apples."):
            fail(f"no translation: {status.inner_text()}")
        french = widget.locator(".aft-french").inner_text()
        if not french.strip() or french == "(no translation)":
            fail("the translation is empty")
        if canvas_ink(widget) < 50:
            fail("no cross-attention heat map")
        widget.locator("select").nth(2).select_option("1")
        if canvas_ink(widget) < 50:
            fail("no heat map after choosing another head")
        if "head 1" not in widget.locator("select").nth(2).inner_text():
            fail("heads are not numbered from 0 ('head 0', 'head 1', ...)")
        if "scale" not in widget.locator("canvas.aft-heatmap").get_attribute("aria-label"):
            fail("the heat map does not describe its colour scale")
        if run(""):
            fail("an empty sentence was translated")
        if widget.locator(".aft-french").inner_text().strip() or canvas_ink(widget):
            fail("an error left the last translation or its heat map on show")
    else:
        for what, bad in BAD_INPUTS.items():
            ok = run(bad)
            if what in ("empty",) and ok:
                fail("an empty prompt was continued, with no message")
            if what == "outside the vocabulary" and model == "shakespeare" and ok:
                fail("characters outside the vocabulary were accepted with no message")
            if what == "emoji" and model == "shakespeare" and ok:
                fail("emoji were accepted with no message")
            if not ok and not widget.locator(".aft-error").count():
                fail(f"{what}: no message")
        prompt = "ROMEO:\nWhat" if model == "shakespeare" else "Once upon a time, Lily"
        widget.locator("input[type=number]").nth(1).fill("40")
        if not run(prompt):
            fail(f"no continuation of a typed prompt: {status.inner_text()}")
        tokens = widget.locator(".aft-token.aft-new")
        if tokens.count() < 10:
            fail(f"only {tokens.count()} generated tokens shown")
        first = widget.locator(".aft-output").inner_text()
        tokens.nth(3).hover()
        if canvas_ink(widget) < 50:
            fail("no heat map after hovering a generated token")
        # keyboard: focus a generated token, the heat map follows it
        tokens.nth(5).focus()
        page.keyboard.press("Tab")
        chosen = widget.locator(".aft-token.aft-chosen").count()
        if chosen != 1:
            fail("focusing a token by keyboard did not choose it")
        if "layer 0" not in widget.locator("select").first.inner_text():
            fail("layers are not numbered from 0 ('layer 0', ...)")
        broken = widget.locator(".aft-output").evaluate(BROKEN_WORDS_JS)
        if broken:
            fail(f"words broken across lines: {broken[:3]}")
        bars = widget.locator(".aft-bars li")
        if bars.count() < 1:
            fail("no next-token probability bar under the text")
        before = widget.locator(".aft-next").inner_text()
        slider = widget.locator("input[type=range]").first
        slider.evaluate(
            "s => { s.value = String(Number(s.value) + 0.5); "
            "s.dispatchEvent(new Event('input', {bubbles: true})); }"
        )
        if widget.locator(".aft-next").inner_text() == before:
            fail("the next-token bar did not reshape when the temperature moved")
        slider.evaluate(
            "s => { s.value = String(Number(s.value) - 0.5); "
            "s.dispatchEvent(new Event('input', {bubbles: true})); }"
        )
        # a slider moved: temperature up, the widget writes again, and the text changes
        widget.evaluate("w => { delete w.dataset.state }")
        slider = widget.locator("input[type=range]").first
        slider.focus()
        for _ in range(10):
            page.keyboard.press("ArrowRight")
        slider.dispatch_event("change")
        page.wait_for_function(
            "w => w.dataset.state === 'done'", arg=handle, timeout=timeout * 1000
        )
        if widget.locator(".aft-output").inner_text() == first:
            fail("moving the temperature slider did not change the output")
        check_head_switches(page, widget, fail, timeout)
        if run(""):
            fail("an empty prompt was continued")
        if widget.locator(".aft-token").count() or widget.locator(".aft-bars li").count():
            fail("an error left the last output or its next-token bar on show")
    sideways(page, fail)
    if shots:
        widget.screenshot(path=str(Path(shots) / f"widget-{label}-{width}.png"))


def check_head_switches(page, widget, fail, timeout):
    """The head switches of a language model's widget, by keyboard alone (issue 53).

    One switch a head of every layer; Space on layer 1's head 0 switches it off and the text
    is written again, changed, the status naming the head and the heat map of layer 1
    marking it; "All heads on" (Enter) writes the text of before again (the same seed).
    """
    handle = widget.element_handle()
    boxes = widget.locator(".aft-switches input[type=checkbox]")
    layers = widget.locator("select").first.evaluate("s => s.options.length")
    if boxes.count() < 4 or boxes.count() % layers:
        fail(f"{boxes.count()} head switches for {layers} layers")
        return
    heads = boxes.count() // layers
    output = widget.locator(".aft-output")
    before = output.inner_text()

    def press(locator, key):
        widget.evaluate("w => { delete w.dataset.state }")
        locator.focus()
        page.keyboard.press(key)
        page.wait_for_function(
            "w => w.dataset.state === 'done' || w.querySelector('.aft-error')",
            arg=handle,
            timeout=timeout * 1000,
        )

    switch = boxes.nth(heads)  # layer 1, head 0
    press(switch, "Space")
    if not switch.is_checked() or widget.get_attribute("data-heads-off") != "1":
        fail("Space on a head switch did not switch the head off")
    off = output.inner_text()
    if off == before:
        fail("switching layer 1's head 0 off did not change the text")
    if "1.0 (layer.head)" not in widget.locator(".aft-status").first.inner_text():
        fail("the status does not name the head switched off")
    widget.locator("select").first.select_option("1")
    widget.locator(".aft-token.aft-new").last.focus()
    if "head 0 ✕" not in (widget.locator("canvas.aft-heatmap").get_attribute("aria-label") or ""):
        fail("the heat map of layer 1 does not mark head 0 as switched off")
    widget.locator("select").first.select_option("0")
    press(widget.get_by_role("button", name="All heads on"), "Enter")
    if boxes.evaluate_all("bs => bs.some((b) => b.checked)"):
        fail("'All heads on' left a switch on")
    if output.inner_text() != before:
        fail("with every head back on, the text is not the one written before")
    print(
        f"{widget.get_attribute('data-model')}: layer 1's head 0 off changes "
        f"{sum(a != b for a, b in zip(before, off)) + abs(len(before) - len(off))} "
        f"of {len(before)} characters of the output"
    )


def check_window_widget(page, widget, label, problems, shots, width, timeout):
    """The window widget (widget-window.mjs): writes past the context with its memory flat.

    Bad input (an empty prompt, emoji) gives a message; the keyboard alone starts it; with
    a window and sinks it writes past the 128-character training length and the window,
    and the memory of keys and values stays the same; full attention's memory grows;
    Stop stops it; the memory chart is drawn; every control has an accessible name.
    """
    fail = lambda what: problems.append(f"{label} at {width}px: {what}")  # noqa: E731
    widget.scroll_into_view_if_needed()
    handle = widget.element_handle()
    accessible_names(widget, fail)
    text, button = widget.locator("textarea"), widget.locator("button.aft-go")
    wait = lambda js: page.wait_for_function(js, arg=handle, timeout=timeout * 1000)  # noqa: E731
    for what in ("empty", "emoji"):
        widget.evaluate("w => { delete w.dataset.state }")
        text.fill(BAD_INPUTS[what])
        button.click()
        wait("w => w.dataset.state === 'error' || w.dataset.state === 'running'")
        if (
            widget.get_attribute("data-state") != "error"
            or not widget.locator(".aft-error").count()
        ):
            fail(f"{what} prompt: no message")
            if widget.get_attribute("data-state") == "running":
                button.click()
                wait("w => w.dataset.state !== 'running'")

    def write(mode, until):
        widget.evaluate("w => { delete w.dataset.state; delete w.dataset.position }")
        text.fill("ROMEO:\n")
        widget.locator("select").first.select_option("sinks")  # every input enabled
        widget.locator("input[type=number]").first.fill("32")
        widget.locator("select").first.select_option(mode)
        button.focus()
        page.keyboard.press("Enter")  # the keyboard alone starts it
        wait(f"w => Number(w.dataset.position || 0) >= {until // 2} || w.dataset.state === 'error'")
        half = int(widget.get_attribute("data-bytes") or 0)
        wait(f"w => Number(w.dataset.position || 0) >= {until} || w.dataset.state === 'error'")
        end = int(widget.get_attribute("data-bytes") or 0)
        peak = int(widget.get_attribute("data-bytes-max") or 0)
        button.click()  # Stop
        wait("w => w.dataset.state === 'done' || w.dataset.state === 'error'")
        if widget.get_attribute("data-state") != "done":
            fail(f"{mode}: {widget.locator('.aft-status').inner_text()}")
        return half, end, peak

    half, end, peak = write("sinks", 400)
    if not (half and half == end == peak):
        fail(f"window + sinks: memory not flat past the context ({half}, {end}, max {peak} bytes)")
    if "Stopped" not in widget.locator(".aft-status").inner_text():
        fail("Stop did not stop the writing")
    if len(widget.locator(".aft-output").inner_text().strip()) < 300:
        fail("fewer than 300 characters written on show")
    ink = widget.locator("canvas.aft-memory").evaluate("""c => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] < 200) n++; return n; }""")
    if ink < 100:
        fail("the memory chart is blank")
    half, end, _ = write("full", 300)
    if not end > half > 0:
        fail(f"full attention: the memory did not grow ({half} -> {end} bytes)")
    sideways(page, fail)
    if shots:
        widget.screenshot(path=str(Path(shots) / f"widget-{label}-{width}.png"))


def check(site, chromium, shots=None, timeout=60.0, only=None):
    site = Path(site)
    problems, timings, train_timings = [], [], []
    # the whole site: a chapter page also loads files from outside _static
    # (a 404 there is a console error)
    with open_site(site, chromium, prefix="widgets-") as web:
        work = web.work
        (work / "book" / "widgets.html").write_text(scratch_page(work), encoding="utf8")
        pages = ["book/widgets.html"]
        for p in sorted(site.rglob("*.html")):
            if "aft-widget" in p.read_text(encoding="utf8", errors="replace"):
                pages.append(p.relative_to(site).as_posix())
        if only:  # --only: the pages whose path holds one of these strings
            pages = [p for p in pages if any(o in p for o in only)]
        if not any("data-train=" in (work / rel).read_text(encoding="utf8") for rel in pages):
            (work / "book" / "training.html").write_text(training_page(), encoding="utf8")
            pages.append("book/training.html")  # chapters built before their training widgets
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
        for width in WIDTHS:
            with web.visit(width, problems) as visit:
                for rel in pages:
                    page = visit.open(rel, ".aft-widget.aft-live", timeout)
                    page.set_default_timeout(timeout * 1000)
                    if visit.models:
                        problems.append(
                            f"{rel} at {width}px: model weights fetched before "
                            f"any click: {visit.models[:2]}"
                        )
                    for i, w in enumerate(page.locator(".aft-widget").all()):
                        if w.get_attribute("data-train"):  # scripts/browser_training.py
                            label = f"{Path(rel).stem}-{w.get_attribute('data-train')}"
                            train_args = (problems, shots, width, timeout * 5, train_timings)
                            check_training_widget(page, w, label, *train_args)
                            continue
                        if w.get_attribute("data-model") == "smollm2":
                            # driven by scripts/browser_smollm2.py (a 98 MB download, a
                            # chat); here the page is checked to fetch nothing before a click
                            continue
                        label = f"{Path(rel).stem}-{w.get_attribute('data-model')}-{i}"
                        t0 = time.perf_counter()
                        run = check_widget
                        if w.get_attribute("data-kind") == "window":
                            run = check_window_widget
                        run(page, w, label, problems, shots, width, timeout)
                        timings.append(
                            (
                                label,
                                width,
                                time.perf_counter() - t0,
                                w.get_attribute("data-first-token-ms")
                                or w.get_attribute("data-map-ms"),
                            )
                        )
                    page.close()
    for label, width, seconds, first in timings:
        print(f"{label:40s} {width:5d}px  {seconds:5.1f} s  first token {first} ms")
    for line in train_timings:
        print(line)
    return problems


def main(argv=None):
    parser = arguments(__doc__, timeout=120.0)
    parser.add_argument(
        "--only", nargs="+", help="check only the pages whose path holds one of these"
    )
    args = parser.parse_args(argv)
    problems = check(args.site, args.chromium, args.screenshots, args.timeout, args.only)
    return verdict(problems, "widgets")


if __name__ == "__main__":
    sys.exit(main())
