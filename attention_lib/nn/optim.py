"""Optimisers: update the ``params`` of a list of layers from their ``grads``."""

import numbers
from collections.abc import Sequence

import numpy as np


def _hyper(value, name, low, high=None):
    """``value`` as a float in ``[low, high)`` (``high=None``: no upper end).

    The ranges are ``torch.optim.Adam``'s, plus finiteness: a NaN or infinite
    step size or decay rate turns every parameter into NaN at the first step.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    allowed = f"0 <= {name} < 1" if high is not None else f"{name} >= 0 and finite"
    if not np.isfinite(value) or value < low or (high is not None and value >= high):
        raise ValueError(f"{name} must satisfy {allowed}, got {value!r}")
    return value


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

    Raises
    ------
    ValueError
        If ``lr`` or ``eps`` is negative or not finite, or a beta is outside
        ``[0, 1)`` (the ranges ``torch.optim.Adam`` accepts, finite); if the
        same parameter array is listed twice;
        from :meth:`step`, if a parameter has no gradient yet or a gradient
        of the wrong shape.
    TypeError
        If a hyper-parameter is not a real number or ``betas`` not a pair.

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

    def __init__(
        self,
        layers: Sequence,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.layers = list(layers)
        owner = {}
        for i, layer in enumerate(self.layers):
            for name, theta in layer.params.items():
                if id(theta) in owner:
                    raise ValueError(
                        f"parameter {name!r} of layer {i} ({type(layer).__name__}) is also "
                        f"{owner[id(theta)]}: each step would move it twice. List each "
                        f"layer once (a model's layers() already holds its sub-layers), "
                        f"as torch.optim refuses a parameter given twice"
                    )
                owner[id(theta)] = f"parameter {name!r} of layer {i}"
        self.lr = _hyper(lr, "lr", 0.0)
        self.eps = _hyper(eps, "eps", 0.0)
        try:
            beta1, beta2 = betas
        except (TypeError, ValueError):
            raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}") from None
        self.beta1 = _hyper(beta1, "betas[0]", 0.0, 1.0)
        self.beta2 = _hyper(beta2, "betas[1]", 0.0, 1.0)
        self.t = 0
        self.m = [{k: np.zeros_like(a) for k, a in layer.params.items()} for layer in self.layers]
        self.v = [{k: np.zeros_like(a) for k, a in layer.params.items()} for layer in self.layers]

    def step(self) -> None:
        """Update every parameter once from the gradients in ``grads``.

        Every gradient is checked before any parameter moves, so a missing
        one leaves the model as it was.
        """
        for i, layer in enumerate(self.layers):
            for name, theta in layer.params.items():
                g = getattr(layer, "grads", {}).get(name)
                if g is None:
                    raise ValueError(
                        f"layer {i} ({type(layer).__name__}) has no gradient for "
                        f"parameter {name!r}: call the model's backward() before step()"
                    )
                if np.shape(g) != theta.shape:
                    raise ValueError(
                        f"layer {i} ({type(layer).__name__}): the gradient of {name!r} has "
                        f"shape {np.shape(g)} but the parameter has shape {theta.shape}"
                    )
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
