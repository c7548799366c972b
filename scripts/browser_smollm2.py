"""The SmolLM2 chat widget (book/_static/runtime/widget-smollm2.mjs) in headless Chromium.

Serves a scratch page holding the widget, beside ``book/_static``'s runtime and models (the
chunks ``scripts/export_smollm2.py`` writes: exported first when missing), from 127.0.0.1,
and opens it at 1280 and at 390 px wide (no other request leaves the machine):

- before the button is pressed, no chunk of the model is fetched, and the button states the
  download's size;
- pressed (Enter), the model loads (every chunk checked); an empty message gives a message;
- the keyboard alone: Tab visits every control of the widget in the order it is drawn (no
  control skipped, none out of order), the message is sent with Enter on Send, the presets
  and Regenerate are pressed with Space or Enter;
- "What is the capital of France?" sent with temperature 0 gets the library's greedy reply
  (``attention_lib.models.smollm2``: its first 32 tokens, or up to ``<|im_end|>``); the
  attention map is drawn (a non-blank canvas); while it writes, Send and the message box
  are disabled (a second Send cannot start a second reply) and Stop is enabled;
- a head switched off (18.6) and the reply regenerated: the widget says how many heads are off;
- a longer reply (a story) is written for 48 tokens and stopped: the widget's tokens per second
  then is the speed printed (and recorded with ``--json``);
- (at 1280 px) the repeated-text preset is continued by copying ("quiet harbour lemon"), and
  no longer with the chapter's top induction heads switched off; the random-head preset
  switches off as many other heads (what it writes is printed beside);
- (at 1280 px) a message longer than the widget's context (1,024 tokens) is cropped to its
  last 1,024 tokens, as the library crops a prompt (the first tokens of the reply are the
  library's greedy ones on the cropped ids), with a message; Stop pressed while it writes
  stops it within a token, the reply a prefix of the greedy one;
- axe-core finds no critical or serious problem in the widget, loaded and answering;
- on the second width the page is opened afresh and the chunks come from Cache Storage (no
  chunk fetched again);
- no console error, nothing scrolls sideways.

Then, each in a fresh browser context (its own empty Cache Storage): a damaged chunk, a
truncated chunk and a manifest whose whole-file SHA-256 is wrong are each refused with a
message naming the fault, the button offered again; and a page without WebAssembly SIMD
(``WebAssembly.validate`` answering no; the chunks from Cache Storage) is told the model
runs on its scalar path, which writes the library's greedy tokens, and Stop stops it
mid-reply.

Writes a screenshot at each width into ``--screenshots`` (default: /tmp/smollm2-shots), and
with ``--json PATH`` the Chromium speed (tokens per second by the widget's own count, wall
clock) with the load average, CPU and date, into PATH's "chromium" entry.

    python scripts/browser_smollm2.py [--chromium /usr/bin/chromium] [--screenshots DIR]
                                      [--json data/smollm2/runtime_speed.json]
"""

import argparse
import datetime
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from attention_lib.train.evaluate_long_context import cpu_name  # noqa: E402

from browser_check import (  # noqa: E402
    CHROMIUM_FLAGS,
    DEFAULT_AXE,
    PHONE_SKIPS_AXE_RULES,
    run_axe,
    serve,
)

PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>SmolLM2 widget</title><link rel="icon" href="data:,"><link rel="stylesheet" href="runtime/widgets.css"></head>
<body><main style="max-width: 48rem; margin: 0 auto; padding: 0 0.5rem">
<div class="aft-widget" data-model="smollm2" data-kind="smollm2" role="region"
 aria-label="SmolLM2-135M-Instruct, a chat model running in your browser"></div>
<script type="module">import("./runtime/widgets.mjs").then((m) => m.mountAll());</script>
</main></body></html>
"""
QUESTION = "What is the capital of France?"
TOKENS = 32
COPY = "quiet harbour lemon"  # what the repeated-text preset's continuation copies
INDUCTION_PRESET = "18.6, 17.3, 17.4, 17.5, 18.7"  # widget-smollm2.mjs INDUCTION_HEADS
#: a message of more than the widget's 1,024 tokens (MAX_CONTEXT): about 1,400
LONG = " ".join(f"item{i}" for i in range(700)) + ". " + QUESTION
CONTEXT = 1024
PREFIX = 4  # tokens of a cropped or stopped reply compared with the library's
#: the speed recorded: the widget's own rate after SPEED_TOKENS tokens of a longer reply
SPEED_PROMPT = "Write a short story about a lighthouse keeper and a seagull."
SPEED_TOKENS = 48

#: the widget's controls a keyboard reaches, in the order Tab visits them
FOCUSABLE_JS = """w => [...w.querySelectorAll('textarea, input, button, select, [tabindex]')]
  .filter(e => !e.disabled && !e.hidden && e.tabIndex >= 0 && e.getClientRects().length)
  .map(e => e.id || e.textContent.trim().slice(0, 40) || e.tagName)"""
ACTIVE_JS = """() => { const e = document.activeElement;
  return e ? (e.id || e.textContent.trim().slice(0, 40) || e.tagName) : null; }"""
STATE_IS = "s => document.querySelector('.aft-widget').dataset.state === s"


def library_reply(model, tok, ids, n=TOKENS):
    """The library's greedy reply ids after ``ids`` (at most n, up to and without <|im_end|>)."""
    new = model.generate(ids, n, temperature=0)[len(ids) :].tolist()
    return new[: new.index(tok.eos_id)] if tok.eos_id in new else new


def library_replies():
    """The library's greedy reply to QUESTION, and the first tokens of its reply to LONG cropped."""
    from attention_lib.models.smollm2 import chat_prompt, load_smollm2

    model, tok = load_smollm2()
    want = library_reply(model, tok, chat_prompt(tok, QUESTION))
    ids = chat_prompt(tok, LONG)
    assert len(ids) > CONTEXT, f"the long message is only {len(ids)} tokens"
    cropped = library_reply(model, tok, ids[-CONTEXT:], PREFIX)  # the last 1,024 tokens
    return want, cropped, len(ids)


def wait_state(page, state, timeout):
    page.wait_for_function(STATE_IS, arg=state, timeout=timeout * 1000)


def reply_ids(w):
    return [int(i) for i in (w.get_attribute("data-reply-ids") or "").split(",") if i]


def check_tab_order(page, w, fail):
    """Tab from the widget's first control visits every control, in the order they are drawn."""
    order = w.evaluate(FOCUSABLE_JS)
    w.locator("textarea").focus()
    seen = [page.evaluate(ACTIVE_JS)]
    for _ in order[1:]:
        page.keyboard.press("Tab")
        seen.append(page.evaluate(ACTIVE_JS))
    if seen != order:
        fail(f"Tab visits {seen}, not the controls in their order {order}")
    return order


def press(page, locator, key="Enter"):
    """``key`` on ``locator``, focused as a keyboard user would reach it."""
    locator.focus()
    page.keyboard.press(key)


def chat_checks(page, w, fail, width, want, cropped, n_long, timeout, axe, problems_axe):
    """Everything done on the loaded widget at one width; returns the speed line."""
    box = w.locator("textarea")
    send = w.get_by_role("button", name="Send", exact=True)
    stop = w.get_by_role("button", name="Stop", exact=True)
    heads = w.locator("input[type=text]")
    order = check_tab_order(page, w, fail)
    box.fill("   ")
    press(page, send)
    if "Write a message first" not in w.locator(".aft-status").first.inner_text():
        fail("an empty message gave no message")
    box.fill(QUESTION)
    box.focus()
    for _ in range(len(order)):  # Tab from the message box to Send, then Enter
        page.keyboard.press("Tab")
        if send.evaluate("b => b === document.activeElement"):
            break
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('.aft-widget').dataset.state !== 'ready'", timeout=10000
    )
    # while it writes: no second Send, the box disabled, Stop offered
    if w.get_attribute("data-state") != "done":
        if not (send.is_disabled() and box.is_disabled()) or stop.is_disabled():
            fail("while writing, Send or the message box is enabled, or Stop is not")
    wait_state(page, "done", timeout)
    got = reply_ids(w)[: len(want)]
    if got != want:
        fail(f"the reply's ids {got[:8]}... are not the library's {want[:8]}...")
    blank = page.evaluate(
        "() => { const c = document.querySelector('.aft-heatmap');"
        " return !c.width || !c.getContext('2d').getImageData(0, 0, c.width, c.height)"
        ".data.some((v, i) => i % 4 !== 3 && v < 250); }"
    )
    if blank:
        fail("the attention map is blank")
    if axe:
        skip = PHONE_SKIPS_AXE_RULES if width < 500 else ()
        label = f"smollm2 widget at {width}px"
        problems_axe.append(run_axe(page, axe, label, problems_axe, skip=skip))
    heads.fill("18.6")
    page.evaluate("() => document.querySelector('.aft-widget').dataset.state = ''")
    press(page, w.get_by_role("button", name="Regenerate"), "Space")
    wait_state(page, "done", timeout)
    if "1 head switched off" not in w.locator(".aft-status").first.inner_text():
        fail("the widget does not say that a head is switched off")
    heads.fill("")
    speed = measure_speed(page, w, timeout)
    if width != 1280:
        return speed
    # the repeated text copied, and no longer with the induction heads off (presets by keyboard)
    press(page, w.get_by_role("button", name="New chat"))
    press(page, w.get_by_role("button", name="A repeated-text prompt"), "Space")
    if not w.locator("input[type=checkbox]").is_checked() or COPY not in box.input_value():
        fail("the repeated-text preset did not fill the message as plain text")
    heads.fill("")
    replies = {}
    for step, preset in (("Send", None), ("Regenerate", "top"), ("Regenerate", "random")):
        if preset == "top":
            press(page, w.get_by_role("button", name="Switch off the top induction heads"), "Space")
            if heads.input_value() != INDUCTION_PRESET:
                fail(f"the induction preset wrote {heads.input_value()!r}")
        elif preset == "random":
            press(page, w.get_by_role("button", name="Switch off as many random heads"))
            picked = [p for p in re.split(r"[,\s]+", heads.input_value()) if p]
            if len(picked) != 5 or heads.input_value() == INDUCTION_PRESET:
                fail(f"the random preset wrote {heads.input_value()!r}")
        page.evaluate("() => document.querySelector('.aft-widget').dataset.state = ''")
        press(page, w.get_by_role("button", name=step, exact=True))
        wait_state(page, "done", timeout)
        replies[preset] = w.get_attribute("data-reply")
    if COPY not in replies[None]:
        fail(f"the repeated text is not continued by copying: {replies[None]!r}")
    if COPY in replies["top"]:
        fail(f"with the induction heads off it still copies: {replies['top']!r}")
    print(
        f"repeated text: {replies[None]!r}; top induction heads off: {replies['top']!r}; "
        f"random heads {heads.input_value()} off: {replies['random']!r}"
    )
    # a message longer than the context: cropped to its last 1,024 tokens, as the library crops
    heads.fill("")
    press(page, w.get_by_role("button", name="New chat"))
    w.locator("input[type=checkbox]").set_checked(False)
    box.fill(LONG)
    # the speed line still counts the last reply's tokens: cleared, it counts this one's
    page.evaluate(
        "() => { document.querySelector('.aft-widget').dataset.state = '';"
        " document.querySelectorAll('.aft-widget .aft-status')[1].textContent = ''; }"
    )
    press(page, send)
    page.wait_for_function(
        f"() => /^({PREFIX}|[{PREFIX + 1}-9]|\\d\\d+) tokens/.test("
        "document.querySelectorAll('.aft-widget .aft-status')[1].textContent)"
        " || document.querySelector('.aft-widget').dataset.state === 'done'",
        timeout=timeout * 1000,
    )
    t0 = time.perf_counter()
    press(page, stop)  # Stop, pressed while it writes
    wait_state(page, "done", timeout)
    stopped_in = time.perf_counter() - t0
    status = w.locator(".aft-status").first.inner_text()
    if f"longer than the widget's {CONTEXT} tokens" not in status:
        fail(f"a message of {n_long} tokens was not cropped with a message: {status!r}")
    if not status.startswith("Stopped"):
        fail(f"Stop did not stop the reply: {status!r}")
    got = reply_ids(w)
    if len(got) < PREFIX or got[:PREFIX] != cropped[: min(PREFIX, len(got))]:
        fail(
            f"the cropped reply starts {got[:PREFIX]}, the library's on the last {CONTEXT} "
            f"tokens {cropped}"
        )
    print(
        f"a {n_long}-token message: cropped to {CONTEXT}, reply {got[:PREFIX]} (library "
        f"{cropped}); stopped {stopped_in:.2f} s after Stop was pressed, {status!r}"
    )
    return speed


def serving(body):
    """A route handler that answers every request with ``body``."""
    return lambda route: route.fulfill(status=200, body=body)


def measure_speed(page, w, timeout):
    """The widget's own tokens per second over a longer reply: SPEED_TOKENS tokens (greedy),
    then Stop; the speed line as the widget shows it."""
    w.locator("textarea").fill(SPEED_PROMPT)
    page.evaluate(
        "() => { document.querySelector('.aft-widget').dataset.state = '';"
        " document.querySelectorAll('.aft-widget .aft-status')[1].textContent = ''; }"
    )
    press(page, w.get_by_role("button", name="Send", exact=True))
    page.wait_for_function(
        "n => parseInt(document.querySelectorAll('.aft-widget .aft-status')[1].textContent) >= n"
        " || document.querySelector('.aft-widget').dataset.state === 'done'",
        arg=SPEED_TOKENS,
        timeout=timeout * 1000,
    )
    speed = w.locator(".aft-status").nth(1).inner_text()
    if w.get_attribute("data-state") != "done":
        press(page, w.get_by_role("button", name="Stop", exact=True))
        wait_state(page, "done", timeout)
    return speed


def refusals(browser, base, fail, timeout):
    """A damaged chunk, a truncated chunk, a wrong whole-file SHA-256: each refused, said."""
    folder = ROOT / "book" / "_static" / "models" / "smollm2"
    first = (folder / "smollm2.gguf.0").read_bytes()
    manifest = json.loads((folder / "smollm2.json").read_text(encoding="utf8"))
    damaged = bytearray(first)
    damaged[len(first) // 2] ^= 1
    cases = [
        (
            "a damaged chunk",
            "**/smollm2.gguf.0",
            bytes(damaged),
            "smollm2.gguf.0 does not match its SHA-256 in the manifest: the download is damaged",
        ),
        (
            "a truncated chunk",
            "**/smollm2.gguf.0",
            first[:1_000_000],
            f"smollm2.gguf.0 stopped at 1000000 of its {len(first)} bytes: the download is truncated",
        ),
        (
            "a wrong SHA-256 of the whole file",
            "**/smollm2.json",
            json.dumps({**manifest, "sha256": "0" * 64}).encode(),
            "the chunks joined do not match the file's SHA-256",
        ),
    ]
    for what, pattern, body, message in cases:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        ctx.route(pattern, serving(body))
        page = ctx.new_page()
        page.set_default_timeout(timeout * 1000)
        page.goto(base + "smollm2-check.html")
        w = page.locator(".aft-widget.aft-live")
        w.wait_for()
        button = w.get_by_role("button", name="Load SmolLM2-135M-Instruct")
        press(page, button)
        page.wait_for_selector(".aft-widget .aft-status.aft-error", timeout=timeout * 1000)
        said = w.locator(".aft-status").first.inner_text()
        if message not in said or "try again" not in said:
            fail(f"{what}: the widget said {said!r}")
        if button.is_disabled():
            fail(f"{what}: the button is not offered again")
        print(f"{what}: {said!r}")
        ctx.close()


def scalar_path(ctx, base, want, fail, timeout):
    """A browser without WebAssembly SIMD: told so; the scalar path writes the greedy tokens;
    Stop stops it mid-reply. ``ctx``: the context of the checks above (its Cache Storage
    holds the chunks: nothing is downloaded again); its pages from now on lack SIMD."""
    ctx.add_init_script("WebAssembly.validate = () => false;")  # simd.mjs's probe says no
    page = ctx.new_page()
    page.set_default_timeout(timeout * 1000)
    page.goto(base + "smollm2-check.html")
    w = page.locator(".aft-widget.aft-live")
    w.wait_for()
    press(page, w.get_by_role("button", name="Load SmolLM2-135M-Instruct"))
    wait_state(page, "ready", timeout * 4)
    said = w.locator(".aft-status").first.inner_text()
    if "no WebAssembly SIMD" not in said or "scalar path" not in said:
        fail(f"without SIMD the widget did not say so: {said!r}")
    w.locator("textarea").fill(QUESTION)
    press(page, w.get_by_role("button", name="Send", exact=True))
    page.wait_for_function(
        "() => /^[2-9]\\d* tokens|^\\d\\d+ tokens/.test("
        "document.querySelectorAll('.aft-widget .aft-status')[1].textContent)",
        timeout=timeout * 4000,
    )
    t0 = time.perf_counter()
    press(page, w.get_by_role("button", name="Stop", exact=True))
    wait_state(page, "done", timeout)
    stopped_in = time.perf_counter() - t0
    got = reply_ids(w)
    status = w.locator(".aft-status").first.inner_text()
    if not status.startswith("Stopped") or len(got) >= len(want):
        fail(f"Stop did not stop the scalar path's reply: {status!r}, {len(got)} tokens")
    if got != want[: len(got)]:
        fail(f"the scalar path wrote {got}, not the library's {want[: len(got)]}")
    speed = w.locator(".aft-status").nth(1).inner_text()
    print(f"no SIMD: {said!r}; {len(got)} tokens ({speed}), stopped {stopped_in:.2f} s after Stop")
    page.close()


def check(chromium, shots, timeout, axe=DEFAULT_AXE):
    from playwright.sync_api import sync_playwright

    import tempfile

    static = ROOT / "book" / "_static"
    if not (static / "models" / "smollm2" / "smollm2.json").exists():
        from export_smollm2 import export, smollm2

        export(smollm2.gguf_path())  # the site build's export (build-book.sh), done here
    want, cropped, n_long = library_replies()
    axe_source = Path(axe).read_text(encoding="utf8") if axe and Path(axe).is_file() else None
    # a scratch folder: the page, and links to the runtime and the exported models
    work = Path(tempfile.mkdtemp(prefix="smollm2-check-"))
    for name in ("runtime", "models"):
        (work / name).symlink_to(static / name)
    page_path = work / "smollm2-check.html"
    page_path.write_text(PAGE, encoding="utf8")
    server, base = serve(work)
    problems, speeds = [], {}
    Path(shots).mkdir(parents=True, exist_ok=True)
    if axe_source is None:
        problems.append(f"no axe-core at {axe}: scripts/check-browser.sh installs it")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            for width in (1280, 390):
                fail = lambda m, w=width: problems.append(f"{w}px: {m}")  # noqa: E731
                page = context.new_page()
                page.set_viewport_size({"width": width, "height": 900})
                page.set_default_timeout(timeout * 1000)
                chunks, errors = [], []
                page.on("request", lambda r: ".gguf." in r.url and chunks.append(r.url))
                page.on("console", lambda m: m.type == "error" and errors.append(m.text))
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(base + "smollm2-check.html")
                w = page.locator(".aft-widget.aft-live")
                w.wait_for()
                button = w.get_by_role("button", name="Load SmolLM2-135M-Instruct")
                if "MB download" not in button.inner_text():
                    fail(f"the button does not state the download's size: {button.inner_text()!r}")
                if chunks:
                    fail(f"chunks fetched before the button was pressed: {chunks[:2]}")
                press(page, button)  # by keyboard
                wait_state(page, "ready", timeout * 4)
                if width == 390 and chunks:
                    fail(
                        f"the second visit fetched {len(chunks)} chunks again (no Cache Storage copy)"
                    )
                if width == 1280 and len(chunks) != 4:
                    fail(f"the first visit fetched {len(chunks)} chunks, not 4")
                axe_found = []
                speed = chat_checks(
                    page, w, fail, width, want, cropped, n_long, timeout, axe_source, axe_found
                )
                for found in axe_found:
                    if isinstance(found, tuple):
                        fail(f"{found[0]}: {found[1]}")
                    else:
                        print(found)
                wide = page.evaluate(
                    "() => document.documentElement.scrollWidth > window.innerWidth + 1"
                )
                if wide:
                    fail("the page scrolls sideways")
                w.screenshot(path=str(Path(shots) / f"smollm2-{width}.png"))
                for e in errors:
                    fail(f"console error: {e}")
                speeds[width] = speed
                print(f"{width}px: speed: {speed}; load average {load()}")
                page.close()
            fail = lambda m: problems.append(f"bad input: {m}")  # noqa: E731
            refusals(browser, base, fail, timeout)
            scalar_path(context, base, want, fail, timeout)
            browser.close()
    finally:
        server.shutdown()
        for name in ("runtime", "models", "smollm2-check.html"):
            (work / name).unlink()
        work.rmdir()
    return problems, speeds


def load():
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def write_speed(path, speeds, chromium, seconds):
    """PATH's "chromium" entry: tokens per second at each width, with the load and the CPU."""
    rates = {}
    for width, line in speeds.items():
        m = re.search(r"([\d.]+) tokens per second", line)
        if m:
            rates[f"{width}px"] = float(m.group(1))
    path = Path(path).resolve()
    data = json.loads(path.read_text(encoding="utf8")) if path.exists() else {}
    data["chromium"] = {
        "smollm2_js_chromium_tokens_per_s": rates,
        "what": f"the widget's own count after {SPEED_TOKENS} tokens of its reply to "
        f"{SPEED_PROMPT!r} (greedy, the second turn of the chat), by the wall clock, "
        "WebAssembly SIMD, one thread",
        "command": "python scripts/browser_smollm2.py --json "
        + (str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)),
        "chromium": chromium,
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "check_wall_s": round(seconds, 1),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf8")
    print(f"wrote {path}: {rates} tokens/s at load {load()}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--screenshots", default="/tmp/smollm2-shots")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--axe", default=DEFAULT_AXE, help="axe-core's axe.min.js")
    parser.add_argument("--json", help="write the Chromium speed into this JSON's 'chromium'")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    problems, speeds = check(args.chromium, args.screenshots, args.timeout, args.axe)
    for p in problems:
        print("PROBLEM:", p)
    if args.json and not problems:
        write_speed(args.json, speeds, args.chromium, time.perf_counter() - t0)
    print("smollm2 widget:", "FAILED" if problems else "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
