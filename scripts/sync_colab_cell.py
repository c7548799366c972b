"""Give every chapter notebook a Colab set-up cell that fetches this repository.

Colab opens a chapter as a lone notebook, without attention_lib or data/.
The first code cell of each chapter therefore clones the repository (named
once, in _config.yml) and installs it (``pip install -e``: subprocesses such
as ``python -m attention_lib.align`` need the installed package, and the
editable install finds data/ in the clone), and puts it on the running
kernel's ``sys.path`` (which started before the install), when and only when
it runs on Colab; elsewhere it does nothing and prints nothing, so nbval and
the site are unaffected (the cell is also hidden on the site with the tag
remove-cell). scripts/check-colab.sh runs every chapter that way, offline.

It does not change the working directory: a chapter reads its data through
the library (``attention_lib.data_dir()``), never through a path relative to
``book/``, so it runs from any folder, as a notebook downloaded from the site
must (tests/test_book.py checks).

    python scripts/sync_colab_cell.py      # after changing repository.url

Rewrites the cell in place if present, inserts it before the first code cell
otherwise (then re-execute the notebook so its execution counts run in
order). tests/test_book.py checks that every chapter has it, up to date.
"""

import argparse
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
MARKER = '"google.colab" in sys.modules'

TEMPLATE = """\
# On Google Colab only: fetch the book's repository and install attention_lib
# from it (Binder and local runs have both already; elsewhere this cell does
# nothing). scripts/check-colab.sh runs it offline: BOOK_REPOSITORY and
# BOOK_CLONE_DIR then name a local copy and a scratch folder.
import sys

if {marker}:
    import os
    import subprocess

    REPOSITORY = "{url}"
    home = os.environ.get("BOOK_CLONE_DIR",
                          "/content/attention-from-scratch")
    if not os.path.isdir(home):
        source = os.environ.get("BOOK_REPOSITORY", REPOSITORY)
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", source, home],
                       check=True)
    # Installed, so that subprocesses (python -m attention_lib.align) find it;
    # editable, so that it finds data/ in the clone. Skipped once done.
    probe = ("import importlib.util as u, sys; sys.exit(not ("
             "u.find_spec('attention_lib') and u.find_spec('myst_nb')))")
    if subprocess.run([sys.executable, "-c", probe], cwd="/").returncode:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                        "-e", home, "myst-nb"], check=True)
    if home not in sys.path:  # this kernel started before the install
        sys.path.insert(0, home)"""


def cell_source(url):
    """The set-up cell's source for the repository at ``url``."""
    return TEMPLATE.format(marker=MARKER, url=url)


def sync(path, url):
    nb = nbformat.read(path, as_version=4)
    text = cell_source(url)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    if MARKER in nb.cells[first].source:
        nb.cells[first].source = text
    else:
        cell = nbformat.v4.new_code_cell(text, metadata={"tags": ["remove-cell"]})
        nb.cells.insert(first, cell)
    nbformat.write(nb, path)


def main(argv=None):
    argparse.ArgumentParser(
        description="Rewrite (or insert) the Colab set-up cell of every chapter in book/, "
        "for the repository named in _config.yml."
    ).parse_args(argv)
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        sync(path, url)
        print(f"{path.relative_to(ROOT)}: Colab cell fetches {url}")


if __name__ == "__main__":
    main()
