"""The gated recurrent unit (GRU), with its backward pass through time.

The equations and gate order are PyTorch's ``nn.GRU`` (reset ``r``, update
``z``, candidate ``n``), so a GRU here and one there give the same numbers
from the same weights. With row vectors, input ``x_t`` and previous state
``h_{t-1}``::

    r_t = sigmoid(x_t W_ir + b_ir + h_{t-1} W_hr + b_hr)
    z_t = sigmoid(x_t W_iz + b_iz + h_{t-1} W_hz + b_hz)
    n_t = tanh(x_t W_in + b_in + r_t * (h_{t-1} W_hn + b_hn))
    h_t = (1 - z_t) * n_t + z_t * h_{t-1}

The three gates' weights sit side by side: ``W_ih`` is ``(d_in, 3H)`` with
columns ``[r | z | n]``, the transpose of PyTorch's ``weight_ih_l0``.

Padding: a mask ``m_t`` (1 at real words, 0 at padding) freezes the state,
``h_t = m_t * GRU(x_t, h_{t-1}) + (1 - m_t) * h_{t-1}``, so a padded sentence
ends in the same state as the unpadded one, and a backward-running GRU starts
at its sentence's last real word.
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


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large |x|


class GRUCell:
    """One GRU step, ``h_t = GRU(x_t, h_{t-1})``, and its backward.

    Parameters
    ----------
    d_in, hidden : int
        Sizes of the input ``x_t`` and of the state ``h_t``.
    rng : numpy.random.Generator
        Draws every weight and bias from ``U(-1/sqrt(H), 1/sqrt(H))``, as PyTorch does.
    dtype : numpy dtype, optional
        float32 (default) to train, float64 to check gradients.

    Notes
    -----
    The step keeps a small cache and :meth:`step_backward` takes it back, so
    a model can interleave steps with other layers (the decoder does). The
    gradients of the weights *add up* in ``grads`` over the steps of a
    sequence; :meth:`zero_grad` starts a new sum.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import GRUCell
    >>> cell = GRUCell(3, 4, np.random.default_rng(0))
    >>> h, cache = cell.step(np.ones((2, 3), np.float32), np.zeros((2, 4), np.float32))
    >>> h.shape, h.dtype
    ((2, 4), dtype('float32'))
    >>> cell.zero_grad()
    >>> dx, dh = cell.step_backward(np.ones((2, 4), np.float32), cache)
    >>> dx.shape, cell.grads["W_hh"].shape
    ((2, 3), (4, 12))
    """

    def __init__(
        self, d_in: int, hidden: int, rng: Generator, dtype: DTypeLike = np.float32
    ) -> None:
        d_in, H = as_int(d_in, "d_in", 1), as_int(hidden, "hidden", 1)
        dtype, rng = as_float_dtype(dtype), as_rng(rng)
        k = 1.0 / np.sqrt(H)
        u = lambda *shape: rng.uniform(-k, k, size=shape).astype(dtype)
        self.params = {
            "W_ih": u(d_in, 3 * H),
            "W_hh": u(H, 3 * H),
            "b_ih": u(3 * H),
            "b_hh": u(3 * H),
        }
        self.d_in, self.hidden = d_in, H
        self.zero_grad()

    def zero_grad(self) -> None:
        self.grads = {k: np.zeros_like(v) for k, v in self.params.items()}

    def input_gates(self, x: np.ndarray) -> np.ndarray:
        """``x W_ih + b_ih``: the input's share of all three gates, ``(..., 3H)``.

        It does not depend on the state, so a whole sequence's can be computed
        in one product before the loop.
        """
        return x @ self.params["W_ih"] + self.params["b_ih"]

    def step(
        self, x: ArrayLike, h: np.ndarray, mask: ArrayLike | None = None
    ) -> tuple[np.ndarray, tuple]:
        """One step from input ``x`` ``(B, d_in)`` and state ``h`` ``(B, H)``.

        Returns the new state ``(B, H)`` and the cache for :meth:`step_backward`.
        """
        x = as_float_input(x, "x")
        require_shape(x, "x", (None, self.d_in), "(B, d_in)")
        h = self._check_state(h, "h", x.shape[0])
        if mask is not None:
            mask = as_mask_01(mask, "mask", (x.shape[0],), "(B,)")
        h_new, cache = self.step_gates(self.input_gates(x), h, mask)
        return h_new, (x, cache)

    def _check_state(self, h, name, B):
        h = as_float_input(h, name)
        require_shape(h, name, (B, self.hidden), "(B, hidden)")
        return h

    def step_gates(
        self, gi: np.ndarray, h: np.ndarray, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, tuple]:
        """:meth:`step` from precomputed input gates ``gi = x W_ih + b_ih``."""
        H = self.hidden
        gh = h @ self.params["W_hh"] + self.params["b_hh"]  # (B, 3H)
        r = _sigmoid(gi[:, :H] + gh[:, :H])
        z = _sigmoid(gi[:, H : 2 * H] + gh[:, H : 2 * H])
        n = np.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
        h_new = (1 - z) * n + z * h
        if mask is not None:  # padding keeps the old state
            m = mask[:, None].astype(h.dtype)
            h_new = m * h_new + (1 - m) * h
        return h_new, (h, r, z, n, gh[:, 2 * H :], mask)

    def step_backward(self, dh_new: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray]:
        """Backward of :meth:`step`: returns ``(dx, dh)`` and adds to ``grads``."""
        x, cache = cache
        dgi, dh = self.step_gates_backward(dh_new, cache)
        self.grads["W_ih"] += x.T @ dgi
        self.grads["b_ih"] += dgi.sum(axis=0)
        return dgi @ self.params["W_ih"].T, dh

    def step_gates_backward(
        self, dh_new: np.ndarray, cache: tuple
    ) -> tuple[np.ndarray, np.ndarray]:
        """Backward of :meth:`step_gates`: returns ``(d gi, dh)``; adds the ``W_hh, b_hh`` grads."""
        h, r, z, n, gh_n, mask = cache
        dh_keep = 0.0
        if mask is not None:
            m = mask[:, None].astype(h.dtype)
            dh_keep = (1 - m) * dh_new
            dh_new = m * dh_new
        dn = dh_new * (1 - z)
        dz = dh_new * (h - n)
        da_n = dn * (1 - n * n)  # through tanh
        da_r = da_n * gh_n * r * (1 - r)  # through r * (h W_hn + b_hn), then sigmoid
        da_z = dz * z * (1 - z)
        dgi = np.concatenate([da_r, da_z, da_n], axis=1)
        dgh = np.concatenate([da_r, da_z, da_n * r], axis=1)
        self.grads["W_hh"] += h.T @ dgh
        self.grads["b_hh"] += dgh.sum(axis=0)
        dh = dh_new * z + dgh @ self.params["W_hh"].T + dh_keep
        return dgi, dh


class GRU(GRUCell):
    """A GRU run over a whole (padded) sequence, forwards or backwards in time.

    Parameters
    ----------
    d_in, hidden, rng, dtype
        As for :class:`GRUCell`.
    reverse : bool, optional
        Run from the last word to the first (the backward half of a
        bidirectional encoder). Padding at the end is skipped by the mask, so
        each sentence starts from its own last real word.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import GRU
    >>> gru = GRU(3, 4, np.random.default_rng(0))
    >>> x = np.ones((2, 5, 3), np.float32)
    >>> mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    >>> hs = gru.forward(x, mask)          # (B, T, H): the state after each word
    >>> hs.shape, bool(np.allclose(hs[1, 2], hs[1, 4]))    # padding freezes the state
    ((2, 5, 4), True)
    >>> dx = gru.backward(np.ones_like(hs))
    >>> dx.shape
    (2, 5, 3)
    """

    def __init__(
        self,
        d_in: int,
        hidden: int,
        rng: Generator,
        dtype: DTypeLike = np.float32,
        reverse: bool = False,
    ) -> None:
        super().__init__(d_in, hidden, rng, dtype)
        self.reverse = bool(reverse)
        self.caches = None

    def forward(
        self, x: ArrayLike, mask: ArrayLike | None = None, h0: np.ndarray | None = None
    ) -> np.ndarray:
        """States ``(B, T, H)`` for inputs ``x`` ``(B, T, d_in)``; ``mask`` ``(B, T)``."""
        x = as_float_input(x, "x")
        require_shape(x, "x", (None, None, self.d_in), "(B, T, d_in)")
        B, T, _ = x.shape
        if mask is not None:
            mask = as_mask_01(mask, "mask", (B, T), "(B, T)")
        dtype = np.result_type(x, self.params["W_ih"])  # never the input's integers
        h = np.zeros((B, self.hidden), dtype) if h0 is None else self._check_state(h0, "h0", B)
        self.caches = None  # a failed forward leaves nothing to go back through
        gi = self.input_gates(x)  # (B, T, 3H), one product
        hs = np.empty((B, T, self.hidden), np.result_type(dtype, h))
        caches = [None] * T
        for t in range(T - 1, -1, -1) if self.reverse else range(T):
            h, caches[t] = self.step_gates(gi[:, t], h, None if mask is None else mask[:, t])
            hs[:, t] = h
        self.x, self.mask, self.caches = x, mask, caches
        return hs

    def backward(self, dhs: np.ndarray) -> np.ndarray:
        """From ``d loss / d hs`` ``(B, T, H)``: ``dx`` ``(B, T, d_in)``; sets ``grads``.

        The gradient of the initial state is kept in ``dh0``.
        """
        require_forward(self.caches, self)
        dhs = as_float_input(dhs, "dhs")
        require_shape(
            dhs,
            "dhs",
            (self.x.shape[0], self.x.shape[1], self.hidden),
            "(B, T, hidden), the shape of forward's output",
        )
        self.zero_grad()
        B, T, _ = dhs.shape
        dgi = np.empty((B, T, 3 * self.hidden), dhs.dtype)
        dh = np.zeros((B, self.hidden), dhs.dtype)
        for t in range(T) if self.reverse else range(T - 1, -1, -1):
            dgi[:, t], dh = self.step_gates_backward(dhs[:, t] + dh, self.caches[t])
        self.dh0 = dh
        x = self.x
        self.grads["W_ih"] += x.reshape(-1, x.shape[-1]).T @ dgi.reshape(-1, dgi.shape[-1])
        self.grads["b_ih"] += dgi.sum(axis=(0, 1))
        return dgi @ self.params["W_ih"].T
