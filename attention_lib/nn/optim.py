"""Optimisers: update the ``params`` of a list of layers from their ``grads``."""

import numpy as np


class Adam:
    """The Adam optimiser (Kingma and Ba, 2015).

    For every parameter ``theta`` with gradient ``g``, at step ``t = 1, 2, ...``::

        m = beta1 m + (1 - beta1) g          running mean of the gradient
        v = beta2 v + (1 - beta2) g**2       running mean of its square
        m_hat = m / (1 - beta1**t)           undo the bias towards the
        v_hat = v / (1 - beta2**t)           zero starting values
        theta -= lr m_hat / (sqrt(v_hat) + eps)

    Each parameter moves by about ``lr`` per step whatever the size of its
    gradient: the ratio ``m_hat / sqrt(v_hat)`` is near +-1 when the
    gradient keeps its sign, and small when it flips from step to step.

    Parameters
    ----------
    layers : sequence
        Objects with ``params`` and ``grads`` dicts (the layers of this
        module); their ``params`` arrays are updated in place.
    lr : float, optional
        Step size (default 1e-3, the paper's).
    betas : (float, float), optional
        Decay rates of the two running means (default (0.9, 0.999)).
    eps : float, optional
        Keeps the division finite (default 1e-8).

    Examples
    --------
    The first step moves every parameter by ``lr`` against the sign of its
    gradient (``m_hat = g`` and ``v_hat = g**2``):

    >>> import numpy as np
    >>> from attention_lib.nn import Adam, Linear
    >>> layer = Linear(2, 1, np.random.default_rng(0), bias=False)
    >>> before = layer.params["W"].copy()
    >>> layer.grads["W"] = np.array([[3.0], [-0.5]])
    >>> Adam([layer], lr=0.1).step()
    >>> (layer.params["W"] - before).round(6)
    array([[-0.1],
           [ 0.1]])
    """

    def __init__(self, layers, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        self.layers = list(layers)
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.t = 0
        self.m = [{k: np.zeros_like(a) for k, a in layer.params.items()}
                  for layer in self.layers]
        self.v = [{k: np.zeros_like(a) for k, a in layer.params.items()}
                  for layer in self.layers]

    def step(self):
        """Update every parameter once from the gradients in ``grads``."""
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        for layer, m, v in zip(self.layers, self.m, self.v):
            for name, theta in layer.params.items():
                g = layer.grads[name]
                m[name] = b1 * m[name] + (1 - b1) * g
                v[name] = b2 * v[name] + (1 - b2) * g**2
                m_hat = m[name] / (1 - b1**self.t)
                v_hat = v[name] / (1 - b2**self.t)
                theta -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
