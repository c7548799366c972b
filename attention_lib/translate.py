"""Translate English sentences into French with the committed models.

Library use::

    from attention_lib.translate import load_model, translate_sentences
    model, tok = load_model("transformer")
    translate_sentences(model, tok, ["I am cold.", "Where is the station?"])
"""

import sys

import numpy as np

from ._cli import int_at_least

#: Longest source the command line translates, in subword tokens; longer lines
#: are cut to their first ``MAX_SOURCE_TOKENS`` tokens (the models were trained on
#: sentences of up to 15 English words, well under 48 tokens).
MAX_SOURCE_TOKENS = 48


def translate_ids(model, src_ids, beam=None, length_penalty=0.6, batch=64):
    """Output ids for each list of source ids (each non-empty), batched by length."""
    from .models.train_translation import pad_batch

    order = np.argsort([len(s) for s in src_ids], kind="stable")
    out = [None] * len(src_ids)
    for start in range(0, len(order), batch):
        idx = order[start : start + batch]
        src, lengths = pad_batch([src_ids[i] for i in idx])
        if beam is not None and beam > 1 and hasattr(model, "beam_search"):
            ids = model.beam_search(src, lengths, beam=beam, length_penalty=length_penalty)
        elif beam is not None and beam > 1:
            from .models.decoding import rnnsearch_beam_search

            ids = rnnsearch_beam_search(model, src, lengths, beam, length_penalty)
        elif hasattr(model, "greedy"):
            ids = model.greedy(src, lengths)
        else:
            ids = model.translate(src, lengths)[0]
        for b, i in enumerate(idx):
            out[i] = ids[b]
    return out


def translate_sentences(
    model, tok, sentences, beam=None, length_penalty=0.6, batch=64, max_tokens=MAX_SOURCE_TOKENS
):
    """French for each English sentence; an empty sentence gives an empty string.

    Sources longer than ``max_tokens`` subwords are cut to their first ``max_tokens``.
    """
    encoded = [tok.encode(s)[:max_tokens] for s in sentences]
    todo = [i for i, ids in enumerate(encoded) if ids]
    ids = translate_ids(model, [encoded[i] for i in todo], beam, length_penalty, batch)
    out = [""] * len(sentences)
    for i, row in zip(todo, ids):
        out[i] = tok.decode(row)
    return out


# -- models ------------------------------------------------------------------

MODELS = ("transformer", "rnnsearch")


def load_model(name, directory=None, dtype=np.float32):
    """A committed model and the tokenizer it was trained with: ``(model, tokenizer)``.

    The checkpoint's and the tokenizer's sha256 are checked against
    ``data/checkpoints/translation/manifest.json`` first.
    """
    import json
    from pathlib import Path

    from .data.paths import sha256
    from .data.tatoeba import Tokenizer, tatoeba_dir
    from .models.train_translation import checkpoint_dir, load_checkpoint

    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {name!r}")
    directory = Path(directory) if directory is not None else checkpoint_dir()
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf8"))
    if name not in manifest.get("models", {}):
        raise FileNotFoundError(
            f"no {name} checkpoint in {directory}: train it with "
            f"python -m attention_lib.models.train_translation --model {name}"
        )
    entry = manifest["models"][name]
    path = directory / entry["file"]
    for file, expected in (
        (path, entry["sha256"]),
        (tatoeba_dir() / "bpe.json", entry["tokenizer_sha256"]),
    ):
        if sha256(file) != expected:
            raise ValueError(f"{file} does not match the sha256 in {directory / 'manifest.json'}")
    return load_checkpoint(name, path, dtype), Tokenizer.load()


# -- command line ------------------------------------------------------------

#: Lines translated per chunk: each chunk is sorted by length, batched,
#: translated, written in input order and flushed before the next is read.
CHUNK = 512


def main(argv=None, stdin=None, stdout=None, stderr=None):
    """``python -m attention_lib.translate``: English lines in, French lines out.

    Returns 0 on success; bad arguments or input exit with status 2 and a
    one-line message before anything is written; 141 (quietly) when standard
    output is closed early (``| head``).
    """
    import argparse

    from ._cli import read_text, write_flushed
    from .align.scoring import split_lines

    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    parser = argparse.ArgumentParser(
        prog="python -m attention_lib.translate",
        description="Translate English sentences, one per line, into French with the "
        "book's committed models. An empty line gives an empty line; a line "
        f"of more than {MAX_SOURCE_TOKENS} subword tokens is translated from its "
        f"first {MAX_SOURCE_TOKENS} (a note on standard error names the line).",
    )
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help="UTF-8 text, one English sentence per line (default or -: standard input)",
    )
    parser.add_argument(
        "--model",
        choices=MODELS,
        default="transformer",
        help="which model translates (default transformer)",
    )
    parser.add_argument(
        "--beam",
        type=int_at_least(1),
        default=1,
        metavar="N",
        help="beam size (default 1: greedy decoding)",
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=0.6,
        metavar="ALPHA",
        help="beam search's length penalty ((5 + |y|) / 6) ** ALPHA (default 0.6)",
    )
    args = parser.parse_args(argv)
    if not np.isfinite(args.length_penalty) or args.length_penalty < 0:
        parser.error(f"--length-penalty must be a finite number >= 0, got {args.length_penalty}")
    lines = split_lines(read_text(parser, args.file, stdin))
    try:
        model, tok = load_model(args.model)
    except (OSError, ValueError) as err:
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    for k, line in enumerate(lines):
        n = len(tok.encode(line))
        if n > MAX_SOURCE_TOKENS:
            stderr.write(
                f"{parser.prog}: line {k + 1} has {n} subword tokens, more than the "
                f"{MAX_SOURCE_TOKENS} the models take: translating its first "
                f"{MAX_SOURCE_TOKENS}\n"
            )
    beam = args.beam if args.beam > 1 else None

    def translated():
        for start in range(0, len(lines), CHUNK):
            chunk = lines[start : start + CHUNK]
            out = translate_sentences(model, tok, chunk, beam, args.length_penalty)
            yield "".join(t + "\n" for t in out)

    return write_flushed(stdout, translated())


if __name__ == "__main__":
    sys.exit(main())
