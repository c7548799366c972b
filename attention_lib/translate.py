"""Translate English sentences into French with the committed models.

Library use::

    from attention_lib.translate import load_model, translate_sentences
    model, tok = load_model("transformer")
    translate_sentences(model, tok, ["I am cold.", "Where is the station?"])
"""

import sys
from pathlib import Path

import numpy as np

from ._cli import int_in

#: Widest beam :func:`translate_sentences` takes: far beyond the committed evaluation's 4
#: (a beam of 100,000 would hold 100,000 hypotheses of every sentence in memory).
MAX_BEAM = 64
#: Largest length penalty ``alpha``: ``((5 + |y|) / 6) ** alpha`` stays far from
#: overflowing for the models' 64 target tokens (the usual values are 0.6 to 1).
MAX_LENGTH_PENALTY = 10.0

#: Longest source the command line translates, in subword tokens; longer lines
#: are cut to their first ``MAX_SOURCE_TOKENS`` tokens (the models were trained on
#: sentences of up to 15 English words, well under 48 tokens).
MAX_SOURCE_TOKENS = 48


def translate_ids(model, src_ids, beam=None, length_penalty=0.6, batch=64):
    """Output ids for each list of source ids (each non-empty), batched by length."""
    from .data.tatoeba import pad_batch

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
    ``beam`` (None or 1: greedy) may be at most :data:`MAX_BEAM` and
    ``length_penalty`` in ``[0, MAX_LENGTH_PENALTY]``.
    """
    from ._checks import as_int, as_real

    if isinstance(sentences, (str, bytes)):
        raise TypeError(
            "sentences must be a list of str, got one string (it would be translated "
            "character by character): pass [sentence]"
        )
    sentences = list(sentences)
    bad = [s for s in sentences if not isinstance(s, str)]
    if bad:
        raise TypeError(f"sentences must be str, got {type(bad[0]).__name__}")
    batch = as_int(batch, "batch", minimum=1)
    max_tokens = as_int(max_tokens, "max_tokens", minimum=1)
    if beam is not None:
        beam = as_int(beam, "beam", minimum=1)
        if beam > MAX_BEAM:
            raise ValueError(f"beam must be at most {MAX_BEAM}, got {beam}")
    as_real(length_penalty, "length_penalty", 0.0, MAX_LENGTH_PENALTY)
    encoded = [tok.encode(s)[:max_tokens] for s in sentences]
    todo = [i for i, ids in enumerate(encoded) if ids]
    ids = translate_ids(model, [encoded[i] for i in todo], beam, length_penalty, batch)
    out = [""] * len(sentences)
    for i, row in zip(todo, ids):
        out[i] = tok.decode(row)
    return out


# -- models ------------------------------------------------------------------

MODELS = ("transformer", "rnnsearch")
#: Every model the command line takes: the committed translators, and SmolLM2-135M-Instruct
#: with chapter 16's LoRA adapters (``data/checkpoints/finetune``).
CLI_MODELS = (*MODELS, "smollm2-lora")

#: The system message chapter 16's SmolLM2 adapters were trained (and scored) with.
SMOLLM2_SYSTEM = "Translate the user's English sentence into French."
#: The most French tokens SmolLM2 writes for one sentence (chapter 16's evaluation's).
SMOLLM2_MAX_NEW = 40


def checkpoint_dir() -> Path:
    """``data/checkpoints/translation``: the committed models and their manifest."""
    from .data.paths import data_dir

    return data_dir() / "checkpoints" / "translation"


def load_checkpoint(name: str, path, dtype=np.float32):
    """The model ``name`` (one of :data:`MODELS`) from its file, with its own ``load``.

    Its sha256 is not checked here (:func:`load_model` does that); every
    fault of the file raises
    :class:`~attention_lib.models.checkpoint.CheckpointError` naming it.
    """
    if name == "transformer":
        from .models.transformer import Transformer

        return Transformer.load(path, dtype)
    if name == "rnnsearch":
        from .models.seq2seq import RNNsearch

        return RNNsearch.load(path, dtype)
    raise ValueError(f"model must be one of {', '.join(MODELS)}, got {name!r}")


def load_model(name, directory=None, dtype=np.float32):
    """A committed model and the tokenizer it was trained with: ``(model, tokenizer)``.

    The checkpoint's and the tokenizer's sha256 are checked against
    ``data/checkpoints/translation/manifest.json`` first.
    """
    from .data.tatoeba import Tokenizer, tatoeba_dir
    from .models.checkpoint import check_sha256

    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {name!r}")
    directory = Path(directory) if directory is not None else checkpoint_dir()
    entry = manifest_entry(directory, name)
    path = directory / entry["file"]
    for file, expected in (
        (path, entry["sha256"]),
        (tatoeba_dir() / "bpe.json", entry["tokenizer_sha256"]),
    ):
        check_sha256(file, expected, directory / "manifest.json", ValueError)
    return load_checkpoint(name, path, dtype), Tokenizer.load()


def manifest_entry(directory, name):
    """``manifest.json``'s entry for model ``name`` in ``directory``, checked.

    A damaged manifest (not JSON, such as a merge-conflict marker; not an
    object; an entry without its file or sha256, or naming a file outside the
    folder, or another model's checkpoint) raises
    :class:`~attention_lib.DataFileError` naming the manifest.
    """
    import json
    import re

    from .data.paths import DataFileError

    path = Path(directory) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf8"))
    except FileNotFoundError:
        raise DataFileError(
            f"{path} is missing: it lists the checkpoints and their sha256"
        ) from None
    except (ValueError, UnicodeDecodeError) as err:
        raise DataFileError(f"{path} is not valid JSON ({err}); restore it with git") from None
    models = manifest.get("models") if isinstance(manifest, dict) else None
    if not isinstance(models, dict):
        raise DataFileError(f'{path} must be a JSON object whose "models" is an object')
    if name not in models:
        raise DataFileError(
            f"no {name} checkpoint in {directory} ({path} has no entry for it): train it "
            f"with python -m attention_lib.train.translation --model {name}"
        )
    entry = models[name]
    sha = re.compile(r"[0-9a-f]{64}")
    ok = (
        isinstance(entry, dict)
        and entry.get("file") == f"{name}.npz"
        and all(
            isinstance(entry.get(k), str) and sha.fullmatch(entry[k])
            for k in ("sha256", "tokenizer_sha256")
        )
    )
    if not ok:
        raise DataFileError(
            f'{path}: the entry for {name} must be an object with "file": "{name}.npz" '
            f'and "sha256", "tokenizer_sha256" of 64 hex digits, got {str(entry)[:120]}'
        )
    return entry


# -- SmolLM2 with chapter 16's adapters --------------------------------------


def smollm2_adapter_path() -> Path:
    """``data/checkpoints/finetune/smollm2_translate_lora.npz``: chapter 16's adapters."""
    from .data.paths import data_dir

    return data_dir() / "checkpoints" / "finetune" / "smollm2_translate_lora.npz"


def load_smollm2_translator(adapter=None):
    """SmolLM2-135M-Instruct with chapter 16's LoRA adapters merged in: ``(model, tokenizer)``.

    The adapter's sha256 is checked against ``smollm2_translate.json`` (its
    manifest, beside it) when it is the committed one; :func:`attention_lib.nn.lora.load`
    refuses a file saved for another model or rank. The adapters are then
    folded into the weights (:func:`~attention_lib.nn.lora.merge_and_unload`),
    so greedy decoding runs the KV-cached fast decoder.

    Raises
    ------
    DataFileError
        The adapter or its manifest is missing, or the adapter is not the
        committed one.
    ValueError
        The file is not an adapter of SmolLM2 (from :func:`~attention_lib.nn.lora.load`).
    """
    import json

    from .data.paths import DataFileError
    from .models.checkpoint import check_sha256
    from .models.smollm2 import load_smollm2
    from .nn import lora

    path = smollm2_adapter_path() if adapter is None else Path(adapter)
    if not path.is_file():
        raise DataFileError(
            f"{path} is missing: it is committed with the repository, or made by "
            "python scripts/finetune_smollm2_translate.py"
        )
    if adapter is None:
        manifest = path.with_name("smollm2_translate.json")
        try:
            expected = json.loads(manifest.read_text(encoding="utf8"))["outputs"][path.name]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise DataFileError(
                f"{manifest} cannot give the adapter's sha256 ({err}); restore it with git"
            ) from None
        check_sha256(path, expected, manifest)
    model, tok = load_smollm2()
    lora.load(model, path)
    return lora.merge_and_unload(model), tok


def smollm2_translate(model, tok, sentences, max_new=SMOLLM2_MAX_NEW):
    """French for each English sentence from SmolLM2 in its chat template, greedy.

    The prompt is :data:`SMOLLM2_SYSTEM` then the sentence as the user's
    turn; the answer stops at the end of the turn (``<|im_end|>``) or at a
    newline, and its first line is kept. An empty sentence gives an empty string.
    """
    from .models.gpt import check_generation, stream_tokens
    from .models.smollm2 import chat_prompt

    if isinstance(sentences, (str, bytes)):
        raise TypeError("sentences must be a list of str, got one string: pass [sentence]")
    out = []
    for sentence in sentences:
        if not sentence.strip():
            out.append("")
            continue
        ids = chat_prompt(tok, sentence, system=SMOLLM2_SYSTEM)
        seq = check_generation(model, ids, max_new, 0.0, None, None, None, True)
        new = []
        for nxt in stream_tokens(model, seq, max_new, 0.0, None, None, None, True, True, True):
            t = int(nxt[0])
            if t == tok.eos_id:
                break
            new.append(t)
            if "\n" in tok.decode([t]):
                break
        out.append(tok.decode(new).split("\n")[0].strip())
    return out


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
        choices=CLI_MODELS,
        default="transformer",
        help="which model translates (default transformer); smollm2-lora is "
        "SmolLM2-135M-Instruct with chapter 16's adapters (greedy only)",
    )
    parser.add_argument(
        "--beam",
        type=int_in(1, MAX_BEAM),
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
    if not 0 <= args.length_penalty <= MAX_LENGTH_PENALTY:  # NaN too
        parser.error(
            f"--length-penalty must be a number in [0, {MAX_LENGTH_PENALTY:g}], "
            f"got {args.length_penalty}"
        )
    if args.model == "smollm2-lora" and args.beam > 1:
        parser.error("--model smollm2-lora decodes greedily: --beam must be 1")
    lines = split_lines(read_text(parser, args.file, stdin))
    try:
        if args.model == "smollm2-lora":
            model, tok = load_smollm2_translator()
        else:
            model, tok = load_model(args.model)
    except (OSError, ValueError) as err:
        parser.exit(1, f"{parser.prog}: error: {err}\n")
    if args.model == "smollm2-lora":
        return write_flushed(
            stdout,
            ("".join(t + "\n" for t in smollm2_translate(model, tok, [line])) for line in lines),
            parser.prog,
            stderr,
        )
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

    return write_flushed(stdout, translated(), parser.prog, stderr)


if __name__ == "__main__":
    sys.exit(main())
