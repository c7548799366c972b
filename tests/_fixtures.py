"""Shared by the fixture tests: a script's fixture made again, beside the committed one.

Each ``scripts/make_*_fixture.py`` writes, with its ``build()``, a JSON file that
the node tests (``tests/js/``) check the browser runtime against; its test here
makes the fixture again from the library and compares it with the committed
one, so that a change in the library or a checkpoint cannot leave it stale.
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def load_script(name):
    """``scripts/<name>.py`` as a module (``scripts/`` is not a package; it is put on
    ``sys.path`` once, for the scripts that import each other)."""
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rebuilt(name, build=None):
    """The script ``name``, its fixture made again, and its committed fixture.

    ``build(module)`` makes the fixture (default: ``module.build()``); the
    committed one is read from ``module.FIXTURE``. Returns ``(module, fresh,
    committed)``, ``fresh`` passed through JSON as the committed one was (tuples
    become lists, keys strings), so that the two compare like for like.
    """
    module = load_script(name)
    committed = json.loads(module.FIXTURE.read_text(encoding="utf8"))
    fresh = json.loads(json.dumps(module.build() if build is None else build(module)))
    return module, fresh, committed


def tokenizer_texts(extra=()):
    """More than 2,000 texts: Tatoeba in English and French, Shakespeare's lines, code,
    numbers, emoji, accents, CJK, control characters, empty and whitespace-only strings
    (``extra`` go before the random strings): the corpus of tests/test_smollm2.py's tokenizer
    comparison and of the runtime's fixture (scripts/make_bpe_fixture.py)."""
    pairs = [
        line.split("\t")
        for line in (ROOT / "data/tatoeba/test.tsv").read_text("utf8").splitlines()[:800]
    ]
    texts = [p[0] for p in pairs] + [p[1] for p in pairs if len(p) > 1]
    lines = (ROOT / "data/shakespeare/input.txt").read_text("utf8").split("\n")
    texts += ["\n".join(lines[i : i + 3]) for i in range(0, 1200, 3)]
    texts += [
        "",
        " ",
        "   ",
        "\n",
        "\n\n\t \r\n",
        "x = [1, 22, 333, 4444, 55555]  # 3.14159e-10",
        "def f(a, b):\n\treturn a ** 2 + b  // 7\n",
        "for (int i = 0; i < n; ++i) { s += a[i]; }",
        "0123456789 9876543210 1,234,567.89 -42 +7 1e6 ²³ ½ ٣ ४",
        "émigré naïve café façade Ångström Øresund straße İstanbul",
        "日本語のテキストと中文文本，한국어 텍스트",
        "😀 👍🏽 👨‍👩‍👧 🇫🇷 ❤️ 🤖",
        "tab\there, bell\x07, null\x00, escape\x1b[0m, delete\x7f, nbsp\xa0, zws\u200b",
        "line\u2028separator\u2029paragraph\ufeffbom",
        "I'm can't they'll we've she'd you're IT'S",
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>",
        "<|endoftext|><|im_start|><|im_end|>",
        "a" * 300,
        " ".join(["word"] * 200),
    ]
    texts += list(extra)
    rng = np.random.default_rng(0)
    alphabet = list("aeiou xyz.,;!?'\"-\n\t0123456789éüßçñ日本😀") + ["<|im_end|>"]
    texts += ["".join(rng.choice(alphabet, size=rng.integers(1, 40))) for _ in range(300)]
    return texts
