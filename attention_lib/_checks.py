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
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
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
        raise ValueError(f"{name} must have at least {ndim} axes {layout}, got shape {arr.shape}")


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


def as_bool(flag, name):
    """Return ``flag`` as a bool, or raise ``TypeError`` unless it is one.

    A string such as ``"no"`` is truthy, so accepting any object would turn
    ``is_causal="no"`` into ``is_causal=True``.
    """
    if not isinstance(flag, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {flag!r}")
    return bool(flag)


def as_axis(axis, ndim, name="axis"):
    """Return ``axis`` as an int in ``[-ndim, ndim)`` (0-d arrays allow 0 and -1)."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {axis!r}")
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise ValueError(f"{name} {axis} is out of range for an array with {ndim} axes")
    return int(axis)


def as_scale(scale, name="scale"):
    """Return ``scale`` as a finite float, or raise if it is not one real number.

    Python and NumPy numbers and 0-d real arrays are accepted; strings, bools,
    complex numbers and arrays with elements are refused.
    """
    arr = scale if isinstance(scale, np.ndarray) else None
    if arr is not None and arr.ndim == 0 and arr.dtype.kind in "iuf":
        scale = arr[()]
    if isinstance(scale, (bool, np.bool_)) or not isinstance(
        scale, (int, float, np.integer, np.floating)
    ):
        what = f"array of shape {scale.shape}" if isinstance(scale, np.ndarray) else repr(scale)
        raise TypeError(
            f"{name} must be a real number, got {what}: pass one "
            f"Python or NumPy scalar such as 0.125"
        )
    value = float(scale)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {scale!r}")
    return value


def as_mask(mask, name="attn_mask"):
    """Return ``mask`` as an ndarray that is boolean or floating.

    PyTorch accepts only these two kinds, and so do we: an integer 0/1 mask
    would otherwise be *added* to the scores (a bias of 0 or 1) instead of
    masking, which gives plausible but wrong weights.
    """
    arr = as_numeric(mask, name)
    if arr.dtype.kind not in "bf":
        raise TypeError(
            f"{name} must be boolean (True = may attend, False = masked) or "
            f"floating (added to the scores, -inf masks), got dtype {arr.dtype}; "
            f"for a 0/1 mask pass {name}.astype(bool)"
        )
    return arr


def overflow_bound(*factors):
    """Upper bound on a product of magnitudes, as a Python float (``inf`` if huge).

    Python floats overflow to ``inf`` quietly, which is what a bound needs.
    """
    bound = 1.0
    for f in factors:
        bound *= float(f)
    return bound


def max_abs(arr):
    """Largest magnitude in ``arr`` as a Python float (0 for an empty array)."""
    return float(np.max(np.abs(arr), initial=0))


# -- layers and models (attention_lib.nn, attention_lib.models) ------------


def as_float_dtype(dtype, name="dtype"):
    """Return ``dtype`` as a floating NumPy dtype, or raise ``TypeError``.

    Weights drawn from ``U(-k, k)`` and cast to an integer dtype are all
    zero, and a model built from them learns nothing, so only floating
    dtypes are accepted (PyTorch refuses the others too).
    """
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"{name} must be a floating dtype such as np.float32, got {dtype!r}"
        ) from None
    if dt.kind != "f":
        raise TypeError(
            f"{name} must be a floating dtype such as np.float32 or np.float64, got {dt}"
        )
    return dt


def as_float_input(x, name):
    """Return ``x`` as a floating ndarray, or raise ``TypeError`` (no silent casts).

    An integer input would make a layer compute in integers (states that
    round to 0, a dropout scale cast to 1), so it is refused, as PyTorch's
    layers refuse it: the caller converts, e.g. ``x.astype(np.float32)``.
    """
    arr = as_numeric(x, name)
    if arr.dtype.kind != "f":
        raise TypeError(
            f"{name} must be a floating array (float32 or float64), got "
            f"dtype {arr.dtype}: convert it first, e.g. "
            f"{name}.astype(np.float32)"
        )
    return arr


def as_rng(rng, name="rng"):
    """Return ``rng`` if it is a ``numpy.random.Generator``, else raise ``TypeError``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"{name} must be a numpy.random.Generator "
            f"(np.random.default_rng(seed)), got {type(rng).__name__}"
        )
    return rng


def as_probability(p, name, high_open=True):
    """Return ``p`` as a float in ``[0, 1)`` (``[0, 1]`` with ``high_open=False``).

    Anything else, a string or a bool included, raises ``ValueError``.
    """
    interval = "[0, 1)" if high_open else "[0, 1]"
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise ValueError(
            f"{name} must be a probability in {interval}, a real number, "  # noqa: TRY004 (one error type for every bad p, as Dropout always raised)
            f"got {p!r}"
        )
    value = float(p)
    if not (0 <= value < 1 if high_open else 0 <= value <= 1):
        raise ValueError(f"{name} must be a probability in {interval}, got {p!r}")
    return value


def as_real(value, name, low=0.0, high=None, high_open=False):
    """Return ``value`` as a float, or raise if it is not a finite number in the interval."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    ok = np.isfinite(value) and value >= low
    if high is not None:
        ok = ok and (value < high if high_open else value <= high)
    if not ok:
        bound = f">= {low}" if high is None else f"in [{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def require_shape(arr, name, shape, layout):
    """Raise ``ValueError`` unless ``arr.shape == shape`` (``None`` entries match anything)."""
    if len(arr.shape) != len(shape) or any(
        want is not None and got != want for got, want in zip(arr.shape, shape)
    ):
        want = (
            "("
            + ", ".join("*" if s is None else str(s) for s in shape)
            + ("," if len(shape) == 1 else "")
            + ")"
        )
        raise ValueError(f"{name} must have shape {layout} = {want}, got {arr.shape}")


def require_forward(cache, layer, method="backward", before="forward"):
    """Raise ``RuntimeError`` if ``layer`` has no forward pass to go back through."""
    if cache is None:
        raise RuntimeError(
            f"{type(layer).__name__}.{method}() was called before {before}(): call {before}() first"
        )


def as_features(x, d, owner, dim="d"):
    """``x`` as a floating array whose last axis has ``d`` features, as ``owner`` was built for."""
    x = as_float_input(x, "x")
    if x.ndim == 0 or x.shape[-1] != d:
        got = f"{x.shape[-1]} features" if x.ndim else "no axes (a scalar)"
        raise ValueError(
            f"x has {got} but {owner} was built for {dim} = {d}: the last axes must match"
        )
    return x


def as_output_grad(grad, layer, shape):
    """``grad`` as a floating array shaped like ``layer``'s last output, after its forward pass.

    Raises ``RuntimeError`` before any forward pass (``shape`` is None), ``TypeError``
    for a non-float gradient and ``ValueError`` for another shape.
    """
    require_forward(shape, layer)
    grad = as_float_input(grad, "grad")
    if grad.shape != tuple(shape):
        raise ValueError(
            f"grad must have the shape of forward's output {tuple(shape)}, got {grad.shape}"
        )
    return grad


def as_mask_01(mask, name, shape, layout):
    """A padding mask as booleans: ``bool`` or numbers that are all 0 or 1.

    A value such as 0.5 would blend the new state with the old one, so any
    other value is refused; so is a mask of another shape.
    """
    arr = as_numeric(mask, name)
    require_shape(arr, name, shape, layout)
    if arr.dtype.kind != "b":
        if arr.size and not np.isin(arr, (0, 1)).all():
            raise ValueError(
                f"{name} must hold only True/False (or 1/0): 1 at a word, 0 at padding"
            )
        arr = arr.astype(bool)
    return arr


def as_int_array(x, name):
    """Return ``x`` as an integer ndarray, or raise ``TypeError`` (no silent truncation).

    ``2.7`` must not become ``2``: floats are refused even when integral,
    as PyTorch refuses a float index.
    """
    arr = as_numeric(x, name)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    return arr
