"""The library's SmolLM2 tokenizer on 2,000+ texts, as the browser runtime's node test reads it.

Writes ``tests/js/fixtures/bpe.json``: texts and the ids that
:class:`attention_lib.data.bpe_tokenizer.BPETokenizer` (Hugging Face ``tokenizers``, built
from SmolLM2's GGUF: digits split one by one, GPT-2's pattern, special tokens matched whole)
gives them, for ``book/_static/runtime/bpe.mjs`` (``tests/js/bpe.test.mjs``). The texts:
Tatoeba's test pairs in English and French, Shakespeare's lines, code, numbers of every
kind, emoji, accents, CJK, control characters, empty and whitespace-only strings, and every
character whose class (Unicode whitespace, letter, number) JavaScript's regular expressions
might see otherwise than the library's (U+0085 and U+FEFF: JavaScript's ``\\s`` differs from
Unicode's White_Space there), each in several contexts. A case whose ids decode to another text (a byte the vocabulary lacks, such as
U+001D's, is dropped) records the library's ``decoded`` text. Also records the GGUF file's path
and SHA-256 (the vocabulary and merges are read from it, not copied here).

    python scripts/make_bpe_fixture.py   # needs requirements.txt + requirements-model.txt
"""

import argparse
import json
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention_lib.data.bpe_tokenizer import BPETokenizer  # noqa: E402
from attention_lib.data.gguf import read_gguf  # noqa: E402
from attention_lib.models import smollm2  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from _fixtures import tokenizer_texts  # noqa: E402

OUT = ROOT / "tests" / "js" / "fixtures" / "bpe.json"

#: Characters whose class a regular expression engine may get wrong: every Unicode
#: White_Space character, characters JavaScript's \s holds but White_Space does not
#: (U+FEFF) or that look like spaces (U+180E, U+200B, the information separators),
#: numbers that are not digits (Nl, No), combining marks, letters of recent Unicode versions.
EDGE = [
    *range(0x09, 0x0E),
    0x1C,
    0x1D,
    0x1E,
    0x1F,
    0x20,
    0x85,
    0xA0,
    0x1680,
    0x180E,
    *range(0x2000, 0x200C),
    0x2028,
    0x2029,
    0x202F,
    0x205F,
    0x2060,
    0x3000,
    0xFEFF,
    0xB2,
    0xB9,
    0xBD,
    0x0663,
    0x096A,
    0x2160,
    0x216B,
    0x2460,
    0x3007,
    0x10107,
    0x1D7CE,
    0x0301,
    0x0308,
    0x20DD,
    0x0E31,
    0x00AD,
    0x200D,
    0xFE0F,
    0x1F3FD,
    0x1DF00,
    0x11F00,
    0x2EBF0,
    0x31350,
    0x1E030,
    0x0870,
    0x2E5D,
    0xE000,
    0xFFFD,
]


def texts():
    """The texts: tests/test_smollm2.py's corpus (three more before its random strings),
    then the edge characters in context."""
    out = tokenizer_texts(
        extra=["<|im_start<|im_end|>|>", "  \n  x  \n\n  1  \t2", "'S 'LL 'd's 'll've"]
    )
    for cp in EDGE:
        c = chr(cp)
        out += [f"x{c}y", f"x{c}{c}y", f"!{c}!", f"{c}1", f"a {c} 1{c} ", f"{c}{c}", f"a{c}'s"]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    tok = BPETokenizer.from_gguf(read_gguf(smollm2.gguf_path()))
    cases = []
    for t in texts():
        ids = tok.encode(t).tolist()
        cases.append({"text": t, "ids": ids})
        back = tok.decode(ids)
        if back != t:  # a byte the vocabulary lacks (U+001D): the library drops it
            cases[-1]["decoded"] = back
    chats = [
        [{"role": "user", "content": "What is 2 + 2?"}],
        [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Bonjour"},
            {"role": "user", "content": "Thanks\n  "},
        ],
        [],
    ]
    record = {
        "what": "ids of attention_lib.data.bpe_tokenizer.BPETokenizer (SmolLM2's GGUF) for "
        "tests/js/bpe.test.mjs",
        "script": "scripts/make_bpe_fixture.py",
        "gguf": smollm2.GGUF_NAME,
        "gguf_sha256": smollm2.GGUF_SHA256,
        "gguf_path": str(smollm2.gguf_path()),
        "cases": cases,
        "chats": [{"messages": m, "text": tok.chat(m)} for m in chats],
    }
    OUT.write_text(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n", "utf8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(cases)} texts, {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
