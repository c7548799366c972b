"""Dropout: zero a random fraction of the activations while training."""

import numpy as np


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

    def __init__(self, p, rng=None):
        if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) \
                or not 0 <= p < 1:
            raise ValueError(f"p must be a probability in [0, 1), got {p!r}: "
                             f"p = 1 would drop everything")
        if p > 0 and rng is None:
            raise ValueError("Dropout with p > 0 needs rng, a numpy.random.Generator")
        self.p, self.rng, self.training = float(p), rng, True
        self.params, self.grads = {}, {}

    def forward(self, x):
        if not self.training or self.p == 0:
            self.mask = None
            return x
        # Draw in float32 for float32 inputs (half the memory traffic); float64
        # inputs keep float64 draws, so seeded float64 runs are unchanged.
        draw = np.float32 if x.dtype == np.float32 else np.float64
        keep = self.rng.random(x.shape, dtype=draw) >= self.p
        self.mask = keep * x.dtype.type(1.0 / (1.0 - self.p))
        return x * self.mask

    def backward(self, grad):
        return grad if self.mask is None else grad * self.mask
