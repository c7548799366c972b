"""The library's tokenizers on edge cases, as the node tests of the browser runtime read them.

Two golden files, both from the library (the reference):

- ``tests/js/fixtures/wordpiece.json``, for ``encoder.mjs`` (``tests/js/minilm.test.mjs``):
  the word pieces and ids of all-MiniLM-L6-v2's tokenizer (Hugging Face ``tokenizers``,
  :class:`attention_lib.models.minilm.MiniLMTokenizer`) for texts with every kind of
  character its normalizer treats specially (capital sigma at the end of a word, U+2028
  and U+2029, private use, format and unassigned characters, characters outside the BMP),
  and, for every code point but the surrogates, what the normalizer and pre-tokenizer make
  of ``"a" + character + "b"``: dropped (``["ab"]``), a space (``["a", "b"]``), split off
  as punctuation or CJK (``["a", character, "b"]``), kept as it is (``["a" + character +
  "b"]``) or mapped (lowercased, accents stripped: the words joined by spaces are stored,
  without the ``a`` and ``b``);
- ``tests/js/fixtures/llama_tokenizer.json``, for the stories260K tokenizer of
  ``transformer.mjs`` (``tests/js/tokenizer.test.mjs``): the ids of
  :class:`attention_lib.data.llama_tokenizer.LlamaTokenizer` for long texts (a story,
  one 16,000-character word, runs of spaces, characters outside the vocabulary).

    python scripts/make_tokenizer_fixture.py   # needs requirements.txt + requirements-model.txt
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib import data_dir  # noqa: E402
from attention_lib.data.gguf import read_gguf  # noqa: E402
from attention_lib.data.llama_tokenizer import LlamaTokenizer  # noqa: E402
from attention_lib.models import minilm  # noqa: E402

FIXTURES = ROOT / "tests" / "js" / "fixtures"
MAX_TOKENS = 64  # the encoder widget's longest input (scripts/export_minilm.py)

WORDPIECE_TEXTS = [
    "ΟΔΟΣ ΚΑΛΟΣ",  # capital sigma at the end of a word: σ, not ς
    "ΣΑΣ ΕΙΣΑΙ ΟΣΟΣ",
    "Σ",
    "ΑΣ.ΒΣ",
    "ὈΔΥΣΣΕΎΣ",
    "line\u2028separator\u2029paragraph",
    "x\ue000y \U000f0000z \U0010fffdw",  # private use
    "a\u0378b c\U000e0001d",  # unassigned, a tag (format)
    "soft\u00adhyphen zero\u200bwidth bom\ufeffnel\u0085end",
    "İstanbul ǅemal ﬃ ẞ Straße",
    "Emoji 🙂🏳️‍🌈 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐁𝐨𝐥𝐝",
    "\u3000ideographic\u3000space\u00a0no-break\u202fnarrow",
    "控制\u0000null\ufffdreplacement",
    "",
    "x",
    " \t\n ",
    "Ωμέγα ǲ ǈ ǋ",
]


def ranges(points):
    """``[[first, last], ...]``: runs of consecutive code points."""
    out = []
    for p in points:
        if out and out[-1][1] == p - 1:
            out[-1][1] = p
        else:
            out.append([p, p])
    return out


def wordpiece():
    """The MiniLM tokenizer's pieces and ids for :data:`WORDPIECE_TEXTS` and every code point."""
    _, tok = minilm.load_minilm()
    tok.max_length = MAX_TOKENS
    normalizer, pre = tok._tok.normalizer, tok._tok.pre_tokenizer
    cases = []
    for text in WORDPIECE_TEXTS:
        try:
            ids = tok.encode(text).tolist()
        except ValueError:
            ids = None  # no word piece: the runtime refuses it too
        cases.append(
            {"text": text, "ids": ids, "tokens": None if ids is None else tok.tokens(text)}
        )
    kinds = {"drop": [], "space": [], "split": [], "keep": [], "map": []}
    mapped = []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue  # a str of Rust (tokenizers) cannot hold a surrogate
        ch = chr(cp)
        words = [w for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(f"a{ch}b"))]
        if words == ["ab"]:
            kinds["drop"].append(cp)
        elif words == ["a", "b"]:
            kinds["space"].append(cp)
        elif words == ["a", ch, "b"]:
            kinds["split"].append(cp)
        elif words == [f"a{ch}b"]:
            kinds["keep"].append(cp)
        else:
            kinds["map"].append(cp)
            mapped.append(" ".join(words)[1:-1])  # "X" for ["aXb"], " X " for ["a", "X", "b"]
    vocab = "\n".join(tok.pieces)
    return {
        "made_by": "scripts/make_tokenizer_fixture.py",
        "library": f"tokenizers {__import__('tokenizers').__version__}",
        "vocab_sha256": hashlib.sha256(vocab.encode()).hexdigest(),
        "max_tokens": MAX_TOKENS,
        "cases": cases,
        "code_points": {k: ranges(v) for k, v in kinds.items()},
        "mapped": mapped,
    }


def llama():
    """The stories260K tokenizer's ids for long texts and characters outside its vocabulary."""
    gguf = read_gguf(data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf")
    tok = LlamaTokenizer.from_gguf(gguf)
    rng = np.random.default_rng(0)
    story = (
        "Once upon a time, there was a little girl named Lily. She loved to play outside "
        "in the sunshine. One day, she saw a big, red ball in the park. "
    )
    letters = list("abcdefghijklmnopqrstuvwxyz")
    texts = [
        (story * 120)[:16000],
        "".join(rng.choice(letters, 16000)),  # one word of 16,000 characters
        "onceuponatimetherewasagirl" * 160,
        " " * 3000 + "a" + "  " * 500 + "b  ",
        "Tom said: “Naïve café — 🙂 emoji 𝔘𝔫𝔦𝔠𝔬𝔡𝔢, 東京, \u00e9\u0301 and tabs\tand\nnewlines.”",
        "aaaa" * 1000,
        "a",
        "🙂",
        " ",
    ]
    return {
        "made_by": "scripts/make_tokenizer_fixture.py",
        "model": "stories260k",
        "cases": [{"text": t, "ids": tok.encode(t).tolist()} for t in texts],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    for name, data in (("wordpiece.json", wordpiece()), ("llama_tokenizer.json", llama())):
        path = FIXTURES / name
        path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
        print(f"wrote {path} ({path.stat().st_size / 1000:.0f} kB)")


if __name__ == "__main__":
    main()
