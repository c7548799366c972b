"""Multi-head attention, the layer every model of the library is built on.

    Q = x_q W_Q + b_Q,   K = x_kv W_K + b_K,   V = x_kv W_V + b_V
    head_h = softmax(Q_h K_g^T / sqrt(d_head) + M) V_g     (g = the key head of h)
    out = Concat(head_1, ..., head_H) W_O + b_O

with a hand-written backward pass, a KV cache for generation, rotary
positions, grouped-query heads and cross-attention. Masks follow the book
(and ``torch.nn.functional.scaled_dot_product_attention``): a boolean mask is
True where a query *may attend*, a float mask is added to the scores.
"""

from __future__ import annotations

import numpy as np
from numpy.random import Generator
from numpy.typing import ArrayLike, DTypeLike
from numpy.lib.stride_tricks import as_strided

from .._checks import as_bool, as_int, as_mask, as_numeric, max_abs, overflow_bound
from .._kernel import and_causal, attention_backward, attention_weights, float_mask
from ..blockwise import tile_mask, tiled_backward, tiled_forward
from ..positions import alibi_slopes, rope_scaling, rotary_tables, rotate_pairs, yarn_frequencies
from .dropout import Dropout
from .layers import init_weight, sum_to_matrix

_ROTARY = (None, "interleaved", "half")


class KVCache:
    """The keys and values one attention layer has computed so far.

    **Self-attention.** When a model generates one token at a time, the keys
    and values of the earlier positions do not change (a causal layer never
    lets them see a later token), so they are kept here and each step
    appends the new rows instead of recomputing the whole prefix.

    **Cross-attention.** The keys and values come from the encoder's output,
    which does not change while the decoder generates: the first call
    computes them from ``x_kv`` and stores them, and later calls reuse them
    (``x_kv`` may then be None).

    Attributes
    ----------
    k, v : ndarray, shape (B, n_kv_heads, S, d_head), or None before the first call
    position : int
        How many query positions the layer has processed with this cache:
        the position of the next query (for the causal mask and rotary).
    cross : bool
        True once the cache holds cross-attention keys and values.
    """

    def __init__(self) -> None:
        self.k = self.v = None
        self.position, self.cross = 0, False

    def __len__(self):
        return 0 if self.k is None else self.k.shape[-2]

    @property
    def nbytes(self) -> int:
        """Memory held by the cached keys and values, in bytes."""
        return 0 if self.k is None else self.k.nbytes + self.v.nbytes

    def check(self, batch: int, k_shape: tuple | None = None) -> None:
        """Refuse a call whose batch (or head layout) differs from what the cache holds."""
        if self.k is None:
            return
        if batch != self.k.shape[0]:
            raise ValueError(
                f"the KV cache holds {self.k.shape[0]} sequences but this call has "
                f"{batch}: a cache belongs to one batch; start a new cache for another"
            )
        if (
            k_shape is not None
            and k_shape[1:2] + k_shape[3:] != self.k.shape[1:2] + self.k.shape[3:]
        ):
            raise ValueError(
                f"the KV cache holds keys of shape (B, heads, S, d_head) = {self.k.shape} "
                f"but this layer makes {k_shape}: was the cache made for another layer?"
            )

    def append(self, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add the new rows ``k, v`` (B, n_kv_heads, T, d_head); return all keys and values."""
        self.check(k.shape[0], k.shape)
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = np.concatenate([self.k, k], axis=-2)
            self.v = np.concatenate([self.v, v], axis=-2)
        return self.k, self.v


class RollingKVCache(KVCache):
    """A KV cache that keeps only the first ``sinks`` and the last ``window`` positions.

    For a layer with a sliding ``window`` (and attention ``sinks``), the
    keys a query can ever see again are the first ``sinks`` of the sequence
    and the last ``window``; everything between is dropped after each call,
    so generation runs for any length in constant memory: at most ``sinks +
    window`` rows per layer (StreamingLLM, Xiao et al., 2023).

    As in StreamingLLM, positions are counted *inside the cache*: rotary
    angles and ALiBi distances use the index of a key in the cache, not its
    position in the stream, so a model never meets a distance longer than
    ``sinks + window``: the query at the end of a full cache is at position
    ``sinks + window - 1`` and its sinks at ``0 .. sinks - 1``. The keys are
    kept unrotated and rotated at every call.

    Parameters
    ----------
    window : int
        Positions of the recent past each query sees (itself included).
    sinks : int, optional
        The first positions of the sequence every query keeps seeing.

    Attributes
    ----------
    k, v : ndarray, shape (B, n_kv_heads, <= sinks + window, d_head), or None
    position : int
        The position of the next query in the whole stream.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import MultiHeadAttention, RollingKVCache
    >>> att = MultiHeadAttention(8, 2, np.random.default_rng(0), window=3, sinks=1)
    >>> cache = RollingKVCache(window=3, sinks=1)
    >>> x = np.random.default_rng(1).normal(size=(1, 10, 8))
    >>> steps = [att.forward(x[:, t : t + 1], is_causal=True, cache=cache) for t in range(10)]
    >>> len(cache), cache.position       # 1 sink and the last 2 of the window
    (3, 10)
    """

    def __init__(self, window: int, sinks: int = 0) -> None:
        super().__init__()
        self.window, self.sinks = _check_window(window, sinks, "window")

    def trim(self) -> None:
        """Drop the rows no later query can see: all but the first ``sinks`` and the last
        ``window - 1`` (the next query is the window's last position)."""
        if self.k is not None and len(self) > self.sinks + self.window - 1:
            keep = np.r_[0 : self.sinks, len(self) - self.window + 1 : len(self)]
            self.k, self.v = self.k[..., keep, :], self.v[..., keep, :]


def _check_window(window, sinks, name):
    """Checked ``(window, sinks)``: window None or >= 1, sinks >= 0 and only with a window."""
    if window is not None:
        window = as_int(window, name, 1)
    if isinstance(sinks, (bool, np.bool_)):
        raise TypeError(f"sinks must be an integer, got {sinks!r}")
    sinks = as_int(sinks, "sinks", 0)
    if sinks and window is None:
        raise ValueError(
            f"sinks = {sinks} needs a window: attention sinks are the first positions "
            f"kept in view when a sliding window drops the rest; pass window too"
        )
    return window, sinks


def _check_long(block_size, window, sinks, alibi, rope, rotary, rotary_base, n_heads, d_head):
    """The long-sequence options, checked before anything is allocated."""
    if block_size is not None:
        if isinstance(block_size, (bool, np.bool_)):
            raise TypeError(f"block_size must be an integer or None, got {block_size!r}")
        block_size = as_int(block_size, "block_size", 1)
    window, sinks = _check_window(window, sinks, "window")
    slopes = None
    if alibi is not None and alibi is not False:
        if alibi is True:
            slopes = alibi_slopes(n_heads)
        else:
            slopes = as_numeric(alibi, "alibi").astype(np.float64)
            if slopes.shape != (n_heads,) or not (np.isfinite(slopes).all() and (slopes > 0).all()):
                raise ValueError(
                    f"alibi must be True or one positive slope per query head: {n_heads} "
                    f"heads need shape ({n_heads},), got {slopes.shape}"
                )
    scaling = None
    if rope is not None:
        if not rotary:
            raise ValueError("rope_scaling needs rotary positions (rotary='interleaved' or 'half')")
        yarn = isinstance(rope, dict) and rope.get("type") == "yarn"
        keys = {"type", "factor", "original_length"} if yarn else {"type", "factor"}
        if not isinstance(rope, dict) or set(rope) != keys:
            raise ValueError(
                f"rope_scaling must be a dict {{'type': 'linear' or 'ntk', 'factor': f}} "
                f"or {{'type': 'yarn', 'factor': f, 'original_length': n}}, got {rope!r}"
            )
        if yarn:  # checks
            yarn_frequencies(d_head, rope["factor"], rope["original_length"], rotary_base)
        else:
            rope_scaling(rope["type"], rope["factor"], d_head, rotary_base)  # checks
        scaling = dict(rope)
    return block_size, window, sinks, slopes, scaling


def _check_rotary(rotary, rotary_base, d_head):
    if rotary not in _ROTARY:
        raise ValueError(f"rotary must be one of {_ROTARY}, got {rotary!r}")
    if rotary and d_head % 2:
        raise ValueError(f"rotary needs an even head size, got d_head = {d_head}")
    if not (isinstance(rotary_base, (int, float)) and rotary_base > 0):
        raise ValueError(f"rotary_base must be a positive number, got {rotary_base!r}")


def _float_rows(x, name, width, batch=None, ndim=3):
    """``x`` as a (B, T, width) float array (``ndim=2``: (T, width), given a batch axis)."""
    x = as_numeric(x, name)
    if x.dtype.kind != "f":
        raise TypeError(f"{name} must be a floating-point array, got dtype {x.dtype}")
    if x.ndim not in (2, 3) or x.shape[-1] != width or (batch is not None and x.ndim != ndim):
        want = f"(B, T, {width})" if ndim == 3 else f"(T, {width}) like x_q"
        raise ValueError(
            f"{name} must have shape {want}: (batch, positions, features), got {x.shape}"
        )
    x = x if x.ndim == 3 else x[None]
    if batch is not None and x.shape[0] != batch:
        raise ValueError(
            f"{name} holds {x.shape[0]} sequences but x_q holds {batch}: the batch sizes must match"
        )
    return x


class MultiHeadAttention:
    """Multi-head attention with learned projections and a backward pass.

    Parameters
    ----------
    d_model : int
        Size of the query rows and of the output rows.
    n_heads : int
        Number of query heads ``H``.
    rng : numpy.random.Generator
        Draws the weights (variance ``1 / fan-in``) and the dropout masks.
    n_kv_heads : int, optional
        Number of key/value heads; must divide ``n_heads`` (default
        ``n_heads``). Query head ``h`` uses key/value head
        ``h // (n_heads / n_kv_heads)``: grouped-query attention (Ainslie et
        al., 2023); ``n_kv_heads=1`` is multi-query attention (Shazeer, 2019).
    d_head : int, optional
        Features per head (default ``d_model / n_heads``, which must divide).
    d_kv : int, optional
        Size of the rows keys and values are computed from, for
        cross-attention from another model (default ``d_model``).
    bias : bool, optional
        Biases on the four projections (default True; Llama has none).
    dropout : float, optional
        Probability of dropping an attention weight while training (default 0).
    rotary : {None, "interleaved", "half"}, optional
        Rotate queries and keys by their positions before the scores
        (:func:`~attention_lib.rotary`): feature pairs ``(2i, 2i+1)``
        (RoFormer, Meta's Llama, llama2.c) or ``(i, i + d_head/2)``
        (GPT-NeoX, Hugging Face's Llama). Default None: no rotation.
    rotary_base : float, optional
        The base of the rotary frequencies ``base^(-2i/d_head)`` (10000).
    dtype : float32 or float64, optional
        The parameters' dtype (default float64).
    block_size : int, optional
        Run attention tile by tile, ``block_size`` queries by ``block_size``
        keys at a time, forward and backward (FlashAttention, Dao et al.,
        2022): between them only the output ``O`` (B, H, T, d) and the
        log-sum-exp (B, H, T) are kept, never a (T, S) matrix, so ``weights``
        stays None whatever ``need_weights`` says. Dropout on the weights
        regenerates each tile's mask from a seeded counter. Default None:
        the whole score matrix at once.
    window : int, optional
        Sliding-window attention (causal only): the query at position ``p``
        sees the keys at ``p - window + 1 .. p``. Default None: all of them.
    sinks : int, optional
        With a ``window``: the first ``sinks`` positions stay visible to
        every query (attention sinks, Xiao et al., 2023). Default 0.
    alibi : bool or array of shape (n_heads,), optional
        Add ALiBi's distance penalty ``-m_h (i - j)`` to the scores (Press et
        al., 2022): True takes the slopes of
        :func:`~attention_lib.alibi_slopes`; or pass one slope per query head.
    rope_scaling : dict, optional
        ``{"type": "linear" or "ntk", "factor": f}``: rotary positions
        stretched ``f`` times, by position interpolation or NTK-aware base
        scaling (:func:`~attention_lib.positions.rope_scaling`); or
        ``{"type": "yarn", "factor": f, "original_length": n}``: YaRN's
        per-pair speeds and attention factor for a model trained on ``n``
        positions (:func:`~attention_lib.positions.yarn_frequencies`).

    Attributes
    ----------
    params : dict
        ``W_Q (d_model, H d_head)``, ``W_K (d_kv, H_kv d_head)``,
        ``W_V (d_kv, H_kv d_head)``, ``W_O (H d_head, d_model)`` and, with
        ``bias=True``, ``b_Q, b_K, b_V, b_O``. Rows are inputs and columns
        outputs (``x @ W``), head ``h`` owning columns ``h d_head .. (h+1)
        d_head``.
    weights : ndarray, shape (B, H, L, S)
        The attention weights of the last forward pass, before dropout.

    Notes
    -----
    ``forward(x_q)`` is self-attention. ``forward(x_q, x_kv)`` is
    cross-attention: queries from ``x_q``, keys and values from ``x_kv``
    (``x_v`` gives the values their own input, as PyTorch's layer allows).
    ``is_causal=True`` lets the query at position ``p`` see keys at
    positions ``<= p``; with a :class:`KVCache`, new queries continue at the
    cache's position and see the whole cached prefix.

    The backward runs the forward in reverse: ``dW_O = C^T g``, then the
    attention's gradients from the saved weights (:mod:`attention_lib.backward`
    explains them), rotary's gradient is the rotation back (a rotation's
    inverse is its transpose), key and value gradients are summed over the
    query heads that share them, and ``dW = x^T dY``, ``dx = dY W^T`` for
    each projection. It returns ``dx`` for self-attention, and
    ``(dx_q, dx_kv)`` (or ``(dx_q, dx_k, dx_v)``) for cross-attention.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import MultiHeadAttention
    >>> att = MultiHeadAttention(8, 4, np.random.default_rng(0), n_kv_heads=2)
    >>> x = np.random.default_rng(1).normal(size=(3, 5, 8))
    >>> att.forward(x, is_causal=True).shape, att.weights.shape
    ((3, 5, 8), (3, 4, 5, 5))
    >>> att.backward(np.ones((3, 5, 8))).shape, att.params["W_K"].shape
    ((3, 5, 8), (8, 4))
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        rng: Generator,
        n_kv_heads: int | None = None,
        d_head: int | None = None,
        d_kv: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        rotary: str | None = None,
        rotary_base: float = 10000.0,
        dtype: DTypeLike = np.float64,
        block_size: int | None = None,
        window: int | None = None,
        sinks: int = 0,
        alibi: bool | ArrayLike = False,
        rope_scaling: dict | None = None,
    ) -> None:
        d_model = as_int(d_model, "d_model", 1)
        H = as_int(n_heads, "n_heads", 1)
        H_kv = H if n_kv_heads is None else as_int(n_kv_heads, "n_kv_heads", 1)
        if H % H_kv:
            raise ValueError(
                f"n_kv_heads = {H_kv} does not divide n_heads = {H}: each "
                f"key/value head serves n_heads / n_kv_heads query heads"
            )
        if d_head is None:
            if d_model % H:
                raise ValueError(
                    f"n_heads = {H} does not divide d_model = {d_model}: "
                    f"each head gets d_model / n_heads features (or pass d_head)"
                )
            d_head = d_model // H
        d_head = as_int(d_head, "d_head", 1)
        d_kv = d_model if d_kv is None else as_int(d_kv, "d_kv", 1)
        _check_rotary(rotary, rotary_base, d_head)
        long = _check_long(
            block_size, window, sinks, alibi, rope_scaling, rotary, rotary_base, H, d_head
        )
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        self.n_heads, self.n_kv_heads, self.d_head = H, H_kv, d_head
        self.rotary, self.rotary_base = rotary, float(rotary_base)
        self.block_size, self.window, self.sinks, self.alibi, self.rope_scaling = long
        self.bias = as_bool(bias, "bias")
        self.dropout = Dropout(dropout, rng)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {rng!r}")
        self.params = {}
        for name, W in zip("QKVO", self._draw(rng, d_model, d_kv, H * d_head, H_kv * d_head)):
            self.params["W_" + name] = np.ascontiguousarray(W, dtype=dtype)
            if self.bias:
                self.params["b_" + name] = np.zeros(W.shape[1], dtype)
        self.grads, self._saved = {}, None

    @classmethod
    def from_params(
        cls,
        params: dict[str, np.ndarray],
        n_heads: int,
        n_kv_heads: int | None = None,
        rotary: str | None = None,
        rotary_base: float = 10000.0,
        block_size: int | None = None,
        window: int | None = None,
        sinks: int = 0,
        alibi: bool | ArrayLike = False,
        rope_scaling: dict | None = None,
    ) -> MultiHeadAttention:
        """A layer around existing weights (the arrays themselves, not copies).

        ``params`` holds ``W_Q, W_K, W_V, W_O`` in the layout of
        :attr:`params` and, for a layer with biases, all of ``b_Q, b_K, b_V,
        b_O``; the sizes are read from the shapes. The layer has no dropout.

        Examples
        --------
        >>> import numpy as np
        >>> from attention_lib.nn import MultiHeadAttention
        >>> eye = np.eye(4)
        >>> att = MultiHeadAttention.from_params(
        ...     {"W_Q": eye, "W_K": eye[:, :2], "W_V": eye[:, :2], "W_O": eye}, n_heads=2,
        ...     n_kv_heads=1)
        >>> att.d_head, att.bias, att.forward(np.ones((1, 3, 4))).shape
        (2, False, (1, 3, 4))
        """
        H = as_int(n_heads, "n_heads", 1)
        H_kv = H if n_kv_heads is None else as_int(n_kv_heads, "n_kv_heads", 1)
        names = [n + x for n in ("W_", "b_") for x in "QKVO"]
        arrays = {k: as_numeric(params[k], f"params[{k!r}]") for k in names if k in params}
        if (
            set(params) - set(names)
            or not set(names[:4]) <= set(arrays)
            or len(arrays) not in (4, 8)
        ):
            raise ValueError(
                f"params must hold W_Q, W_K, W_V, W_O and either all or none of "
                f"b_Q, b_K, b_V, b_O; got {sorted(params)}"
            )
        for k in names[:4]:
            if arrays[k].ndim != 2:
                raise ValueError(
                    f"params[{k!r}] must be a matrix (inputs, outputs), got shape {arrays[k].shape}"
                )
        W_Q, W_K, W_V = (arrays["W_" + x] for x in "QKV")
        d_head, d_v = W_Q.shape[-1] // H, W_V.shape[-1] // max(H_kv, 1)
        shapes = {
            "W_Q": (W_Q.shape[0], H * d_head),
            "W_K": (W_K.shape[0], H_kv * d_head),
            "W_V": (W_V.shape[0], H_kv * d_v),
            "W_O": (H * d_v, W_Q.shape[0]),
            "b_Q": (H * d_head,),
            "b_K": (H_kv * d_head,),
            "b_V": (H_kv * d_v,),
            "b_O": (W_Q.shape[0],),
        }
        for k, a in arrays.items():
            if a.shape != shapes[k] or a.dtype.kind != "f" or d_head == 0 or H % H_kv:
                raise ValueError(
                    f"params[{k!r}] has shape {a.shape} and dtype {a.dtype}; "
                    f"{n_heads} heads sharing {H_kv} key/value heads need "
                    f"floats of shape {shapes[k]}"
                )
        _check_rotary(rotary, rotary_base, d_head)
        long = _check_long(
            block_size, window, sinks, alibi, rope_scaling, rotary, rotary_base, H, d_head
        )
        layer = cls.__new__(cls)
        layer.n_heads, layer.n_kv_heads, layer.d_head = H, H_kv, d_head
        layer.rotary, layer.rotary_base = rotary, float(rotary_base)
        layer.block_size, layer.window, layer.sinks, layer.alibi, layer.rope_scaling = long
        layer.bias, layer.dropout = len(arrays) == 8, Dropout(0.0)
        layer.params, layer.grads, layer._saved = arrays, {}, None
        return layer

    def _draw(self, rng, d_model, d_kv, q_cols, kv_cols):
        """``W_Q, W_K, W_V, W_O``, each with variance ``1 / fan-in``."""
        if d_kv == d_model:  # one draw: the numbers of the fused W_QKV of earlier versions
            W_Q, W_K, W_V = np.split(
                init_weight(rng, d_model, q_cols + 2 * kv_cols),
                [q_cols, q_cols + kv_cols],
                axis=1,
            )
        else:
            W_Q = init_weight(rng, d_model, q_cols)
            W_K, W_V = np.split(init_weight(rng, d_kv, 2 * kv_cols), 2, axis=1)
        return W_Q, W_K, W_V, init_weight(rng, q_cols, d_model)

    def _rotate(self, x, start, inverse=False):
        """Rotary positions ``start, start + 1, ...`` (or the array ``start``) on ``x``
        (B, heads, T, d); back if ``inverse``. With ``rope_scaling``, the scaled angles."""
        positions = (
            np.arange(start, start + x.shape[-2]) if np.ndim(start) == 0 else np.asarray(start)
        )
        key = (positions[0] if len(positions) else 0, len(positions), x.shape[-1], x.dtype)
        # keyed on every setting the tables are made from: a base changed after a
        # forward (layer.rotary_base = ...) must not rotate with the old one
        key = key + (str(self.rope_scaling), positions[-1] if len(positions) else 0)
        key = key + (self.rotary_base,)
        cached = getattr(self, "_tables", None)
        contiguous = np.ndim(start) == 0 or bool(np.all(np.diff(positions) == 1))
        if not contiguous or cached is None or cached[0] != key:  # the last call's are kept
            divisor, base = 1.0, self.rotary_base
            r = getattr(self, "rope_scaling", None)
            if r is not None and r["type"] == "yarn":  # its own speed for each pair
                theta, factor = yarn_frequencies(
                    x.shape[-1], r["factor"], r["original_length"], base
                )
                angles = np.asarray(positions, dtype=np.float64)[..., None] * theta
                tables = (
                    (factor * np.cos(angles)).astype(x.dtype),
                    (factor * np.sin(angles)).astype(x.dtype),
                )
            else:
                if r is not None:
                    divisor, base = rope_scaling(r["type"], r["factor"], x.shape[-1], base)
                tables = rotary_tables(positions / divisor, x.shape[-1], base, x.dtype)
            cached = (key, *tables)
            if contiguous:
                self._tables = cached
        _, cos, sin = cached
        return rotate_pairs(x, cos, -sin if inverse else sin, self.rotary)

    def _split(self, y, heads):
        """``(B, T, heads d)`` -> ``(B, heads, T, d)``: a reshape and a transpose (no copy)."""
        B, T, n = y.shape
        return y.reshape(B, T, heads, n // heads).transpose(0, 2, 1, 3)

    def _weight(self, names, kind="W_"):
        """The weights (or biases) of the projections ``names`` side by side.

        No copy when they already are: views of consecutive columns of one
        array (the PyTorch-style adapter's ``in_proj_weight``).
        """
        arrays = [self.params[kind + n] for n in names]
        if len(arrays) == 1:
            return arrays[0]
        whole = _joined(arrays)
        return np.concatenate(arrays, axis=-1) if whole is None else whole

    def _project(self, x, names):
        """``x W + b`` for the projections ``names`` that read ``x``, in one product."""
        y = x @ self._weight(names)
        if self.bias:
            y += self._weight(names, "b_")
        widths = np.cumsum([self.params["W_" + n].shape[1] for n in names])[:-1]
        return np.split(y, widths, axis=-1)

    def _mask(self, attn_mask, is_causal, B, T, S, offset, dtype, scores_bound):
        """One mask for the kernel, broadcastable to (B, H_kv, G, T, S), or None."""
        H, H_kv = self.n_heads, self.n_kv_heads
        mask = None
        if attn_mask is not None:
            mask = as_mask(attn_mask, "attn_mask")
            try:
                fits = np.broadcast_shapes(mask.shape, (B, H, T, S)) == (B, H, T, S)
            except ValueError:
                fits = False
            if not fits:
                raise ValueError(
                    f"attn_mask of shape {mask.shape} does not broadcast to "
                    f"(B, n_heads, L, S) = {(B, H, T, S)}"
                )
            if mask.dtype.kind == "f":
                if np.isnan(mask).any() or np.isposinf(mask).any():
                    raise ValueError("attn_mask contains NaN or +inf; use -inf or False to mask")
                mask = float_mask(mask, dtype, scores_bound())
            m = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
            heads = (H_kv, H // H_kv) if m.shape[1] == H else (1, 1)
            mask = m.reshape(m.shape[:1] + heads + m.shape[2:])
        if is_causal:  # the query at position p sees keys 0 .. p
            mask = and_causal(mask, np.arange(S) <= np.arange(offset, offset + T)[:, None])
        return mask

    def forward(
        self,
        x_q: ArrayLike,
        x_kv: ArrayLike | None = None,
        attn_mask: ArrayLike | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        x_v: ArrayLike | None = None,
        need_weights: bool = True,
    ) -> np.ndarray:
        """Attend from ``x_q`` (B, L, d_model) to itself, or to ``x_kv`` (B, S, d_kv).

        Parameters
        ----------
        x_q : ndarray, shape (B, L, d_model)
        x_kv : ndarray, shape (B, S, d_kv), optional
            Cross-attention: keys and values come from here (default: from ``x_q``).
        attn_mask : ndarray, optional
            Broadcastable to ``(B, n_heads, L, S)``. Boolean: True = may
            attend. Floating: added to the scores.
        is_causal : bool, optional
            The query at position ``p`` sees keys at positions ``<= p`` only.
        cache : KVCache, optional
            Keys and values of earlier calls (see :class:`KVCache`).
        x_v : ndarray, shape (B, S, d_v), optional
            The values' own input, if it is not ``x_kv``.
        need_weights : bool, optional
            False: inference only. The weights are neither normalised nor
            kept (``weights`` is None and there is no backward); the output
            is divided instead, which saves a pass over the scores.

        Returns
        -------
        ndarray, shape (B, L, d_model)
        """
        p, H, H_kv = self.params, self.n_heads, self.n_kv_heads
        self._unbatched = np.ndim(x_q) == 2  # (T, d_model): one sequence
        x_q = _float_rows(x_q, "x_q", p["W_Q"].shape[0])
        is_causal = as_bool(is_causal, "is_causal")
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
        if x_v is not None and x_kv is None:
            raise ValueError("x_v (the values' input) needs x_kv (the keys' input)")
        B, T, _ = x_q.shape
        offset = 0 if cache is None else cache.position
        if cache is not None:
            cache.check(B)
            if len(cache) and not cache.cross and x_kv is not None:
                raise ValueError(
                    "this KV cache holds self-attention keys; cross-attention "
                    "(x_kv) needs a cache of its own"
                )
        reuse = cache is not None and cache.cross and x_v is None
        cross = x_kv is not None or reuse
        if x_kv is not None and not reuse:
            nd = 2 if self._unbatched else 3
            x_kv = _float_rows(x_kv, "x_kv", p["W_K"].shape[0], B, nd)
            x_v = x_kv if x_v is None else _float_rows(x_v, "x_v", p["W_V"].shape[0], B, nd)
            if x_v.shape[1] != x_kv.shape[1]:
                raise ValueError(
                    f"x_kv has {x_kv.shape[1]} positions but x_v has "
                    f"{x_v.shape[1]}: every key needs one value"
                )
        # Projections that read the same input are one matrix product.
        groups = (
            [("QKV", x_q)]
            if not cross
            else [("Q", x_q)]
            if reuse
            else [("Q", x_q), ("KV", x_kv)]
            if x_v is x_kv
            else [("Q", x_q), ("K", x_kv), ("V", x_v)]
        )
        y = {}
        for names, x in groups:
            y.update(zip(names, self._project(x, names)))
        q = self._split(y["Q"], H)  # (B, H, T, d)
        rolling = isinstance(cache, RollingKVCache)
        q_pos = np.arange(offset, offset + T)  # where each query sits
        if reuse:  # cross-attention keys and values, computed once
            k, v = cache.k, cache.v
        else:
            k, v = (
                self._split(y["K"], H_kv),
                self._split(y["V"], H_kv),
            )  # (B, H_kv, S, d)
            if rolling:  # kept unrotated: positions are indices in the cache
                k, v = cache.append(k, v)
                q_pos = np.arange(len(cache) - T, len(cache))
            elif self.rotary:  # keys from another sequence start at position 0
                k = self._rotate(k, 0 if cross else offset)
            if cache is not None and not rolling:
                k, v = cache.append(k, v)
            if cache is not None:
                cache.cross = cross
        S, G = k.shape[-2], H // H_kv
        k_pos = np.arange(S)
        if self.rotary:
            q = self._rotate(q, q_pos if rolling else offset)
            if rolling:
                k = self._rotate(k, k_pos)
        if cache is not None:
            cache.position += T
            if rolling:
                cache.trim()
        window, sinks = (cache.window, cache.sinks) if rolling else (self.window, self.sinks)
        if window is not None or self.alibi is not None:
            if cross:
                raise ValueError("window, sinks and alibi are for self-attention, not x_kv")
            if not is_causal:
                raise ValueError("a window (or alibi) needs is_causal=True: both look back only")
            if window is not None and cache is None and window > S:
                raise ValueError(
                    f"window = {window} is longer than the sequence ({S} positions): "
                    f"every query would see everything; pass a window <= {S}, or None"
                )
        scale = q.dtype.type(1 / np.sqrt(q.shape[-1]))
        tiled = self.block_size is not None
        bound = lambda: overflow_bound(max_abs(q), scale, max_abs(k), q.shape[-1])  # noqa: E731
        mask = self._mask(
            attn_mask,
            is_causal and not tiled and window is None and self.alibi is None,
            B,
            T,
            S,
            offset,
            q.dtype,
            bound,
        )
        slopes = None
        if self.alibi is not None:
            slopes = self.alibi.astype(q.dtype).reshape(H_kv, G, 1, 1)
        geometry = (is_causal, window, sinks, slopes)
        if not tiled and (window is not None or slopes is not None):
            mask = _position_mask(mask, q_pos, k_pos, geometry, q.dtype)
        q5 = q.reshape(B, H_kv, G, T, q.shape[-1])  # query heads grouped by key head
        k5, v5 = k[:, :, None], v[:, :, None]
        need_weights = as_bool(need_weights, "need_weights")
        dropping = self.dropout.training and self.dropout.p > 0
        if tiled:
            drop = (int(self.dropout.rng.integers(2**62)), self.dropout.p) if dropping else None
            out5, lse = tiled_forward(
                q5, k5, v5, scale, q_pos, k_pos, geometry, mask, self.block_size, drop
            )
            context = out5.reshape(B, H, T, -1).transpose(0, 2, 1, 3).reshape(B, T, -1)
            self.weights, P, used = None, None, None
        else:
            P, total = attention_weights(q5, k5, scale, mask, normalise=need_weights)
            used = self.dropout.forward(P) if dropping else P  # (B, H_kv, G, T, S)
            context = used @ v5 if need_weights else (used @ v5) / total
            context = context.reshape(B, H, T, -1).transpose(0, 2, 1, 3).reshape(B, T, -1)
            self.weights = P.reshape(B, H, T, S) if need_weights else None
        self._why_no_backward = (
            "a forward() with a KV cache: the cache is for generation "
            "(inference); train without one"
            if cache is not None
            else "forward(need_weights=False), which keeps nothing for it"
        )
        self._saved = (
            None
            if cache is not None or not (need_weights or tiled)
            else {
                "x_q": x_q,
                "groups": groups,
                "q": q5,
                "k": k5,
                "v": v5,
                "P": P,
                "used": used,
                "drop": dropping,
                "context": context,
                "scale": scale,
                "cross": cross,
            }
        )
        if tiled and self._saved is not None:
            self._saved.update(tiled=(out5, lse, q_pos, k_pos, geometry, mask, drop), offset=offset)
        out = self._project(context, "O")[0]
        if self._unbatched:
            self.weights = None if self.weights is None else self.weights[0]
            return out[0]
        return out

    def backward(self, grad: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        """Gradients of every parameter (into ``grads``) and of the inputs, from ``d loss / d out``.

        Returns ``dx`` (self-attention), ``(dx_q, dx_kv)`` (cross-attention), or
        ``(dx_q, dx_k, dx_v)`` when the forward pass had an ``x_v``.
        """
        s = self._saved
        if s is None:
            why = getattr(self, "_why_no_backward", None)
            raise RuntimeError(
                "backward() needs a forward() first: there is nothing to differentiate"
                if why is None
                else f"backward() after {why}"
            )
        p, g, H, H_kv = self.params, self.grads, self.n_heads, self.n_kv_heads
        B, T = s["x_q"].shape[:2]
        expected = (B, T, p["W_O"].shape[1])
        grad = as_numeric(grad, "grad")
        if grad.shape != expected[self._unbatched :]:
            raise ValueError(
                f"grad has shape {grad.shape} but the output of the last "
                f"forward() has shape {expected[self._unbatched :]}"
            )
        grad = grad.reshape(expected)
        g["W_O"] = sum_to_matrix(s["context"], grad)
        d_ctx = grad @ p["W_O"].T  # (B, T, H dv)
        d_ctx = d_ctx.reshape(B, T, H, -1).transpose(0, 2, 1, 3)
        d_ctx = d_ctx.reshape(B, H_kv, H // H_kv, T, d_ctx.shape[-1])
        if "tiled" in s:  # the weights are recomputed tile by tile from O and lse
            out5, lse, q_pos, k_pos, geometry, mask, drop = s["tiled"]
            dq, dk, dv = tiled_backward(
                d_ctx,
                s["q"],
                s["k"],
                s["v"],
                out5,
                lse,
                s["scale"],
                q_pos,
                k_pos,
                geometry,
                mask,
                self.block_size,
                drop,
            )
        else:
            dq, dk, dv = attention_backward(
                d_ctx,
                s["q"],
                s["k"],
                s["v"],
                s["P"],
                s["scale"],
                s["used"],
                self.dropout if s["drop"] else None,
            )
        dq = dq.reshape(B, H, T, -1)
        if dk.shape[2] == 1:
            dk, dv = dk[:, :, 0], dv[:, :, 0]
        elif H == H_kv:
            dk, dv = dk[:, :, 0], dv[:, :, 0]
        else:  # summed over the query heads that share them
            dk, dv = dk.sum(axis=2), dv.sum(axis=2)
        if self.rotary:  # rotate back: R(-p) = R(p)^T
            dq = self._rotate(dq, 0, inverse=True)
            dk = self._rotate(dk, 0, inverse=True)
        d_heads, d_in = {"Q": dq, "K": dk, "V": dv}, []
        for names, x in s["groups"]:
            dy = _merge_heads([d_heads[n] for n in names])  # (B, S, columns)
            widths = np.cumsum([p["W_" + n].shape[1] for n in names])[:-1]
            for n, dW in zip(names, np.split(sum_to_matrix(x, dy), widths, axis=1)):
                g["W_" + n] = dW
            if self.bias:
                db = dy.reshape(-1, dy.shape[-1]).sum(axis=0)
                for n, db_n in zip(names, np.split(db, widths)):
                    g["b_" + n] = db_n
            d_in.append(dy @ self._weight(names).T)
        if self.bias:
            g["b_O"] = grad.reshape(-1, grad.shape[-1]).sum(axis=0)
        self.grads = {k: g[k] for k in p}  # in the order of params
        if self._unbatched:
            d_in = [d[0] for d in d_in]
        return d_in[0] if len(d_in) == 1 else tuple(d_in)


def _position_mask(mask, q_pos, k_pos, geometry, dtype):
    """The untiled path's mask with the window, sinks and ALiBi terms folded in."""
    causal, window, sinks, slopes = geometry
    allowed = tile_mask(q_pos, k_pos, causal, window, sinks)
    if slopes is not None:  # -m_h (i - j): (H_kv, G, T, S)
        bias = slopes * (k_pos[None, :] - q_pos[:, None]).astype(dtype)
        if allowed is not None:
            bias = np.where(allowed, bias, -np.inf).astype(dtype)
        if mask is None:
            return bias
        return (
            np.where(mask, bias, -np.inf).astype(dtype) if mask.dtype.kind == "b" else mask + bias
        )
    return mask if allowed is None else and_causal(mask, allowed)


def _joined(arrays):
    """One view of ``arrays`` side by side if they are consecutive columns of one buffer."""
    first = arrays[0]
    if first.base is None or any(
        a.base is not first.base or a.strides != first.strides or a.shape[:-1] != first.shape[:-1]
        for a in arrays
    ):
        return None
    start, pointer = 0, first.__array_interface__["data"][0]
    for a in arrays:
        if a.__array_interface__["data"][0] != pointer + start * first.strides[-1]:
            return None
        start += a.shape[-1]
    return as_strided(first, first.shape[:-1] + (start,), first.strides, writeable=False)


def _merge_heads(parts):
    """Per-head gradients ``(B, heads, T, d)`` side by side as ``(B, T, columns)``, one copy."""
    B, _, T, _ = parts[0].shape
    if len({d.shape[-1] for d in parts}) > 1:  # heads of different sizes: no shared buffer
        return np.concatenate([d.transpose(0, 2, 1, 3).reshape(B, T, -1) for d in parts], -1)
    out = np.empty((B, T, sum(d.shape[1] for d in parts), parts[0].shape[-1]), parts[0].dtype)
    start = 0
    for d in parts:
        out[:, :, start : start + d.shape[1]] = d.transpose(0, 2, 1, 3)
        start += d.shape[1]
    return out.reshape(B, T, -1)


class SelfAttention(MultiHeadAttention):
    """Multi-head self-attention, causal by default: chapter 9's name for the layer.

    ``SelfAttention(d_model, n_heads, rng, dropout, causal, rotary)`` is
    :class:`MultiHeadAttention` whose ``forward(x, cache=None)`` applies the
    causal mask when ``causal`` is True, with rotary positions
    (``"interleaved"``) when ``rotary`` is True. Keyword arguments
    (``block_size``, ``window``, ``sinks``, ``alibi``, ``rope_scaling``) go
    to :class:`MultiHeadAttention`.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import SelfAttention
    >>> att = SelfAttention(8, 2, np.random.default_rng(0))
    >>> x = np.random.default_rng(1).normal(size=(3, 5, 8))
    >>> att.forward(x).shape, att.weights.shape
    ((3, 5, 8), (3, 2, 5, 5))
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        rng: Generator,
        dropout: float = 0.0,
        causal: bool = True,
        rotary: bool = False,
        **long,
    ) -> None:
        super().__init__(
            d_model,
            n_heads,
            rng,
            dropout=dropout,
            rotary="interleaved" if as_bool(rotary, "rotary") else None,
            **long,
        )
        self.causal = as_bool(causal, "causal")

    def forward(self, x: ArrayLike, cache: KVCache | None = None) -> np.ndarray:
        """Attend within ``x`` (B, T, d_model); with a ``cache``, also to its earlier positions."""
        return super().forward(x, is_causal=self.causal, cache=cache)


class Attention(MultiHeadAttention):
    """One attention head, no biases, queries from ``x_q`` and keys and values from ``x_kv``.

    ``out = softmax(Q K^T / sqrt(d_k) + M) V W_O`` with ``Q = x_q W_Q``,
    ``K = x_kv W_K``, ``V = x_kv W_V`` (chapter 8): :class:`MultiHeadAttention`
    with one head of ``d_k`` features and values of ``d_v``. ``weights`` is
    ``(B, L, S)`` and ``backward`` returns ``(dx_q, dx_kv)``.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import Attention
    >>> att = Attention(8, 4, 4, np.random.default_rng(0))
    >>> x = np.random.default_rng(1).normal(size=(2, 5, 8))
    >>> att.forward(x, x).shape, att.weights.shape
    ((2, 5, 8), (2, 5, 5))
    >>> dx_q, dx_kv = att.backward(np.ones((2, 5, 8)))
    >>> list(att.grads), dx_q.shape
    (['W_Q', 'W_K', 'W_V', 'W_O'], (2, 5, 8))
    """

    def __init__(self, d_model: int, d_k: int, d_v: int, rng: Generator) -> None:
        self.d_v = as_int(d_v, "d_v", 1)
        super().__init__(d_model, 1, rng, d_head=d_k, bias=False)

    def _draw(self, rng, d_model, d_kv, q_cols, kv_cols):
        return (
            init_weight(rng, d_model, q_cols),
            init_weight(rng, d_model, kv_cols),
            init_weight(rng, d_model, self.d_v),
            init_weight(rng, self.d_v, d_model),
        )

    def forward(
        self,
        x_q: ArrayLike,
        x_kv: ArrayLike,
        attn_mask: ArrayLike | None = None,
        is_causal: bool = False,
    ) -> np.ndarray:
        out = super().forward(x_q, x_kv, attn_mask, is_causal)
        self.weights = self.weights[..., 0, :, :]
        return out
