"""The NumPy library's greedy tokens and logits, as the fixture the node parity tests read.

For every exported model (book/_static/models/<name>.json) and each of its
prompts below, the library's own model (the one the chapters run) encodes the
prompt, continues it greedily for ``N_NEW`` tokens, and gives its logits at
the first and the last step of the continuation. The result goes to
``tests/js/fixtures/parity.json``; ``tests/js/parity.test.mjs`` checks that the
browser runtime produces the same ids and logits within 1e-3, and
``tests/test_parity_fixture.py`` regenerates this file and compares it with the
committed one, so it cannot go stale when a checkpoint or the library changes.

    python scripts/make_parity_fixture.py              # rewrite all three fixtures
    python scripts/make_parity_fixture.py --beam-only  # only tests/js/fixtures/beam.json
    python scripts/make_parity_fixture.py --crop-only  # only tests/js/fixtures/crop.json

It also writes ``tests/js/fixtures/crop.json``, greedy generation far past
the context (cropped), which ``tests/js/crop.test.mjs`` compares with the
runtime's, and ``tests/js/fixtures/beam.json``, the library's beam search
(beam 4) on every sentence of the translation test set, which
``tests/js/beam.test.mjs`` compares with the runtime's beam search.
"""

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "js" / "fixtures" / "parity.json"
BEAM_FIXTURE = ROOT / "tests" / "js" / "fixtures" / "beam.json"
CROP_FIXTURE = ROOT / "tests" / "js" / "fixtures" / "crop.json"
N_NEW = 32
BEAM, LENGTH_PENALTY = 4, 0.6

PROMPTS = {
    "shakespeare": [
        "ROMEO:",
        "JULIET:\n",
        "First Citizen:\nBefore we proceed",
        "KING RICHARD III:\nNow is the",
        "To be, or not to be",
        "O Romeo, Romeo!",
        "What light through yonder window",
        "MENENIUS:\nI tell you, friends,",
        "The quality of mercy",
        "HAMLET:\nAlas, poor",
        "Good morrow, my lord.",
        "\n",
        "A",
        "Wherefore art thou",
        "LADY MACBETH:\nOut, damned",
        "Now is the winter of our discontent",
        "And so, my lords, farewell.",
        "GLOUCESTER:\nI",
        "Friends, Romans, countrymen, lend me your ears;",
        "the king is dead",
        "Exeunt.\n\nSCENE II.",
        "What say you?",
    ],
    "stories260k": [
        "",
        "Once upon a time",
        "Lily and Tom",
        "The cat sat on the mat.",
        "One day, a little bird",
        "Tim was sad because",
        "The sun was shining",
        "Mom said,",
        "They played in the park",
        "Once upon a time, there was a big dog named Max.",
        "Sara had a red ball",
        "The little girl",
        "He wanted to eat",
        '"Can I play?" asked Ben.',
        "After lunch,",
        "The end of the story",
        "A boy found a box",
        "Spot the dog",
        "She looked at the sky and",
        "Tom and Sue went to the zoo.",
        "It was a rainy day.",
        "The old man",
    ],
    "translator": [
        "I like green apples.",
        "Where is the station?",
        "Tom is here.",
        "It's raining.",
        "I don't know.",
        "She is reading a book.",
        "We went to the beach yesterday.",
        "Can you help me?",
        "This is my house.",
        "He has two cats.",
        "I'm hungry.",
        "The weather is nice today.",
        "Do you speak French?",
        "Thank you very much.",
        "I will call you tomorrow.",
        "My brother is a doctor.",
        "Open the door, please.",
        "They are playing football.",
        "What time is it?",
        "I love you.",
        "Hello 🙂",
        "The café is closed.",
    ],
}


def shakespeare_model(path):
    """The TinyGPT and its characters, loaded as the chapter loads them."""
    from attention_lib.models.gpt import TinyGPT

    model, chars = TinyGPT.load(path)
    lookup = {c: i for i, c in enumerate(chars)}
    return model, (lambda text: [lookup[c] for c in text])


def stories_model(path):
    """stories260K and its llama2.c tokenizer from the library (attention_lib.models.llama)."""
    from attention_lib.models.llama import load_stories260k

    model, tokenizer = load_stories260k(path)
    return model, (lambda text: [int(i) for i in tokenizer.encode(text)])


def translator_cases(folder, sentences=None, scheme=None, digits=7):
    """The library's greedy translations (ids) and its decoder logits at the first and last step.

    ``sentences`` default to :data:`PROMPTS`'s; with ``scheme`` the model is first
    quantized by :func:`attention_lib.quantize.quantize_model` (the quantized
    runtime's fixture, scripts/make_quant_fixture.py); logits keep ``digits``.
    """
    from attention_lib.translate import load_model

    model, tok = load_model("transformer", folder)
    if scheme is not None:
        from attention_lib.quantize import quantize_model

        quantize_model(model, scheme)
    cases = []
    for sentence in PROMPTS["translator"] if sentences is None else sentences:
        src = tok.encode(sentence)[:48]
        lengths = np.array([len(src)])
        ids = [int(i) for i in model.greedy(np.array([src]), lengths)[0]]
        memory, mask = model.encode(np.array([src]), lengths)
        logits = np.asarray(model.decode(np.array([[1] + ids]), memory, mask)[0], np.float32)
        cases.append(
            {
                "prompt": sentence,
                "ids": [int(i) for i in src],
                "new_ids": ids,
                "logits_first": [float(f"{v:.{digits}g}") for v in logits[0]],
                "logits_last": [float(f"{v:.{digits}g}") for v in logits[-1]],
            }
        )
    return cases


def translator_beam(folder, every=1):
    """The library's beam search (beam 4, length penalty 0.6) on the translation test set.

    Every English sentence of the test split once (``load_references``), cut to
    the command line's 48 tokens as ``translate_sentences`` cuts it; with
    ``every`` > 1 only every ``every``-th sentence (the staleness test's sample).
    Sentences are decoded in batches of equal source length, so that each one's
    output cannot depend on the padded width of a batch (a sentence's own length
    sets its output limit, ``2 S + 10``).
    """
    from attention_lib.data.tatoeba import load_references
    from attention_lib.train.translation import pad_batch
    from attention_lib.translate import MAX_SOURCE_TOKENS, load_model

    model, tok = load_model("transformer", folder)
    sources = load_references("test")[0][::every]
    encoded = [tok.encode(s)[:MAX_SOURCE_TOKENS] for s in sources]
    by_length = {}
    for i, ids in enumerate(encoded):
        by_length.setdefault(len(ids), []).append(i)
    out = [None] * len(sources)
    for length, idx in sorted(by_length.items()):
        for start in range(0, len(idx), 64):
            part = idx[start : start + 64]
            src, lengths = pad_batch([encoded[i] for i in part])
            ids = model.beam_search(src, lengths, beam=BEAM, length_penalty=LENGTH_PENALTY)
            for i, row in zip(part, ids):
                out[i] = [int(t) for t in row]
    return [
        {"source": s, "ids": [int(t) for t in e], "beam_ids": o}
        for s, e, o in zip(sources, encoded, out)
    ]


def build_beam(folder, every=1):
    """The beam fixture as a dict (``tests/js/fixtures/beam.json``)."""
    manifest = json.loads((ROOT / "book" / "_static" / "models" / "translator.json").read_text())
    return {
        "weights_sha256": manifest["sha256"],
        "beam": BEAM,
        "length_penalty": LENGTH_PENALTY,
        "cases": translator_beam(folder, every),
    }


#: Greedy generation past the context (cropped): prompt, new tokens.
CROP_CASES = {
    "shakespeare": [
        ("ROMEO:", 1000),
        ("First Citizen:\n" + "Before we proceed any further, hear me speak. " * 4, 200),
    ],
    "stories260k": [("Once upon a time", 700)],
}


def crop_greedy(model, prompt_ids, n_new):
    """Greedy ids past the context, cropped as the runtime's ``steps()`` crops them.

    The library's ``generate(..., crop=True)`` when it has it; else the same rule
    written here on the library's ``forward`` and KV cache: with ``W = max_len``
    and ``H = W // 2``, encode the prompt's last ``W`` tokens; feed each new token
    at the next position while the cache has room, and when it is full encode the
    last ``H`` tokens of the text afresh in a new cache.
    """
    try:
        seq = model.generate(np.array(prompt_ids), n_new, temperature=0, crop=True)
        return [int(t) for t in np.asarray(seq).reshape(-1)[len(prompt_ids) :]]
    except TypeError:
        pass
    W, H = model.max_len, model.max_len // 2
    ids = [int(t) for t in prompt_ids]
    cache = model.new_cache()
    logits = model.forward(np.array([ids[-W:]]), cache)[0, -1]
    out = []
    for i in range(n_new):
        t = int(np.argmax(logits))
        ids.append(t)
        out.append(t)
        if i + 1 == n_new:
            break
        if cache[0].position < W:
            logits = model.forward(np.array([[t]]), cache)[0, -1]
        else:
            cache = model.new_cache()
            logits = model.forward(np.array([ids[-H:]]), cache)[0, -1]
    return out


def build_crop(sources):
    """The cropped-generation fixture as a dict (``tests/js/fixtures/crop.json``)."""
    out = {"models": {}}
    for name, cases in CROP_CASES.items():
        manifest = json.loads((ROOT / "book" / "_static" / "models" / f"{name}.json").read_text())
        model, encode = LOADERS[name](sources[name])
        rows = []
        for prompt, n_new in cases:
            ids = encode(prompt)
            rows.append({"prompt": prompt, "ids": ids, "new_ids": crop_greedy(model, ids, n_new)})
        out["models"][name] = {
            "weights_sha256": manifest["sha256"],
            "max_len": int(model.max_len),
            "cases": rows,
        }
    return out


LOADERS = {
    "shakespeare": shakespeare_model,
    "stories260k": stories_model,
    "translator": translator_cases,
}


def reference(name, source):
    """{prompt, ids, new_ids, logits_first, logits_last} for each prompt of one model."""
    if name == "translator":
        return translator_cases(source)
    model, encode = LOADERS[name](source)
    cases = []
    for prompt in PROMPTS[name]:
        ids = encode(prompt)
        # greedy with the library's KV-cached generator, then one uncached pass for the logits
        seq = [int(i) for i in model.generate(np.array(ids), N_NEW, temperature=0)]
        logits = np.asarray(model.forward(np.array([seq[:-1]]))[0], dtype=np.float32)
        logits_first, logits = logits[len(ids) - 1], logits[-1]
        cases.append(
            {
                "prompt": prompt,
                "ids": [int(i) for i in ids],
                "new_ids": seq[len(ids) :],
                "logits_first": [float(f"{v:.7g}") for v in logits_first],
                "logits_last": [float(f"{v:.7g}") for v in logits],
            }
        )
    return cases


def build(sources):
    """The fixture as a dict, for the models in ``sources`` ({name: checkpoint path})."""
    out = {"n_new": N_NEW, "models": {}}
    for name, path in sources.items():
        manifest = json.loads((ROOT / "book" / "_static" / "models" / f"{name}.json").read_text())
        out["models"][name] = {"weights_sha256": manifest["sha256"], "cases": reference(name, path)}
    return out


def default_sources():
    sys.path.insert(0, str(ROOT / "scripts"))
    from export_models import source_paths

    return {
        name: path
        for name, path in source_paths().items()
        if name in LOADERS and (ROOT / "book" / "_static" / "models" / f"{name}.json").exists()
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(FIXTURE))
    parser.add_argument("--shakespeare", metavar="PATH", help="the Shakespeare checkpoint")
    parser.add_argument(
        "--beam-only",
        action="store_true",
        help="write only the beam-search fixture (tests/js/fixtures/beam.json)",
    )
    parser.add_argument(
        "--no-beam", action="store_true", help="do not rewrite the beam-search fixture"
    )
    parser.add_argument(
        "--crop-only",
        action="store_true",
        help="write only the cropped-generation fixture (tests/js/fixtures/crop.json)",
    )
    args = parser.parse_args(argv)
    if args.crop_only or not args.beam_only:
        crop = build_crop(default_sources())
        tmp = CROP_FIXTURE.with_suffix(".tmp")
        tmp.write_text(json.dumps(crop, separators=(",", ":"), ensure_ascii=False) + "\n")
        os.replace(tmp, CROP_FIXTURE)
        print(f"cropped greedy generation past the context -> {CROP_FIXTURE}")
    if args.crop_only:
        return
    if not args.no_beam and not args.crop_only:
        beam = build_beam(default_sources()["translator"])
        tmp = BEAM_FIXTURE.with_suffix(".tmp")
        tmp.write_text(json.dumps(beam, separators=(",", ":"), ensure_ascii=False) + "\n")
        os.replace(tmp, BEAM_FIXTURE)
        print(f"translator: beam {BEAM} on {len(beam['cases'])} test sentences -> {BEAM_FIXTURE}")
    if args.beam_only:
        return
    sources = default_sources()
    if args.shakespeare:
        sources["shakespeare"] = Path(args.shakespeare)
    fixture = build(sources)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    os.replace(tmp, out)
    for name, m in fixture["models"].items():
        print(f"{name}: {len(m['cases'])} prompts x {N_NEW} greedy tokens -> {out}")


if __name__ == "__main__":
    main()
