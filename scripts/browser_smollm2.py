"""The SmolLM2 chat widget (book/_static/runtime/widget-smollm2.mjs) in headless Chromium.

Serves a scratch page holding the widget, beside ``book/_static``'s runtime and models (the
chunks ``scripts/export_smollm2.py`` writes: exported first when missing), from 127.0.0.1,
and opens it at 1280 and at 390 px wide (no other request leaves the machine):

- before the button is pressed, no chunk of the model is fetched, and the button states the
  download's size;
- pressed, the model loads (every chunk checked); an empty message gives a message;
- "What is the capital of France?" sent with temperature 0 gets the library's greedy reply
  (``attention_lib.models.smollm2``: its first 32 tokens, or up to ``<|im_end|>``); the
  attention map is drawn (a non-blank canvas);
- a head switched off (18.6) and the reply regenerated: the widget says how many heads are off;
- (at 1280 px) the repeated-text preset is continued by copying ("quiet harbour lemon"), and
  no longer with the chapter's top induction heads switched off;
- on the second width the page is opened afresh and the chunks come from Cache Storage (no
  chunk fetched again);
- no console error, nothing scrolls sideways.

Writes a screenshot at each width into ``--screenshots`` (default: /tmp/smollm2-shots).

    python scripts/browser_smollm2.py [--chromium /usr/bin/chromium] [--screenshots DIR]
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from browser_check import CHROMIUM_FLAGS, serve  # noqa: E402

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


def library_reply():
    """The library's greedy reply ids (at most TOKENS, up to and without <|im_end|>)."""
    from attention_lib.models.smollm2 import chat_prompt, load_smollm2

    model, tok = load_smollm2()
    ids = chat_prompt(tok, QUESTION)
    new = model.generate(ids, TOKENS, temperature=0)[len(ids) :].tolist()
    return new[: new.index(tok.eos_id)] if tok.eos_id in new else new


def check(chromium, shots, timeout):
    from playwright.sync_api import sync_playwright

    import tempfile

    static = ROOT / "book" / "_static"
    if not (static / "models" / "smollm2" / "smollm2.json").exists():
        from export_smollm2 import export, smollm2

        export(smollm2.gguf_path())  # the site build's export (build-book.sh), done here
    want = library_reply()
    # a scratch folder: the page, and links to the runtime and the exported models
    work = Path(tempfile.mkdtemp(prefix="smollm2-check-"))
    for name in ("runtime", "models"):
        (work / name).symlink_to(static / name)
    page_path = work / "smollm2-check.html"
    page_path.write_text(PAGE, encoding="utf8")
    server, base = serve(work)
    problems = []
    Path(shots).mkdir(parents=True, exist_ok=True)
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
                button.focus()
                page.keyboard.press("Enter")  # by keyboard
                page.wait_for_function(
                    "document.querySelector('.aft-widget').dataset.state === 'ready'",
                    timeout=timeout * 4000,
                )
                if width == 390 and chunks:
                    fail(
                        f"the second visit fetched {len(chunks)} chunks again (no Cache Storage copy)"
                    )
                if width == 1280 and len(chunks) != 4:
                    fail(f"the first visit fetched {len(chunks)} chunks, not 4")
                box = w.locator("textarea")
                box.fill("   ")
                w.get_by_role("button", name="Send").click()
                if "Write a message first" not in w.locator(".aft-status").first.inner_text():
                    fail("an empty message gave no message")
                box.fill(QUESTION)
                w.get_by_role("button", name="Send").click()
                page.wait_for_function(
                    "document.querySelector('.aft-widget').dataset.state === 'done'",
                    timeout=timeout * 1000,
                )
                got = [int(i) for i in w.get_attribute("data-reply-ids").split(",") if i][
                    : len(want)
                ]
                if got != want:
                    fail(f"the reply's ids {got[:8]}... are not the library's {want[:8]}...")
                blank = page.evaluate(
                    "() => { const c = document.querySelector('.aft-heatmap');"
                    " return !c.width || !c.getContext('2d').getImageData(0, 0, c.width, c.height)"
                    ".data.some((v, i) => i % 4 !== 3 && v < 250); }"
                )
                if blank:
                    fail("the attention map is blank")
                w.locator("input[type=text]").fill("18.6")
                page.evaluate("() => document.querySelector('.aft-widget').dataset.state = ''")
                w.get_by_role("button", name="Regenerate").click()
                page.wait_for_function(
                    "document.querySelector('.aft-widget').dataset.state === 'done'",
                    timeout=timeout * 1000,
                )
                if "1 head switched off" not in w.locator(".aft-status").first.inner_text():
                    fail("the widget does not say that a head is switched off")
                if width == 1280:
                    # the repeated text copied, and no longer with the induction heads off
                    w.get_by_role("button", name="New chat").click()
                    w.get_by_role("button", name="A repeated-text prompt").click()
                    w.locator("input[type=text]").fill("")
                    replies = []
                    for step in ("Send", "Regenerate"):
                        if step == "Regenerate":
                            w.get_by_role(
                                "button", name="Switch off the top induction heads"
                            ).click()
                        page.evaluate(
                            "() => document.querySelector('.aft-widget').dataset.state = ''"
                        )
                        w.get_by_role("button", name=step).click()
                        page.wait_for_function(
                            "document.querySelector('.aft-widget').dataset.state === 'done'",
                            timeout=timeout * 1000,
                        )
                        replies.append(w.get_attribute("data-reply"))
                    if COPY not in replies[0]:
                        fail(f"the repeated text is not continued by copying: {replies[0]!r}")
                    if COPY in replies[1]:
                        fail(f"with the induction heads off it still copies: {replies[1]!r}")
                    print(f"repeated text: {replies[0]!r}; induction heads off: {replies[1]!r}")
                wide = page.evaluate(
                    "() => document.documentElement.scrollWidth > window.innerWidth + 1"
                )
                if wide:
                    fail("the page scrolls sideways")
                w.screenshot(path=str(Path(shots) / f"smollm2-{width}.png"))
                for e in errors:
                    fail(f"console error: {e}")
                speed = w.locator(".aft-status").nth(1).inner_text()
                print(f"{width}px: reply {w.get_attribute('data-reply')!r}; {speed}")
                page.close()
            browser.close()
    finally:
        server.shutdown()
        for name in ("runtime", "models", "smollm2-check.html"):
            (work / name).unlink()
        work.rmdir()
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--screenshots", default="/tmp/smollm2-shots")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    problems = check(args.chromium, args.screenshots, args.timeout)
    for p in problems:
        print("PROBLEM:", p)
    print("smollm2 widget:", "FAILED" if problems else "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
