"""Held-out Shakespeare for the page's finetuning widget: what the model forgets, measured.

The own-text widget of chapter 11 finetunes the chapter's model on the reader's
text and shows, beside the loss on that text, the loss on Shakespeare the model
never trained on (``book/_static/runtime/train-finetune.mjs``). This writes
that text: the first ``N_CHARS`` characters of the validation split (the last
10% of Tiny Shakespeare, ``attention_lib.train.shakespeare.load_text``), public
domain as the whole text is (``data/README.md``).

    python scripts/export_shakespeare_heldout.py   # writes book/_static/models/shakespeare_heldout.txt
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.train.shakespeare import text_path  # noqa: E402

OUT = ROOT / "book" / "_static" / "models" / "shakespeare_heldout.txt"
N_CHARS = 8192  # 127 windows of 64: the widget spreads 24 over it


def heldout_text() -> str:
    """The first N_CHARS characters of the validation split (load_text's 90/10 cut)."""
    text = text_path().read_text(encoding="utf8")
    start = int(0.9 * len(text))
    return text[start : start + N_CHARS]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    OUT.write_text(heldout_text(), encoding="utf8")
    print(f"wrote {OUT.relative_to(ROOT)} ({N_CHARS} characters)")


if __name__ == "__main__":
    main()
