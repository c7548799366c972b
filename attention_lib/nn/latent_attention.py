"""Attention layers that keep a smaller KV cache: grouped-query and multi-head latent attention.

When a model generates text, every new token reads the keys and values of
every earlier token, so the bytes a token leaves in the cache set the cost of
serving. Multi-head attention keeps ``2 n_heads d_head`` numbers per token
and layer; grouped-query attention (Ainslie et al., 2023) shares each
key/value head between ``n_heads / n_kv_heads`` query heads and keeps
``2 n_kv_heads d_head``; multi-query attention is the case ``n_kv_heads = 1``.

**Multi-head latent attention** (MLA, DeepSeek-AI, 2024, "DeepSeek-V2")
keeps one latent row ``c`` of width ``d_latent`` per token, from which every
head's keys and values are rebuilt by an up-projection, and, because rotary
positions cannot pass through that up-projection, a small *decoupled* rotary
key ``k_rope`` of width ``d_rope`` shared by all heads. Head ``h`` scores

    e_ij = (q_h,i . k_h,j + qr_h,i . kr_j) / sqrt(d_head + d_rope)

with ``k_h = c W_UK[:, h]``, ``v_h = c W_UV[:, h]``, ``kr = RoPE(x W_KR)``,
``q_h = x W_Q[:, h]``, ``qr_h = RoPE(x W_QR[:, h])``. The cache keeps
``d_latent + d_rope`` numbers per token and layer. (DeepSeek-V2 also
compresses the queries through a latent to save activation memory while
training; queries are never cached, so this layer projects them directly.)

With a cache the layer uses the "absorbed" form: ``q_h . (c W_UK,h) =
(q_h W_UK,h^T) . c``, so the keys and values are never rebuilt; the two
forms agree to rounding (tested).
"""

import numpy as np
from numpy.random import Generator
from numpy.typing import ArrayLike, DTypeLike

from .._checks import as_int, as_rng
from ..positions import rotary_tables, rotate_pairs
from ..softmax import softmax
from .dropout import Dropout
from .layers import init_weight
from .multi_head_attention import KVCache, MultiHeadAttention

__all__ = ["GroupedSelfAttention", "LatentCache", "MultiHeadLatentAttention"]


class GroupedSelfAttention(MultiHeadAttention):
    """Causal grouped-query self-attention: ``n_kv_heads`` key/value heads for ``n_heads`` queries.

    :class:`~attention_lib.nn.MultiHeadAttention` with ``n_kv_heads``, and a
    ``forward(x, cache=None)`` like :class:`~attention_lib.nn.SelfAttention`'s,
    so that it can take a Transformer block's ``attn`` slot.
    ``n_kv_heads = n_heads`` is multi-head, ``1`` multi-query attention.

    Examples
    --------
    >>> import numpy as np
    >>> att = GroupedSelfAttention(8, 4, 2, np.random.default_rng(0))
    >>> att.forward(np.ones((1, 3, 8))).shape, att.params["W_K"].shape
    ((1, 3, 8), (8, 4))
    """

    def __init__(
        self, d_model: int, n_heads: int, n_kv_heads: int, rng: Generator, dropout: float = 0.0
    ) -> None:
        super().__init__(d_model, n_heads, rng, n_kv_heads=n_kv_heads, dropout=dropout)

    def forward(self, x: ArrayLike, cache: KVCache | None = None) -> np.ndarray:
        """Attend within ``x`` (B, T, d_model), causally; with a ``cache``, also to earlier positions."""
        return super().forward(x, is_causal=True, cache=cache)

    def cache_floats_per_token(self) -> int:
        """Numbers one token leaves in this layer's cache: ``2 n_kv_heads d_head``."""
        return 2 * self.n_kv_heads * self.d_head


class LatentCache:
    """What :class:`MultiHeadLatentAttention` keeps per token: the latent ``c`` and ``k_rope``.

    Attributes
    ----------
    c : ndarray, shape (B, S, d_latent), or None before the first call
    k_rope : ndarray, shape (B, S, d_rope), or None before the first call
    position : int
        The position of the next query.
    """

    def __init__(self) -> None:
        self.c = self.k_rope = None
        self.position = 0

    def __len__(self) -> int:
        return 0 if self.c is None else self.c.shape[1]

    @property
    def nbytes(self) -> int:
        """Memory held by the cached latents and rotary keys, in bytes."""
        return 0 if self.c is None else self.c.nbytes + self.k_rope.nbytes

    def append(self, c: np.ndarray, k_rope: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add the rows of the new positions; return all of them."""
        if self.c is not None and c.shape[0] != self.c.shape[0]:
            raise ValueError(
                f"the latent cache holds {self.c.shape[0]} sequences but this call has "
                f"{c.shape[0]}: a cache belongs to one batch"
            )
        if self.c is None:
            self.c, self.k_rope = c, k_rope
        else:
            self.c = np.concatenate([self.c, c], axis=1)
            self.k_rope = np.concatenate([self.k_rope, k_rope], axis=1)
        self.position += c.shape[1]
        return self.c, self.k_rope

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` positions (speculative decoding rewinds rejected tokens)."""
        n = as_int(n, "n")
        if n > len(self):
            raise ValueError(f"cannot truncate a cache of {len(self)} positions to {n}")
        if self.c is not None:
            self.c, self.k_rope = self.c[:, :n], self.k_rope[:, :n]
        self.position = n


class MultiHeadLatentAttention:
    """Causal multi-head latent attention (DeepSeek-V2), with its backward pass.

    Parameters
    ----------
    d_model : int
        Row size of the input and output.
    n_heads : int
        Query heads (each with its own rebuilt key and value).
    d_latent : int
        Width ``d_c`` of the cached latent (DeepSeek-V2: ``4 d_head``).
    d_rope : int
        Width of the decoupled rotary key shared by all heads, even
        (DeepSeek-V2: ``d_head / 2``).
    rng : numpy.random.Generator
        Draws the weights (variance ``1 / fan-in``).
    d_head : int, optional
        Features per head (default ``d_model / n_heads``).
    dropout : float, optional
        Dropout on the attention weights while training.
    rotary_base : float, optional
        Rotary's base (default 10,000).
    dtype : {float64, float32}, optional

    Notes
    -----
    ``params``: ``W_DKV`` (d_model, d_latent), ``W_UK`` and ``W_UV``
    (d_latent, n_heads d_head), ``W_KR`` (d_model, d_rope), ``W_Q``
    (d_model, n_heads d_head), ``W_QR`` (d_model, n_heads d_rope), ``W_O``
    (n_heads d_head, d_model). No biases, as DeepSeek-V2.

    Examples
    --------
    >>> import numpy as np
    >>> mla = MultiHeadLatentAttention(16, 4, d_latent=8, d_rope=2,
    ...                                rng=np.random.default_rng(0))
    >>> x = np.random.default_rng(1).normal(size=(2, 5, 16))
    >>> mla.forward(x).shape, mla.cache_floats_per_token()
    ((2, 5, 16), 10)
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_latent: int,
        d_rope: int,
        rng: Generator,
        d_head: int | None = None,
        dropout: float = 0.0,
        rotary_base: float = 10000.0,
        dtype: DTypeLike = np.float64,
    ) -> None:
        d_model = as_int(d_model, "d_model", 1)
        H = as_int(n_heads, "n_heads", 1)
        d_latent = as_int(d_latent, "d_latent", 1)
        d_rope = as_int(d_rope, "d_rope", 2)
        if d_rope % 2:
            raise ValueError(f"d_rope must be even (rotary turns pairs of features), got {d_rope}")
        if d_head is None:
            if d_model % H:
                raise ValueError(
                    f"n_heads = {H} does not divide d_model = {d_model} (or pass d_head)"
                )
            d_head = d_model // H
        d_head = as_int(d_head, "d_head", 1)
        if not (isinstance(rotary_base, (int, float)) and rotary_base > 0):
            raise ValueError(f"rotary_base must be a positive number, got {rotary_base!r}")
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        as_rng(rng)
        self.n_heads, self.d_head, self.d_latent, self.d_rope = H, d_head, d_latent, d_rope
        self.rotary_base = float(rotary_base)
        self.dropout = Dropout(dropout, rng)
        shapes = {
            "W_DKV": (d_model, d_latent),
            "W_UK": (d_latent, H * d_head),
            "W_UV": (d_latent, H * d_head),
            "W_KR": (d_model, d_rope),
            "W_Q": (d_model, H * d_head),
            "W_QR": (d_model, H * d_rope),
            "W_O": (H * d_head, d_model),
        }
        self.params = {
            k: np.ascontiguousarray(init_weight(rng, *s), dtype=dtype) for k, s in shapes.items()
        }
        self.grads, self._saved = {}, None

    def cache_floats_per_token(self) -> int:
        """Numbers one token leaves in this layer's cache: ``d_latent + d_rope``."""
        return self.d_latent + self.d_rope

    def _rope(self, x, start, inverse=False):
        """Rotary at positions ``start, start + 1, ...`` along axis -2 of ``x``."""
        cos, sin = rotary_tables(
            np.arange(start, start + x.shape[-2]), x.shape[-1], self.rotary_base, x.dtype
        )
        return rotate_pairs(x, cos, -sin if inverse else sin)

    def _heads(self, y, d):
        B, T, _ = y.shape
        return y.reshape(B, T, self.n_heads, d).transpose(0, 2, 1, 3)

    @staticmethod
    def _merge(y):
        B, H, T, d = y.shape
        return y.transpose(0, 2, 1, 3).reshape(B, T, H * d)

    def forward(self, x: ArrayLike, cache: LatentCache | None = None) -> np.ndarray:
        """Causal attention within ``x`` (B, T, d_model); with a ``cache``, also to its positions.

        Returns
        -------
        ndarray, shape (B, T, d_model)
        """
        p, H, dh, dr = self.params, self.n_heads, self.d_head, self.d_rope
        x = np.asarray(x)
        if x.dtype.kind != "f":
            raise TypeError(f"x must be a floating-point array, got dtype {x.dtype}")
        if x.ndim != 3 or x.shape[-1] != p["W_Q"].shape[0]:
            raise ValueError(
                f"x must have shape (B, T, {p['W_Q'].shape[0]}): (batch, positions, features), "
                f"got {x.shape}"
            )
        if cache is not None and not isinstance(cache, LatentCache):
            raise TypeError(f"cache must be a LatentCache, got {type(cache).__name__}")
        B, T, _ = x.shape
        start = 0 if cache is None else cache.position
        scale = float(1.0 / np.sqrt(dh + dr))  # a Python float keeps float32 float32
        c = x @ p["W_DKV"]  # (B, T, d_latent): all a token leaves behind
        kr = self._rope(x @ p["W_KR"], start)  # (B, T, d_rope), one for all heads
        q = self._heads(x @ p["W_Q"], dh)  # (B, H, T, d_head)
        qr = self._rope(self._heads(x @ p["W_QR"], dr), start)  # (B, H, T, d_rope)
        if cache is not None:
            c_all, kr_all = cache.append(c, kr)
            S = c_all.shape[1]
            W_UK = p["W_UK"].reshape(-1, H, dh)  # (d_latent, H, d_head)
            W_UV = p["W_UV"].reshape(-1, H, dh)
            q_lat = np.einsum("bhtj,chj->bhtc", q, W_UK)  # W_UK absorbed into the query
            e = (
                q_lat @ c_all[:, None].swapaxes(-1, -2) + qr @ kr_all[:, None].swapaxes(-1, -2)
            ) * scale
            e = np.where(_causal(T, S, start), e, -np.inf)
            a = softmax(e, axis=-1)
            o = np.einsum("bhtc,chj->bhtj", a @ c_all[:, None], W_UV)  # W_UV after the sum
            self._saved = None  # a cached call is inference: no backward
            return self._merge(o) @ p["W_O"]
        k = self._heads(c @ p["W_UK"], dh)  # (B, H, T, d_head)
        v = self._heads(c @ p["W_UV"], dh)
        e = (q @ k.swapaxes(-1, -2) + qr @ kr[:, None].swapaxes(-1, -2)) * scale
        e = np.where(_causal(T, T, 0), e, -np.inf)
        a = softmax(e, axis=-1)
        self.weights = a
        ad = self.dropout.forward(a)
        o = self._merge(ad @ v)
        self._saved = dict(x=x, c=c, kr=kr, q=q, qr=qr, k=k, v=v, a=a, ad=ad, o=o, scale=scale)
        return o @ p["W_O"]

    def backward(self, grad: np.ndarray) -> np.ndarray:
        """``d loss / d x`` from ``d loss / d output``; fills ``grads``."""
        s = self._saved
        if s is None:
            raise RuntimeError("backward needs a forward without a cache first")
        p, g, dh = self.params, {}, self.d_head
        grad = np.asarray(grad, dtype=s["o"].dtype)
        if grad.shape != s["o"].shape[:2] + (p["W_O"].shape[1],):
            raise ValueError(f"grad must have the output's shape, got {grad.shape}")
        x, c = s["x"], s["c"]
        flat = lambda y: y.reshape(-1, y.shape[-1])  # noqa: E731
        g["W_O"] = flat(s["o"]).T @ flat(grad)
        do = self._heads(grad @ p["W_O"].T, dh)  # (B, H, T, d_head)
        dv = s["ad"].swapaxes(-1, -2) @ do
        da = self.dropout.backward(do @ s["v"].swapaxes(-1, -2))
        a = s["a"]
        de = a * (da - (da * a).sum(axis=-1, keepdims=True)) * s["scale"]
        dq = de @ s["k"]
        dk = de.swapaxes(-1, -2) @ s["q"]
        dqr = de @ s["kr"][:, None]
        dkr = (de.swapaxes(-1, -2) @ s["qr"]).sum(axis=1)  # shared by all heads
        dqr = self._merge(self._rope(dqr, 0, inverse=True))  # a rotation's gradient: rotate back
        dkr = self._rope(dkr, 0, inverse=True)
        dq, dk, dv = self._merge(dq), self._merge(dk), self._merge(dv)
        g["W_UK"] = flat(c).T @ flat(dk)
        g["W_UV"] = flat(c).T @ flat(dv)
        dc = dk @ p["W_UK"].T + dv @ p["W_UV"].T
        g["W_DKV"] = flat(x).T @ flat(dc)
        g["W_KR"] = flat(x).T @ flat(dkr)
        g["W_Q"] = flat(x).T @ flat(dq)
        g["W_QR"] = flat(x).T @ flat(dqr)
        dx = dc @ p["W_DKV"].T + dkr @ p["W_KR"].T + dq @ p["W_Q"].T + dqr @ p["W_QR"].T
        self.grads = {k: g[k] for k in p}
        return dx


def _causal(T, S, start):
    """(T, S) booleans: query ``start + i`` may see key ``j`` when ``j <= start + i``."""
    return np.arange(S)[None, :] <= start + np.arange(T)[:, None]
