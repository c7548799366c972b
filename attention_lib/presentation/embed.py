"""The HTML embedding of an interactive chart: :func:`chart_html` and :func:`show`.

:func:`show` displays a chart as a mimebundle with two representations:

* ``text/html``: an accessible container and a script (``chart_loader.js``,
  beside this module) that loads Vega, Vega-Lite and vega-embed from the
  site's own ``_static/vendor/`` (``scripts/vendor-vega.sh`` vendors them), so
  the static site needs no network: Jupyter Book picks this one
  (``_config.yml``: ``nb_mime_priority_overrides``). Where those files do not
  exist (JupyterLab on Binder, Colab) the script loads the same pinned
  versions from a CDN.
* ``application/vnd.vegalite.v5+json``: the spec itself, for JupyterLab's
  built-in Vega extension (Vega-Lite 5: the specs use nothing that only
  Vega-Lite 6 has, and render unchanged with Vega-Lite 5.23).
"""

import functools
import hashlib
import html
import json
from importlib.resources import files

VENDOR_VERSIONS = {"vega": "6.4.0", "vega-lite": "6.4.1", "vega-embed": "7.3.0"}
"""The npm versions vendored in book/_static/vendor (scripts/vendor-vega.sh)."""


@functools.cache
def _loader_js():
    """``chart_loader.js`` without its leading comment: a function expression."""
    text = files(__package__).joinpath("chart_loader.js").read_text(encoding="utf8")
    return text[text.index("(function") :].strip()


def _script_safe(text):
    """JSON ``text`` made safe inside an inline ``<script>`` element.

    The HTML tokenizer reads a script's text before JavaScript does: ``</script``
    ends it, and ``<!--`` followed by ``<script`` switches it into a state in
    which the real ``</script>`` no longer ends it, so the chart and the rest
    of the page vanish. Every such sequence starts with ``<``; written as
    ``\\u003c`` (the same character to JavaScript's JSON) it leaves the
    tokenizer nothing to see, whatever the labels, titles or descriptions hold.
    """
    return text.replace("<", "\\u003c")


def chart_html(chart, *, caption=None, description=None, static_path="../_static/vendor/"):
    """The HTML that renders ``chart`` from vendored Vega (see the module docstring).

    Parameters
    ----------
    chart : altair.TopLevelMixin
        A chart from :mod:`.charts` (or any Altair chart).
    caption : str, optional
        A visible caption under the chart.
    description : str, optional
        Text for screen readers; defaults to the chart's own ``description``.
    static_path : str, default "../_static/vendor/"
        Where the vendored scripts are, relative to the page.

    Returns
    -------
    str

    Examples
    --------
    >>> from attention_lib.presentation import chart_html, mask_explorer_chart
    >>> page = chart_html(mask_explorer_chart(["a", "b"]), caption="Masks.")
    >>> 'src="' in page, "../_static/vendor/vega-embed.min.js" in page
    (False, True)
    >>> 'role="figure"' in page and "aria-describedby" in page and "<noscript>" in page
    True
    >>> chart_html(mask_explorer_chart(["a", "b"])) == chart_html(mask_explorer_chart(["a", "b"]))
    True
    """
    spec = chart.to_dict()
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    chart_id = "attention-chart-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    description = description or spec.get("description", "An interactive chart.")
    title = spec.get("title")
    label = caption or (title if isinstance(title, str) else None) or "Interactive chart"
    names = ["vega", "vega-lite", "vega-embed"]
    local = [f"{static_path}{n}.min.js" for n in names]
    cdn = [f"https://cdn.jsdelivr.net/npm/{n}@{VENDOR_VERSIONS[n]}/build/{n}.min.js" for n in names]
    args = [json.dumps(chart_id), text, json.dumps(local), json.dumps(cdn)]
    script = f"{_loader_js()}({', '.join(_script_safe(a) for a in args)});"
    esc = html.escape
    fit = (spec.get("usermeta") or {}).get("attention_lib", {})
    view_style = ""
    if fit.get("max_width"):  # a chart as wide as the column (vega.fit_column)
        axes = int(fit.get("axes", 0))
        width = f"calc(100% - {axes}px)" if axes else "100%"
        view_style = f' style="width: {width}; max-width: {int(fit["max_width"])}px"'
    caption_html = (
        (f'<p class="attention-chart-caption" style="font-size:0.9em">{esc(caption)}</p>')
        if caption
        else ""
    )
    style = (
        f"<style>#{chart_id} .vega-bind {{margin: 0.2em 0}} "
        f"#{chart_id} .vega-bind-name {{margin-right: 0.5em}} "
        f"#{chart_id} .vega-bind label {{margin-right: 1em}} "
        f"#{chart_id} .vega-bind input {{margin-right: 0.3em}} "
        f"#{chart_id} .vega-bind input[type=range] {{width: min(16em, 50vw)}}</style>"
    )
    return (
        style + f'<div class="attention-chart" id="{chart_id}" role="figure" '
        f'aria-label="{esc(label)}" aria-describedby="{chart_id}-description">'
        f'<p id="{chart_id}-description" style="position:absolute;width:1px;height:1px;'
        f'overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap">{esc(description)}</p>'
        f'<div class="attention-chart-view"{view_style}></div>{caption_html}'
        f"<noscript>This interactive chart needs JavaScript; the figure above shows "
        f"the same data.</noscript></div>\n<script>{script}</script>"
    )


def show(chart, *, caption=None, description=None, static_path="../_static/vendor/"):
    """Display ``chart`` for the static site, JupyterLab and Colab alike.

    Displays the mimebundle of the module docstring, and ``text/plain``.
    Parameters as for :func:`chart_html`.

    Returns
    -------
    None
    """
    from IPython.display import display

    spec = chart.to_dict()
    page = chart_html(chart, caption=caption, description=description, static_path=static_path)
    lab_spec = dict(spec, **{"$schema": "https://vega.github.io/schema/vega-lite/v5.json"})
    bundle = {
        "text/html": page,
        "application/vnd.vegalite.v5+json": lab_spec,
        "text/plain": "(An interactive chart, shown on the book's web pages and in "
        f"JupyterLab: {caption or description or spec.get('description', '')})",
    }
    display(bundle, raw=True)
