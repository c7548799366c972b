"""attention_lib.presentation: the chart specs carry the right data and controls.

The rendering itself (that each chart draws, shows a tooltip and redraws when
a control moves, with the network blocked) is checked in a real browser by
scripts/browser_check.py; these tests pin what the specs contain.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

alt = pytest.importorskip("altair")

from attention_lib import softmax  # noqa: E402
from attention_lib.presentation import (
    attention_heatmap_chart,
    chart_html,  # noqa: E402
    mask_explorer_chart,
    online_softmax_chart,
    saturation_chart,
    show,
)
from attention_lib.presentation.embed import VENDOR_VERSIONS  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def params(spec):
    return {p["name"]: p for p in spec["params"]}


def test_numerical_modules_do_not_import_altair():
    code = "import sys, attention_lib; print('altair' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_heatmap_stores_raw_scores_and_recomputes_the_row_softmax():
    scores = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]])
    spec = attention_heatmap_chart(scores, ["a", "b"], ["x", "y", "z"]).to_dict()
    rows = spec["data"]["values"]
    assert [r["score"] for r in rows] == scores.ravel().tolist()
    transforms = json.dumps(spec["layer"][0]["transform"])
    # row max and sum of exponentials by window transforms grouped by query
    assert '"op": "max"' in transforms and '"op": "sum"' in transforms
    assert "datum.score / temperature" in transforms and '"groupby": ["qi"]' in transforms
    p = params(spec)
    assert p["temperature"]["bind"]["input"] == "range" and p["temperature"]["value"] == 1.0
    assert p["colour_scale"]["bind"]["options"] == ["0 to 1", "min to max"]
    tooltip = [t.get("title", t["field"]) for t in spec["layer"][0]["encoding"]["tooltip"]]
    assert tooltip == ["query word", "key word", "weight", "score"]


def test_heatmap_temperature_range_sets_the_slider_ends():
    # Cosine scores need T up to sqrt(d_k) = 17.3 to show the scaled weights.
    spec = attention_heatmap_chart(
        [[0.2, 0.1]], ["a"], ["x", "y"], temperature=17.32, temperature_range=(0.05, 20)
    ).to_dict()
    bind = params(spec)["temperature"]["bind"]
    assert (bind["min"], bind["max"]) == (0.05, 20.0)
    assert params(spec)["temperature"]["value"] == 17.32
    with pytest.raises(ValueError, match="temperature_range"):
        attention_heatmap_chart([[0.2, 0.1]], ["a"], ["x", "y"], temperature=17.32)


@pytest.mark.parametrize("bad", [(3, 1), (0, 1), (1,), "ab", (1, np.inf)])
def test_heatmap_rejects_a_bad_temperature_range(bad):
    with pytest.raises(ValueError, match="temperature_range"):
        attention_heatmap_chart(
            [[0.2, 0.1]], ["a"], ["x", "y"], temperature=1.0, temperature_range=bad
        )


def test_key_labels_wider_than_their_column_are_turned():
    # English words in 36 px columns overprinted each other when kept flat.
    long = attention_heatmap_chart(
        np.zeros((1, 3)), ["L"], ["agreement", "European", "Economic"]
    ).to_dict()
    short = attention_heatmap_chart(np.zeros((1, 3)), ["L"], ["a", "b", "c"]).to_dict()
    assert long["layer"][0]["encoding"]["x"]["axis"]["labelAngle"] == -45
    assert short["layer"][0]["encoding"]["x"]["axis"]["labelAngle"] == 0
    assert long["layer"][0]["encoding"]["y"]["axis"]["labelAngle"] == 0  # rows stay flat


def test_range_sliders_are_wide_enough_to_drag():
    page = chart_html(saturation_chart(n_keys=4, log2_dk=[1, 2]))
    assert "input[type=range] {width: min(16em, 50vw)}" in page


def test_repeated_words_keep_their_own_rows():
    spec = attention_heatmap_chart(np.zeros((2, 2)), ["the", "the"], ["a", "b"]).to_dict()
    assert {r["qi"] for r in spec["data"]["values"]} == {0, 1}
    assert spec["layer"][0]["encoding"]["y"]["field"] == "qi"


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(scores=[1.0, 2.0]), "2-D"),
        (dict(scores=[[np.nan, 1.0]]), "NaN"),
        (dict(query_labels=["a", "b"]), "query_labels"),
        (dict(temperature=0.0), "temperature"),
    ],
)
def test_heatmap_rejects_bad_input(bad, match):
    args = dict(scores=[[1.0, 2.0]], query_labels=["a"], key_labels=["x", "y"]) | bad
    temperature = args.pop("temperature", 1.0)
    with pytest.raises(ValueError, match=match):
        attention_heatmap_chart(
            args["scores"], args["query_labels"], args["key_labels"], temperature=temperature
        )


def test_saturation_scores_have_variance_d_k():
    # One row shares its query q, so its scores have variance |q|^2; over many
    # seeds (many queries) the variance is d_k, as the chapter derives.
    pooled = {4: [], 64: []}
    for seed in range(30):
        spec = saturation_chart(n_keys=16, log2_dk=[2, 3, 4, 5, 6], seed=seed).to_dict()
        for r in spec["data"]["values"]:
            if r["d_k"] in pooled:
                pooled[r["d_k"]].append(r["score"])
    for d_k, scores in pooled.items():
        assert 0.8 < np.var(scores) / d_k < 1.25, (d_k, np.var(scores))
    assert set(params(spec)) == {"log2_dk", "divide"}


def test_saturation_rejects_gaps_in_d_k():
    with pytest.raises(ValueError, match="consecutive"):
        saturation_chart(log2_dk=[1, 3])


def test_mask_explorer_marks_padding_keys_and_offers_each_mask():
    spec = mask_explorer_chart(["a", "b", "<pad>"]).to_dict()
    rows = spec["data"]["values"]
    assert [r["real_key"] for r in rows if r["qi"] == 0] == [True, True, False]
    options = params(spec)["mask"]["bind"]["options"]
    assert options == ["bidirectional", "causal", "padding", "ALiBi"]


def test_mask_explorer_can_leave_alibi_out():
    spec = mask_explorer_chart(["a", "b", "<pad>"], masks=["causal", "padding"]).to_dict()
    mask = params(spec)["mask"]
    assert mask["bind"]["options"] == ["causal", "padding"]
    assert mask["value"] == "causal"  # the first one is shown first
    assert all("alibi" not in r for r in spec["data"]["values"])
    assert "ALiBi" not in spec["description"]


@pytest.mark.parametrize("masks", [[], ["causal", "causal"], ["causal", "sliding window"]])
def test_mask_explorer_rejects_bad_masks(masks):
    with pytest.raises(ValueError, match="masks must name"):
        mask_explorer_chart(["a", "b"], masks=masks)


def test_mask_explorer_rejects_only_padding():
    with pytest.raises(ValueError, match="not all"):
        mask_explorer_chart(["<pad>", "<pad>"])


def test_online_softmax_last_block_is_the_softmax():
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0])
    spec = online_softmax_chart(x, block_size=3).to_dict()
    rows = spec["data"]["values"]
    assert [r["block"] for r in rows] == [0, 0, 0, 1, 1, 1, 2]
    assert params(spec)["blocks_seen"]["bind"]["max"] == 3
    # what the browser computes at the last block, in NumPy: exp(x - m) / l
    m = max(r["x"] for r in rows)
    e = np.exp(np.array([r["x"] for r in rows]) - m)
    np.testing.assert_allclose(e / e.sum(), softmax(x), rtol=1e-12)


def font_sizes(spec):
    """Every font size a chart spec sets: its configuration and its text marks."""
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key.lower().endswith("fontsize") and isinstance(value, (int, float)):
                yield value
            else:
                yield from font_sizes(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from font_sizes(value)


@pytest.mark.parametrize(
    "build",
    [
        lambda: attention_heatmap_chart([[1.0, 2.0]], ["q"], ["a", "b"]),
        lambda: saturation_chart(n_keys=3, log2_dk=[1, 2]),
        lambda: mask_explorer_chart(["a", "b"]),
        lambda: online_softmax_chart([1.0, 2.0, 3.0], block_size=2),
    ],
    ids=["heatmap", "saturation", "masks", "online"],
)
def test_chart_text_is_readable_and_titles_are_the_body_size(build):
    spec = build().to_dict()
    sizes = list(font_sizes(spec))
    assert sizes and min(sizes) >= 13, f"chart text of {min(sizes)} px (at least 13)"
    assert spec["config"]["axis"]["titleFontSize"] == 16  # the body text's size
    assert spec["config"]["title"]["fontSize"] == 16


CHARTS = [
    lambda: attention_heatmap_chart([[1.0, 2.0]], ["q"], ["a", "b"]),
    lambda: saturation_chart(n_keys=3, log2_dk=[1, 2]),
    lambda: mask_explorer_chart(["a", "b"]),
    lambda: online_softmax_chart([1.0, 2.0, 3.0], block_size=2),
]


def numeric_widths(spec):
    """Every fixed width in a spec (numbers or steps), which would not fit a phone."""
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key == "width" and value != "container":
                yield value
            yield from numeric_widths(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from numeric_widths(value)


@pytest.mark.parametrize("build", CHARTS, ids=["heatmap", "saturation", "masks", "online"])
def test_charts_take_the_width_of_the_column_up_to_their_own(build):
    from attention_lib.presentation import chart_html

    chart = build()
    spec = chart.to_dict()
    assert list(numeric_widths({k: v for k, v in spec.items() if k != "config"})) == []
    fit = spec["usermeta"]["attention_lib"]
    assert 100 <= fit["max_width"] <= 700  # no wider than the desktop column
    view = chart_html(chart).split('class="attention-chart-view"')[1].split(">")[0]
    assert f"max-width: {fit['max_width']}px" in view
    assert ("width: 100%" in view) if not fit["axes"] else (f"calc(100% - {fit['axes']}px)" in view)


def test_charts_write_the_symbols_of_the_notation_page():
    """tau for the temperature; e_j and ell in the online softmax (not T, x_j, l)."""
    heat = json.dumps(
        attention_heatmap_chart([[1.0, 2.0]], ["q"], ["a", "b"]).to_dict(), ensure_ascii=False
    )
    assert "temperature τ" in heat and "temperature T" not in heat
    online = json.dumps(
        online_softmax_chart([1.0, 2.0, 3.0], block_size=2).to_dict(), ensure_ascii=False
    )
    assert "score e_j" in online and "ℓ" in online
    assert "x_j" not in online and "sum l " not in online


def test_html_loads_vendored_scripts_first_and_describes_the_chart():
    page = chart_html(mask_explorer_chart(["a", "b"]), caption="Pick a mask.")
    for name in ("vega", "vega-lite", "vega-embed"):
        assert f'"../_static/vendor/{name}.min.js"' in page
        assert f"npm/{name}@{VENDOR_VERSIONS[name]}/" in page  # fallback off the site
        assert (ROOT / "book/_static/vendor" / f"{name}.min.js").is_file()
    assert page.index("../_static/vendor/") < page.index("cdn.jsdelivr")
    assert 'role="figure"' in page and 'aria-label="Pick a mask."' in page
    assert "Interactive heat map of self-attention weights" in page
    assert "<noscript>" in page


def test_vendored_vega_lite_matches_altair_schema():
    assert alt.SCHEMA_VERSION == "v" + VENDOR_VERSIONS["vega-lite"]
    readme = (ROOT / "book/_static/vendor/README.md").read_text()
    for name, version in VENDOR_VERSIONS.items():
        assert f"`{name}` | {version}" in readme


def test_show_offers_html_and_vega_lite_json(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, raw: shown.append(obj))
    show(online_softmax_chart(), caption="Step.")
    (bundle,) = shown
    assert set(bundle) == {"text/html", "application/vnd.vegalite.v5+json", "text/plain"}
    assert bundle["application/vnd.vegalite.v5+json"]["$schema"].endswith("/v5.json")


def _inline_script(page):
    """The text of the chart's inline script, as the HTML tokenizer delimits it."""
    start = page.index("<script>") + len("<script>")
    return page[start : page.rindex("</script>")]


@pytest.mark.parametrize("hostile", ["<!--<script>", "</script><b>x</b>", "a & b > c"])
def test_html_script_holds_no_markup_whatever_the_labels_hold(hostile):
    # "<!--<script" in script data puts the tokenizer in its "double escaped"
    # state: the closing </script> no longer closes, and the chart and the rest
    # of the page disappear. The embedded JSON must carry no "<" at all.
    chart = attention_heatmap_chart(
        [[1.0, 2.0]], [hostile], ["x", hostile], title=hostile, description=hostile
    )
    page = chart_html(chart, caption=hostile, description=hostile, static_path=f"{hostile}/")
    script = _inline_script(page)
    assert "<" not in script
    assert page.count("</script>") == 1
    # The loader (chart_loader.js) is called with (id, spec, local, cdn), each JSON.
    args = json.loads("[" + script[script.rindex("})(") + 3 : script.rindex(");")] + "]")
    assert args[1] == chart.to_dict()  # JavaScript reads the same data


def test_html_of_a_chart_without_angle_brackets_embeds_its_spec_unchanged():
    chart = attention_heatmap_chart([[1.0, 2.0]], ["a"], ["x", "y"])
    spec = json.dumps(chart.to_dict(), sort_keys=True, separators=(",", ":"))
    assert "<" not in spec and spec in chart_html(chart)


def test_heatmap_refuses_scores_that_overflow_when_divided_by_the_temperature():
    # Vega computes score / T in float64: 1e307 / 0.05 is infinite and the row
    # would silently vanish from the chart.
    with pytest.raises(ValueError, match="overflow.*temperature_range"):
        attention_heatmap_chart([[1e307, 0.0]], ["a"], ["x", "y"])
    attention_heatmap_chart(
        [[1e307, 0.0]], ["a"], ["x", "y"], temperature_range=(1.0, 3.0)
    )  # 1e307 / 1 fits
