"""The training widgets in a real browser (headless Chromium, driven by Playwright).

``scripts/browser_widgets.py`` calls :func:`check_training_widget` for every
``<div class="aft-widget" data-train=...>`` it meets (chapters 9 and 11, and a
scratch page built from those chapters' widget cells). Run alone, this script
checks just the training widgets, on the scratch page and on chapters 9 and 11
of a built site, at 1280 and 390 px:

- every control has an accessible name, and the keyboard alone starts, pauses
  and resumes training;
- chapter 9's widget trains, its loss falls, both layers' attention maps
  change, and the induction head forms (held-out accuracy >= 90%): the time is
  printed; paused, its head switches work by keyboard: the induction head
  switched off stops the copying (the held-out accuracy falls by more than
  half), switched on again restores it, and while training runs they are off;
- chapter 11's widget refuses bad input with a message (an empty text, one
  character, more than the limit pasted, a 100 MB file, a learning rate of 0 or
  NaN), trains on characters outside the Basic Multilingual Plane, trains on
  Shakespeare until its held-out loss falls, generates from what it trained,
  and downloads its manifest and weights; chosen by keyboard, it finetunes
  chapter 11's model with LoRA rank 8 on Tatoeba's English sentences: the
  trainable count shown, the loss on that text falls in 25 steps, shown beside
  the loss on held-out Shakespeare, axe-core finds nothing critical or serious;
- removing a widget mid-step leaves no error; the widget's own main-thread work
  for any message of the worker takes at most 100 ms, and on a quiet machine
  (load average below 1 per CPU) no frame of the page takes more than 100 ms
  while a widget trains (the longest frame and task are printed, with the load);
  nothing scrolls sideways; the console shows no error and no request leaves
  the site.

    python scripts/browser_training.py --site _build/html [--screenshots DIR]
"""

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from browser_site import accessible_names, arguments, open_site, sideways, verdict  # noqa: E402

#: chapters holding a training widget, and where their cell's HTML goes in a page
#: built before the cell existed (the section it precedes)
CHAPTERS = {
    "09_transformer": ('<section id="generating-with-a-kv-cache"', "induction"),
    "11_shakespeare": ('<section id="what-the-heads-look-at"', "text"),
}
FRAME_LIMIT_MS = 100
#: frames are held to the limit only on a machine this quiet (load average per CPU): on a
#: busy one the page's main thread waits for a CPU whatever it does, and the frames are
#: reported; the widget's own main-thread time per message is held to the limit always
QUIET_LOAD_PER_CPU = 1.0


def frame_problem(f, widget):
    """A sentence if the page's frames (or the widget's own work) broke the limit."""
    main = float(widget.get_attribute("data-main-ms") or 0)
    if main > FRAME_LIMIT_MS:
        return f"the widget's main-thread work took {main:.0f} ms for one message"
    quiet = os.getloadavg()[0] / (os.cpu_count() or 1) < QUIET_LOAD_PER_CPU
    if f["max"] > FRAME_LIMIT_MS and quiet:
        return f"a frame took {f['max']:.0f} ms while training (limit {FRAME_LIMIT_MS} ms)"
    return None


def load():
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# The longest gap between two animation frames, and the long tasks, from now on.
FRAME_MONITOR_JS = """() => {
  window.__frames = {max: 0, last: performance.now(), long: 0};
  const tick = (t) => { const f = window.__frames; f.max = Math.max(f.max, t - f.last);
    f.last = t; if (!f.stop) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  try { new PerformanceObserver((list) => { for (const e of list.getEntries())
    window.__frames.long = Math.max(window.__frames.long, e.duration); })
    .observe({type: 'longtask', buffered: false}); } catch (e) {}
}"""


def widget_cell(chapter):
    """The HTML of a chapter's training-widget cell (after its markdown paragraphs)."""
    nb = json.loads((ROOT / "book" / f"{chapter}.ipynb").read_text(encoding="utf8"))
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if "data-train=" in source:
            return source[source.index("<link") :]
    return None


def scratch_page():
    """A page with both training widgets, as the chapters' cells write them, under ``book/``."""
    body = "\n".join(f"<h2>{c}</h2>\n{widget_cell(c) or ''}" for c in CHAPTERS)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<title>Training widgets</title></head><body><main style="max-width: 820px; '
        f'margin: auto; padding: 8px"><h1>The training widgets</h1>\n{body}\n</main></body></html>\n'
    )


def with_cell(page_html, chapter):
    """A chapter page built before its widget cell existed, with the cell's HTML in place."""
    marker, _ = CHAPTERS[chapter]
    cell = widget_cell(chapter)
    if cell is None or "data-train=" in page_html or marker not in page_html:
        return page_html
    return page_html.replace(marker, cell + "\n" + marker, 1)


def canvas_hash(widget, selector):
    return widget.locator(selector).evaluate(
        """c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let h = 0, ink = 0; for (let i = 0; i < d.length; i += 4) {
          h = (h * 31 + d[i] + 7 * d[i + 1] + 13 * d[i + 2]) % 1000000007;
          if (d[i] < 250 || d[i + 1] < 250) ink++; } return [h, ink]; }"""
    )


def frames(page):
    return page.evaluate("() => { window.__frames.stop = true; return window.__frames; }")


def check_induction(page, widget, fail, timeout, timings, label):
    handle = widget.element_handle()
    train = widget.locator("button.aft-go")
    page.evaluate(FRAME_MONITOR_JS)
    train.focus()
    page.keyboard.press("Enter")  # the keyboard alone starts it
    t0 = time.perf_counter()
    page.wait_for_function("w => Number(w.dataset.step || 0) >= 10", arg=handle, timeout=60000)
    first = canvas_hash(widget, "canvas.aft-map >> nth=1")
    page.wait_for_function(
        "w => w.dataset.formed || w.dataset.state === 'done' || w.querySelector('.aft-error')",
        arg=handle,
        timeout=timeout * 1000,
    )
    wall = time.perf_counter() - t0
    formed = widget.get_attribute("data-formed")
    if not formed:
        fail(f"the induction head did not form: {widget.locator('.aft-status').inner_text()}")
    page.keyboard.press("Enter")  # pause, by keyboard (focus stayed on the button)
    if widget.get_attribute("data-state") != "paused":
        fail("Enter on the focused button did not pause")
    step = widget.get_attribute("data-step")
    page.wait_for_timeout(1500)
    if widget.get_attribute("data-step") != step:
        fail("steps ran while paused")
    f = frames(page)
    last = canvas_hash(widget, "canvas.aft-map >> nth=1")
    if first == last or last[1] < 100:
        fail("layer 1's attention map did not change (or is blank)")
    if (
        float(widget.get_attribute("data-loss"))
        > float(widget.get_attribute("data-loss-first")) - 1
    ):
        fail("the loss did not fall by a nat")
    timings.append(
        f"{label}: induction head formed after {formed} s in the worker "
        f"({wall:.0f} s wall from the key press), step {widget.get_attribute('data-step')}, "
        f"loss {widget.get_attribute('data-loss-first')} -> {widget.get_attribute('data-loss')}; "
        f"longest frame {f['max']:.0f} ms, longest task {f['long']:.0f} ms, the widget's own "
        f"longest message {widget.get_attribute('data-main-ms')} ms; load average {load()}"
    )
    problem = frame_problem(f, widget)
    if problem:
        fail(problem)
    check_induction_switches(page, widget, fail, timeout, timings, label)
    train.focus()
    page.keyboard.press("Enter")  # resume
    page.wait_for_timeout(300)
    if not widget.locator(".aft-switches input").first.is_disabled():
        fail("the head switches stay on while training runs")
    widget.locator("button", has_text="Stop").click()


def check_induction_switches(page, widget, fail, timeout, timings, label):
    """The paused model's head switches, by keyboard (Space): the induction head off
    stops the copying (held-out accuracy down by more than half), back on restores it."""
    handle = widget.element_handle()
    boxes = widget.locator(".aft-switches input[type=checkbox]")
    if boxes.count() != 2 or boxes.first.is_disabled():
        fail("no head switches to use once training is paused")
        return

    def flip(i):
        widget.evaluate("w => { delete w.dataset.ablatedAccuracy }")
        boxes.nth(i).focus()
        page.keyboard.press("Space")
        page.wait_for_function(
            "w => w.dataset.ablatedAccuracy !== undefined", arg=handle, timeout=timeout * 1000
        )
        return float(widget.get_attribute("data-ablated-accuracy"))

    induction_off = flip(1)
    base = float(widget.get_attribute("data-baseline-accuracy"))
    said = widget.locator(".aft-switches [role=status]").inner_text()
    if not induction_off < base - 0.5:
        fail(f"the induction head switched off: accuracy {base:.2f} -> {induction_off:.2f}")
    if "the induction head (layer 1) switched off" not in said or "✗" not in said:
        fail(f"the widget does not say what the switch did: {said[:120]!r}")
    back_on = flip(1)
    if back_on != base:
        fail(f"the induction head back on: accuracy {back_on:.2f}, not {base:.2f}")
    previous_off = flip(0)
    flip(0)
    timings.append(
        f"{label}: held-out copy accuracy {base:.2f} with both heads, {induction_off:.2f} with the "
        f"induction head off, {previous_off:.2f} with the previous-token head off"
    )


def check_text(page, widget, fail, timeout, timings, label, big_file, shot=None):
    handle = widget.element_handle()
    text = widget.locator("textarea")
    train = widget.locator("button.aft-go")
    status = widget.locator(".aft-status")
    lr = widget.locator("input[id$='-lr']")

    def put(value):  # Playwright's fill() stalls on 200,000 characters: set the value
        text.evaluate("(t, v) => { t.value = v; t.dispatchEvent(new Event('input')); }", value)

    def refused(what, setup, click=True):
        status.evaluate("s => { s.textContent = ''; s.classList.remove('aft-error'); }")
        setup()
        if click:
            train.click()
        try:
            page.wait_for_function(
                "w => w.querySelector('.aft-status.aft-error')", arg=handle, timeout=20000
            )
        except Exception:
            fail(f"{what}: no message in the widget ({status.inner_text()[:80]})")
        if widget.get_attribute("data-state") not in (None, "idle"):
            fail(f"{what}: training started anyway")

    refused("an empty text", lambda: text.fill(""))
    refused("one character", lambda: text.fill("a"))
    refused(
        "1.3 million characters pasted",
        lambda: put("ab " * 440000),
    )
    refused(
        "a 100 MB file",
        lambda: widget.locator("input[type=file]").set_input_files(big_file),
        click=False,
    )
    sample = (ROOT / "data" / "shakespeare" / "input.txt").read_text(encoding="utf8")[:200_000]
    widget.locator("summary").focus()
    page.keyboard.press("Enter")  # open "Advanced" by keyboard
    for bad in ("0", "NaN", "-1", "abc"):
        refused(f"a learning rate of {bad}", lambda bad=bad: (put(sample), lr.fill(bad)))
    lr.fill("")
    # characters outside the Basic Multilingual Plane: one token each, and it trains
    status.evaluate("s => { s.textContent = ''; s.classList.remove('aft-error'); }")
    text.fill("🙂 𝄞 🚀 abc " * 400)
    widget.locator("select[id$='-preset']").select_option("tiny")
    train.click()
    page.wait_for_function("w => Number(w.dataset.step || 0) >= 25", arg=handle, timeout=120000)
    if widget.locator(".aft-error").count():
        fail(f"emoji text: {status.inner_text()}")
    train.click()  # the second press pauses, never starts a second run
    if widget.get_attribute("data-state") != "paused":
        fail("pressing Train twice did not pause the run")
    widget.locator("button", has_text="Stop").click()
    # Shakespeare, the small preset: the held-out loss falls; Generate; Download
    put(sample)
    widget.locator("select[id$='-preset']").select_option("small")
    widget.evaluate("w => { delete w.dataset.step }")  # the emoji run's last step
    t0 = time.perf_counter()
    train.click()
    # frames are judged while it trains: from its first step on, after the press has
    # read and encoded the 200,000 characters (one task of about 100 ms here, before
    # any step; a press is a single event, not the page's responsiveness while training)
    page.wait_for_function(
        "w => Number(w.dataset.step || 0) >= 1 || w.querySelector('.aft-error')",
        arg=handle,
        timeout=timeout * 1000,
    )
    page.evaluate(FRAME_MONITOR_JS)
    page.wait_for_function(
        "w => w.dataset.heldOutFirst && Number(w.dataset.heldOut) < 2.7"
        " || w.querySelector('.aft-error')",
        arg=handle,
        timeout=timeout * 1000,
    )
    wall = time.perf_counter() - t0
    f = frames(page)
    first, last = widget.get_attribute("data-held-out-first"), widget.get_attribute("data-held-out")
    if widget.locator(".aft-error").count() or float(last) > float(first) - 0.5:
        fail(f"the held-out loss did not fall: {first} -> {last} ({status.inner_text()[:80]})")
    timings.append(
        f"{label}: held-out loss {first} -> {last} after {wall:.0f} s wall "
        f"(step {widget.get_attribute('data-step')}); longest frame {f['max']:.0f} ms, "
        f"longest task {f['long']:.0f} ms, the widget's own longest message "
        f"{widget.get_attribute('data-main-ms')} ms; load average {load()}"
    )
    problem = frame_problem(f, widget)
    if problem:
        fail(problem)
    widget.locator("input[id$='-prompt']").fill("ROMEO:")
    widget.locator("button", has_text="Generate").click()
    page.wait_for_function("w => w.dataset.generated", arg=handle, timeout=60000)
    out = widget.locator(".aft-output").inner_text()
    if not out.startswith("ROMEO:") or len(out) < 100 or not set(out) <= set(sample) | {"\n"}:
        fail(f"Generate wrote {out[:60]!r}")
    if shot:
        widget.screenshot(path=shot)
    names = []
    page.on("download", lambda d: names.append(d.suggested_filename))
    widget.locator("button", has_text="Download").click()
    page.wait_for_timeout(3000)
    if sorted(names) != ["my-text.bin", "my-text.json"]:
        fail(f"Download gave {names}, not my-text.json and my-text.bin")
    # removing the widget mid-step: the page carries on without an error
    widget.evaluate("w => w.remove()")
    page.wait_for_timeout(1000)


def reader_text():
    """A reader's text for the finetuning check: the English side of Tatoeba's test pairs
    (chapter 10's sentences; CC BY 2.0 FR, data/README.md), digits and quotes included."""
    lines = (ROOT / "data" / "tatoeba" / "test.tsv").read_text(encoding="utf8").splitlines()
    return "\n".join(line.split("\t")[0] for line in lines)[:60_000]


def check_finetune(page, widget, fail, timeout, timings, label, width, shot=None):
    """Chapter 11's model finetuned with LoRA rank 8, chosen and started by keyboard: the
    trainable count (r (n_in + n_out) for q and v of 4 blocks), the untuned model's two
    held-out losses, then after 25 steps the loss on the reader's text lower and the one on
    held-out Shakespeare shown beside it; axe finds nothing critical or serious; paused, it
    generates; Stop, and the widget is back on training from scratch."""
    from browser_check import DEFAULT_AXE, PHONE_SKIPS_AXE_RULES, run_axe

    handle = widget.element_handle()
    source = widget.locator("select[id$='-source']")
    train = widget.locator("button.aft-go")
    status = widget.locator(".aft-status")
    widget.locator("textarea").evaluate("(t, v) => { t.value = v; }", reader_text())
    source.focus()
    page.keyboard.press("End")  # the last choice, LoRA rank 16; one up, rank 8
    page.keyboard.press("ArrowUp")
    if source.input_value() != "lora-8":
        fail(f"the keyboard chose {source.input_value()!r}, not LoRA rank 8")
        source.select_option("lora-8")
    if not widget.locator("select[id$='-preset']").is_disabled():
        fail("the model size stays enabled when finetuning chapter 11's model")
    train.focus()
    t0 = time.perf_counter()
    page.keyboard.press("Enter")
    page.wait_for_function(
        "w => w.dataset.shakespeareFirst || w.querySelector('.aft-error')",
        arg=handle,
        timeout=120000,
    )
    loaded = time.perf_counter() - t0
    manifest = json.loads((ROOT / "book/_static/models/shakespeare.json").read_text("utf8"))
    c = manifest["config"]
    want = c["n_layers"] * 2 * 8 * (2 * c["d_model"])
    if widget.get_attribute("data-trainable") != str(want):
        fail(f"LoRA rank 8 trains {widget.get_attribute('data-trainable')}, not {want}")
    if f"{want:,}" not in widget.locator(".aft-help").last.inner_text():
        fail("the trainable parameter count is not shown")
    page.wait_for_function(
        "w => Number(w.dataset.step || 0) >= 25 || w.querySelector('.aft-error')",
        arg=handle,
        timeout=timeout * 1000,
    )
    wall = time.perf_counter() - t0
    if widget.locator(".aft-error").count():
        fail(f"finetuning stopped: {status.inner_text()[:120]}")
        return
    new0, new = (float(widget.get_attribute(f"data-held-out{k}")) for k in ("-first", ""))
    old0, old = (float(widget.get_attribute(f"data-shakespeare{k}")) for k in ("-first", ""))
    if not new < new0:
        fail(f"the held-out loss on the reader's text did not fall: {new0} -> {new}")
    cells = widget.locator(".aft-compare tbody td").all_inner_texts()
    if cells[:2] != [f"{new0:.3f}", f"{old0:.3f}"] or cells[2:4] != [f"{new:.3f}", f"{old:.3f}"]:
        fail(f"the table of the two held-out losses shows {cells}")
    timings.append(
        f"{label}: LoRA rank 8 ({want:,} trainable), chapter 11's model loaded and measured in "
        f"{loaded:.0f} s; after 25 steps ({wall:.0f} s wall) held-out loss on the reader's text "
        f"{new0:.3f} -> {new:.3f}, on Shakespeare {old0:.3f} -> {old:.3f}; load average {load()}"
    )
    axe = Path(DEFAULT_AXE)
    if axe.is_file():
        skip = PHONE_SKIPS_AXE_RULES if width < 500 else ()
        found = []
        timings.append(run_axe(page, axe.read_text("utf8"), f"{label} finetuning", found, skip))
        for _, what in found:
            fail(what)
    else:
        fail(f"no axe-core at {axe}: scripts/check-browser.sh installs it")
    train.focus()
    page.keyboard.press("Enter")  # pause
    if widget.get_attribute("data-state") != "paused":
        fail("Enter on the focused button did not pause the finetuning")
    widget.locator("input[id$='-prompt']").fill("ROMEO:")
    widget.locator("button", has_text="Generate").click()
    page.wait_for_function("w => w.dataset.generated", arg=handle, timeout=60000)
    if not widget.locator(".aft-output").inner_text().startswith("ROMEO:"):
        fail("Generate after finetuning did not continue the prompt")
    if shot:
        widget.screenshot(path=shot)
    widget.locator("button", has_text="Stop").click()
    main = float(widget.get_attribute("data-main-ms") or 0)
    timings.append(f"{label} finetuning: the widget's own longest message {main} ms")
    if main > FRAME_LIMIT_MS:
        fail(f"the widget's main-thread work took {main:.0f} ms for one message while finetuning")
    # the run from scratch that follows is judged on its own messages
    widget.evaluate(
        "w => { delete w.dataset.generated; delete w.dataset.step; delete w.dataset.mainMs }"
    )
    source.select_option("scratch")
    if widget.locator("select[id$='-preset']").is_disabled():
        fail("the model size stays disabled after going back to a model from scratch")


def check_training_widget(page, widget, label, problems, shots, width, timeout, timings=None):
    """Drive one training widget; append problems (strings) and timings."""
    timings = [] if timings is None else timings
    fail = lambda what: problems.append(f"{label} at {width}px: {what}")  # noqa: E731
    widget.scroll_into_view_if_needed()
    accessible_names(widget, fail, "input, select, textarea, button, canvas")
    kind = widget.get_attribute("data-train")
    if kind == "induction":
        check_induction(page, widget, fail, timeout, timings, label)
    else:
        big = Path(tempfile.mkdtemp(prefix="big-text-")) / "big.txt"
        with open(big, "wb") as f:
            f.truncate(100 * 1024 * 1024)  # 100 MB (sparse): refused before it is read
        try:
            if shots:
                widget.screenshot(path=str(Path(shots) / f"train-{label}-{width}-start.png"))
            shot = str(Path(shots) / f"train-{label}-{width}-finetune.png") if shots else None
            check_finetune(page, widget, fail, timeout, timings, label, width, shot)
            shot = str(Path(shots) / f"train-{label}-{width}.png") if shots else None
            check_text(page, widget, fail, timeout, timings, label, big, shot)
        finally:
            shutil.rmtree(big.parent, ignore_errors=True)
    sideways(page, fail)
    if shots and kind == "induction":
        widget.screenshot(path=str(Path(shots) / f"train-{label}-{width}.png"))
    return timings


def check(site, chromium, shots=None, timeout=600.0, pages=("scratch", *CHAPTERS)):
    site = Path(site)
    problems, timings = [], []
    with open_site(site, chromium, prefix="training-") as web:
        work = web.work
        # this checkout's runtime and figures, over the site's
        shutil.copytree(ROOT / "book" / "_static", work / "_static", dirs_exist_ok=True)
        rels = []
        if "scratch" in pages:
            (work / "book" / "training.html").write_text(scratch_page(), encoding="utf8")
            rels.append("book/training.html")
        for chapter in CHAPTERS:
            built = site / "book" / f"{chapter}.html"
            if chapter in pages and built.is_file():
                html = with_cell(built.read_text(encoding="utf8"), chapter)
                (work / "book" / built.name).write_text(html, encoding="utf8")
                rels.append(f"book/{built.name}")
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
        for width in (1280, 390):
            with web.visit(width, problems, accept_downloads=True) as visit:
                for rel in rels:
                    page = visit.open(rel, ".aft-widget[data-train].aft-live", timeout=120)
                    for w in page.locator(".aft-widget[data-train]").all():
                        label = f"{Path(rel).stem}-{w.get_attribute('data-train')}"
                        check_training_widget(
                            page, w, label, problems, shots, width, timeout, timings
                        )
                    page.close()
    for t in timings:
        print(t)
    return problems


def main(argv=None):
    parser = arguments(__doc__, timeout=600.0)
    parser.add_argument(
        "--pages",
        default="scratch,09_transformer,11_shakespeare",
        help="comma-separated: scratch (a page of both widgets) and chapter stems",
    )
    args = parser.parse_args(argv)
    problems = check(
        args.site, args.chromium, args.screenshots, args.timeout, tuple(args.pages.split(","))
    )
    return verdict(problems, "training widgets")


if __name__ == "__main__":
    sys.exit(main())
