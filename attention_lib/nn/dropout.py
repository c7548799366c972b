"""Dropout: zero a random fraction of the activations while training."""

import numpy as np
from numpy.random import Generator
from numpy.typing import ArrayLike

from .._checks import as_float_input, as_probability, as_rng, require_forward


class Dropout:
    """Inverted dropout: keep each entry with probability ``1 - p``, scaled by ``1 / (1 - p)``.

    The scaling keeps every entry's expected value unchanged, so nothing
    needs rescaling at test time, when the layer is the identity.

    Parameters
    ----------
    p : float
        Probability of zeroing an entry, in ``[0, 1)``.
    rng : numpy.random.Generator
        Draws the masks (a new one at every forward pass while training).

    Attributes
    ----------
    training : bool
        True (the default) drops; False makes the layer the identity.

    Notes
    -----
    The backward multiplies the gradient by the same scaled mask as the
    forward: a dropped entry passes no gradient. With ``p = 0`` or
    ``training = False`` no random numbers are drawn.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import Dropout
    >>> drop = Dropout(0.5, np.random.default_rng(0))
    >>> y = drop.forward(np.ones(8))
    >>> sorted(set(y.tolist()))
    [0.0, 2.0]
    >>> drop.training = False
    >>> drop.forward(np.ones(3))
    array([1., 1., 1.])
    """

    def __init__(self, p: float, rng: Generator | None = None) -> None:
        try:
            p = as_probability(p, "p")
        except ValueError as err:
            raise ValueError(f"{err}: p = 1 would drop everything") from None
        if p > 0 and rng is None:
            raise ValueError("Dropout with p > 0 needs rng, a numpy.random.Generator")
        if rng is not None:
            as_rng(rng)
        self.p, self.rng, self.training = p, rng, True
        self.params, self.grads = {}, {}
        self.mask, self.shape = None, None

    def forward(self, x: ArrayLike) -> np.ndarray:
        # An integer x would cast the scale 1 / (1 - p) to an integer (1): refused.
        x = as_float_input(x, "x")
        self.shape = x.shape
        if not self.training or self.p == 0:
            self.mask = None
            return x
        # Draw in float32 for float32 inputs (half the memory traffic); float64
        # inputs keep float64 draws, so seeded float64 runs are unchanged.
        draw = np.float32 if x.dtype == np.float32 else np.float64
        keep = self.rng.random(x.shape, dtype=draw) >= self.p
        self.mask = keep * x.dtype.type(1.0 / (1.0 - self.p))
        return x * self.mask

    def backward(self, grad: np.ndarray) -> np.ndarray:
        require_forward(self.shape, self)
        if np.shape(grad) != self.shape:
            raise ValueError(
                f"grad must have the shape of forward's output {self.shape}, got {np.shape(grad)}"
            )
        return grad if self.mask is None else grad * self.mask
