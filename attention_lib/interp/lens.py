"""Reading the residual stream with the output layer: the logit lens and direct logit attribution.

The output layer reads the last residual stream: ``logits = norm(x_L) W_U +
b_U``. The *logit lens* (nostalgebraist, 2020) applies it to the stream
after each block, ``norm(x_l) W_U + b_U``: the layer at which the answer
becomes the top token. *Direct logit attribution* splits the last stream
into what each head wrote, ``x_L = ... + sum_h z_h W_O[h] + ...``, and
passes each piece through the output layer with the final norm's scale
frozen at its value for ``x_L`` (for LayerNorm each piece is also centred):
the part of a logit each head writes directly, not through later layers.
"""

from __future__ import annotations

import numpy as np

from .hooks import Hooks, layout, run

__all__ = ["logit_lens", "head_logit_attribution"]


def _readout(lay):
    if lay.W_U is None:
        raise ValueError(
            f"{type(lay.model).__name__} has no output layer over a vocabulary: the logit "
            f"lens and logit attribution need one (MiniLM's last layer is its output)"
        )
    return lay


def _position(position, T):
    if isinstance(position, (bool, np.bool_)) or not isinstance(position, (int, np.integer)):
        raise TypeError(f"position must be an integer, got {position!r}")
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside the input's {T} positions")
    return int(position)


def logit_lens(model, inputs, position: int = -1) -> np.ndarray:
    """The output layer applied to the residual stream after each block.

    Parameters
    ----------
    model : TinyGPT, Llama or Transformer (the decoder's stream)
    inputs : token ids (B, T), or a tuple of ``forward``'s arguments
    position : int, optional
        The position read (default the last).

    Returns
    -------
    ndarray, shape (n_blocks + 1, B, V)
        Row ``l`` reads the stream entering block ``l`` (row 0: the
        embeddings), the last row the stream leaving the last block: the
        model's own logits.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import TinyGPT
    >>> from attention_lib.interp import logit_lens
    >>> model = TinyGPT(n_vocab=10, d_model=8, n_heads=2, n_layers=2, d_ff=16,
    ...                 max_len=8, rng=np.random.default_rng(0))
    >>> ids = np.array([[1, 2, 3]])
    >>> lens = logit_lens(model, ids)
    >>> lens.shape, bool(np.allclose(lens[-1], model.forward(ids)[:, -1]))
    ((3, 1, 10), True)
    """
    lay = _readout(layout(model))
    names = [f"{p}.resid_pre" for p in lay.stream] + [f"{lay.stream[-1]}.resid_post"]
    with Hooks(model, record=names) as h:
        run(model, inputs)
    T = h[names[0]].shape[1]
    t = _position(position, T)
    x = np.stack([h[n][:, t] for n in names])  # (L + 1, B, d)
    norm = lay.norm  # applied here, not by its forward, which keeps state for backward
    c = x - x.mean(axis=-1, keepdims=True) if norm.centre else x
    y = c * _frozen_scale(norm, x) * norm.params["gamma"]
    if norm.centre:
        y = y + norm.params["beta"]
    logits = y @ lay.W_U
    return logits if lay.b_U is None else logits + lay.b_U


def head_logit_attribution(model, inputs, tokens, position: int = -1) -> np.ndarray:
    """What each head writes directly into the logits of ``tokens`` at ``position``.

    Parameters
    ----------
    model : TinyGPT, Llama or Transformer
    inputs : token ids (B, T), or a tuple of ``forward``'s arguments
    tokens : int or sequence of int
        The vocabulary entries scored (two of them give a logit difference).
    position : int, optional
        The position read (default the last).

    Returns
    -------
    ndarray, shape (n_layers, n_heads, B, K)
        Head ``h`` of attention layer ``l`` (:attr:`Layout.heads`):
        ``norm'(z_h W_O[h]) W_U[:, tokens]``, with the final norm linearised
        at the last stream (its ``1 / sigma`` frozen, LayerNorm's centring
        kept, no shift). Summed with the same term for every other part of
        the stream (embeddings, biases, feed-forward layers) and the norm's
        shift and output bias, it gives the logits.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.llama import Llama
    >>> from attention_lib.interp import head_logit_attribution
    >>> model = Llama(n_vocab=10, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2,
    ...               d_ff=24, max_len=12, rng=np.random.default_rng(0))
    >>> head_logit_attribution(model, np.array([[1, 2, 3]]), [4, 5]).shape
    (2, 4, 1, 2)
    """
    lay = _readout(layout(model))
    tokens = np.atleast_1d(np.asarray(tokens))
    V = lay.W_U.shape[1]
    if (
        tokens.ndim != 1
        or tokens.dtype.kind not in "iu"
        or (tokens < 0).any()
        or (tokens >= V).any()
    ):
        raise ValueError(f"tokens must be token ids in [0, {V}), got {tokens.tolist()!r}")
    names = [f"{a}.z" for a in lay.heads]
    last = f"{lay.stream[-1]}.resid_post"
    with Hooks(model, record=names + [last]) as h:
        run(model, inputs)
    x = h[last]
    t = _position(position, x.shape[1])
    inv = _frozen_scale(lay.norm, x[:, t])  # (B, 1)
    gamma = lay.norm.params["gamma"]
    U = lay.W_U[:, tokens] * gamma[:, None]  # (d, K): the scale folded in
    out = []
    for a, n in zip(lay.heads, names):
        att = lay.attns[a]
        z = h[n][:, :, t]  # (B, H, d_head)
        W_O = att.params["W_O"].reshape(att.n_heads, -1, att.params["W_O"].shape[1])
        c = np.einsum("bhd,hde->hbe", z, W_O)  # (H, B, d_model): each head's write
        if lay.norm.centre:
            c = c - c.mean(axis=-1, keepdims=True)
        out.append((c * inv[None]) @ U)
    return np.stack(out)


def _frozen_scale(norm, x):
    """``1 / sigma`` (LayerNorm) or ``1 / rms`` (RMSNorm) of the rows ``x`` (..., d): (..., 1)."""
    c = x - x.mean(axis=-1, keepdims=True) if norm.centre else x
    return 1 / np.sqrt((c * c).mean(axis=-1, keepdims=True) + norm.eps)
