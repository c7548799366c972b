"""Every chapter writes its mathematics in the notation page's symbols.

``book/notation.md`` gives each symbol one meaning across the book and names,
beside many of them, what they are *never* used for. This test reads the
mathematics of every chapter (``$...$`` and ``$$...$$`` in markdown cells and
in figure captions) and fails, naming the
chapter and the formula, on the symbols the page forbids or reserves:

- the loss is $\\mathcal{L}$, never $\\ell$ (a row sum of exponentials);
- a model's width is $E$, never $d_\\text{model}$;
- $V$ is the value matrix, never a vocabulary size ($|\\mathcal{V}|$);
- position encodings are $\\mathrm{PE}$, never an italic $PE$;
- the scores and the weights are $Z$ and $A$, never FlashAttention's $S$ and $P$
  ($S$ is the number of keys);
- sets of alignment links are calligraphic ($\\mathcal{A}, \\mathcal{S}, ...$);
- $e$ is a score, never Euler's number ($e^x$) or an embedding size;
- $\\lambda$ is an ALiBi slope and carries its head, $\\lambda_r$;
- an embedding is $\\operatorname{emb}(x)$, never $E x$ ($E$ is a width);
- the Kronecker delta is written $\\mathbb{1}[j = k]$ ($\\delta$ is a step);
- $N$ (chapter 1's number of symbols) is not a batch or a number of blocks;
- $T$ (additive attention's decoder steps) is not a language model's length;
- $M$ is the mask, never the encoder's memory (its states are $h_j$);
- $H$ is a number of heads, never an entropy ($\\mathcal{H}$);
- $z$ is a GRU's update gate, never logits ($o$) or SiLU's argument;
- top-p's threshold is $p_\\text{top}$ ($p$ is a probability);
- a rotary or sinusoidal pair is indexed by $u$, $(2u, 2u + 1)$;
- Adam's running means are $\\bar g$ and $\\overline{g^2}$, its parameter $w$
  ($m$ is a row maximum, $v$ a value, $\\theta$ a rotary angle);
- $K$ is a size only where it is not also the key matrix;
- the scores are $Z$ (and their gradient $dZ$), never $E$, which is a width;
- an ALiBi slope is $\\lambda_r$, never the paper's $m_h$ or $m = 2^{-8}$;
- a rotary angle is $\\theta_u$, indexed by the pair $u$, never $\\theta_i$; its base
  is not $b$ (a key block);
- a number of heads is $H$ ($H_\\text{kv}$ key/value heads), a head is $r$, its features
  $d$: never $h$ heads, $g$ groups, $d_h$ or $k_{h,j}$ ($h_j$ is an encoder state);
- a latent is not $c_j$ ($c_i$ is a context vector);
- a quantization scale is not $d$ (features per head), a number of bits not $b$,
  integer codes not $q$ (a query), and a draft model's distribution not $q$;
- a sliding window is $L_w$ long and a warm-up $n_\\text{warm}$ steps: $w$ is one
  trainable parameter.

Text drawn inside figures is read too: every text a figure's PNG records
(``attention_lib.presentation.plotting`` writes it in the PNG's "Drawn text"
chunk), the strings of the code that draws each figure, its alt text, and the
text of the book's SVG diagrams. Mathematics in it (``$...$``) meets the same
rules, and TeX outside ``$...$``, which matplotlib would print literally
("y_{i-1}", "Q K^T"), fails.
"""

import ast
import base64
import json
import re
import struct
import zlib
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb")) + sorted(BOOK.glob("appendix_*.ipynb"))

MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.DOTALL)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)  # code spans may hold a literal $

#: (pattern, what the notation page says instead, chapters the rule skips)
RULES = [
    (
        r"\\partial\s*\\ell|\\ell\s*\(|\\ell\s*=\s*\\sum",
        "the loss is \\mathcal{L}; \\ell is a row sum",
        (),
    ),
    (r"d_\{?\\(?:text|mathrm|rm)\{?model|d_\{model\}", "a model's width is E, not d_model", ()),
    (
        r"(?<![\\\w])V\s*=\s*\d|\(B,\s*V\)|\(B,\s*T,\s*V\)",
        "V is the value matrix; a vocabulary size is |\\mathcal{V}|",
        (),
    ),
    (r"(?<!\\mathrm\{)(?<![\w\\{])PE(?=_|\s|\b)", "position encodings are \\mathrm{PE}", ()),
    (
        r"(?<![\w\\])d[SP](?![\w])|(?<![\w\\])P\s*=\s*\\operatorname\{softmax\}|S\s*=\s*\\text\{scale\}",
        "scores and weights are Z and A (S is the number of keys)",
        (),
    ),
    (
        r"(?<![\w\\{])[ASPG]\s*\\cap|\|[ASPG]\|",
        "sets of links are calligraphic: \\mathcal{A}, \\mathcal{S}, ...",
        (),
    ),
    (
        r"(?<![\w\\])e\s*\^|(?<![\w\\])e\s*=\s*\d",
        "e is a score: write \\exp(x), and a size as d_e",
        (),
    ),
    (r"\\lambda(?!_)", "lambda is an ALiBi slope, \\lambda_r", ()),
    (r"(?<![\w\\])E\s*[xy]_", "an embedding is \\operatorname{emb}(x); E is a width", ()),
    (r"\\delta_\{?[a-z]{2}", "write the indicator \\mathbb{1}[j = k]; \\delta is a step", ()),
    # Chapter 6 quotes PyTorch's documented mask shape (N H, L, S) for the adapter
    # that keeps PyTorch's API; everywhere else the batch is B.
    (
        r"(?<![\w\\{])N\s*H\b|\\times\s*N\b|^N$",
        "N is chapter 1's number of symbols",
        ("01_bottleneck", "06_multi_head"),
    ),
    (
        r"(?<![\w\\])M\s*W_[KV]|(?<![\w\\])M\s*=\s*\\operatorname\{LN",
        "M is the mask; the encoder's memory is its states h_j",
        (),
    ),
    (r"(?<![\w\\{])H\s*=\s*-\s*\\sum", "H is a number of heads; an entropy is \\mathcal{H}", ()),
    (
        r"\\operatorname\{softmax\}\(z|\\operatorname\{SiLU\}\(z\)|z\s*\\sigma\(z\)",
        "z is a GRU's update gate: logits are o, SiLU's argument x",
        (),
    ),
    (
        r"\(2i,\s*2i\s*\+\s*1\)|\(i,\s*i\s*\+\s*d\s*/\s*2\)",
        "a pair of features is indexed by u",
        (),
    ),
    (
        r"\\theta\s*&?\s*\\leftarrow|(?<![\w\\])[mv]\s*&?\s*\\leftarrow",
        "Adam's running means are \\bar g and \\overline{g^2}; its parameter is w",
        (),
    ),
    (
        r"(?<![\w\\{])K\s*=\s*\d",
        "K as a size belongs to additive attention (chapters 1-3); elsewhere K is the key matrix",
        ("01_bottleneck", "02_bahdanau", "03_learning_to_align"),
    ),
    (
        r"(?<![\w\\{])T\s*=\s*\d",
        "T counts additive attention's decoder steps; a sequence is L long",
        ("01_bottleneck", "02_bahdanau", "03_learning_to_align"),
    ),
    (
        r"(?<![\w\\{])d?E\s*=\s*Q\s*K|\\operatorname\{softmax\}\s*\(\s*E\s*\)|(?<![\w\\])dE\b",
        "the scores are Z and their gradient dZ; E is a model's width",
        (),
    ),
    (
        r"(?<![\w\\])m_\{?h\b|(?<![\w\\])m\s*=\s*2\s*\^",
        "an ALiBi slope is \\lambda_r (m is a row maximum)",
        (),
    ),
    (
        r"\\theta_\{?i\b|\^\s*\{\s*-\s*2\s*i\s*/",
        "a rotary angle is \\theta_u, u the index of a pair (i is a query)",
        (),
    ),
    (
        r"(?<![\w\\])b\s*\^\s*\{\s*-|(?<![\w\\])b\s*\\,\s*s\s*\^",
        "b is a key block's index, not the rotary base",
        (),
    ),
    (
        r"(?<![\w\\])d_\{?h\b|_\{h\s*,|,\s*h\s*\}|(?<![\w\\])h\s*/\s*g\b|(?<![\w\\])g\s*=\s*1\b",
        "H heads share H_kv key/value heads; a head is r, its features d (h_j is an encoder state)",
        (),
    ),
    (
        r"(?<![\w\\])c_\{?j\}?\s*(?:=\s*x|W_)",
        "c_i is a context vector, not a latent",
        (),
    ),
    (
        r"(?<![\w\\])d\s*=\s*\\max|(?<![\w\\])w\s*/\s*d\b|(?<![\w\\])d\s*\\,\s*\(\s*q",
        "d is a head's features, not a quantization scale",
        (),
    ),
    (
        r"2\s*\^\s*\{?\s*b\b|(?<![\w\\])b\s*<\s*8",
        "b is a key block's index, not a number of bits",
        (),
    ),
    (
        r"(?<![\w\\])q\s*=\s*\\(?:mathrm|operatorname)\{round\}|(?<![\w\\])q\s*=\s*\\min",
        "q is a query, not an integer code",
        (),
    ),
    (
        r"p\s*\(\s*x\s*\)\s*/\s*q\s*\(|\\sim\s*q\b|\\max\s*\(\s*0\s*,\s*p\s*-\s*q\b|\\min\s*\(\s*p\s*,\s*q\b",
        "q is a query, not a draft model's distribution",
        (),
    ),
    (
        r"(?<![\w\\])[pi]\s*-\s*\(?\s*w\b|(?<![\w\\])[ik]\s*\+\s*w\b|,\s*w\s*\)",
        "a sliding window is L_w long; w is one trainable parameter",
        (),
    ),
    (
        r"\\frac\s*\{\s*t\s*\}\s*\{\s*w\s*\}|\\frac\s*\{\s*w\s*\}\s*\{\s*t\s*\}",
        "a warm-up lasts n_warm steps; w is one trainable parameter",
        (),
    ),
]


#: (pattern, what the notation page says instead): prose around the formulas.
PROSE_RULES = [
    (r"memory \$M\$|memory M\b", "M is the mask; the encoder's memory is its states h_j"),
    (r"embedding table \$E\$|table \$E\$", "E is a width; the embedding table is W_emb"),
    (r"logits \$z\$", "z is a GRU's update gate; logits are o"),
    (r"add up to (?:at least )?\$p\$", "top-p's threshold is p_top; p is a probability"),
    (r"\$W_a\$\s*\$\(n,\s*d_a\)\$", "W_a is d_a x n (the code holds its transpose, n x d_a)"),
    (
        r"\$h\$ (?:query |key/value |attention )?heads|\$g\$ key/value heads",
        "a number of heads is H, of key/value heads H_kv",
    ),
    (
        r"(?:window|last) of (?:the last )?\$w\$|\$w\$ (?:tokens|positions|warm-up)",
        "a sliding window is L_w long, a warm-up n_warm steps; w is one trainable parameter",
    ),
    (
        r"scale \$d\$|\$b\$ bits",
        "d is a head's features and b a key block; name the scale and bits otherwise",
    ),
]

#: Text drawn in a figure: TeX that matplotlib would print literally, outside $...$.
RAW_TEX = re.compile(r"[_^]\{|\^T\b|\\(?:frac|sum|top|alpha|mathrm|text|cdot|times)\b")

#: (pattern, instead) for the words of a figure, outside its $...$.
FIGURE_RULES = [
    (r"\bmemory M\b|\bfrom M\b", "M is the mask; the encoder's memory is h"),
    (
        r"(?<![\w.])E [xy]\b|\bE\u1d40|\bE\^T",
        "E is a width; the embedding is emb(x), the table W_emb",
    ),
]


def _png_text_chunks(data):
    """The tEXt and iTXt chunks of a PNG, as {key: text}."""
    chunks, at = {}, 8
    while at < len(data):
        (n,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + n]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            chunks[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _, _, rest = rest.partition(b"\0")  # language
            _, _, value = rest.partition(b"\0")  # translated keyword
            chunks[key.decode("latin-1")] = (
                zlib.decompress(value) if compressed else value
            ).decode("utf-8")
        at += 12 + n
    return chunks


def _strings(source):
    """The string constants of a cell's code (f-strings' literal parts too)."""
    try:
        tree = ast.parse("\n".join(l for l in source.splitlines() if not l.startswith("%")))
    except SyntaxError:
        return []
    return [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def figure_texts(path):
    """Every text of a chapter's figures: drawn (PNG), drawing code, alt text; and SVGs."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        pngs = [
            o["data"]["image/png"]
            for o in cell.get("outputs", [])
            if "image/png" in o.get("data", {})
        ]
        if not pngs:
            continue
        for png in pngs:
            drawn = _png_text_chunks(base64.b64decode("".join(png))).get("Drawn text", "")
            yield from (t for t in drawn.split("\n") if t.strip())
        yield from _strings("".join(cell["source"]))
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt")
        if alt:
            yield alt


def svg_texts(path):
    """The text of every SVG diagram a chapter's markdown includes."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            for name in re.findall(r"_static/diagrams/([\w-]+\.svg)", "".join(cell["source"])):
                svg = (BOOK / "_static" / "diagrams" / name).read_text(encoding="utf-8")
                for text in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.DOTALL):
                    yield re.sub(r"<[^>]+>", "", text)


def figure_violations(path):
    found = []
    for text in [*figure_texts(path), *svg_texts(path)]:
        words = MATH.sub(" ", text)
        if RAW_TEX.search(words):
            found.append(
                f"{path.stem}: figure text {text!r} (TeX outside $...$ is printed literally)"
            )
        for pattern, instead in FIGURE_RULES:
            if re.search(pattern, words):
                found.append(f"{path.stem}: figure text {text!r} ({instead})")
        for match in MATH.finditer(text):
            formula = " ".join((match.group(1) or match.group(2)).split())
            for pattern, instead, skip in RULES:
                if path.stem not in skip and re.search(pattern, formula, re.MULTILINE):
                    found.append(f"{path.stem}: figure text ${formula}$ ({instead})")
    return found


def prose(path):
    """The markdown of a chapter, code spans removed."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            yield " ".join(CODE.sub(" ", "".join(cell["source"])).split())


def formulas(path):
    """Every formula of a notebook's markdown cells and figure captions, in order."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"])
        else:
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            text = figure.get("caption") or ""
        text = CODE.sub(" ", text)
        for match in MATH.finditer(text):
            yield " ".join((match.group(1) or match.group(2)).split())


def violations(path):
    found = []
    for formula in formulas(path):
        for pattern, instead, skip in RULES:
            if path.stem not in skip and re.search(pattern, formula, re.MULTILINE):
                found.append(f"{path.stem}: ${formula}$ ({instead})")
    for text in prose(path):
        for pattern, instead in PROSE_RULES:
            for match in re.finditer(pattern, text):
                found.append(f"{path.stem}: ...{match.group(0)}... ({instead})")
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_uses_the_notation_page(path):
    found = violations(path)
    assert not found, "symbols the notation page forbids:\n" + "\n".join(found)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_figures_use_the_notation_page(path):
    found = figure_violations(path)
    assert not found, "figure text the notation page forbids:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "formula, forbidden",
    [
        (r"\frac{\partial \ell}{\partial x}", True),
        (r"\frac{\partial \mathcal{L}}{\partial x}", False),
        (r"\ell_i = \sum_j \exp(e_{ij} - m_i)", False),
        (r"W_1: d_\text{model} \times d_\text{ff}", True),
        (r"(B, V)", True),
        (r"PE_{p,\,2i}", True),
        (r"\mathrm{PE}_{p}", False),
        (r"dS = P \odot (dP - \operatorname{rowsum}(dP \odot P))", True),
        (r"dZ = A \odot (dA - \operatorname{rowsum}(dA \odot A))", False),
        (r"|A \cap S| / |S|", True),
        (r"|\mathcal{A} \cap \mathcal{S}|", False),
        (r"e^{x}", True),
        (r"e_{ij}", False),
        (r"\lambda = 0.4", True),
        (r"-\lambda_r (i - j)", False),
        (r"\mathrm{GRU}(E x_j, h)", True),
        (r"\alpha_j (\delta_{jk} - \alpha_k)", True),
        (r"V = M W_V", True),
        (r"V = h W_V", False),
        (r"H = -\sum_i p_i \log p_i", True),
        (r"\mathcal{H}(p) = -\sum_i p_i \log p_i", False),
        (r"p = \operatorname{softmax}(z / \tau)", True),
        (r"\operatorname{SiLU}(z) = z\, \sigma(z)", True),
        (r"\operatorname{SiLU}(x) = x\, \sigma(x)", False),
        (r"(2i, 2i+1)", True),
        (r"(2u, 2u + 1)", False),
        (r"\theta \leftarrow \theta - \eta", True),
        (r"m \leftarrow \beta_1 m", True),
        (r"\bar g \leftarrow \beta_1 \bar g + (1 - \beta_1) g", False),
        (r"K = 5", True),
        # The teacher's read of 2026-12 found these in chapters 18-20, word for word.
        (r"E = Q K^\top / \sqrt{d_k} + M", True),
        (r"A = \operatorname{softmax}(E)", True),
        (r"dQ = \tfrac{1}{\sqrt{d_k}}\, dE\, K", True),
        (r"Z = Q K^\top / \sqrt{d_k} + M", False),
        (r"A = \operatorname{softmax}(Z)", False),
        (r"E = H d", False),
        (r"-m_h (i - j)", True),
        (r"m = 2^{-8}", True),
        (r"m_i = \max_j e_{ij}", False),
        (r"\theta_i = b^{-2i/d}", True),
        (r"p\,\theta_i", True),
        (r"b\, s^{d/(d-2)}", True),
        (r"\theta_u = 10000^{-2u/d}", False),
        (r"p\,\theta_u", False),
        (r"d_h", True),
        (r"h/g", True),
        (r"g = 1", True),
        (r"k_{h,j} = c_j W_{UK,h}", True),
        (r"e_{h,ij} = q_{h,i} \cdot k_{h,j}", True),
        (r"H / H_\text{kv}", False),
        (r"H_\text{kv} = 1", False),
        (r"c_j = x_j W_{DKV}", True),
        (r"c_i = \sum_j \alpha_{ij} h_j", False),
        (r"d = \max |w| / 127", True),
        (r"q = \mathrm{round}(w / d)", True),
        (r"q = \min(2^b - 1, \lfloor w / d + 2^{b-1} + \tfrac12 \rfloor)", True),
        (r"d\,(q - 2^{b-1})", True),
        (r"b < 8", True),
        (r"x \sim q", True),
        (r"\min(1, p(x)/q(x))", True),
        (r"\max(0, p - q)", True),
        (r"\max(0, p - \tilde p)", False),
        (r"\ell_i = \sum_{j \in J_b} \exp(e_{ij} - m_i)", False),
        (r"p - w + 1, \dots, p", True),
        (r"k + w", True),
        (r"i - w < j \le i", True),
        (r"\min(i + 1, w)", True),
        (r"i - L_w < j \le i", False),
        (r"w \leftarrow w - \eta g", False),
        (r"\eta_t = \eta_\text{max} \min\!\left(\frac{t}{w},\ \sqrt{\frac{w}{t}}\right)", True),
        (r"\min\!\left(\frac{t}{n_\text{warm}},\ \sqrt{\frac{n_\text{warm}}{t}}\right)", False),
    ],
)
def test_the_rules_catch_what_they_should(formula, forbidden, tmp_path):
    # A one-cell notebook holding the formula: the rules must flag it or not.
    nb = {"cells": [{"cell_type": "markdown", "source": [f"${formula}$"], "metadata": {}}]}
    path = tmp_path / "10_probe.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert bool(violations(path)) is forbidden, violations(path)


@pytest.mark.parametrize(
    "text, forbidden",
    [
        ("the $h$ query heads share $g$ key/value heads, $h/g$ each", True),
        ("the $H$ query heads share $H_\\text{kv}$ key/value heads", False),
        ("one float16 scale $d$ and one small integer per weight", True),
        ("With $b < 8$ bits", True),
        ("a window of the last $w$ tokens", True),
        ("the rate rises linearly for $w$ warm-up steps", True),
        ("a window of the last $L_w$ tokens", False),
        ("for $n_\\text{warm}$ warm-up steps", False),
    ],
)
def test_the_prose_rules_catch_what_they_should(text, forbidden, tmp_path):
    # A one-cell notebook holding the sentence: the rules must flag it or not.
    nb = {"cells": [{"cell_type": "markdown", "source": [text], "metadata": {}}]}
    path = tmp_path / "10_probe.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert bool(violations(path)) is forbidden, violations(path)


@pytest.mark.parametrize(
    "text, forbidden",
    [
        ("French so far  <bos> y\u2081 \u2026 y_{i-1}", True),
        ("French so far $y_1 \\ldots y_{i-1}$", False),
        ("scores Q K^T", True),
        ("scores $Q K^\\top / \\sqrt{d_k}$", False),
        ("LayerNorm \u2192 memory M", True),
        ("LayerNorm \u2192 memory h", False),
        ("E x \u221ad + PE", True),
        ("emb(x) \u221aE + PE", False),
        ("$H = -\\sum_i p_i \\log p_i$", True),
    ],
)
def test_the_figure_rules_catch_what_they_should(text, forbidden, tmp_path):
    # A one-cell notebook whose figure draws the text: the rules must flag it or not.
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    from attention_lib.presentation.plotting import PNG_DRAWN_TEXT_KEY, drawn_text

    fig, ax = plt.subplots()
    ax.axis("off")
    ax.text(0.1, 0.5, text)
    buffer = io.BytesIO()
    drawn = "\n".join(drawn_text(fig))
    fig.savefig(buffer, format="png", metadata={PNG_DRAWN_TEXT_KEY: drawn})
    plt.close(fig)
    png = base64.b64encode(buffer.getvalue()).decode()
    cell = {
        "cell_type": "code",
        "source": ["plt.show()"],
        "metadata": {},
        "outputs": [{"output_type": "display_data", "data": {"image/png": png}, "metadata": {}}],
    }
    path = tmp_path / "10_probe.ipynb"
    path.write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    assert bool(figure_violations(path)) is forbidden, figure_violations(path)
