"""Multi-head attention: learned projections, several heads, one output.

    Q = X_q W_Q,  K = X_k W_K,  V = X_v W_V            (learned projections)
    head_h = Attention(Q_h, K_h, V_h)                  (h = 1 .. H, each d = E / H wide)
    MultiHead(X_q, X_k, X_v) = Concat(head_1, ..., head_H) W_O

Each head attends in its own ``d``-dimensional slice of the projected
queries, keys and values. The heads are not computed one at a time: the
projected ``(N, L, E)`` arrays are reshaped to ``(N, L, H, d)`` and transposed
to ``(N, H, L, d)``, and :func:`~attention_lib.scaled_dot_product_attention`
treats ``N`` and ``H`` as batch axes.

This class is an adapter: the attention itself is computed by the library's
one layer, :class:`attention_lib.nn.MultiHeadAttention`, around views of the
weights kept here. It mirrors ``torch.nn.MultiheadAttention(batch_first=True)`` with
dropout 0: the same arguments, the same parameter names and layouts (PyTorch
stores a weight as ``(out_features, in_features)`` and computes
``x @ W.T + b``; the book's ``W_Q`` is ``in_proj_weight[:E].T``), and the same
mask conventions, which are the *opposite* of
:func:`~attention_lib.scaled_dot_product_attention`'s for boolean masks.
"""

import numpy as np

from ._checks import as_bool, as_int, as_numeric, max_abs
from ._kernel import run_in_threads
from .masks import causal_mask
from .nn.multi_head_attention import MultiHeadAttention as _Layer

_SEPARATE = ("q_proj_weight", "k_proj_weight", "v_proj_weight")
_BIASES = ("in_proj_bias", "out_proj.bias")
#: The attributes that hold PyTorch's ``out_proj.*`` parameters (a name without a dot).
_ATTR = {"out_proj.weight": "out_proj_weight", "out_proj.bias": "out_proj_bias"}


def _as_mask(mask, name, dtype):
    """A mask as a bool or ``dtype`` array; integer masks are a ``TypeError``."""
    arr = as_numeric(mask, name)
    if arr.dtype.kind == "b":
        return arr
    if arr.dtype.kind != "f":
        raise TypeError(
            f"{name} must be boolean (True = may NOT attend) or floating "
            f"(added to the scores), got dtype {arr.dtype}; convert it with "
            f"{name}.astype(bool) if 1 means 'masked'"
        )
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError(f"{name} contains NaN or +inf; use -inf or True to mask")
    finite = arr[np.isfinite(arr)]
    if max_abs(finite) > float(np.finfo(dtype).max):
        # Cast, -1e39 would become -inf in float32 (masking, not biasing):
        # scaled_dot_product_attention shifts such rows into range instead.
        return arr.astype(np.result_type(arr.dtype, np.float64), copy=False)
    return arr.astype(dtype, copy=False)


#: Sequences are attended to in groups whose scores have about this many
#: elements (8 MiB in float32); see MultiHeadAttention.__call__.
_SCORES_PER_STEP = 2**21


def _rows(mask, part):
    """The rows ``part`` of a mask that broadcasts to ``(N, H, L, S)``."""
    if mask is None or mask.ndim < 4 or mask.shape[0] == 1:
        return mask
    return mask[part]


def _additive(mask, dtype):
    """A blocked-where-True boolean mask as 0 / -inf; a float mask unchanged."""
    if mask.dtype.kind == "b":
        return np.where(mask, dtype.type(-np.inf), dtype.type(0))
    return mask


class MultiHeadAttention:
    """Multi-head attention with the semantics of PyTorch's layer.

    ``torch.nn.MultiheadAttention(embed_dim, num_heads, bias=bias, kdim=kdim,
    vdim=vdim, batch_first=True)`` with dropout 0 and without
    ``add_bias_kv`` / ``add_zero_attn``, in NumPy.

    Parameters
    ----------
    embed_dim : int
        ``E``, the feature size of the queries and of the output.
    num_heads : int
        ``H``, the number of heads; must divide ``embed_dim``. Each head
        works in ``d = E / H`` dimensions.
    bias : bool, optional
        Add biases to the input and output projections (default True).
    kdim, vdim : int, optional
        Feature sizes of the keys and values before projection; default
        ``embed_dim``. When either differs, the three projections are stored
        separately (``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight``)
        instead of as one ``in_proj_weight``, as in PyTorch.
    rng : None, int or numpy.random.Generator, optional
        Source of the initial weights (``np.random.default_rng(rng)``): pass
        a seed for reproducible weights. Initialised as PyTorch does it:
        Xavier-uniform input projections, ``U(-1/sqrt(E), 1/sqrt(E))`` output
        projection, zero biases (the values differ from PyTorch's, whose
        random numbers come from its own generator).
    dtype : numpy float dtype, optional
        ``float64`` (default) or ``float32``: the parameters' dtype, in which
        the layer computes. Inputs are converted to it.

    Attributes
    ----------
    in_proj_weight : ndarray (3E, E) or None
        ``W_Q^T``, ``W_K^T``, ``W_V^T`` stacked (rows ``0:E``, ``E:2E``,
        ``2E:3E``); None when ``kdim`` or ``vdim`` differ from ``E``.
    q_proj_weight, k_proj_weight, v_proj_weight : ndarray or None
        ``(E, E)``, ``(E, kdim)``, ``(E, vdim)``; only when ``kdim`` or
        ``vdim`` differ from ``E``.
    in_proj_bias : ndarray (3E,) or None
        Biases of the three input projections.
    out_proj_weight : ndarray (E, E)
        ``W_O^T``; PyTorch's ``out_proj.weight``.
    out_proj_bias : ndarray (E,) or None
        PyTorch's ``out_proj.bias``.

    Notes
    -----
    The layer has ``4 E^2 + 4 E`` parameters when ``kdim = vdim = E`` and
    ``bias=True``. Shapes (``N`` batch, ``L`` queries, ``S`` keys)::

        query (N, L, E)   key (N, S, kdim)   value (N, S, vdim)
        -> output (N, L, E), weights (N, L, S) or (N, H, L, S)

    or the same without ``N`` for one unbatched sequence.

    **Masks, PyTorch's convention.** A boolean ``key_padding_mask`` or
    ``attn_mask`` is ``True`` where attention is **not** allowed. This is the
    opposite of :func:`~attention_lib.scaled_dot_product_attention` (and of
    ``torch.nn.functional.scaled_dot_product_attention``), where ``True``
    means "may attend". A floating mask is added to the scores in both.
    Integer masks are refused (``TypeError``), as PyTorch refuses them.

    **is_causal.** Here ``is_causal=True`` applies the causal mask (query
    ``i`` sees keys ``j <= i``) by itself, combined with any other mask.
    PyTorch's layer treats it only as a *hint* that the ``attn_mask`` you
    also pass is causal, and raises an error when no ``attn_mask`` is given.

    **Fully masked queries.** A query with nothing left to attend to gets
    zero weights and a zero attention output (so its output is just
    ``out_proj_bias``), as in
    :func:`~attention_lib.scaled_dot_product_attention`. PyTorch's layer
    (2.13 checked) gives NaN there whenever it returns weights, and also
    without weights when it has more than one head.

    The computation is :class:`attention_lib.nn.MultiHeadAttention`'s, the
    library's one attention layer, given views of these weights in its
    layout (``W_Q = in_proj_weight[:E].T``, ``W_O = out_proj_weight.T``);
    the masks are turned into its convention (True = may attend). The
    sequences of a large batch are taken a few at a time (about ``2**21``
    scores per step), which bounds the memory of the ``(N, H, L, S)`` scores
    and keeps the softmax's passes over them in cache.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import MultiHeadAttention
    >>> mha = MultiHeadAttention(embed_dim=8, num_heads=2, rng=0)
    >>> sum(p.size for p in mha.state_dict().values())   # 4 E^2 + 4 E
    288
    >>> x = np.random.default_rng(1).normal(size=(3, 5, 8))   # (N, L, E)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    ((3, 5, 8), (3, 5, 5))

    Per-head weights, with the last two keys of every sequence padded
    (``True`` = may not attend):

    >>> pad = np.array([False, False, False, True, True])
    >>> _, w = mha(x, x, x, key_padding_mask=np.tile(pad, (3, 1)),
    ...            average_attn_weights=False)
    >>> w.shape, float(w[..., 3:].max())
    ((3, 2, 5, 5), 0.0)
    """

    def __init__(
        self, embed_dim, num_heads, bias=True, kdim=None, vdim=None, rng=None, dtype=np.float64
    ):
        E = as_int(embed_dim, "embed_dim", minimum=1)
        H = as_int(num_heads, "num_heads", minimum=1)
        if E % H:
            raise ValueError(
                f"embed_dim={E} is not divisible by num_heads={H}: each head "
                f"gets embed_dim / num_heads features"
            )
        kdim = E if kdim is None else as_int(kdim, "kdim", minimum=1)
        vdim = E if vdim is None else as_int(vdim, "vdim", minimum=1)
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        self.embed_dim, self.num_heads, self.head_dim = E, H, E // H
        self.kdim, self.vdim = kdim, vdim
        self.bias = as_bool(bias, "bias")
        self.dtype = dtype

        rng = np.random.default_rng(rng)

        def xavier(rows, cols):
            bound = np.sqrt(6.0 / (rows + cols))
            return rng.uniform(-bound, bound, (rows, cols)).astype(dtype)

        if self._packed:
            self.in_proj_weight = xavier(3 * E, E)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.in_proj_weight = None
            self.q_proj_weight = xavier(E, E)
            self.k_proj_weight = xavier(E, kdim)
            self.v_proj_weight = xavier(E, vdim)
        bound = 1.0 / np.sqrt(E)
        self.out_proj_weight = rng.uniform(-bound, bound, (E, E)).astype(dtype)
        self.in_proj_bias = np.zeros(3 * E, dtype) if self.bias else None
        self.out_proj_bias = np.zeros(E, dtype) if self.bias else None

    @property
    def _packed(self):
        return self.kdim == self.embed_dim and self.vdim == self.embed_dim

    def __repr__(self):
        extra = "" if self._packed else f", kdim={self.kdim}, vdim={self.vdim}"
        return (
            f"MultiHeadAttention(embed_dim={self.embed_dim}, "
            f"num_heads={self.num_heads}, bias={self.bias}{extra}, "
            f"dtype={self.dtype.name})"
        )

    # -- parameters, by PyTorch's names ---------------------------------
    def _expected_shapes(self):
        E = self.embed_dim
        shapes = (
            {"in_proj_weight": (3 * E, E)}
            if self._packed
            else {
                "q_proj_weight": (E, E),
                "k_proj_weight": (E, self.kdim),
                "v_proj_weight": (E, self.vdim),
            }
        )
        if self.bias:
            shapes["in_proj_bias"] = (3 * E,)
        shapes["out_proj.weight"] = (E, E)
        if self.bias:
            shapes["out_proj.bias"] = (E,)
        return shapes

    def state_dict(self):
        """The parameters by PyTorch's names and layouts (copies).

        Returns
        -------
        dict of str to ndarray
            ``in_proj_weight (3E, E)`` (or ``q_proj_weight``,
            ``k_proj_weight``, ``v_proj_weight``), ``in_proj_bias (3E,)``,
            ``out_proj.weight (E, E)``, ``out_proj.bias (E,)``, in PyTorch's
            order; the biases only with ``bias=True``. Convert with
            ``{k: torch.from_numpy(v) for k, v in ...}`` for
            ``torch.nn.MultiheadAttention.load_state_dict``.

        Examples
        --------
        >>> from attention_lib import MultiHeadAttention
        >>> sd = MultiHeadAttention(6, 3, rng=0).state_dict()
        >>> {name: a.shape for name, a in sd.items()}  # doctest: +NORMALIZE_WHITESPACE
        {'in_proj_weight': (18, 6), 'in_proj_bias': (18,),
         'out_proj.weight': (6, 6), 'out_proj.bias': (6,)}
        """
        return {
            name: getattr(self, _ATTR.get(name, name)).copy() for name in self._expected_shapes()
        }

    @classmethod
    def from_state_dict(cls, state, num_heads):
        """Build a layer from parameters with PyTorch's names and layouts.

        Parameters
        ----------
        state : mapping of str to array_like
            As ``torch.nn.MultiheadAttention.state_dict()`` gives them,
            converted to NumPy (``{k: v.numpy() for k, v in sd.items()}``):
            ``out_proj.weight (E, E)``; either ``in_proj_weight (3E, E)`` or
            ``q_proj_weight (E, E)``, ``k_proj_weight (E, kdim)`` and
            ``v_proj_weight (E, vdim)``; and, for a layer with biases,
            ``in_proj_bias (3E,)`` and ``out_proj.bias (E,)``.
        num_heads : int
            ``H`` (a state dict does not record it).

        Returns
        -------
        MultiHeadAttention
            With copies of the arrays, in their floating dtype (float32
            arrays give a float32 layer, otherwise float64).

        Raises
        ------
        ValueError
            If an entry is missing, unexpected (e.g. PyTorch's ``bias_k``,
            which this layer does not support) or misshapen; the message
            names it.
        TypeError
            If ``state`` is not a mapping or an entry is not real numbers.

        Examples
        --------
        >>> import numpy as np
        >>> from attention_lib import MultiHeadAttention
        >>> E = 4
        >>> state = {"in_proj_weight": np.eye(3 * E, E),
        ...          "out_proj.weight": np.eye(E)}
        >>> MultiHeadAttention.from_state_dict(state, num_heads=2)
        MultiHeadAttention(embed_dim=4, num_heads=2, bias=False, dtype=float64)
        """
        if not hasattr(state, "keys") or not hasattr(state, "__getitem__"):
            raise TypeError(
                f"state must be a mapping of parameter names to arrays, got {type(state).__name__}"
            )
        arrays = {name: as_numeric(state[name], f"state[{name!r}]") for name in state.keys()}
        if "out_proj.weight" not in arrays:
            raise ValueError("state has no 'out_proj.weight' (E, E) entry")
        out_w = arrays["out_proj.weight"]
        if out_w.ndim != 2 or out_w.shape[0] != out_w.shape[1]:
            raise ValueError(
                f"state['out_proj.weight'] must be square (E, E), got shape {out_w.shape}"
            )
        E = out_w.shape[0]
        if "in_proj_weight" in arrays:
            kdim = vdim = E
        else:
            missing = [n for n in _SEPARATE if n not in arrays]
            if missing:
                raise ValueError(
                    f"state needs 'in_proj_weight' (3E, E), or all of "
                    f"{', '.join(map(repr, _SEPARATE))}; missing "
                    f"{', '.join(map(repr, missing))}"
                )
            kdim = arrays["k_proj_weight"].shape[-1]
            vdim = arrays["v_proj_weight"].shape[-1]
        bias = any(n in arrays for n in _BIASES)
        floats = [a.dtype for a in arrays.values()]
        dtype = np.float32 if all(d == np.float32 for d in floats) else np.float64
        layer = cls(E, num_heads, bias=bias, kdim=kdim, vdim=vdim, rng=0, dtype=dtype)
        expected = layer._expected_shapes()
        unexpected = sorted(set(arrays) - set(expected))
        if unexpected:
            raise ValueError(
                f"state has unexpected entries {unexpected}; expected {list(expected)}"
            )
        for name, shape in expected.items():
            if name not in arrays:
                raise ValueError(f"state has no {name!r} entry of shape {shape}")
            if arrays[name].shape != shape:
                raise ValueError(
                    f"state[{name!r}] must have shape {shape} for "
                    f"embed_dim={E}, got {arrays[name].shape}"
                )
            if not np.isfinite(arrays[name]).all():
                raise ValueError(f"state[{name!r}] contains NaN or infinity")
            setattr(layer, _ATTR.get(name, name), arrays[name].astype(dtype, copy=True))
        return layer

    # -- the forward pass -------------------------------------------------
    def _layer(self):
        """The library's attention layer around views of these weights (no copies)."""
        E = self.embed_dim
        w = (
            (self.in_proj_weight[:E], self.in_proj_weight[E : 2 * E], self.in_proj_weight[2 * E :])
            if self._packed
            else (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        )
        params = {"W_Q": w[0].T, "W_K": w[1].T, "W_V": w[2].T, "W_O": self.out_proj_weight.T}
        if self.bias:
            b = self.in_proj_bias
            params.update(b_Q=b[:E], b_K=b[E : 2 * E], b_V=b[2 * E :], b_O=self.out_proj_bias)
        return _Layer.from_params(params, self.num_heads)

    def _inputs(self, query, key, value):
        q, k, v = (
            as_numeric(a, name).astype(self.dtype, copy=False)
            for a, name in ((query, "query"), (key, "key"), (value, "value"))
        )
        if q.ndim not in (2, 3):
            raise ValueError(f"query must be (N, L, E) or unbatched (L, E), got shape {q.shape}")
        for a, name in ((k, "key"), (v, "value")):
            if a.ndim != q.ndim:
                raise ValueError(
                    f"query has shape {q.shape} but {name} has shape {a.shape}: "
                    f"all three must be batched (3-D) or all unbatched (2-D)"
                )
        batched = q.ndim == 3
        if not batched:
            q, k, v = q[None], k[None], v[None]
        for a, name, size, what in (
            (q, "query", self.embed_dim, "embed_dim"),
            (k, "key", self.kdim, "kdim"),
            (v, "value", self.vdim, "vdim"),
        ):
            if a.shape[-1] != size:
                raise ValueError(
                    f"{name} has {a.shape[-1]} features but the layer's {what} is {size}"
                )
        if not q.shape[0] == k.shape[0] == v.shape[0]:
            raise ValueError(
                f"query, key and value have batch sizes {q.shape[0]}, "
                f"{k.shape[0]} and {v.shape[0]}: they must match"
            )
        if k.shape[1] != v.shape[1]:
            raise ValueError(
                f"key has {k.shape[1]} positions but value has {v.shape[1]}: "
                f"every key needs one value"
            )
        for a, name in ((q, "query"), (k, "key"), (v, "value")):
            if not np.isfinite(a).all():
                raise ValueError(f"{name} contains NaN or infinity")
        return q, k, v, batched

    def _mask(self, key_padding_mask, attn_mask, is_causal, N, L, S, batched):
        """One mask for ``scaled_dot_product_attention`` (True = may attend).

        Broadcastable to ``(N, H, L, S)``; None when nothing is masked.
        """
        H, masks = self.num_heads, []
        if key_padding_mask is not None:
            kpm = _as_mask(key_padding_mask, "key_padding_mask", self.dtype)
            want = (N, S) if batched else (S,)
            if kpm.shape != want:
                raise ValueError(
                    f"key_padding_mask must have shape {want} "
                    f"({'(N, S)' if batched else '(S,)'}), got {kpm.shape}"
                )
            masks.append(kpm.reshape(N, 1, 1, S))
        if attn_mask is not None:
            am = _as_mask(attn_mask, "attn_mask", self.dtype)
            per_head = (N * H, L, S) if batched else (H, L, S)
            if am.shape == (L, S):
                masks.append(am)
            elif am.shape == per_head:
                masks.append(am.reshape(N, H, L, S))
            else:
                raise ValueError(
                    f"attn_mask must have shape (L, S) = {(L, S)} or "
                    f"{'(N * num_heads, L, S)' if batched else '(num_heads, L, S)'}"
                    f" = {per_head}, got {am.shape}"
                )
        if is_causal:
            masks.append(~causal_mask(L, S))  # True = may not attend
        if not masks:
            return None
        if all(m.dtype.kind == "b" for m in masks):
            blocked = masks[0]
            for m in masks[1:]:
                blocked = blocked | m
            return ~blocked
        total = _additive(masks[0], self.dtype)
        for m in masks[1:]:
            total = total + _additive(m, self.dtype)
        return total

    def __call__(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        """Attend from ``query`` to ``key``/``value`` with every head.

        Parameters
        ----------
        query : array_like, shape (N, L, E) or (L, E)
            The sequence doing the attending.
        key : array_like, shape (N, S, kdim) or (S, kdim)
            What the queries are compared with.
        value : array_like, shape (N, S, vdim) or (S, vdim)
            What is averaged; one row per key.
        key_padding_mask : array_like, shape (N, S) or (S,), optional
            Boolean: ``True`` marks a key that **may not** be attended to
            (padding). Floating: added to every query's scores for that key.
        need_weights : bool, optional
            Also return the attention weights (default True). With False the
            second result is None and the weights are never normalised, which
            saves a pass over the ``(N, H, L, S)`` scores.
        attn_mask : array_like, shape (L, S) or (N * num_heads, L, S), optional
            Boolean: ``True`` = **may not** attend. Floating: added to the
            scores. The 3-D form gives each (sequence, head) its own mask,
            ordered sequence-major as in PyTorch (row ``n * H + h``); for
            unbatched inputs it is ``(num_heads, L, S)``.
        average_attn_weights : bool, optional
            Return the weights averaged over the heads, ``(N, L, S)``
            (default), or per head, ``(N, H, L, S)``.
        is_causal : bool, optional
            Apply the causal mask (query ``i`` sees keys ``j <= i``), combined
            with any other mask. Unlike PyTorch, where it is only a hint that
            accompanies an explicit causal ``attn_mask``.

        Returns
        -------
        output : ndarray, shape (N, L, E) or (L, E)
        weights : ndarray or None
            ``(N, L, S)`` (``(N, H, L, S)`` with
            ``average_attn_weights=False``), without ``N`` for unbatched
            inputs; None with ``need_weights=False``. Rows of queries that
            could attend to something sum to 1; fully masked rows are 0.

        Raises
        ------
        TypeError
            If an input is not real numbers, a mask is an integer array, or
            a flag is not a bool.
        ValueError
            If shapes do not fit the layer or each other (the message names
            the argument), or an input holds NaN.
        """
        need_weights = as_bool(need_weights, "need_weights")
        average = as_bool(average_attn_weights, "average_attn_weights")
        is_causal = as_bool(is_causal, "is_causal")
        self_attention = query is key and key is value and self._packed
        q_in, k_in, v_in, batched = self._inputs(query, key, value)
        N, L, _ = q_in.shape
        S = k_in.shape[1]
        E = self.embed_dim
        mask = self._mask(key_padding_mask, attn_mask, is_causal, N, L, S, batched)

        # The heads are a batch axis of the layer. The sequences are taken a
        # few at a time, so that the scores, (n, H, L, S) for n sequences, stay
        # near _SCORES_PER_STEP elements: bounded memory, and the softmax's
        # passes over them run in cache. The groups are independent: with
        # BLAS on several threads they are shared among as many Python threads
        # (NumPy releases the GIL), each with one BLAS thread, so that the
        # softmax's passes run on every core too.
        H = self.num_heads
        step = max(1, _SCORES_PER_STEP // max(1, H * L * S))
        groups = [slice(n, n + step) for n in range(0, N, step)]
        out = np.empty((N, L, E), dtype=self.dtype)
        weights = None
        if need_weights:
            weights = np.empty((N, L, S) if average else (N, H, L, S), dtype=self.dtype)

        def attend(parts):
            layer = self._layer()  # one per thread: a layer keeps its last weights
            for part in parts:
                kv = {} if self_attention else {"x_kv": k_in[part], "x_v": v_in[part]}
                out[part] = layer.forward(
                    q_in[part], attn_mask=_rows(mask, part), need_weights=need_weights, **kv
                )
                if need_weights and average:  # the mean over heads, written in place
                    np.add.reduce(layer.weights, axis=1, out=weights[part])
                    weights[part] /= H
                elif need_weights:
                    weights[part] = layer.weights

        run_in_threads(attend, groups)
        if not batched:
            out = out[0]
            weights = None if weights is None else weights[0]
        return out, weights
