"""The decoding fast path: a preallocated KV cache and one-token steps.

A model's ``forward(tokens, cache)`` is the reference: every call checks its
arguments, builds the causal mask, recomputes the rotary tables, projects the
queries, keys and values with three weights joined at every call and appends
to the cache with ``np.concatenate``. That costs about a thousand Python-level
calls per generated token, far more than the arithmetic of a small model.

This module does the same arithmetic with the overhead paid once per
generation instead of once per token:

- :class:`StaticKVCache` holds every layer's keys and values in one array
  preallocated to the context length, written in place (no
  ``np.concatenate``); beam search reorders its rows in place;
- the query, key and value weights (and biases) of each layer are joined into
  one matrix once, with the attention's ``1 / sqrt(d_head)`` folded into the
  query's columns, and SwiGLU's ``W1`` and ``W3`` into one;
- the rotary angles of every position are one table of complex numbers
  ``exp(i p theta_j)``, computed once: rotating the pairs ``(2j, 2j+1)`` of
  a query or key is one complex multiplication; learned and sinusoidal
  position rows are sliced from their tables;
- a step with one new token needs no mask (it sees every cached key); the
  causal mask of the whole context (up to 1,024 positions) is built once per
  decoder, and a prompt (or speculative decoding's check of its drafts)
  takes a slice of it;
- only the last position goes through the output layer;
- a step of one sequence (``B = 1``, the command line's and the chapters' case)
  runs on 1-D rows (``_row``): ``np.dot`` of a row and a matrix, the norm's
  scale as one Python float, every head's rotation as one row of the table;
- SwiGLU's SiLU and the float32 GELU are NumPy (the GELU layer's own
  polynomial ``Phi``), so that generating never imports SciPy.

The logits are those of ``forward`` up to float rounding (the products are
grouped differently) and the tokens the same: ``tests/test_kv_cache.py``
compares them for TinyGPT (every kind of position), Llama (grouped-query
heads) and the translation Transformer (greedy and beam search).

:func:`decoder_for` gives the fast decoder of a model, or None for a
configuration it does not cover (the callers then take the plain path). The
joined weights of a model's last decoder are kept and reused, with a cache of
the caller's own, while every weight and every setting (a rotary layout, a
norm's eps) equals the copy they were made from.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from ..nn.activations import _normal_cdf_float32
from ..positions import _frequencies  # the rotary frequencies base^(-2i/d)


class StaticKVCache:
    """The keys and values of every layer, preallocated and written in place.

    Parameters
    ----------
    n_layers, batch, n_kv_heads, max_len, d_head : int
        The arrays ``k`` and ``v`` have shape
        ``(n_layers, batch, n_kv_heads, max_len, d_head)``.
    dtype : float32 or float64

    Attributes
    ----------
    kv : ndarray, shape (n_layers, batch, 2, n_kv_heads, max_len, d_head)
        Keys (``kv[:, :, 0]``) and values (``kv[:, :, 1]``) side by side, so
        that one assignment stores both of a step; only the first
        :attr:`length` positions hold anything.
    k, v : ndarray, shape (n_layers, batch, n_kv_heads, max_len, d_head)
        Views of the keys and the values.
    length : int
        How many positions are filled (the position of the next token).

    Examples
    --------
    >>> import numpy as np
    >>> cache = StaticKVCache(2, 1, 4, 16, 8, np.float32)
    >>> cache.write(0, np.ones((1, 4, 3, 8), np.float32), np.ones((1, 4, 3, 8), np.float32))
    >>> cache.advance(3)
    >>> len(cache), cache.nbytes        # 2 layers x 2 arrays x 1 x 4 x 16 x 8 x 4 bytes
    (3, 8192)
    """

    def __init__(self, n_layers, batch, n_kv_heads, max_len, d_head, dtype):
        self.kv = np.zeros((n_layers, batch, 2, n_kv_heads, max_len, d_head), dtype)
        self.k, self.v = self.kv[:, :, 0], self.kv[:, :, 1]
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @property
    def capacity(self) -> int:
        """The most positions the cache can hold."""
        return self.kv.shape[4]

    @property
    def nbytes(self) -> int:
        return self.kv.nbytes

    def write(self, layer: int, k: np.ndarray, v: np.ndarray) -> None:
        """Store ``k, v`` (B, n_kv_heads, T, d_head) of ``layer`` at positions ``length ..``.

        :attr:`length` moves on with :meth:`advance`, once every layer has written.
        (The models' steps write the joined ``kv`` directly, in one assignment.)
        """
        end = self.length + k.shape[2]
        self.k[layer, :, :, self.length : end] = k
        self.v[layer, :, :, self.length : end] = v

    def advance(self, T: int) -> None:
        self.length += T

    def reorder(self, idx: np.ndarray) -> None:
        """Keep the rows ``idx`` of the batch (beam search's surviving hypotheses)."""
        n = self.length
        self.kv[:, :, :, :, :n] = self.kv[:, idx, :, :, :n]

    def reset(self) -> None:
        """Forget every position (the arrays are reused)."""
        self.length = 0


def _softmax_rows(s):
    """Softmax over the last axis, in place (the ufuncs' ``reduce``: ``s.max`` and
    ``s.sum`` add a Python-level call each)."""
    s -= np.maximum.reduce(s, axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= np.add.reduce(s, axis=-1, keepdims=True)
    return s


def _rotary_table(max_len, d_head, base, dtype):
    """``exp(i p theta_j)`` for positions ``p < max_len``: (max_len, d_head / 2), complex."""
    angles = np.arange(max_len, dtype=np.float64)[:, None] * _frequencies(d_head, base)
    ctype = np.complex64 if np.dtype(dtype) == np.float32 else np.complex128
    table = np.empty(angles.shape, ctype)
    # cos and sin rounded to the model's dtype first, as rotary_tables does
    table.real = np.cos(angles).astype(dtype)
    table.imag = np.sin(angles).astype(dtype)
    return table


def _rotary_tables(blocks, max_len, dtype):
    """One rotary table per block, from its attention's own head size and base.

    Blocks that share both share one table (every block of the models the
    library builds), so a model whose blocks differ still rotates each with
    its own angles.
    """
    tables, out = {}, []
    for b in blocks:
        key = (b.attn.d_head, b.attn.rotary_base)
        if key not in tables:
            tables[key] = _rotary_table(max_len, *key, dtype)
        out.append(tables[key])
    return out


def _fold(norm, W, b, dtype):
    """``W, b`` with a norm's scale (and shift) folded in, for rows from :func:`_unit`.

    ``norm(x) @ W + b = (gamma sqrt(d) u + beta) @ W + b = u @ W' + b'`` with
    ``u`` the row divided by its root sum of squares (:func:`_unit`),
    ``W' = diag(gamma sqrt(d)) W`` and ``b' = b + beta @ W``: a matrix product
    replaces the norm's scale and shift. Computed in float64, then cast.
    """
    W = np.asarray(W)
    scale = np.asarray(norm.params["gamma"], dtype=np.float64) * np.sqrt(W.shape[0])
    W2 = np.empty(W.shape, dtype)
    step = 4096  # columns at a time: a float64 copy of SmolLM2's head would be 226 MB
    for j in range(0, W.shape[1], step):
        W2[:, j : j + step] = scale[:, None] * W[:, j : j + step].astype(np.float64)
    b2 = np.zeros(W.shape[1]) if b is None else np.asarray(b, dtype=np.float64)
    if "beta" in norm.params:
        b2 = b2 + norm.params["beta"].astype(np.float64) @ W.astype(np.float64)
    has_bias = b is not None or "beta" in norm.params
    return W2, b2.astype(dtype) if has_bias else None


def _activation(act, dtype):
    """GELU's ``x Phi(x)``: for float32 the layer's own ``Phi`` (a polynomial, in
    NumPy), for float64 SciPy's ``ndtr`` (imported here, when a float64 model
    needs it: importing SciPy costs more CPU than the rest of the command line's
    start-up); the layer's own ``forward`` for the tanh form."""
    if getattr(act, "approximate", None) != "none":
        return act.forward
    if np.dtype(dtype) == np.float32:
        return lambda h: h * _normal_cdf_float32(h)
    from scipy.special import ndtr

    return lambda h: h * ndtr(h)


def _silu_inplace(a):
    """``a * sigma(a)`` in place, ``sigma(a) = 1 / (1 + exp(-a))`` (NumPy only; the
    caller ignores the overflow of ``exp`` below about -88 in float32, where
    ``a / inf`` is the right limit 0)."""
    t = np.negative(a)
    np.exp(t, out=t)
    t += 1
    a /= t
    return a


def _unit(x, eps_d, centre):
    """``x`` (centred first for LayerNorm) divided by ``sqrt(sum of squares + eps d)``.

    ``norm(x) = gamma sqrt(d) _unit(x) (+ beta)``; :func:`_fold` puts
    ``gamma sqrt(d)`` (and ``beta``) into the next matrix product.
    """
    if centre:
        x = x - np.add.reduce(x, axis=-1, keepdims=True) / x.shape[-1]
    return x / np.sqrt(np.vecdot(x, x)[..., None] + eps_d)


def _unit_row(x, eps_d):
    """:func:`_unit` of one row ``x`` (E,), centred (LayerNorm), with scalar arithmetic."""
    x = x - float(np.add.reduce(x)) / x.shape[0]
    return x * (1 / math.sqrt(float(np.dot(x, x)) + eps_d))


class _Attention:
    """One attention layer's joined weights and its step over ``T`` new positions.

    ``norm`` (the LayerNorm or RMSNorm before it) is folded into the joined
    query/key/value weights, which take :func:`_unit` rows.
    """

    def __init__(self, att, dtype, norm, rotary_table=None):
        p = att.params
        H, H_kv, d = att.n_heads, att.n_kv_heads, att.d_head
        scale = 1 / np.sqrt(d)
        self.H, self.H_kv, self.d, self.G = H, H_kv, d, H // H_kv
        W = np.concatenate([p["W_Q"] * scale, p["W_K"], p["W_V"]], axis=1)
        b = np.concatenate([p["b_Q"] * scale, p["b_K"], p["b_V"]]) if att.bias else None
        self.W, self.b = _fold(norm, W, b, dtype)
        self.W_O = np.ascontiguousarray(p["W_O"], dtype=dtype)
        self.b_O = p["b_O"].astype(dtype) if att.bias else None
        self.rot = rotary_table
        self.ctype = None if rotary_table is None else rotary_table.dtype
        self.n_q, self.n_qk = H * d, (H + H_kv) * d
        # one-row steps: the rotation of every query and key head at a position, one row
        self.rot_row = None if rotary_table is None else np.tile(rotary_table, (1, H + H_kv))
        self.qkv_row = np.empty(self.W.shape[1], dtype)  # out= buffer of u @ W

    def fresh(self) -> "_Attention":
        """The same weights with a scratch row of its own."""
        new = copy.copy(self)
        new.qkv_row = np.empty_like(self.qkv_row)
        return new

    def __call__(self, u, cache, layer, mask=None):
        """Attend from ``u`` (B, T, E) at positions ``cache.length ..`` to every cached key."""
        B, T, _ = u.shape
        H_kv, d, G, n_q, n_qk = self.H_kv, self.d, self.G, self.n_q, self.n_qk
        qkv = u @ self.W
        if self.b is not None:
            qkv += self.b
        start = cache.length
        S = start + T
        if self.rot is not None:  # one complex product rotates every pair of q and k
            qk = qkv[..., :n_qk].view(self.ctype).reshape(B, T, n_qk // d, d // 2)
            qk *= self.rot[start] if T == 1 else self.rot[start:S, None]
        KV = cache.kv[layer]  # (B, 2, H_kv, max_len, d), written in place
        K, V = KV[:, 0], KV[:, 1]
        if T == 1:  # keys and values in one assignment; no mask
            KV[:, :, :, start] = qkv[:, 0, n_q:].reshape(B, 2, H_kv, d)
            # the G query heads of a key head are the rows of one product
            s = qkv[..., :n_q].reshape(B, H_kv, G, d) @ K[:, :, :S].transpose(0, 1, 3, 2)
            ctx = (_softmax_rows(s) @ V[:, :, :S]).reshape(B, 1, n_q)
        else:
            KV[:, :, :, start:S] = qkv[..., n_q:].reshape(B, T, 2, H_kv, d).transpose(0, 2, 3, 1, 4)
            q = qkv[..., :n_q].reshape(B, T, H_kv, G, d).transpose(0, 2, 3, 1, 4)
            s = q @ K[:, :, None, :S].transpose(0, 1, 2, 4, 3)  # (B, H_kv, G, T, S)
            if mask is not None:
                s += mask
            ctx = _softmax_rows(s) @ V[:, :, None, :S]
            ctx = ctx.transpose(0, 3, 1, 2, 4).reshape(B, T, n_q)
        out = ctx @ self.W_O
        if self.b_O is not None:
            out += self.b_O
        return out

    def row(self, u, kv, pos):
        """One token of one sequence: ``u`` (E,) at position ``pos``; ``kv`` is the
        layer's cache for this sequence, (2, H_kv, max_len, d). The same arithmetic
        as :meth:`__call__` with ``B = T = 1``, in fewer and smaller NumPy calls
        (``np.dot`` of a row and a matrix costs less than ``@``)."""
        qkv = np.dot(u, self.W, out=self.qkv_row)
        if self.b is not None:
            qkv += self.b
        n_q, S = self.n_q, pos + 1
        if self.rot_row is not None:
            qk = qkv[: self.n_qk].view(self.ctype)
            qk *= self.rot_row[pos]
        kv[:, :, pos] = qkv[n_q:].reshape(2, self.H_kv, self.d)
        s = qkv[:n_q].reshape(self.H_kv, self.G, self.d) @ kv[0, :, :S].transpose(0, 2, 1)
        p = _softmax_rows(s)
        out = np.dot((p @ kv[1, :, :S]).reshape(n_q), self.W_O)
        if self.b_O is not None:
            out += self.b_O
        return out


def causal_mask(start, T, dtype):
    """0 where the query at ``start + t`` may see key ``s``, -inf after it: (T, start + T)."""
    S = start + T
    allowed = np.arange(S) <= np.arange(start, S)[:, None]
    return np.where(allowed, 0, -np.inf).astype(dtype)


class _Decoder:
    """A model's fast decoder: :meth:`prefill` a prompt, then :meth:`step` token by token."""

    _causal = None  # the causal mask of the whole context, built on the first prefill

    def prefill(self, tokens: np.ndarray) -> np.ndarray:
        """Logits (B, V) after ``tokens`` (B, T), which continue what the cache holds."""
        T = tokens.shape[1]
        mask = None
        if T > 1:  # rows start .. S - 1 of the whole context's mask: causal_mask(start, T)
            start, S = self.cache.length, self.cache.length + T
            n = self.cache.k.shape[3]  # the context (at most 1,024 positions: 4 MB in float32)
            if n > 1024 or S > n:
                mask = causal_mask(start, T, self.dtype)
            else:
                if self._causal is None:
                    self._causal = causal_mask(0, n, self.dtype)
                mask = self._causal[start:S, :S]
        return self._run(tokens, mask)

    def step(self, token: np.ndarray) -> np.ndarray:
        """Logits (B, V) after one more token per row, ``token`` (B,)."""
        if token.shape[0] == 1:  # one sequence: 1-D rows, fewest NumPy calls
            return self._row(int(token[0]))[None]
        return self._run(token[:, None], None)

    def reset(self) -> None:
        """Empty the cache (a new sequence starts at position 0)."""
        self.cache.reset()

    def fresh(self) -> "_Decoder":
        """A decoder sharing this one's joined weights, with an empty cache of its own.

        The scratch rows of its attention layers are its own too, so two
        decoders from one build can run interleaved (two generators).
        """
        new = copy.copy(self)
        n_layers, batch, _, n_kv_heads, capacity, d_head = self.cache.kv.shape
        new.cache = StaticKVCache(
            n_layers, batch, n_kv_heads, capacity, d_head, self.cache.kv.dtype
        )
        new.layers = [
            tuple(part.fresh() if isinstance(part, _Attention) else part for part in layer)
            for layer in self.layers
        ]
        return new


class GPTDecoder(_Decoder):
    """:class:`~attention_lib.TinyGPT`'s fast path (learned, sinusoidal, rotary or no positions)."""

    def __init__(self, model, batch, capacity=None):
        dtype = np.result_type(*model.params.values())
        self.dtype, self.model = dtype, model
        first = model.blocks[0].attn
        capacity = model.max_len if capacity is None else capacity
        rots = [None] * len(model.blocks)
        if model.positions == "rotary":
            rots = _rotary_tables(model.blocks, capacity, dtype)  # positions < capacity
        self.E = model.tok.params["E"].astype(dtype, copy=False)
        self.pos = None
        if model.positions == "learned":
            self.pos = model.pos.params["E"].astype(dtype, copy=False)
        elif model.positions == "sinusoidal":
            self.pos = model.pe.astype(dtype, copy=False)
        self.layers = []
        for b, rot in zip(model.blocks, rots):
            ffn = None
            if not b.attention_only:
                f = b.ffn
                W1, b1 = _fold(b.ln2, f.fc1.params["W"], f.fc1.params["b"], dtype)
                act = _activation(f.act, dtype)
                ffn = (b.ln2.eps * W1.shape[0], W1, b1, act, f.fc2.params["W"], f.fc2.params["b"])
            attn = _Attention(b.attn, dtype, b.ln1, rot)
            self.layers.append((b.ln1.eps * attn.W.shape[0], attn, ffn))
        self.cache = StaticKVCache(
            len(model.blocks), batch, first.n_kv_heads, capacity, first.d_head, dtype
        )
        ln_f = model.ln_f
        self.W_head, self.b_head = _fold(
            ln_f, model.head.params["W"], model.head.params["b"], dtype
        )
        self.eps_f = ln_f.eps * self.W_head.shape[0]

    def _run(self, tokens, mask):
        cache = self.cache
        T = tokens.shape[1]
        x = self.E[tokens]
        if self.pos is not None:
            x = x + self.pos[cache.length : cache.length + T]
        for i, (eps1, attn, ffn) in enumerate(self.layers):
            x = x + attn(_unit(x, eps1, True), cache, i, mask)
            if ffn is not None:
                eps2, W1, b1, act, W2, b2 = ffn
                h = _unit(x, eps2, True) @ W1
                h += b1
                h = act(h) @ W2
                h += b2
                x += h
        cache.advance(T)
        out = _unit(x if self.every_row else x[:, -1], self.eps_f, True) @ self.W_head
        out += self.b_head
        return out

    every_row = False  # prefill_rows: logits at every new position, not the last only

    def prefill_rows(self, tokens: np.ndarray) -> np.ndarray:
        """Logits (B, T, V) at every one of ``tokens`` (B, T): speculative decoding's check."""
        self.every_row = True
        try:
            return self.prefill(tokens)
        finally:
            self.every_row = False

    def _row(self, token):
        """Logits (V,) after ``token`` (an int) of the one sequence, as :meth:`_run`."""
        cache = self.cache
        pos = cache.length
        x = self.E[token].copy()
        if self.pos is not None:
            x += self.pos[pos]
        kv = cache.kv[:, 0]
        for i, (eps1, attn, ffn) in enumerate(self.layers):
            x += attn.row(_unit_row(x, eps1), kv[i], pos)
            if ffn is not None:
                eps2, W1, b1, act, W2, b2 = ffn
                h = np.dot(_unit_row(x, eps2), W1)
                h += b1
                h = np.dot(act(h), W2)
                h += b2
                x += h
        cache.advance(1)
        out = np.dot(_unit_row(x, self.eps_f), self.W_head)
        out += self.b_head
        return out


class LlamaDecoder(_Decoder):
    """:class:`~attention_lib.models.llama.Llama`'s fast path (grouped-query heads, rotary)."""

    def __init__(self, model, batch, capacity=None):
        dtype = model.dtype
        self.dtype, self.model = dtype, model
        first = model.blocks[0].attn
        capacity = model.max_len if capacity is None else capacity
        rots = _rotary_tables(model.blocks, capacity, dtype)  # positions < capacity
        self.E = model.tok.params["E"]
        self.layers = []
        for b, rot in zip(model.blocks, rots):
            p = b.ffn.params
            W13, _ = _fold(b.ffn_norm, np.concatenate([p["W1"], p["W3"]], axis=1), None, dtype)
            attn = _Attention(b.attn, dtype, b.attn_norm, rot)
            eps = (b.attn_norm.eps * W13.shape[0], b.ffn_norm.eps * W13.shape[0])
            self.layers.append((eps, attn, W13, p["W1"].shape[1], p["W2"]))
        self.cache = StaticKVCache(
            len(model.blocks), batch, first.n_kv_heads, capacity, first.d_head, dtype
        )
        head = self.E.T if model.head is None else model.head.params["W"]  # (E, V)
        self.W_head, _ = _fold(model.norm, head, None, dtype)
        self.eps_f = model.norm.eps * self.W_head.shape[0]

    @np.errstate(over="ignore")  # exp(-a) of SiLU (see _silu_inplace)
    def _run(self, tokens, mask):
        cache = self.cache
        x = self.E[tokens]
        for i, ((eps1, eps2), attn, W13, d_ff, W2) in enumerate(self.layers):
            x = x + attn(_unit(x, eps1, False), cache, i, mask)
            au = _unit(x, eps2, False) @ W13
            a = _silu_inplace(au[..., :d_ff])
            a *= au[..., d_ff:]
            x += a @ W2
        cache.advance(tokens.shape[1])
        return _unit(x[:, -1], self.eps_f, False) @ self.W_head

    @np.errstate(over="ignore")  # exp(-a) of SiLU (see _silu_inplace)
    def _row(self, token):
        """Logits (V,) after ``token`` (an int) of the one sequence, as :meth:`_run`."""
        cache = self.cache
        pos = cache.length
        x = self.E[token].copy()
        kv = cache.kv[:, 0]
        for i, ((eps1, eps2), attn, W13, d_ff, W2) in enumerate(self.layers):
            u = x * (1 / math.sqrt(float(np.dot(x, x)) + eps1))
            x += attn.row(u, kv[i], pos)
            u = x * (1 / math.sqrt(float(np.dot(x, x)) + eps2))
            au = np.dot(u, W13)
            a = _silu_inplace(au[:d_ff])
            a *= au[d_ff:]
            x += np.dot(a, W2)
        cache.advance(1)
        return np.dot(x * (1 / math.sqrt(float(np.dot(x, x)) + self.eps_f)), self.W_head)


#: The largest model (bytes of weights) whose last build :func:`decoder_for` keeps:
#: keeping one means keeping a copy of every weight to compare with, which for
#: SmolLM2 (538 MB) would cost more than building the decoder again (about 0.5 s).
MEMO_MAX_BYTES = 64 * 2**20


def decoder_for(model, batch: int, capacity: int | None = None):
    """The fast decoder of ``model`` for ``batch`` sequences, or None if it has none.

    TinyGPT (learned, sinusoidal, interleaved rotary or no positions) and
    Llama are covered; another model, or another kind of position, gets None
    and the caller uses ``model.forward`` with its own cache.
    """
    from ..nn.multi_head_attention import MultiHeadAttention

    def plain(attn):  # the library's layer, with none of the long-context options
        return (
            isinstance(attn, MultiHeadAttention)
            and attn.window is None
            and attn.alibi is None
            and attn.rope_scaling is None
        )

    if replaced_forward(model) is not None:  # the forward a user set is the one to run
        return None
    blocks = getattr(model, "blocks", ())
    if not all(plain(b.attn) for b in blocks):
        return None
    if len({(b.attn.n_kv_heads, b.attn.d_head) for b in blocks}) > 1:
        return None  # one StaticKVCache holds every layer's keys: one shape for all
    # Each model says whether this module's decoder fits it (TinyGPT.fast_decoder,
    # Llama.fast_decoder): this module imports no model, so no model module imports it back.
    make = getattr(model, "fast_decoder", None)
    if make is None:
        return None
    # Joining and folding the weights costs about as much as ten tokens of a small model
    # (17 ms for chapter 11's): the last build is kept on the model with a copy of the
    # weights and of the settings it was made from (every number, string and flag held by
    # the model and its layers: a rotary layout, a norm's eps, the positions), and reused
    # while both are still equal to their copies.
    weights = [a for layer in model.layers() for a in layer.params.values()]
    if sum(a.nbytes for a in weights) > MEMO_MAX_BYTES:  # a copy would double the model
        return make(batch, capacity)
    key = (batch, capacity, _settings(model))
    memo = vars(model).get("_fast_decoder_memo")
    if (
        memo is not None
        and memo[0] == key
        and len(memo[1]) == len(weights)
        and all(
            a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
            for a, b in zip(weights, memo[1])
        )
    ):
        return memo[2].fresh()
    decoder = make(batch, capacity)
    if decoder is not None:
        vars(model)["_fast_decoder_memo"] = (key, [a.copy() for a in weights], decoder)
        decoder = decoder.fresh()
    return decoder


_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic)


def replaced_forward(model):
    """The first layer of ``model`` whose ``forward`` is not the library's, or None.

    The fast decoders redo the arithmetic of the library's layers; a
    ``forward`` set on a layer (a head ablation, a hook) or a subclass that
    overrides it (in a notebook) must run instead. A walk through the model,
    its blocks and their layers (attributes, lists, tuples, dicts): a layer
    whose instance holds a ``forward``, or whose class takes ``forward`` from
    a class defined outside ``attention_lib``, is returned.
    """
    seen = set()

    def walk(obj):
        if isinstance(obj, (_SCALARS, np.ndarray)) or id(obj) in seen:
            return None
        seen.add(id(obj))
        if isinstance(obj, dict):
            children = list(obj.values())
        elif isinstance(obj, (list, tuple)):
            children = list(obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            if "forward" in vars(obj):
                return obj
            owner = next((c for c in type(obj).__mro__ if "forward" in vars(c)), None)
            if owner is not None and not owner.__module__.startswith("attention_lib"):
                return obj
            children = [v for k, v in vars(obj).items() if k != "_fast_decoder_memo"]
        else:
            return None
        for child in children:
            found = walk(child)
            if found is not None:
                return found
        return None

    return walk(model)


def _settings(model) -> tuple:
    """Every scalar setting the model's object graph holds, as ``(path, value)`` pairs.

    A walk through the model's attributes, its layers' and theirs (lists, tuples and
    dicts too), keeping numbers, strings, flags and None, and the shapes of non-weight
    arrays (a position table), and leaving out arrays and the memo itself: what a
    decoder's build reads besides the weights. Two models that differ in any of them
    do not share a build.
    """
    out, seen = [], set()

    def walk(obj, path):
        if isinstance(obj, _SCALARS):
            out.append((path, obj))
        elif isinstance(obj, np.ndarray):
            out.append((path, ("array", obj.shape, obj.dtype.str)))
        elif id(obj) in seen:
            return
        elif isinstance(obj, dict):
            seen.add(id(obj))
            for k in sorted(obj, key=str):
                walk(obj[k], f"{path}[{k!r}]")
        elif isinstance(obj, (list, tuple)):
            seen.add(id(obj))
            for i, item in enumerate(obj):
                walk(item, f"{path}[{i}]")
        elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("attention_lib"):
            seen.add(id(obj))
            out.append((path, type(obj).__qualname__))
            for k, v in vars(obj).items():
                if k != "_fast_decoder_memo":
                    walk(v, f"{path}.{k}")

    walk(model, "model")
    return tuple(out)


class TransformerDecoder:
    """The translation Transformer's decoder, one step for many rows at once.

    Built once per batch from the encoder's memory: each layer's
    cross-attention keys and values are computed here, once, for the ``B``
    sentences (the ``K`` hypotheses of a sentence share them: its ``K``
    queries are the rows of one product), and the source mask becomes an
    additive 0 / -inf row. Rows are ``b * K + k``.

    Parameters
    ----------
    model : Transformer
    memory : ndarray (B, S, d_model)
    src_mask : ndarray of bool (B, 1, 1, S)
    beams : int
        ``K`` rows per sentence.
    capacity : int
        The longest output (positions of the self-attention cache).
    """

    def __init__(self, model, memory, src_mask, beams, capacity):
        dtype = model.dtype
        B, S, _ = memory.shape
        self.B, self.K, self.dtype, self.model = B, beams, dtype, model
        self.layers = []
        for layer in model.decoder:
            ca = layer.cross_attn
            p, H, d = ca.params, ca.n_heads, ca.d_head
            scale = 1 / np.sqrt(d)
            kv = memory @ np.concatenate([p["W_K"], p["W_V"]], axis=1)
            kv += np.concatenate([p["b_K"], p["b_V"]])
            k = kv[..., : H * d].reshape(B, S, H, d)
            v = kv[..., H * d :].reshape(B, S, H, d)
            W_Q, b_Q = _fold(layer.ln2, p["W_Q"] * scale, p["b_Q"] * scale, dtype)
            cross = (
                layer.ln2.eps * W_Q.shape[0],
                W_Q,
                b_Q,
                np.ascontiguousarray(k.transpose(0, 2, 3, 1)),  # (B, H, d, S)
                np.ascontiguousarray(v.transpose(0, 2, 1, 3)),  # (B, H, S, d)
                p["W_O"],
                p["b_O"],
            )
            f = layer.ffn
            W1, b1 = _fold(layer.ln3, f.fc1.params["W"], f.fc1.params["b"], dtype)
            act = _activation(f.act, dtype)
            ffn = (layer.ln3.eps * W1.shape[0], W1, b1, act, f.fc2.params["W"], f.fc2.params["b"])
            attn = _Attention(layer.self_attn, dtype, layer.ln1)
            self.layers.append((layer.ln1.eps * W1.shape[0], attn, cross, ffn))
        self.H, self.d = model.decoder[0].cross_attn.n_heads, model.decoder[0].cross_attn.d_head
        self.mask = np.where(src_mask.reshape(B, 1, 1, S), 0, -np.inf).astype(dtype)
        att = model.decoder[0].self_attn
        self.cache = StaticKVCache(
            len(model.decoder), B * beams, att.n_kv_heads, capacity, att.d_head, dtype
        )
        self.E = model.emb.params["E"]
        self.W_head, _ = _fold(model.dec_ln, self.E.T, None, dtype)
        self.b_head = (model.dec_ln.params["beta"].astype(np.float64) @ self.E.T).astype(dtype)
        self.eps_f = model.dec_ln.eps * self.W_head.shape[0]
        self.sqrt_d = dtype.type(np.sqrt(model.d_model))

    def logits(self, y: np.ndarray, t: int) -> np.ndarray:
        """Logits (B K, V) of the next token after ``y`` (B K,) at position ``t``."""
        B, K, H, d = self.B, self.K, self.H, self.d
        cache = self.cache
        x = self.E[y][:, None] * self.sqrt_d + self.model.pe[t]  # (B K, 1, d_model)
        for i, (eps1, self_attn, cross, ffn) in enumerate(self.layers):
            x = x + self_attn(_unit(x, eps1, True), cache, i)
            eps2, W_Q, b_Q, keys, values, W_O, b_O = cross
            q = _unit(x, eps2, True) @ W_Q
            q += b_Q
            s = q.reshape(B, K, H, d).transpose(0, 2, 1, 3) @ keys  # (B, H, K, S)
            s += self.mask  # a sentence's K queries against its own keys
            ctx = (_softmax_rows(s) @ values).transpose(0, 2, 1, 3).reshape(B * K, 1, H * d)
            h = ctx @ W_O
            h += b_O
            x += h
            eps3, W1, b1, act, W2, b2 = ffn
            h = _unit(x, eps3, True) @ W1
            h += b1
            h = act(h) @ W2
            h += b2
            x += h
        cache.advance(1)
        out = _unit(x[:, 0], self.eps_f, True) @ self.W_head
        out += self.b_head
        return out

    def reorder(self, idx: np.ndarray) -> None:
        """Keep the self-attention keys and values of rows ``idx`` (within each sentence)."""
        self.cache.reorder(idx)
