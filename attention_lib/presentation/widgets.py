"""The live model widgets of the book's pages: :func:`widget_html`.

A chapter cell that returns ``widget_html("shakespeare")`` shows, on the static
site, the model of that chapter running in the reader's browser
(``book/_static/runtime/``: the JavaScript runtime, ``widgets.mjs`` and the
exported weights in ``book/_static/models/``, written by
``scripts/export_models.py``). Until the script has replaced it, and wherever
JavaScript does not run (a feed reader, Colab, a PDF), the widget shows a
static figure of the same thing: a greedy continuation and where the heads
looked, drawn from the same weights (``<name>.fallback.svg``, written by
``scripts/make_widget_fallbacks.mjs``).
"""

import html
import re
from pathlib import Path

#: The models a widget can show, and what kind of widget each gets.
WIDGETS = {
    "shakespeare": ("generate", "The Shakespeare model of chapter 11, running in your browser"),
    "stories260k": (
        "generate",
        "stories260K, chapter 12's Llama-family model, running in your browser",
    ),
    "translator": ("translator", "The English-French Transformer, running in your browser"),
    "minilm": ("encoder", "all-MiniLM-L6-v2, chapter 14's encoder, running in your browser"),
    "shakespeare_window": (
        "window",
        "Chapter 19's character model writing without end through a sliding window, "
        "running in your browser",
    ),
    "smollm2": (
        "smollm2",
        "SmolLM2-135M-Instruct, a chat model, running in your browser with its weights in 4 bits",
    ),
}

_STATIC = Path(__file__).resolve().parents[2] / "book" / "_static"


def _download_size(name):
    """``data-bytes`` for an encoder's weights exported at build time (the size shown before
    the download starts), or nothing when they are not exported here."""
    manifest = _STATIC / "models" / name / f"{name}.json"
    if not manifest.is_file():
        return ""
    import json

    size = json.loads(manifest.read_text(encoding="utf8")).get("bytes")
    return f' data-bytes="{int(size) + manifest.stat().st_size}"' if size else ""


def _fallback(name):
    path = _STATIC / "models" / f"{name}.fallback.svg"
    if not path.is_file():
        return f"<p>(The static figure {html.escape(path.name)} is missing.)</p>"
    svg = path.read_text(encoding="utf8")
    return re.sub(r"^<\?xml[^>]*>\s*", "", svg)


def widget_html(model_name, prompt=None, static="../_static/"):
    """The HTML of a live widget for one of the book's models, for a chapter cell.

    Parameters
    ----------
    model_name : {"shakespeare", "stories260k", "translator", "minilm", "shakespeare_window", \
"smollm2"}
        Which model the widget runs. ``"smollm2"`` (the SmolLM2 chapter's chat) loads the
        GGUF that ``scripts/export_smollm2.py`` cuts into chunks at build time.
    prompt : str, optional
        The text the prompt box starts with (default: the widget's own).
    static : str, optional
        Where the site's ``_static/`` folder is, relative to the page
        (default ``"../_static/"``, right for the chapters in ``book/``).

    Returns
    -------
    IPython.display.HTML
        A ``<div class="aft-widget">`` holding the static figure (the widget
        replaces it when its script runs), the stylesheet and a module script
        that mounts the widget; the weights load when the reader first
        presses its button.

    Raises
    ------
    ValueError
        If ``model_name`` is not one of the models above.

    Examples
    --------
    >>> from attention_lib import widget_html
    >>> "data-model=\\"shakespeare\\"" in widget_html("shakespeare").data
    True
    >>> widget_html("gpt2")
    Traceback (most recent call last):
    ...
    ValueError: model_name must be one of 'shakespeare', 'stories260k', 'translator', 'minilm', 'shakespeare_window', 'smollm2', got 'gpt2'
    """
    if model_name not in WIDGETS:
        names = ", ".join(repr(n) for n in WIDGETS)
        raise ValueError(f"model_name must be one of {names}, got {model_name!r}")
    if prompt is not None and not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    from IPython.display import HTML

    kind, label = WIDGETS[model_name]
    esc = html.escape
    data_prompt = "" if prompt is None else f' data-prompt="{esc(prompt)}"'
    data_prompt += _download_size(model_name)
    module = esc(static + "runtime/widgets.mjs")
    return HTML(
        f'<link rel="stylesheet" href="{esc(static)}runtime/widgets.css">\n'
        f'<div class="aft-widget" data-model="{model_name}" data-kind="{kind}"{data_prompt} '
        f'role="region" aria-label="{esc(label)}">\n'
        f'<figure class="aft-fallback">{_fallback(model_name)}\n'
        f"<figcaption>{esc(label)}: a static picture of it. With JavaScript on, this becomes "
        "a live widget.</figcaption></figure>\n"
        "</div>\n"
        f'<script type="module">import("{module}").then((m) => m.mountAll())'
        ".catch(() => {});</script>"
    )
