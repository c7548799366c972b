"""Input checks shared by the attention functions.

Every public function converts its inputs here, so a reader who passes the
wrong thing gets a message in the book's vocabulary (argument names and
shapes) instead of an error from deep inside NumPy.
"""

import numpy as np


def as_numeric(x, name):
    """Return ``x`` as an ndarray, or raise ``TypeError`` if it is not real numbers."""
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:  # ragged lists and the like
        raise TypeError(f"{name} must be an array of real numbers: {err}") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must be an array of real numbers, got dtype {arr.dtype}"
        )
    return arr


def float_dtype(*arrays):
    """The floating dtype a computation on ``arrays`` is carried out in.

    Floating inputs keep their precision (float32 stays float32, mixing with
    float64 gives float64); float16 is computed in float32; integer and
    boolean inputs are computed in float64.
    """
    if all(a.dtype.kind == "f" for a in arrays):
        return np.result_type(np.float32, *arrays)
    return np.dtype(np.float64)


def as_float(x, name, dtype=None):
    """Return ``x`` as a floating array (see :func:`float_dtype`)."""
    arr = as_numeric(x, name)
    return arr.astype(dtype or float_dtype(arr), copy=False)


def require_ndim(arr, name, ndim, layout):
    """Raise ``ValueError`` unless ``arr`` has at least ``ndim`` axes."""
    if arr.ndim < ndim:
        raise ValueError(
            f"{name} must have at least {ndim} axes {layout}, "
            f"got shape {arr.shape}"
        )


def require_finite(arr, name):
    """Raise ``ValueError`` if ``arr`` holds NaN or infinity."""
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinity")


def as_int(n, name, minimum=0):
    """Return ``n`` as an int, or raise if it is not an integer ``>= minimum``."""
    what = "a positive integer" if minimum == 1 else "an integer"
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{name} must be {what}, got {n!r}")
    if n < minimum:
        bound = {0: "non-negative", 1: "a positive integer"}.get(minimum, f"at least {minimum}")
        raise ValueError(f"{name} must be {bound}, got {n}")
    return int(n)
