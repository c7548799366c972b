"""The reference list is labelled author-year, as the text cites it.

book/_ext/book_citations.py registers the pybtex style the site uses for its
reference list; these tests format the book's own references.bib with it.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pybtex = pytest.importorskip("pybtex")
pytest.importorskip("sphinxcontrib.bibtex")
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import book_citations  # noqa: E402  (registers the styles)
from pybtex.database import parse_file  # noqa: E402
from pybtex.plugin import find_plugin  # noqa: E402


@pytest.fixture(scope="module")
def labels():
    bib = parse_file(str(ROOT / "book" / "references.bib"))
    style = find_plugin("pybtex.style.formatting", "author_year")()
    formatted = style.format_bibliography(bib)
    return {entry.key: entry.label for entry in formatted}


def test_list_labels_name_the_authors_and_year(labels):
    assert labels["bahdanau2015"] == "Bahdanau et al., 2015"
    assert labels["och2003"] == "Och and Ney, 2003"
    assert labels["schonemann1966"] == "Schönemann, 1966"  # LaTeX accent resolved


def test_two_works_by_the_same_authors_in_one_year_are_told_apart(labels):
    assert labels["cho2014"] == "Cho et al., 2014a"
    assert labels["cho2014properties"] == "Cho et al., 2014b"


def test_labels_are_unique(labels):
    assert len(set(labels.values())) == len(labels)


def test_no_entry_keeps_raw_latex_maths():
    text = (ROOT / "book" / "references.bib").read_text(encoding="utf8")
    assert "$" not in text, "write maths in titles as Unicode (O(n²)), not $...$"


def test_citations_in_the_text_use_round_brackets():
    style = book_citations.RoundAuthorYearReferenceStyle()
    assert (style.bracket_textual.left, style.bracket_textual.right) == ("(", ")")
    assert style.bracket_parenthetical.left == "("
