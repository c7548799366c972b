"""Additive (Bahdanau) attention with learned weights, one decoder step at a time.

Chapter 2 computed ``e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j)`` with random
weights (:mod:`attention_lib.additive`); this layer learns ``W_a, U_a, v_a``.
The score itself is :func:`attention_lib.additive.projected_scores`, the same
function chapter 2's :func:`~attention_lib.additive_scores` calls; the layer
adds a batch axis, padding masks, and the backward pass.

A decoder calls :meth:`AdditiveAttention.set_keys` once per batch (``U_a h_j``
does not change from step to step), then :meth:`~AdditiveAttention.step` at
every decoder step, and, backwards, :meth:`~AdditiveAttention.step_backward`
for each step in reverse and :meth:`~AdditiveAttention.keys_backward` once.
"""

import numpy as np
from numpy.random import Generator
from numpy.typing import ArrayLike, DTypeLike

from .._checks import (
    as_float_dtype,
    as_float_input,
    as_int,
    as_mask_01,
    as_rng,
    require_forward,
    require_shape,
)
from ..additive import projected_scores
from ..softmax import softmax, softmax_backward


class AdditiveAttention:
    """Learned additive attention of a decoder state over encoder states.

    Parameters
    ----------
    d_h : int
        Size of an encoder state ``h_j`` (``2H`` for a bidirectional encoder).
    d_s : int
        Size of the decoder state ``s_{i-1}``.
    d_a : int
        Size of the score's hidden layer.
    rng : numpy.random.Generator
        Draws ``U_a, W_a, v`` with variance ``1 / fan-in``.
    dtype : numpy dtype, optional
        float32 (default) or float64.

    Notes
    -----
    Shapes, for a batch of ``B`` sentences padded to ``S`` words::

        H (B, S, d_h) --U_a--> UH (B, S, d_a)            once per batch
        s (B, d_s)    --W_a--> Ws (B, d_a)               every step
        e     = tanh(Ws + UH) v          (B, S)          -inf at padding
        alpha = softmax_j(e)             (B, S)
        c     = sum_j alpha_j h_j        (B, d_h)

    Backward, with ``g = d loss / d c``: ``d alpha_j = g . h_j``;
    ``de_j = alpha_j (d alpha_j - sum_k alpha_k d alpha_k)`` (the softmax's
    Jacobian); then back through ``tanh`` into ``v``, ``W_a`` (and ``s``) and
    ``U_a`` (and ``H``); ``h_j`` also receives ``alpha_j g`` from the average.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import AdditiveAttention
    >>> att = AdditiveAttention(6, 4, 5, np.random.default_rng(0))
    >>> H = np.ones((2, 3, 6), np.float32)
    >>> att.set_keys(H, np.array([[1, 1, 1], [1, 1, 0]], bool))
    >>> c, alpha, cache = att.step(np.zeros((2, 4), np.float32))
    >>> c.shape, alpha.astype(float).round(3).tolist()
    ((2, 6), [[0.333, 0.333, 0.333], [0.5, 0.5, 0.0]])
    """

    def __init__(
        self, d_h: int, d_s: int, d_a: int, rng: Generator, dtype: DTypeLike = np.float32
    ) -> None:
        d_h, d_s, d_a = (
            as_int(n, name, 1) for n, name in ((d_h, "d_h"), (d_s, "d_s"), (d_a, "d_a"))
        )
        dtype, rng = as_float_dtype(dtype), as_rng(rng)
        self.params = {
            "U_a": rng.normal(scale=d_h**-0.5, size=(d_h, d_a)).astype(dtype),
            "W_a": rng.normal(scale=d_s**-0.5, size=(d_s, d_a)).astype(dtype),
            "v": rng.normal(scale=d_a**-0.5, size=d_a).astype(dtype),
        }
        self.grads = {k: np.zeros_like(p) for k, p in self.params.items()}
        self.H = None

    def set_keys(self, H: ArrayLike, mask: ArrayLike | None = None) -> None:
        """Take the encoder states ``H`` ``(B, S, d_h)`` and padding ``mask`` ``(B, S)`` (True = a word)."""
        H = as_float_input(H, "H")
        if H.ndim != 3:
            raise ValueError(f"H must have shape (B, S, d_h), got {H.shape}")
        if H.shape[-1] != self.params["U_a"].shape[0]:
            raise ValueError(
                f"H has {H.shape[-1]} features but U_a expects "
                f"{self.params['U_a'].shape[0]}: the last axes must match"
            )
        if mask is not None:
            mask = as_mask_01(mask, "mask", H.shape[:2], "(B, S)")
        self.H, self.mask = H, mask
        self.UH = H @ self.params["U_a"]  # (B, S, d_a)
        self.zero_grad()

    def zero_grad(self) -> None:
        """Start new sums: the gradients, and ``d loss / d H`` of the current keys."""
        require_forward(self.H, self, "zero_grad", "set_keys")
        self.grads = {k: np.zeros_like(p) for k, p in self.params.items()}
        self.dH = np.zeros_like(self.H)
        self.dUH = np.zeros_like(self.UH)

    def step(self, s: ArrayLike) -> tuple[np.ndarray, np.ndarray, tuple]:
        """Context ``c`` ``(B, d_h)`` and weights ``alpha`` ``(B, S)`` for decoder states ``s`` ``(B, d_s)``."""
        require_forward(self.H, self, "step", "set_keys")
        s = as_float_input(s, "s")
        require_shape(
            s, "s", (self.H.shape[0], self.params["W_a"].shape[0]), "(B, d_s), B as in the keys"
        )
        query = s @ self.params["W_a"]  # (B, d_a)
        hidden, e = projected_scores(self.UH, query, self.params["v"])
        if self.mask is not None:
            e = np.where(self.mask, e, -np.inf)
        alpha = softmax(e, axis=-1)  # (B, S)
        c = np.einsum("bs,bsd->bd", alpha, self.H)
        return c, alpha, (s, hidden, alpha)

    def step_backward(self, dc: np.ndarray, cache: tuple) -> np.ndarray:
        """From ``d loss / d c`` ``(B, d_h)``: returns ``d loss / d s`` and adds to the grads."""
        require_forward(self.H, self, "step_backward", "set_keys")
        dc = as_float_input(dc, "dc")
        require_shape(dc, "dc", (self.H.shape[0], self.H.shape[-1]), "(B, d_h)")
        s, hidden, alpha = cache
        d_alpha = np.einsum("bsd,bd->bs", self.H, dc)
        self.dH += alpha[:, :, None] * dc[:, None, :]
        de = softmax_backward(d_alpha, alpha)
        self.grads["v"] += np.einsum("bs,bsa->a", de, hidden)
        d_pre = de[:, :, None] * self.params["v"] * (1 - hidden * hidden)  # (B, S, d_a)
        self.dUH += d_pre
        d_Ws = d_pre.sum(axis=1)  # (B, d_a)
        self.grads["W_a"] += s.T @ d_Ws
        return d_Ws @ self.params["W_a"].T

    def keys_backward(self) -> np.ndarray:
        """After every :meth:`step_backward`: ``d loss / d H`` ``(B, S, d_h)``; sets the ``U_a`` grad."""
        require_forward(self.H, self, "keys_backward", "set_keys")
        H, dUH = self.H, self.dUH
        self.grads["U_a"] = H.reshape(-1, H.shape[-1]).T @ dUH.reshape(-1, dUH.shape[-1])
        return self.dH + dUH @ self.params["U_a"].T
