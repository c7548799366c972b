"""Byte-level BPE, the tokenizer of GPT-2 and of SmolLM2, built from a GGUF file.

A byte-level BPE tokenizer turns text into ids in three steps:

1. **Pre-tokenize**: cut the text into chunks that no merge may cross. SmolLM2
   (``tokenizer.ggml.pre = "smollm"``) puts every digit on its own, then
   splits the rest with GPT-2's pattern: a word with the space before it, a
   number, a run of punctuation, a run of spaces.
2. **Bytes to symbols**: each chunk's UTF-8 bytes become printable
   characters (GPT-2's ``bytes_to_unicode``: a space is ``Ġ``, a newline
   ``Ċ``), so every string, in any script, is spelled with 256 symbols and
   no text is ever unknown.
3. **Merge**: the merges (``tokenizer.ggml.merges``, ``"Ġ t"``, ``"Ġt he"``,
   ...) are a ranked list of pairs; the pair of adjacent symbols with the
   best rank is joined, again and again, until no adjacent pair has a rank.
   Each final symbol is a token of the vocabulary (``tokenizer.ggml.tokens``).

Special tokens (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``: the
vocabulary's control tokens, type 3) are matched whole in the text first,
as transformers does, so a chat template's markers are one id each.

The work is done by Hugging Face's ``tokenizers`` (the field's implementation,
in Rust), configured as SmolLM2's own ``tokenizer.json``; the SmolLM2 chapter applies
the merges to a word by hand and checks the result against this class.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["BPETokenizer", "bytes_to_unicode", "PRE_TOKENIZERS"]

#: The ``tokenizer.ggml.pre`` values read here: llama.cpp's names for the
#: pre-tokenizers of models whose merges were learned on GPT-2's pattern,
#: after the digits were split one by one ("smollm") or not ("gpt2").
PRE_TOKENIZERS = ("smollm", "gpt2")
CONTROL = 3  # tokenizer.ggml.token_type of a special (control) token


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character (``0x20`` -> ``"Ġ"``).

    Printable Latin-1 bytes map to themselves; the other 68 (controls, the
    space, ...) to ``chr(256 + n)`` in order, so the map is one to one.

    Examples
    --------
    >>> m = bytes_to_unicode()
    >>> m[ord("a")], m[ord(" ")], m[ord("\\n")], len(set(m.values()))
    ('a', 'Ġ', 'Ċ', 256)
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


class BPETokenizer:
    """SmolLM2's tokenizer: byte-level BPE with its merges, digits split, special tokens whole.

    Parameters
    ----------
    tokens : list of str
        The vocabulary, in id order, spelled in :func:`bytes_to_unicode`'s symbols.
    merges : list of str
        The merges, best first, each ``"left right"``.
    special : list of int
        Ids of the special tokens, matched whole in the text.
    pre : str, optional
        ``"smollm"`` (digits one by one, then GPT-2's pattern) or ``"gpt2"``.
    chat_template : str, optional
        The model's chat template (Jinja), for :meth:`chat`.
    bos_id, eos_id : int, optional

    Examples
    --------
    >>> tok = BPETokenizer(["a", "b", "ab", "Ġ", "Ġab", "1", "<|end|>"],
    ...                    ["a b", "Ġ ab"], special=[6])
    >>> tok.encode("ab ab<|end|>1").tolist()
    [2, 4, 6, 5]
    >>> tok.decode([2, 4, 6])
    'ab ab<|end|>'
    """

    def __init__(
        self,
        tokens,
        merges,
        special=(),
        pre="smollm",
        chat_template=None,
        bos_id=None,
        eos_id=None,
    ):
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

        tokens = list(tokens)
        if not tokens or not all(isinstance(t, str) for t in tokens):
            raise ValueError("tokens must be a non-empty list of strings")
        vocab = {t: i for i, t in enumerate(tokens)}
        if len(vocab) != len(tokens):
            raise ValueError("tokens holds the same token twice: each must have one id")
        pairs = []
        for i, m in enumerate(merges):
            parts = m.split(" ") if isinstance(m, str) else ()
            if len(parts) != 2 or not all(parts) or parts[0] + parts[1] not in vocab:
                raise ValueError(
                    f"merge {i} ({m!r}) is not two symbols whose join is in the vocabulary"
                )
            pairs.append((parts[0], parts[1]))
        if pre not in PRE_TOKENIZERS:
            raise ValueError(f"pre must be one of {PRE_TOKENIZERS}, got {pre!r}")
        self.special = sorted({int(i) for i in special})
        if any(not 0 <= i < len(tokens) for i in self.special):
            raise ValueError(f"special ids must be token ids below {len(tokens)}")
        self.tokens, self.pre, self.chat_template = tokens, pre, chat_template
        self.bos_id, self.eos_id = bos_id, eos_id
        self.vocab = vocab
        self.ranks = {p: r for r, p in enumerate(pairs)}
        tk = Tokenizer(models.BPE(vocab=vocab, merges=pairs, ignore_merges=False))
        split = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
        if pre == "smollm":
            split.insert(0, pre_tokenizers.Digits(individual_digits=True))
        tk.pre_tokenizer = pre_tokenizers.Sequence(split)
        tk.decoder = decoders.ByteLevel()
        tk.add_special_tokens([AddedToken(tokens[i], special=True) for i in self.special])
        self._tk = tk

    @classmethod
    def from_gguf(cls, f) -> BPETokenizer:
        """The tokenizer stored in a GGUF file read by :func:`~attention_lib.data.gguf.read_gguf`.

        Reads ``tokenizer.ggml.tokens``, ``.merges``, ``.token_type`` (type 3:
        special), ``.pre``, ``.bos_token_id``, ``.eos_token_id`` and
        ``tokenizer.chat_template``; a missing key, or a model other than
        ``"gpt2"`` (byte-level BPE), is a ``ValueError`` naming the file.
        """
        m = f.metadata
        model = m.get("tokenizer.ggml.model")
        if model != "gpt2":
            raise ValueError(
                f"{f.path}: tokenizer.ggml.model is {model!r}; this class reads byte-level "
                "BPE ('gpt2') vocabularies"
            )
        for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
            if not isinstance(m.get(key), list):
                raise ValueError(f"{f.path}: {key} is missing or not an array of strings")
        pre = m.get("tokenizer.ggml.pre", "gpt2")
        if pre not in PRE_TOKENIZERS:
            raise ValueError(
                f"{f.path}: tokenizer.ggml.pre is {pre!r}; this class knows {PRE_TOKENIZERS}"
            )
        tokens = m["tokenizer.ggml.tokens"]
        types = np.asarray(m.get("tokenizer.ggml.token_type", np.ones(len(tokens))))
        if types.shape != (len(tokens),):
            raise ValueError(f"{f.path}: tokenizer.ggml.token_type has not one type per token")
        try:
            return cls(
                tokens,
                m["tokenizer.ggml.merges"],
                special=np.flatnonzero(types == CONTROL).tolist(),
                pre=pre,
                chat_template=m.get("tokenizer.chat_template"),
                bos_id=m.get("tokenizer.ggml.bos_token_id"),
                eos_id=m.get("tokenizer.ggml.eos_token_id"),
            )
        except ValueError as err:
            raise ValueError(f"{f.path}: {err}") from None

    @property
    def n_vocab(self) -> int:
        """The number of token ids."""
        return len(self.tokens)

    def __len__(self) -> int:
        return self.n_vocab

    def __repr__(self):
        return f"BPETokenizer({self.n_vocab} tokens, {len(self.ranks)} merges, pre={self.pre!r})"

    def encode(self, text: str) -> np.ndarray:
        """The ids of ``text`` (int64); special tokens written in it are one id each.

        No start token is added (SmolLM2's ``add_bos_token`` is false: its chat
        template begins every turn with ``<|im_start|>``).
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        try:
            text.encode("utf8")
        except UnicodeEncodeError as err:
            raise ValueError(
                f"text has a lone surrogate (U+{ord(text[err.start]):04X} at index "
                f"{err.start}), which no UTF-8 byte sequence spells"
            ) from None
        return np.array(self._tk.encode(text, add_special_tokens=False).ids, dtype=np.int64)

    def decode(self, ids: ArrayLike) -> str:
        """The text of ``ids`` (special tokens written out); ``decode(encode(s)) == s``.

        A sequence cut inside a character's UTF-8 bytes ends in U+FFFD.
        """
        ids = np.asarray(ids)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise ValueError(f"ids must be a 1-D array of integers, got {ids.dtype} {ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.n_vocab):
            raise ValueError(f"ids must be in [0, {self.n_vocab}), got {ids.min()}..{ids.max()}")
        return self._tk.decode(ids.tolist(), skip_special_tokens=False)

    def pieces(self, ids: ArrayLike) -> list[str]:
        """The vocabulary's spelling of each id (``"Ġthe"``), for showing tokens."""
        return [self.tokens[int(i)] for i in np.asarray(ids).reshape(-1)]

    def chat(self, messages, add_generation_prompt: bool = True) -> str:
        """The model's chat template applied to ``messages`` (or one user prompt, a str).

        ``messages`` is a list of ``{"role": ..., "content": ...}``; the
        template (the GGUF's ``tokenizer.chat_template``) is rendered with
        Jinja's sandbox, as transformers' ``apply_chat_template`` does. With
        ``add_generation_prompt`` the text ends where the assistant's answer
        starts.
        """
        if self.chat_template is None:
            raise ValueError("this tokenizer has no chat template (tokenizer.chat_template)")
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        for i, msg in enumerate(messages):
            if not (isinstance(msg, dict) and isinstance(msg.get("role"), str)) or not isinstance(
                msg.get("content"), str
            ):
                raise ValueError(f"messages[{i}] must be a dict with str 'role' and 'content'")
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(self.chat_template).render(
            messages=messages, add_generation_prompt=add_generation_prompt
        )
