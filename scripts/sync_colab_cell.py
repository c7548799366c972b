"""Give every chapter notebook a Colab set-up cell that fetches this repository.

Colab opens a chapter as a lone notebook, without attention_lib or data/.
The first code cell of each chapter therefore clones the repository (named
once, in _config.yml) and makes it importable, when and only when it runs on
Colab; elsewhere it does nothing and prints nothing, so nbval and the site
are unaffected (the cell is also hidden on the site with the tag remove-cell).

    python scripts/sync_colab_cell.py      # after changing repository.url

Rewrites the cell in place if present, inserts it before the first code cell
otherwise (then re-execute the notebook so its execution counts run in
order). tests/test_book.py checks that every chapter has it, up to date.
"""

from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
MARKER = '"google.colab" in sys.modules'

TEMPLATE = '''\
# On Google Colab only: fetch the book's repository, so that attention_lib and
# data/ are there (Binder and local runs have them already; elsewhere this cell
# does nothing).
import sys

if {marker}:
    import os
    import subprocess

    REPOSITORY = "{url}"
    subprocess.run(["git", "clone", "--quiet", "--depth", "1", REPOSITORY,
                    "/content/attention-from-scratch"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "myst-nb"], check=True)
    sys.path.insert(0, "/content/attention-from-scratch")
    os.chdir("/content/attention-from-scratch/book")'''


def sync(path, url):
    nb = nbformat.read(path, as_version=4)
    text = TEMPLATE.format(marker=MARKER, url=url)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    if MARKER in nb.cells[first].source:
        nb.cells[first].source = text
    else:
        cell = nbformat.v4.new_code_cell(text, metadata={"tags": ["remove-cell"]})
        nb.cells.insert(first, cell)
    nbformat.write(nb, path)


def main():
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        sync(path, url)
        print(f"{path.relative_to(ROOT)}: Colab cell fetches {url}")


if __name__ == "__main__":
    main()
