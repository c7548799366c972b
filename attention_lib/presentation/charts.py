"""Interactive figures: charts that recompute attention in the reader's browser.

Each builder returns an Altair (Vega-Lite) chart that carries its own data (a
few hundred numbers computed here, with fixed seeds) and recomputes what the
reader asks for with Vega expressions in the browser: a softmax at another
temperature, another mask, another key width. No kernel and no server is
involved, so the charts work on the static site. The builders share the
Vega-Lite helpers of :mod:`.vega`; :func:`~attention_lib.presentation.embed.show`
puts a chart on a page.

How a chapter adds a chart (three cells, what nbval compares, which numbers
to print) is in CONTRIBUTING.md, "An interactive chart in a chapter".
"""

import numpy as np

from .._checks import as_float, as_int, require_finite
from ..positions import alibi_bias
from .vega import (
    FONT_SIZE,
    GREY,
    OKABE_ITO_BLUE,
    OKABE_ITO_ORANGE,
    altair,
    finish,
    fit_column,
    heat_map_width,
    row_softmax,
    word_axis,
)


def _matrix(x, name):
    arr = as_float(x, name, np.float64)
    if arr.ndim != 2 or 0 in arr.shape:
        raise ValueError(
            f"{name} must be a non-empty 2-D array (queries, keys), got shape {arr.shape}"
        )
    require_finite(arr, name)
    return arr


def _labels(labels, n, name):
    labels = [str(w) for w in labels]
    if len(labels) != n:
        raise ValueError(f"{name} must have {n} entries, got {len(labels)}")
    return labels


def _temperature_range(bounds):
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(
            f"temperature_range must be two numbers (low, high), got {bounds!r}"
        ) from None
    if not 0 < low < high < np.inf:
        raise ValueError(f"temperature_range must satisfy 0 < low < high, got {bounds!r}")
    return low, high


def _slider(alt, name, value, low, high, step, label):
    """A parameter that the reader sets with a range slider from ``low`` to ``high``."""
    bind = alt.binding_range(min=low, max=high, step=step, name=label)
    return alt.param(name=name, value=value, bind=bind)


def _cell_rows(scores, queries, keys):
    """A heat map's data: one row per cell, with its indices, its two words and its score."""
    return [
        {"qi": i, "ki": j, "query": q, "key": k, "score": round(float(scores[i, j]), 6)}
        for i, q in enumerate(queries)
        for j, k in enumerate(keys)
    ]


def _heat_map(alt, value, queries, keys, step, allowed="true"):
    """Queries as rows, keys as columns, ``weight`` the softmax of ``value`` over each row."""
    return row_softmax(alt, alt.Chart(), value, ["qi"], allowed).encode(
        x=alt.X("ki:O", axis=word_axis(alt, keys, "key", step)),
        y=alt.Y("qi:O", axis=word_axis(alt, queries, "query")),
    )


def _cell_tooltip(alt, *fields):
    """The tooltip of a heat map's cell: its two words, ``fields``, its weight and score."""
    words = [alt.Tooltip("query:N", title="query word"), alt.Tooltip("key:N", title="key word")]
    numbers = [alt.Tooltip("weight:Q", format=".4f"), alt.Tooltip("score:Q", format=".4f")]
    return words + list(fields) + numbers


def _heat_map_chart(alt, layers, rows, params, title, step, row_labels, n_keys):
    """``layers`` over ``rows`` with their controls, as wide as the column allows."""
    chart = (
        alt.layer(*layers, data=alt.Data(values=rows))
        .add_params(*params)
        .properties(title=title, height=alt.Step(step))
    )
    return fit_column(chart, heat_map_width(n_keys, step, row_labels))


def attention_heatmap_chart(
    scores,
    query_labels,
    key_labels,
    *,
    temperature=1.0,
    temperature_range=(0.05, 3.0),
    title="Attention weights",
    description=None,
):
    """Heat map of softmax weights that the reader can re-temper and re-scale.

    The chart stores the raw ``scores``; the browser computes each row's
    softmax of ``scores / tau`` at the temperature ``tau`` (notation page),
    so moving the temperature slider recomputes every weight.

    Parameters
    ----------
    scores : array_like, shape (L, S)
        Attention scores, one row per query (finite).
    query_labels, key_labels : sequence of str
        The ``L`` query words (rows) and ``S`` key words (columns).
    temperature : float, default 1.0
        The slider's starting temperature ``tau``, inside ``temperature_range``.
    temperature_range : (float, float), default (0.05, 3.0)
        The slider's ends (it moves in steps of 0.05). Widen it when the
        scores are small: cosines of word vectors need ``tau`` up to
        ``sqrt(d_k)`` to show the scaled weights.
    title : str
        Shown above the chart.
    description : str, optional
        Text for screen readers; a description of the chart by default.

    Returns
    -------
    altair.LayerChart
        Controls: a temperature slider, and a radio switch between a colour
        scale fixed to 0-1 and one stretched from the smallest to the largest
        weight (the flattering scale). The tooltip gives query word, key
        word, weight and score.

    Raises
    ------
    ValueError
        If ``scores`` is not a finite non-empty 2-D array, the label counts
        do not match its shape, ``temperature_range`` is not two numbers
        ``0 < low < high``, ``temperature`` is outside it, or a score divided
        by the lowest temperature would overflow float64 in the browser.

    Examples
    --------
    >>> from attention_lib.presentation import attention_heatmap_chart
    >>> spec = attention_heatmap_chart([[1.0, 2.0], [0.5, 0.0]],
    ...                                ["le", "chat"], ["the", "cat"]).to_dict()
    >>> sorted(p["name"] for p in spec["params"])
    ['colour_scale', 'temperature']
    >>> [p["bind"]["input"] for p in sorted(spec["params"], key=lambda p: p["name"])]
    ['radio', 'range']
    >>> rows = spec["data"]["values"]
    >>> [(r["query"], r["key"], r["score"]) for r in rows]
    [('le', 'the', 1.0), ('le', 'cat', 2.0), ('chat', 'the', 0.5), ('chat', 'cat', 0.0)]
    >>> spec["layer"][0]["encoding"]["color"]["scale"]["scheme"]
    'cividis'
    """
    alt = altair()
    s = _matrix(scores, "scores")
    L, S = s.shape
    queries = _labels(query_labels, L, "query_labels")
    keys = _labels(key_labels, S, "key_labels")
    t_low, t_high = _temperature_range(temperature_range)
    if not t_low <= float(temperature) <= t_high:
        raise ValueError(
            f"temperature must be in [{t_low:g}, {t_high:g}] (temperature_range), got {temperature}"
        )
    # The browser divides by the temperature in float64; an infinite quotient
    # would make Vega drop the whole row without a word.
    biggest = float(np.abs(s).max())
    if not np.isfinite(biggest / t_low):  # Python floats: inf, no warning
        raise ValueError(
            f"scores up to {biggest:.3g} divided by the lowest temperature {t_low:g} "
            f"overflow the browser's float64 (largest {np.finfo(np.float64).max:.3g}): "
            f"scale the scores down (softmax weights change with the scale) or "
            f"raise the low end of temperature_range"
        )
    rows = _cell_rows(s, queries, keys)
    temp = _slider(alt, "temperature", float(temperature), t_low, t_high, 0.05, "temperature τ ")
    scale = alt.param(
        name="colour_scale",
        value="0 to 1",
        bind=alt.binding_radio(options=["0 to 1", "min to max"], name="colour scale "),
    )
    step = max(14, min(36, 560 // max(S, 1)))
    base = _heat_map(alt, "datum.score / temperature", queries, keys, step)
    domain = alt.ExprRef("colour_scale == '0 to 1' ? [0, 1] : null")  # null: min to max
    colours = alt.Scale(scheme="cividis", zero=False, nice=False, domainRaw=domain)
    cells = base.mark_rect().encode(
        color=alt.Color("weight:Q", title="weight", scale=colours), tooltip=_cell_tooltip(alt)
    )
    chart = _heat_map_chart(alt, [cells], rows, [temp, scale], title, step, queries, S)
    description = description or (
        f"Interactive heat map of attention weights, {L} query words (rows) by {S} key "
        "words (columns), darker for smaller weights. A temperature slider recomputes "
        "each row's softmax of the scores divided by the temperature; a switch sets the "
        "colour scale to 0 to 1 or to the weights' own minimum to maximum. Hover over "
        "a cell to read its two words, its weight and its score."
    )
    return finish(chart, description)


def saturation_chart(n_keys=8, log2_dk=range(1, 11), *, seed=0, title=None, description=None):
    """One query's softmax weights as the key width ``d_k`` grows, with and without scaling.

    The chart stores the scores ``q . k_j`` of :func:`saturation_scores`,
    which have variance ``d_k``. The browser shows the softmax of the row for
    the ``d_k`` the slider selects, divided by ``sqrt(d_k)`` (variance 1) or
    not (the weights saturate towards one-hot).

    Parameters
    ----------
    n_keys, log2_dk, seed
        The keys (bars), the exponents ``p`` the slider steps through
        (``d_k = 2**p``) and the seed, as for :func:`saturation_scores`.
    title, description : str, optional
        Title (a live one by default) and text for screen readers.

    Returns
    -------
    altair.Chart
        Controls: a slider over ``log2 d_k`` and a "divide by sqrt(d_k)" checkbox.

    Raises
    ------
    ValueError
        As :func:`saturation_scores` does.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.presentation import saturation_chart
    >>> spec = saturation_chart(n_keys=4, log2_dk=[1, 2, 3]).to_dict()
    >>> [(p["name"], p["bind"]["input"]) for p in spec["params"]]
    [('log2_dk', 'range'), ('divide', 'checkbox')]
    >>> rows = spec["data"]["values"]
    >>> len(rows), sorted({r["d_k"] for r in rows})
    (12, [2, 4, 8])
    >>> rng = np.random.default_rng(0)       # the same draws, recomputed
    >>> q, k = rng.standard_normal(2), rng.standard_normal((4, 2))
    >>> np.allclose([r["score"] for r in rows[:4]], k @ q, atol=1e-6)
    True
    """
    alt = altair()
    drawn = saturation_scores(n_keys, log2_dk, seed=seed)
    ps = [d_k.bit_length() - 1 for d_k in drawn]
    rows = [
        {"log2_dk": d_k.bit_length() - 1, "d_k": d_k, "key": j, "score": round(float(v), 6)}
        for d_k, scores in drawn.items()
        for j, v in enumerate(scores)
    ]
    dk = _slider(alt, "log2_dk", ps[len(ps) // 2], ps[0], ps[-1], 1, "log2 d_k ")
    divide = alt.param(
        name="divide", value=False, bind=alt.binding_checkbox(name="divide by sqrt(d_k) ")
    )
    base = (
        alt.Chart(alt.Data(values=rows))
        .transform_filter("datum.log2_dk == log2_dk")
        .transform_calculate(used="divide ? datum.score / sqrt(datum.d_k) : datum.score")
    )
    base = row_softmax(alt, base, "datum.used", ["log2_dk"])
    title = title or alt.Title(
        alt.ExprRef(
            "'d_k = ' + pow(2, log2_dk) + (divide ? ': softmax(q·k / sqrt(d_k))' "
            ": ': softmax(q·k), score variance ' + pow(2, log2_dk))"
        )
    )
    chart = (
        base.mark_bar(color=OKABE_ITO_BLUE)
        .encode(
            x=alt.X("key:O", title="key j", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("weight:Q", title="weight", scale=alt.Scale(domain=[0, 1])),
            tooltip=[
                alt.Tooltip("key:O", title="key j"),
                alt.Tooltip("d_k:Q", title="d_k"),
                alt.Tooltip("score:Q", title="score q·k", format=".3f"),
                alt.Tooltip("used:Q", title="score used", format=".3f"),
                alt.Tooltip("weight:Q", format=".4f"),
            ],
        )
        .add_params(dk, divide)
        .properties(title=title, height=220)
    )
    chart = fit_column(chart, 420 + 80)  # the bars, and the weight axis beside them
    description = description or (
        f"Interactive bar chart of one query's softmax weights over {n_keys} keys. A "
        "slider sets the key width d_k from "
        f"{2 ** ps[0]} to {2 ** ps[-1]}; the scores q dot k then have variance d_k and "
        "the weights saturate towards a single key. A checkbox divides the scores by "
        "the square root of d_k, which keeps the weights spread at every width."
    )
    return finish(chart, description)


def saturation_scores(n_keys=8, log2_dk=range(1, 11), *, seed=0):
    """The scores :func:`saturation_chart` draws: ``{d_k: K @ q}`` for ``d_k = 2**p``.

    ``q`` and the ``n_keys`` rows of ``K`` have independent standard-normal
    components, drawn in order of ``p`` from ``numpy.random.default_rng(seed)``,
    so each score has variance ``d_k``. A chapter prints their softmax, with
    and without dividing by ``sqrt(d_k)``, in the compared cell under the chart.

    Parameters
    ----------
    n_keys : int, default 8
        Number of keys, at least 2.
    log2_dk : iterable of int, default 1..10
        Consecutive exponents ``p`` in [0, 14].
    seed : int, default 0
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    dict of int to ndarray, shape (n_keys,)

    Raises
    ------
    ValueError
        If ``n_keys`` < 2 or ``log2_dk`` is not consecutive integers in [0, 14].

    Examples
    --------
    >>> from attention_lib.presentation import saturation_scores
    >>> scores = saturation_scores(n_keys=4, log2_dk=[1, 2])
    >>> sorted(scores), scores[4].shape
    ([2, 4], (4,))
    """
    n_keys = as_int(n_keys, "n_keys", minimum=2)
    ps = [as_int(p, "log2_dk") for p in log2_dk]
    if not ps or ps != list(range(ps[0], ps[0] + len(ps))) or ps[-1] > 14:
        raise ValueError(f"log2_dk must be consecutive integers in [0, 14], got {ps}")
    rng = np.random.default_rng(seed)
    drawn = {}
    for p in ps:
        q, k = rng.standard_normal(2**p), rng.standard_normal((n_keys, 2**p))
        drawn[2**p] = k @ q
    return drawn


def mask_explorer_scores(words, *, d=8, seed=0):
    """The scores :func:`mask_explorer_chart` stores: ``X X^T / sqrt(d)``.

    ``X`` holds one standard-normal row of width ``d`` per word, from
    ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    words : sequence of str
    d : int, default 8
    seed : int, default 0

    Returns
    -------
    ndarray, shape (len(words), len(words))

    Examples
    --------
    >>> from attention_lib.presentation import mask_explorer_scores
    >>> s = mask_explorer_scores(["a", "b", "c"])
    >>> s.shape, bool((s == s.T).all())
    ((3, 3), True)
    """
    d = as_int(d, "d", minimum=1)
    x = np.random.default_rng(seed).standard_normal((len(list(words)), d))
    return x @ x.T / np.sqrt(d)


MASK_EXPLORER_MASKS = ("bidirectional", "causal", "padding", "ALiBi")


def mask_explorer_chart(
    words,
    *,
    pad_token="<pad>",
    d=8,
    seed=0,
    masks=MASK_EXPLORER_MASKS,
    title="Masks and the weights they leave",
    description=None,
):
    """Self-attention weights of one sentence under a mask the reader chooses.

    The scores are those of :func:`mask_explorer_scores`. The reader picks
    bidirectional (no mask), causal (key ``j <= i``), padding (keys that are
    ``pad_token`` hidden) or ALiBi
    (:func:`attention_lib.positions.alibi_bias`, head 0 of 8: causal, plus a
    penalty of 1/2 per position of distance), or only those of them named in
    ``masks``; the browser recomputes the softmax over the allowed keys and
    marks masked cells with a cross.

    Parameters
    ----------
    words : sequence of str
        The sentence, padding tokens included (at least 2 words, at least
        one of them not padding).
    pad_token : str, default "<pad>"
        The word that marks padding.
    d, seed : int, default 8 and 0
        Width and seed of the random word vectors (:func:`mask_explorer_scores`).
    masks : sequence of str, default all four
        The masks the reader may choose, in this order, from
        ``"bidirectional"``, ``"causal"``, ``"padding"`` and ``"ALiBi"``; the
        first is shown at the start. Leave ``"ALiBi"`` out on a page that
        comes before ALiBi is explained.
    title, description : str, optional
        Title and text for screen readers.

    Returns
    -------
    altair.LayerChart
        Control: a radio choice of mask.

    Raises
    ------
    ValueError
        If there are fewer than 2 words or only padding, or if ``masks`` is
        empty, repeats a mask or names one that is not offered.

    Examples
    --------
    >>> from attention_lib.presentation import mask_explorer_chart
    >>> spec = mask_explorer_chart(["the", "cat", "sat", "<pad>"]).to_dict()
    >>> spec["params"][0]["bind"]["options"][:3]
    ['bidirectional', 'causal', 'padding']
    >>> rows = spec["data"]["values"]
    >>> len(rows), [r["real_key"] for r in rows[:4]]
    (16, [True, True, True, False])
    >>> spec["layer"][1]["mark"]["type"], spec["layer"][1]["mark"]["text"]
    ('text', '×')
    """
    alt = altair()
    words = [str(w) for w in words]
    L = len(words)
    if L < 2 or all(w == pad_token for w in words):
        raise ValueError(f"words must hold at least 2 words, not all {pad_token!r}, got {words}")
    modes = [masks] if isinstance(masks, str) else list(masks)
    unknown = [m for m in modes if m not in MASK_EXPLORER_MASKS]
    if not modes or unknown or len(set(modes)) < len(modes):
        raise ValueError(
            f"masks must name each mask at most once, from {list(MASK_EXPLORER_MASKS)}, got {modes}"
        )
    scores = mask_explorer_scores(words, d=d, seed=seed)
    alibi = alibi_bias(8, L)[0]  # (L, L), slope 1/2
    rows = _cell_rows(scores, words, words)
    for r in rows:
        r["real_key"] = r["key"] != pad_token
        if "ALiBi" in modes:
            r["alibi"] = round(float(alibi[r["qi"], r["ki"]]), 6) if r["ki"] <= r["qi"] else 0.0
    mode = alt.param(
        name="mask", value=modes[0], bind=alt.binding_radio(options=modes, name="mask ")
    )
    allowed = (
        "mask == 'causal' || mask == 'ALiBi' ? datum.ki <= datum.qi : "
        "mask == 'padding' ? datum.real_key : true"
    )
    step = max(20, min(40, 480 // L))
    value = "datum.score + (mask == 'ALiBi' ? datum.alibi : 0)"
    base = _heat_map(alt, value, words, words, step, allowed)
    cells = base.mark_rect().encode(
        color=alt.condition(
            "datum.allowed",
            alt.Color("weight:Q", title="weight", scale=alt.Scale(scheme="cividis", domain=[0, 1])),
            alt.value("#FFFFFF"),
        ),
        tooltip=_cell_tooltip(alt, alt.Tooltip("allowed:N", title="allowed")),
    )
    crosses = base.transform_filter("!datum.allowed").mark_text(
        text="×", fontSize=18, color="#555555"
    )
    chart = _heat_map_chart(alt, [cells, crosses], rows, [mode], title, step, words, L)
    description = description or (
        f"Interactive heat map of self-attention weights for the {L} words "
        f"'{' '.join(words)}', queries as rows and keys as columns. A radio choice of "
        f"mask ({', '.join(modes)}) recomputes each row's softmax over the keys it may "
        "see; masked cells are white with a cross. Hover over a cell for its weight."
    )
    return finish(chart, description)


def online_softmax_chart(
    scores=None,
    block_size=4,
    *,
    n=16,
    seed=0,
    title="The online softmax, block by block",
    description=None,
):
    """Step block by block through the online softmax's running maximum and sum.

    The browser processes the first ``t`` blocks of ``scores`` (the slider):
    the running maximum ``m`` of the scores ``e_j`` seen, the running sum
    ``ell = sum_j exp(e_j - m)`` over them, and the weights
    ``exp(e_j - m) / ell`` they give so far (the notation of the online-softmax
    chapter, book/17_online_softmax). At the last block these are the softmax
    of the whole row.

    Parameters
    ----------
    scores : array_like, shape (n,), optional
        One row of scores; by default ``n`` standard-normal draws times 2
        (fixed ``seed``).
    block_size : int, default 4
        Scores per block.
    n, seed : int
        Length and seed of the default scores.
    title, description : str, optional
        Title and text for screen readers.

    Returns
    -------
    altair.VConcatChart
        The scores (seen blocks in blue, a dashed line at ``m_t``) above the
        weights so far; control: a slider over the number of blocks seen.

    Raises
    ------
    ValueError
        If ``scores`` is not a finite 1-D array of at least 2 values, or
        ``block_size`` is not between 1 and its length.

    Examples
    --------
    >>> from attention_lib.presentation import online_softmax_chart
    >>> spec = online_softmax_chart([3.0, 1.0, 4.0, 1.0, 5.0], block_size=2).to_dict()
    >>> p = spec["params"][0]
    >>> p["name"], p["bind"]["min"], p["bind"]["max"]
    ('blocks_seen', 1, 3)
    >>> rows = spec["data"]["values"]
    >>> [r["block"] for r in rows]
    [0, 0, 1, 1, 2]
    """
    alt = altair()
    if scores is None:
        scores = 2 * np.random.default_rng(seed).standard_normal(as_int(n, "n", minimum=2))
    x = as_float(scores, "scores", np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"scores must be a 1-D array of at least 2 values, got shape {x.shape}")
    require_finite(x, "scores")
    block_size = as_int(block_size, "block_size", minimum=1)
    if block_size > x.size:
        raise ValueError(f"block_size must be at most len(scores) = {x.size}, got {block_size}")
    n_blocks = -(-x.size // block_size)
    rows = [{"j": j, "x": round(float(v), 6), "block": j // block_size} for j, v in enumerate(x)]
    seen = _slider(alt, "blocks_seen", 1, 1, n_blocks, 1, "blocks seen ")
    base = (
        alt.Chart()
        .transform_calculate(seen="datum.block < blocks_seen")
        .transform_calculate(kept="datum.seen ? datum.x : null")
        .transform_joinaggregate(m="max(kept)")
        .transform_calculate(e="datum.seen ? exp(datum.x - datum.m) : 0")
        .transform_joinaggregate(l="sum(e)")
        .transform_calculate(
            weight="datum.e / datum.l", status="datum.seen ? 'seen' : 'not yet seen'"
        )
    )
    tooltip = [
        alt.Tooltip("j:O", title="position j"),
        alt.Tooltip("block:O"),
        alt.Tooltip("x:Q", title="score e_j", format=".4f"),
        alt.Tooltip("weight:Q", title="weight so far", format=".4f"),
    ]
    xj = alt.X("j:O", title="position j", axis=alt.Axis(labelAngle=0))
    bars = base.mark_bar().encode(
        x=xj,
        y=alt.Y("x:Q", title="score e_j"),
        tooltip=tooltip,
        color=alt.Color(
            "status:N",
            title=None,
            scale=alt.Scale(domain=["seen", "not yet seen"], range=[OKABE_ITO_BLUE, GREY]),
            legend=alt.Legend(orient="bottom"),
        ),
    )
    first = base.transform_filter("datum.j == 0")
    rule = first.mark_rule(color=OKABE_ITO_ORANGE, strokeDash=[6, 3], strokeWidth=2).encode(y="m:Q")
    # Above the plot, clear of the bars, in two lines that fit a phone's narrow plot
    label = first.transform_calculate(
        label="'running max m = ' + format(datum.m, '.4f') + '\\nrunning sum ℓ = '"
        " + format(datum.l, '.4f')"
    ).mark_text(
        align="left", baseline="bottom", color="#333333", lineBreak="\n", fontSize=FONT_SIZE
    )
    label = label.encode(x=alt.value(0), y=alt.value(-6), text=alt.Text("label:N"))
    top = alt.layer(bars, rule, label).properties(height=170)
    y_weight = alt.Y("weight:Q", title="exp(e_j − m) / ℓ", scale=alt.Scale(domain=[0, 1]))
    weights = base.mark_bar(color=OKABE_ITO_BLUE).encode(x=xj, y=y_weight, tooltip=tooltip)
    weights = weights.properties(height=120)
    chart = (
        alt.vconcat(top, weights, data=alt.Data(values=rows))
        .add_params(seen)
        .properties(title=alt.Title(title, offset=40))
    )
    chart = fit_column(chart, 440, axes=70)  # 440-px panels, their axes to the left
    description = description or (
        f"Interactive chart of the online softmax over {x.size} scores in {n_blocks} "
        f"blocks of {block_size}. A slider sets how many blocks have been seen; the top "
        "panel shows the scores, the seen ones in blue, with a dashed line at the running "
        "maximum and the running sum written beside it; the bottom panel shows the "
        "weights exp(e minus m) over ell so far, which at the last block are the softmax."
    )
    return finish(chart, description)
