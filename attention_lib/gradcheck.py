"""Checking a hand-written backward pass against central differences.

Every layer in :mod:`attention_lib.nn` computes its gradients by hand, and
each is checked the same way: nudge one number of a parameter (or input) up
and down by ``eps``, recompute the loss, and compare

    (loss(theta + eps) - loss(theta - eps)) / (2 eps)

with the gradient the backward pass gave. In float64 the central difference
is accurate to about ``eps^2`` (truncation) plus ``1e-16 / eps`` (rounding),
so with ``eps = 1e-6`` a correct gradient agrees to about ``1e-9`` relative,
and a wrong one (a missed term, a transposed product) is off by far more.
"""

import numpy as np

#: The relative error a correct float64 gradient stays below.
TOLERANCE = 1e-6


def numerical_gradient(f, x, eps=1e-6):
    """Central differences of the scalar ``f()`` with respect to the array ``x``.

    Parameters
    ----------
    f : callable
        Takes no argument and returns a number computed from ``x``.
    x : ndarray of float64
        Changed in place, one entry at a time, and restored afterwards.
    eps : float, optional
        The step (default ``1e-6``).

    Returns
    -------
    ndarray, the shape of ``x``

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.gradcheck import numerical_gradient
    >>> x = np.array([1.0, 2.0])
    >>> numerical_gradient(lambda: float(np.sum(x ** 2)), x).round(6)
    array([2., 4.])
    """
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = f()
        x[i] = old - eps
        down = f()
        x[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


def relative_error(a, b, floor=1e-3):
    """Largest difference between ``a`` and ``b``, relative to their largest entry.

    The denominator is at least ``floor``, so gradients that are nearly zero
    everywhere do not turn the finite differences' own rounding (about
    ``1e-10``) into a large relative error.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.gradcheck import relative_error
    >>> round(relative_error(np.array([1.0, 2.0]), np.array([1.0, 2.002])), 6)  # 0.002 / 2.002
    0.000999
    """
    scale = max(np.max(np.abs(a), initial=0), np.max(np.abs(b), initial=0), floor)
    return float(np.max(np.abs(a - b), initial=0) / scale)


def check_gradients(layers, loss, run_backward, inputs=(), tol=TOLERANCE, eps=1e-6):
    """Compare every gradient of ``layers`` (and of ``inputs``) with central differences.

    Parameters
    ----------
    layers : list of layers
        Each has ``params`` and, after ``run_backward()``, ``grads`` with the
        same keys.
    loss : callable
        ``loss()`` runs the forward pass and returns a number.
    run_backward : callable
        Runs the forward and backward passes once and returns the gradients
        with respect to ``inputs`` (a sequence, in the same order).
    inputs : sequence of ndarray, optional
        Inputs whose gradients ``run_backward`` returns.
    tol : float, optional
        Largest relative error accepted (default :data:`TOLERANCE`).
    eps : float, optional
        The finite-difference step (default ``1e-6``).

    Returns
    -------
    float
        The largest relative error found.

    Raises
    ------
    AssertionError
        Naming the layer (its position and class), the parameter or input,
        and the error, for the first gradient that is off.

    Notes
    -----
    The errors are relative to the larger gradient, or to a floor: 1e-3, or
    more when the loss is large, since a difference quotient cannot resolve
    less than about ``|loss| * 2.2e-16 / eps`` (a gradient that is zero in
    theory, such as that of a bias on the keys, comes out as that noise).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import Linear
    >>> from attention_lib.gradcheck import check_gradients
    >>> rng = np.random.default_rng(0)
    >>> layer, x = Linear(3, 2, rng), rng.normal(size=(4, 3))
    >>> err = check_gradients([layer], lambda: np.sum(layer.forward(x) ** 2),
    ...                       lambda: [layer.backward(2 * layer.forward(x))], [x])
    >>> err < 1e-6
    True
    """
    d_inputs = list(run_backward())
    grads = [{k: np.array(g, copy=True) for k, g in layer.grads.items()} for layer in layers]
    floor = max(1e-3, 10 * abs(float(loss())) * np.finfo(np.float64).eps / (eps * tol))
    worst = 0.0
    for i, layer in enumerate(layers):
        where = f"layer {i} ({type(layer).__name__})"
        if set(grads[i]) != set(layer.params):
            raise AssertionError(
                f"{where}: grads has {sorted(grads[i])} but params has {sorted(layer.params)}"
            )
        for name, param in layer.params.items():
            err = relative_error(grads[i][name], numerical_gradient(loss, param, eps), floor)
            if not err < tol:
                raise AssertionError(f"{where}, parameter {name}: relative error {err:.3g}")
            worst = max(worst, err)
    for j, (x, dx) in enumerate(zip(inputs, d_inputs)):
        err = relative_error(dx, numerical_gradient(loss, x, eps), floor)
        if not err < tol:
            raise AssertionError(f"input {j}: relative error {err:.3g}")
        worst = max(worst, err)
    return worst
