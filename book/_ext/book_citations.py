"""Author-year citations, in the text and in the reference list alike.

sphinxcontrib-bibtex's ``author_year`` referencing style writes citations in
the text as "Bahdanau et al. [2015]" (textual) and "[Bahdanau et al., 2015]"
(parenthetical), while pybtex's built-in bibliography styles label the list
with numbers ("[1]") or alpha keys ("[BCB15]"). This Sphinx extension, loaded
from ``_config.yml`` (``sphinx.local_extensions``), registers two plugins:

* the referencing style ``author_year_round``: author-year citations in round
  brackets, "Bahdanau et al. (2015)" and "(Bahdanau et al., 2015)";
* the bibliography style ``author_year``: pybtex's ``unsrt`` formatting,
  sorted by first author, year and title, with each entry labelled as it is cited,
  "Bahdanau et al., 2015" (a letter is added to the year when two entries
  would otherwise share a label).

Both are selected in ``_config.yml`` (``bibtex_reference_style`` and
``bibtex_default_style``). The registration is the documented plugin route of
sphinxcontrib-bibtex and pybtex (``register_plugin``).
"""

from collections import Counter
from dataclasses import dataclass, field

import pybtex.plugin
import sphinxcontrib.bibtex.plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting import BaseSortingStyle
from sphinxcontrib.bibtex.style.referencing import BracketStyle
from sphinxcontrib.bibtex.style.referencing.author_year import (
    AuthorYearReferenceStyle,
)


def _round_brackets() -> BracketStyle:
    return BracketStyle(left="(", right=")")


@dataclass
class RoundAuthorYearReferenceStyle(AuthorYearReferenceStyle):
    """Author-year citations in round brackets: "Bahdanau et al. (2015)"."""

    bracket_parenthetical: BracketStyle = field(default_factory=_round_brackets)
    bracket_textual: BracketStyle = field(default_factory=_round_brackets)
    bracket_author: BracketStyle = field(default_factory=_round_brackets)
    bracket_label: BracketStyle = field(default_factory=_round_brackets)
    bracket_year: BracketStyle = field(default_factory=_round_brackets)


def _surname(person) -> str:
    """A person's last name(s) as plain text (LaTeX accents resolved)."""
    return " ".join(part.render_as("text") for part in person.rich_last_names)


def _author_year(entry) -> str:
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    if not people:
        who = entry.fields.get("organization", entry.key)
    elif len(people) == 1:
        who = _surname(people[0])
    elif len(people) == 2:
        who = f"{_surname(people[0])} and {_surname(people[1])}"
    else:
        who = f"{_surname(people[0])} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabelStyle(BaseLabelStyle):
    """Label each entry "Surname et al., Year", as the text cites it."""

    def format_labels(self, sorted_entries):
        labels = [_author_year(entry) for entry in sorted_entries]
        total = Counter(labels)
        seen = Counter()
        for label in labels:
            if total[label] > 1:          # "Smith, 2017a", "Smith, 2017b"
                seen[label] += 1
                label += "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            yield label


class FirstAuthorYearSortingStyle(BaseSortingStyle):
    """Sort by the label's order: first author's surname, then year, title."""

    def sorting_key(self, entry):
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        who = _surname(people[0]) if people else entry.key
        return (who.lower(), entry.fields.get("year", ""),
                entry.fields.get("title", "").lower())


class AuthorYearStyle(UnsrtStyle):
    """unsrt formatting, sorted by first author and year, labelled author-year."""

    default_sorting_style = "first_author_year"
    default_label_style = "author_year"


pybtex.plugin.register_plugin(
    "pybtex.style.labels", "author_year", AuthorYearLabelStyle)
pybtex.plugin.register_plugin(
    "pybtex.style.sorting", "first_author_year", FirstAuthorYearSortingStyle)
pybtex.plugin.register_plugin(
    "pybtex.style.formatting", "author_year", AuthorYearStyle)
sphinxcontrib.bibtex.plugin.register_plugin(
    "sphinxcontrib.bibtex.style.referencing", "author_year_round",
    RoundAuthorYearReferenceStyle)


def _list_items_for_screen_readers(app, pagename, templatename, context, doctree):
    """Give each entry of a reference list the role its list needs.

    Sphinx writes a list of citations as ``<div role="list">`` whose entries
    have the role ``doc-biblioentry``, which ARIA 1.2 deprecates and which a
    list may not hold: screen readers then announce an empty list (axe-core:
    aria-required-children, critical; aria-deprecated-role on every entry).
    As ``listitem`` s the entries are read as the list's items.
    """
    body = context.get("body")
    if body and 'role="doc-biblioentry"' in body:
        context["body"] = body.replace('role="doc-biblioentry"', 'role="listitem"')


def setup(app):
    """Importing the module registers the styles; the reference list gets list items."""
    app.connect("html-page-context", _list_items_for_screen_readers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
