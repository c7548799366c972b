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
- $T$ (additive attention's decoder steps) is not a language model's length.
"""

import json
import re
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
    # Chapter 7 quotes PyTorch's documented mask shape (N H, L, S) for the adapter
    # that keeps PyTorch's API; everywhere else the batch is B.
    (
        r"(?<![\w\\{])N\s*H\b|\\times\s*N\b|^N$",
        "N is chapter 1's number of symbols",
        ("01_bottleneck", "07_multi_head"),
    ),
    (
        r"(?<![\w\\{])T\s*=\s*\d",
        "T counts additive attention's decoder steps; a sequence is L long",
        ("01_bottleneck", "02_bahdanau", "03_learning_to_align"),
    ),
]


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
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_uses_the_notation_page(path):
    found = violations(path)
    assert not found, "symbols the notation page forbids:\n" + "\n".join(found)


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
    ],
)
def test_the_rules_catch_what_they_should(formula, forbidden, tmp_path):
    # A one-cell notebook holding the formula: the rules must flag it or not.
    nb = {"cells": [{"cell_type": "markdown", "source": [f"${formula}$"], "metadata": {}}]}
    path = tmp_path / "10_probe.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert bool(violations(path)) is forbidden, violations(path)
