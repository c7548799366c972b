"""A Llama-family language model, and stories260K, a real one, read from its GGUF file.

Chapter 9's TinyGPT follows GPT-2. Llama (Touvron et al., 2023) keeps the
decoder-only Transformer and changes four parts of the block:

============================  ===========================  ==============================
                              GPT-2 (TinyGPT)              Llama (this module)
============================  ===========================  ==============================
normalisation                 LayerNorm (mean, variance)   RMSNorm (root mean square)
feed-forward                  GELU(x W1 + b1) W2 + b2      (SiLU(x W1) * x W3) W2: SwiGLU
word order                    learned position vectors     rotary, inside attention
keys and values               one pair per query head      one pair per group of heads (GQA)
biases                        everywhere                   none
============================  ===========================  ==============================

One block is, for a (B, T, E) stream ``x``::

    x = x + Attention(RMSNorm(x))      # causal, grouped-query, rotary
    x = x + SwiGLU(RMSNorm(x))

and the model is a token embedding, ``n_layers`` blocks, a final RMSNorm and
an output layer (for stories260K the transposed token embedding: tied).

:func:`load_stories260k` builds the model that Andrej Karpathy trained with
llama2.c on TinyStories (5 layers, E = 64, 8 query heads sharing 4 key/value
heads, 512 tokens) from ``data/stories260k/``, with its tokenizer.
"""

from __future__ import annotations

import contextlib
import os
import re

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from .._checks import as_int, as_numeric
from ..data.gguf import GGUFError, read_gguf
from ..data.gguf_quant import BLOCKS, block_bytes, read_quantized
from ..data.llama_tokenizer import LlamaTokenizer
from ..data.paths import verified_path
from ..nn.block import Composite
from ..nn.layers import Embedding, Linear
from ..nn.multi_head_attention import KVCache, MultiHeadAttention
from ..nn.norm import RMSNorm
from ..nn.swiglu import SwiGLU
from .heads import zeroed_heads
from .gpt import generate_tokens

STORIES260K = "stories260k/tinyllamas-stories-260k-f32.gguf"
STORIES260K_DOC = "stories260k/llama2c_doc_stories260K.md"

# GGUF tensor name -> (the book's name, transpose?). GGUF keeps PyTorch's
# (out, in) layout; the book's layers compute x @ W with W (in, out).
GGUF_NAMES = {
    "token_embd.weight": ("tok.E", False),
    "blk.{i}.attn_norm.weight": ("blocks.{i}.attn_norm.gamma", False),
    "blk.{i}.attn_q.weight": ("blocks.{i}.attn.W_Q", True),
    "blk.{i}.attn_k.weight": ("blocks.{i}.attn.W_K", True),
    "blk.{i}.attn_v.weight": ("blocks.{i}.attn.W_V", True),
    "blk.{i}.attn_output.weight": ("blocks.{i}.attn.W_O", True),
    "blk.{i}.ffn_norm.weight": ("blocks.{i}.ffn_norm.gamma", False),
    "blk.{i}.ffn_gate.weight": ("blocks.{i}.ffn.W1", True),
    "blk.{i}.ffn_up.weight": ("blocks.{i}.ffn.W3", True),
    "blk.{i}.ffn_down.weight": ("blocks.{i}.ffn.W2", True),
    "output_norm.weight": ("norm.gamma", False),
    "output.weight": ("head.W", True),
}


class LlamaBlock(Composite):
    """``x + Attention(RMSNorm(x))``, then ``x + SwiGLU(RMSNorm(x))``.

    The attention is causal, has no biases, rotates queries and keys in
    Llama's interleaved pairs (``rotary="interleaved"``) and lets
    ``n_heads / n_kv_heads`` query heads share each key/value head.
    """

    def __init__(
        self,
        d_model,
        n_heads,
        n_kv_heads,
        d_ff,
        rng,
        eps=1e-5,
        rotary_base=10000.0,
        dtype=np.float32,
    ):
        self.attn_norm = RMSNorm(d_model, eps)
        self.attn = MultiHeadAttention(
            d_model,
            n_heads,
            rng,
            n_kv_heads=n_kv_heads,
            bias=False,
            rotary="interleaved",
            rotary_base=rotary_base,
            dtype=dtype,
        )
        self.ffn_norm = RMSNorm(d_model, eps)
        self.ffn = SwiGLU(d_model, d_ff, rng)

    def layers(self) -> list:
        return [self.attn_norm, self.attn, self.ffn_norm, self.ffn]

    def dropouts(self) -> list:
        """The block's dropout layers: the attention's (Llama has no other)."""
        return [self.attn.dropout]

    def forward(self, x: np.ndarray, cache: KVCache | None = None) -> np.ndarray:
        x = x + self.attn.forward(self.attn_norm.forward(x), is_causal=True, cache=cache)
        return x + self.ffn.forward(self.ffn_norm.forward(x))

    def backward(self, grad: np.ndarray) -> np.ndarray:
        grad = grad + self.ffn_norm.backward(self.ffn.backward(grad))
        return grad + self.attn_norm.backward(self.attn.backward(grad))


class Llama(Composite):
    """Token embedding, ``n_layers`` :class:`LlamaBlock`, a final RMSNorm, logits.

    Parameters
    ----------
    n_vocab, d_model, n_layers, n_heads, n_kv_heads, d_ff, max_len : int
        Vocabulary size ``V``, width ``E``, blocks, query heads, key/value
        heads (dividing ``n_heads``), SwiGLU hidden units, longest sequence.
    rng : numpy.random.Generator
        Draws every weight (replaced by :meth:`from_gguf`).
    eps : float, optional
        RMSNorm's epsilon (1e-5).
    rotary_base : float, optional
        Base of the rotary frequencies (10000).
    tied : bool, optional
        The output layer is the transposed token embedding (default True,
        as in stories260K); False gives it its own weights ``head.W``.
    dtype : float32 or float64, optional
        Parameters and arithmetic (default float32, the file's type).

    Notes
    -----
    ``forward(tokens)`` maps (B, T) token ids to logits (B, T, V); the
    logits at position ``t`` score the token at ``t + 1``. ``backward``
    fills every layer's ``grads`` (with ``tied=True`` the embedding's
    gradient adds the output layer's). :meth:`generate` continues a prompt
    as :meth:`attention_lib.TinyGPT.generate` does.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.llama import Llama
    >>> model = Llama(n_vocab=10, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2,
    ...               d_ff=24, max_len=12, rng=np.random.default_rng(0))
    >>> model.forward(np.zeros((3, 7), dtype=int)).shape
    (3, 7, 10)
    >>> model.generate(np.array([1, 2, 3]), 4, temperature=0).shape
    (7,)
    """

    def __init__(
        self,
        n_vocab,
        d_model,
        n_layers,
        n_heads,
        n_kv_heads,
        d_ff,
        max_len,
        rng,
        eps=1e-5,
        rotary_base=10000.0,
        tied=True,
        dtype=np.float32,
    ):
        n_vocab, d_model = as_int(n_vocab, "n_vocab", 1), as_int(d_model, "d_model", 1)
        n_layers, d_ff = as_int(n_layers, "n_layers", 1), as_int(d_ff, "d_ff", 1)
        self.max_len = as_int(max_len, "max_len", 1)
        self.dtype = np.dtype(dtype)
        self.tok = Embedding(n_vocab, d_model, rng)
        self.blocks = [
            LlamaBlock(d_model, n_heads, n_kv_heads, d_ff, rng, eps, rotary_base, self.dtype)
            for _ in range(n_layers)
        ]
        self.norm = RMSNorm(d_model, eps)
        self.head = None if tied else Linear(d_model, n_vocab, rng, bias=False)
        for layer in self.layers():
            for k, a in layer.params.items():
                layer.params[k] = a.astype(self.dtype, copy=False)
        self.config = {
            "n_vocab": n_vocab,
            "d_model": d_model,
            "n_layers": n_layers,
            "n_heads": n_heads,
            "n_kv_heads": n_kv_heads,
            "d_ff": d_ff,
            "max_len": self.max_len,
            "eps": eps,
            "rotary_base": rotary_base,
            "tied": tied,
        }

    def layers(self) -> list:
        tail = [] if self.head is None else [self.head]
        return [self.tok, *(b for block in self.blocks for b in block.layers()), self.norm, *tail]

    def new_cache(self) -> list[KVCache]:
        """An empty KV cache, one :class:`~attention_lib.nn.KVCache` per block."""
        return [KVCache() for _ in self.blocks]

    def fast_decoder(self, batch: int, capacity: int | None = None):
        """This model's :class:`~attention_lib.models.kv_cache.LlamaDecoder`, or None.

        None for a subclass with its own ``forward`` or a layer whose rotary
        pairs are not interleaved (use
        :func:`~attention_lib.models.kv_cache.decoder_for`, which also checks
        the attention layers).
        """
        if type(self).forward is not Llama.forward:
            return None
        if not all(b.attn.rotary == "interleaved" for b in self.blocks):
            return None
        from .kv_cache import LlamaDecoder

        return LlamaDecoder(self, batch, capacity)

    def forward(self, tokens: ArrayLike, cache: list[KVCache] | None = None) -> np.ndarray:
        """Logits (B, T, V) for ``tokens`` (B, T).

        With a ``cache`` (from :meth:`new_cache`), ``tokens`` continue the
        sequence the cache holds: they take the next positions (rotary
        angles) and attend to the cached keys and values too.
        """
        tokens = as_numeric(tokens, "tokens")
        if tokens.ndim != 2 or tokens.shape[1] == 0:
            raise ValueError(f"tokens must have shape (B, T) with T >= 1, got {tokens.shape}")
        start = 0 if cache is None else cache[0].position
        if start + tokens.shape[1] > self.max_len:
            raise ValueError(
                f"the sequence would be {start + tokens.shape[1]} tokens long "
                f"but max_len = {self.max_len}"
            )
        x = self.tok.forward(tokens)  # (B, T, E)
        for i, block in enumerate(self.blocks):
            x = block.forward(x, None if cache is None else cache[i])
        self.x_final = self.norm.forward(x)
        if self.head is not None:
            return self.head.forward(self.x_final)
        return self.x_final @ self.tok.params["E"].T  # (B, T, V)

    def backward(self, dlogits: np.ndarray) -> None:
        """Fill ``grads`` of every layer from ``d loss / d logits`` (B, T, V)."""
        if self.head is not None:
            grad = self.head.backward(dlogits)
        else:
            E = self.tok.params["E"]
            grad = dlogits @ E
            d_head = dlogits.reshape(-1, E.shape[0]).T @ self.x_final.reshape(
                -1, E.shape[1]
            )  # (V, E)
        grad = self.norm.backward(grad)
        for block in reversed(self.blocks):
            grad = block.backward(grad)
        self.tok.backward(grad)
        if self.head is None:
            self.tok.grads["E"] += d_head

    def generate(
        self,
        tokens,
        max_new_tokens,
        temperature=1.0,
        top_k=None,
        top_p=None,
        rng=None,
        use_cache=True,
        crop=True,
    ):
        """Continue ``tokens`` (for Llama starting with ``<s>``, id 1) by ``max_new_tokens`` tokens.

        As :meth:`attention_lib.TinyGPT.generate` (the same arguments and
        choices, ``crop`` included), sampling from float64 logits. Returns an
        int64 array, the prompt followed by the new tokens (same ndim).
        """
        return generate_tokens(
            self,
            tokens,
            max_new_tokens,
            temperature,
            top_k,
            top_p,
            rng,
            use_cache,
            float64=True,
            crop=crop,
        )

    @classmethod
    def from_gguf(cls, path: str | os.PathLike, dtype: DTypeLike = np.float32) -> Llama:
        """The Llama model stored in a GGUF file (F32, F16, Q8_0, Q4_0 or Q4_1 tensors).

        Every tensor is mapped to the book's layers by :data:`GGUF_NAMES`
        (transposed where PyTorch's ``(out, in)`` becomes the book's
        ``(in, out)``) and checked for shape. Quantized
        tensors are dequantized to ``dtype`` as ggml computes them
        (:func:`~attention_lib.data.gguf_quant.read_quantized`). An
        ``output.weight`` equal to ``token_embd.weight`` (or missing) makes
        the output layer tied. The metadata and every tensor's shape and size
        are checked first (:func:`gguf_sizes`, from the headers), so a damaged
        file is one ``ValueError`` naming it; the model is built without
        drawing any weights, and holds only the file's.

        Returns
        -------
        Llama
        """
        f = read_gguf(path)
        sizes = gguf_sizes(f)  # every claimed size checked against the tensors' headers
        tied = "output.weight" not in f.tensor_infos or np.array_equal(
            _read_tensor(f, "output.weight"), _read_tensor(f, "token_embd.weight")
        )
        # The layers' weights are left unset (zeros: no memory is touched) and then
        # replaced by the file's, so a 135M-parameter model costs its weights once.
        model = cls(**sizes, rng=_Unfilled(), tied=tied, dtype=dtype)
        for gguf_name, book_name, transpose in tensor_names(model.config["n_layers"]):
            if gguf_name == "output.weight" and tied:
                continue
            array = _read_tensor(f, gguf_name)
            # a file's F32 tensor is a read-only view of it: the model gets its own copy
            array = array.astype(model.dtype, copy=not array.flags.writeable)
            owner, key = model._owner(book_name)
            value = np.ascontiguousarray(array.T) if transpose else array
            if value.shape != owner.params[key].shape:
                raise ValueError(
                    f"{path}: tensor {gguf_name} has shape {array.shape}, so "
                    f"{book_name} would be {value.shape}, but the model "
                    f"needs {owner.params[key].shape}"
                )
            owner.params[key] = value
        return model

    def parameter(self, name: str) -> np.ndarray:
        """A parameter by its book name, e.g. ``"blocks.0.attn.W_Q"`` (the array itself)."""
        owner, key = self._owner(name)
        return owner.params[key]

    @contextlib.contextmanager
    def ablate(self, heads):
        """Within the ``with`` block, the given query heads' outputs are zero.

        A head is removed by zeroing its ``d_head`` rows of its block's
        ``W_O`` (its share of the output projection), on a copy; the original
        arrays are put back on leaving the block, even after an error. With
        grouped-query attention only the query head goes: the key/value head
        it shares with its group is untouched.

        Parameters
        ----------
        heads : iterable of (int, int)
            ``(layer, head)`` pairs, counted from 0; ``head`` is a query head.

        Yields
        ------
        Llama
            This model, with the heads removed.

        Raises
        ------
        ValueError, TypeError
            A pair that is not two integers, or a layer or head out of range,
            before any weight is changed.

        Examples
        --------
        >>> import numpy as np
        >>> from attention_lib.models.llama import Llama
        >>> model = Llama(n_vocab=10, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2,
        ...               d_ff=24, max_len=12, rng=np.random.default_rng(0))
        >>> ids = np.array([[1, 2, 3]])
        >>> with model.ablate([(1, 0), (1, 3)]):
        ...     changed = model.forward(ids)
        >>> bool(np.abs(changed - model.forward(ids)).max() > 0)
        True
        """
        H = self.config["n_heads"]
        with zeroed_heads(self.blocks, H, self.config["d_model"] // H, heads):
            yield self

    def _owner(self, name: str) -> tuple:
        """The layer holding parameter ``name`` and the parameter's key in its ``params``."""
        owner, _, key = name.rpartition(".")
        obj = self
        for part in owner.split("."):
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        return obj, key


class _Unfilled(np.random.Generator):
    """A generator whose ``normal`` draws nothing: float32 zeros, never written to.

    :meth:`Llama.from_gguf` builds the model with it and then replaces every
    weight by the file's, so no random weights are drawn for a model that a file
    holds (for SmolLM2, 134M of them) and no memory is touched for them.
    """

    def __init__(self):
        super().__init__(np.random.PCG64(0))

    def normal(self, loc=0.0, scale=1.0, size=None):
        # zeros, not np.empty: a float64 model casts these before they are replaced, and
        # leftover bits can be a signalling NaN, whose cast warns on some CPUs (NumPy's
        # baseline SIMD). A large np.zeros is fresh pages the kernel maps on first write.
        return np.zeros(size, np.float32)


def _read_tensor(f, name: str) -> np.ndarray:
    """Tensor ``name`` of GGUF file ``f`` as an array: F32/F16/F64 as stored, quantized ones
    dequantized to float32; a damaged block is an error naming the file and the tensor."""
    try:
        return read_quantized(f, name)
    except GGUFError as err:
        raise GGUFError(f"{f.path}: tensor {name}: {err}") from None


def _metadata(f, key, kind, default=None):
    """``f.metadata[key]`` checked to be a positive int (``kind="count"``), a positive
    finite number (``"positive"``) or a str (``"str"``); a one-line error naming the file."""
    m, types = f.metadata, f.metadata_types
    if key not in m:
        if default is not None:
            return default
        raise ValueError(f"{f.path}: the metadata key {key!r} is missing (a Llama file needs it)")
    value, vtype = m[key], types[key]
    if kind == "str":
        ok = isinstance(value, str)
        want = "a string"
    elif kind == "count":
        ok = vtype.startswith(("uint", "int")) and isinstance(value, int) and value >= 1
        want = "a positive integer"
    else:
        ok = vtype in ("float32", "float64") or vtype.startswith(("uint", "int"))
        ok = ok and isinstance(value, (int, float)) and bool(np.isfinite(value)) and value > 0
        want = "a positive finite number"
    if not ok:
        raise ValueError(
            f"{f.path}: the metadata key {key!r} must be {want}, got {value!r} ({vtype})"
        )
    return value


def gguf_sizes(f) -> dict:
    """The sizes a Llama GGUF file claims, checked against its tensors before anything is built.

    Every metadata key the model needs must be there with the right type, and
    every tensor the claimed sizes imply must be in the file with the shape they
    imply (read from the tensor's header: nothing is allocated), so a file that
    claims 3,000 blocks, or a 10**9-wide embedding, fails here with the file's
    name instead of after drawing the model it claims.
    """
    if _metadata(f, "general.architecture", "str") != "llama":
        raise ValueError(
            f"{f.path}: general.architecture is {f.metadata['general.architecture']!r}, not 'llama'"
        )
    layout = _metadata(f, "llama.tensor_data_layout", "str", default="reference")
    if layout not in ("reference", "Meta AI original pth"):
        raise ValueError(
            f"{f.path}: llama.tensor_data_layout is {layout!r}; only the "
            "original layout (rotary pairs 2i, 2i+1) is read"
        )
    d = _metadata(f, "llama.embedding_length", "count")
    n_layers = _metadata(f, "llama.block_count", "count")
    n_heads = _metadata(f, "llama.attention.head_count", "count")
    n_kv = _metadata(f, "llama.attention.head_count_kv", "count", default=n_heads)
    d_ff = _metadata(f, "llama.feed_forward_length", "count")
    max_len = _metadata(f, "llama.context_length", "count")
    eps = float(_metadata(f, "llama.attention.layer_norm_rms_epsilon", "positive"))
    base = float(_metadata(f, "llama.rope.freq_base", "positive", default=10000.0))
    if d % n_heads or (d // n_heads) % 2 or n_heads % n_kv:
        raise ValueError(
            f"{f.path}: {n_heads} query heads and {n_kv} key/value heads do not fit "
            f"embedding_length {d} (the heads must divide it into even widths, and the "
            "key/value heads must divide the query heads)"
        )
    info = f.tensor_infos.get("token_embd.weight")
    if info is None or len(info.shape) != 2 or info.shape[1] != d or info.shape[0] < 1:
        got = "missing" if info is None else f"of shape {info.shape}"
        raise ValueError(
            f"{f.path}: tensor token_embd.weight is {got}; it must be (n_vocab >= 1, {d})"
        )
    V, kv = info.shape[0], d // n_heads * n_kv
    shapes = {  # in the file's (PyTorch's) layout
        "token_embd.weight": (V, d),
        "blk.{i}.attn_norm.weight": (d,),
        "blk.{i}.attn_q.weight": (d, d),
        "blk.{i}.attn_k.weight": (kv, d),
        "blk.{i}.attn_v.weight": (kv, d),
        "blk.{i}.attn_output.weight": (d, d),
        "blk.{i}.ffn_norm.weight": (d,),
        "blk.{i}.ffn_gate.weight": (d_ff, d),
        "blk.{i}.ffn_up.weight": (d_ff, d),
        "blk.{i}.ffn_down.weight": (d, d_ff),
        "output_norm.weight": (d,),
        "output.weight": (V, d),
    }
    for gguf_name, _, _ in tensor_names(n_layers):
        info = f.tensor_infos.get(gguf_name)
        want = shapes[re.sub(r"^blk\.\d+\.", "blk.{i}.", gguf_name)]
        if info is None:
            if gguf_name == "output.weight":  # optional: tied to the embedding
                continue
            raise ValueError(
                f"{f.path}: tensor {gguf_name} is missing, but block_count = {n_layers} "
                f"and the other sizes need it, of shape {want}"
            )
        if info.shape != want:
            raise ValueError(
                f"{f.path}: tensor {gguf_name} has shape {info.shape}, but the metadata's "
                f"sizes need {want}"
            )
        if info.type_name not in ("F32", "F16", "F64") and info.ggml_type not in BLOCKS:
            raise ValueError(
                f"{f.path}: tensor {gguf_name} is {info.type_name}; only F32, F16, F64, "
                "Q8_0, Q4_0 and Q4_1 weights are read"
            )
        need = info.nbytes if info.nbytes is not None else block_bytes(info.ggml_type, want)
        if info.offset + need > len(f._buffer):
            raise ValueError(
                f"{f.path}: tensor {gguf_name} ({info.type_name}, shape {want}) needs "
                f"{need:,} bytes from byte {info.offset:,}, but the file has "
                f"{len(f._buffer):,}: truncated"
            )
    return {
        "n_vocab": V,
        "d_model": d,
        "n_layers": n_layers,
        "n_heads": n_heads,
        "n_kv_heads": n_kv,
        "d_ff": d_ff,
        "max_len": max_len,
        "eps": eps,
        "rotary_base": base,
    }


def tensor_names(n_layers: int) -> list[str]:
    """``(gguf_name, book_name, transpose)`` for every tensor of a Llama GGUF file."""
    out = []
    for gguf, (book, transpose) in GGUF_NAMES.items():
        layers = range(n_layers) if "{i}" in gguf else [None]
        for i in layers:
            out.append((gguf.format(i=i), book.format(i=i), transpose))
    return out


def load_stories260k(
    path: str | os.PathLike | None = None, dtype: DTypeLike = np.float32
) -> tuple[Llama, LlamaTokenizer]:
    """stories260K and its tokenizer, from ``data/stories260k/`` (checked by its SHA-256).

    Parameters
    ----------
    path : str or os.PathLike, optional
        Another GGUF file to read instead.
    dtype : float32 or float64, optional

    Returns
    -------
    (Llama, LlamaTokenizer)

    Examples
    --------
    >>> from attention_lib.models.llama import load_stories260k
    >>> model, tok = load_stories260k()
    >>> ids = model.generate(tok.encode("Once upon a time"), 12, temperature=0)
    >>> tok.decode(ids)
    'Once upon a time, there was a little girl named Lily. She'
    """
    if path is None:
        path = verified_path(STORIES260K)
    model = Llama.from_gguf(path, dtype=dtype)
    tokenizer = LlamaTokenizer.from_gguf(read_gguf(path))
    if tokenizer.n_vocab != model.config["n_vocab"]:
        raise ValueError(
            f"{path}: the tokenizer has {tokenizer.n_vocab} pieces but token_embd.weight "
            f"has {model.config['n_vocab']} rows: every token id needs one"
        )
    return model, tokenizer


def stories260k_reference() -> str:
    """The text llama2.c prints for stories260K at temperature 0, from its documentation.

    ``data/stories260k/llama2c_doc_stories260K.md`` shows the command
    ``./run stories260K/stories260K.bin -z stories260K/tok512.bin -t 0.0`` and
    its output in a code block; this returns that output (without the
    command line and the block's last newline): 256 tokens of greedy
    decoding from ``<s>``, run.c's default number of steps.
    """
    doc = verified_path(STORIES260K_DOC).read_text(encoding="utf8")
    blocks = doc.split("```")[1::2]  # the insides of the code blocks
    block = next(b for b in blocks if "-t 0.0" in b.split("\n", 2)[1])
    return block.split("\n", 2)[2].removesuffix("\n")
