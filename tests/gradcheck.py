"""Central-difference checks of every parameter of a layer or model (float64)."""

import numpy as np

from test_backward import FD_TOLERANCE, numerical_gradient, relative_error


def check_all_gradients(layers, loss, run_backward, inputs=()):
    """Compare ``grads`` of every layer in ``layers`` (and ``d loss / d input``
    returned by ``run_backward`` for each array in ``inputs``) with central
    differences of the scalar ``loss()``."""
    d_inputs = run_backward()
    grads = [{k: g.copy() for k, g in layer.grads.items()} for layer in layers]
    for i, layer in enumerate(layers):
        assert set(grads[i]) == set(layer.params), type(layer).__name__
        for name, param in layer.params.items():
            numeric = numerical_gradient(loss, param)
            err = relative_error(grads[i][name], numeric)
            assert err < FD_TOLERANCE, (type(layer).__name__, name, err)
    for x, dx in zip(inputs, d_inputs):
        assert relative_error(dx, numerical_gradient(loss, x)) < FD_TOLERANCE
