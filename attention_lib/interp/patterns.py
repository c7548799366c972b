"""Heads found by where they look: the weight each head puts at a fixed distance back.

A *previous-token head* puts its weight on the position just before the
query (distance 1). On a sequence repeated once, ``[x_1 .. x_n, x_1 .. x_n]``,
an *induction head* at the second copy's position ``p`` looks at the token
that followed the earlier occurrence of ``x_p``: position ``p - n + 1``,
distance ``n - 1``. Scores are what heads look at; whether they matter is for
ablation and patching to say.
"""

from __future__ import annotations

import numpy as np

from .hooks import Hooks, layout, run

__all__ = ["offset_attention"]


def offset_attention(model, inputs, offset: int, start: int | None = None, layers=None):
    """Each head's mean attention weight on the key ``offset`` positions before its query.

    Parameters
    ----------
    model : TinyGPT, Llama, MiniLM or Transformer
    inputs : token ids (B, T), or a tuple of ``forward``'s arguments
    offset : int
        The distance back: 1 for previous-token heads, ``n - 1`` for
        induction heads on a sequence of period ``n``.
    start : int, optional
        The first query position scored (default ``offset``; ``n`` for the
        second copy of a repeated sequence).
    layers : list, optional
        Attention layers (indices or names; default :attr:`Layout.heads`).

    Returns
    -------
    ndarray, shape (n_layers, n_heads)
        The weight on key ``q - offset``, averaged over the queries
        ``q = start .. T - 1`` and the batch.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import TinyGPT
    >>> from attention_lib.interp import offset_attention
    >>> model = TinyGPT(n_vocab=10, d_model=8, n_heads=2, n_layers=2, d_ff=16,
    ...                 max_len=8, rng=np.random.default_rng(0))
    >>> seq = np.array([[3, 1, 4, 3, 1, 4]])              # period 3: induction at distance 2
    >>> offset_attention(model, seq, offset=2, start=3).shape
    (2, 2)
    """
    lay = layout(model)
    names = lay.heads if layers is None else [lay.attn_of(a) for a in layers]
    for value, what in ((offset, "offset"), (start, "start")):
        if value is not None and (
            isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer))
        ):
            raise TypeError(f"{what} must be an integer, got {value!r}")
    start = offset if start is None else start
    if offset < 0 or start < offset:
        raise ValueError(
            f"offset = {offset} and start = {start}: the offset must be >= 0 and the first "
            f"query at least offset positions in (start >= offset)"
        )
    with Hooks(model, record=[f"{a}.pattern" for a in names]) as h:
        run(model, inputs)
    out = []
    for a in names:
        P = h[f"{a}.pattern"]  # (B, H, T, S)
        T = P.shape[2]
        if start >= T:
            raise ValueError(f"start = {start} but the input has only {T} positions")
        q = np.arange(start, T)
        out.append(P[:, :, q, q - offset].mean(axis=(0, 2)))
    return np.stack(out)
