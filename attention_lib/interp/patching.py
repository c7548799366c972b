"""Activation patching and path patching: which activations carry the answer.

Two inputs that differ in one fact, *clean* (``"When Mary and John went to
the store, John gave a drink to"`` -> ``" Mary"``) and *corrupted* (the
names swapped), give different answers; a *metric* on the logits
(:func:`logit_diff`: the correct answer's logit minus the wrong one's)
measures which. **Activation patching** runs the corrupted input with one
activation (a layer's residual stream at one position, one head's output)
taken from the clean run: if the metric comes back, that activation carries
what the clean input says. **Path patching** (Wang et al., 2022) narrows
this to one path: a *sender* head's clean output reaches only a *receiver*
head's query, key or value input, while every other part of the network
keeps its corrupted value.

Positions are aligned: the clean and corrupted inputs must have the same
shape (the same number of tokens).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .ablation import checked_heads
from .hooks import Hooks, layout, run

__all__ = ["logit_diff", "patch_residual", "patch_heads", "path_patch", "record_all"]

_KINDS = ("z", "q", "k", "v", "pattern")


def logit_diff(correct, wrong, position: int = -1) -> Callable[[np.ndarray], float]:
    """A metric: the mean over the batch of ``logits[b, position, correct[b]] - logits[b, position, wrong[b]]``.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.interp import logit_diff
    >>> logits = np.array([[[0.0, 2.0, 0.5]], [[1.0, 0.0, 3.0]]])   # (B=2, T=1, V=3)
    >>> logit_diff([1, 2], [2, 0])(logits)
    1.75
    """
    correct, wrong = np.atleast_1d(correct), np.atleast_1d(wrong)
    for name, ids in (("correct", correct), ("wrong", wrong)):
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise ValueError(f"{name} must be token ids, one per sequence, got {ids.tolist()!r}")

    def metric(logits):
        logits = np.asarray(logits)
        B, T, V = logits.shape
        for name, ids in (("correct", correct), ("wrong", wrong)):
            if len(ids) not in (1, B) or (ids < 0).any() or (ids >= V).any():
                raise ValueError(
                    f"{name} must be 1 or {B} token ids in [0, {V}), got {ids.tolist()!r}"
                )
        row = logits[:, position]
        b = np.arange(B)
        return float(
            np.mean(row[b, np.broadcast_to(correct, B)] - row[b, np.broadcast_to(wrong, B)])
        )

    return metric


def _aligned(clean, corrupted):
    """Refuse clean and corrupted inputs whose shapes differ (positions must align)."""

    def shapes(x):
        if isinstance(x, tuple):
            return [np.shape(a) for a in x]
        if isinstance(x, dict):
            return {k: np.shape(a) for k, a in x.items()}
        return np.shape(x)

    a, b = shapes(clean), shapes(corrupted)
    if a != b:
        raise ValueError(
            f"clean and corrupted inputs have shapes {a} and {b}: patching puts each clean "
            f"activation at the same position of the corrupted run, so they must have the "
            f"same number of tokens"
        )


def _checked(lay, names):
    known = set(lay.names())
    for n in names:
        if n not in known:
            raise KeyError(
                f"{n!r} is not an activation of {type(lay.model).__name__}; it has {lay.summary()}"
            )


def record_all(model, inputs, names=None) -> tuple[object, dict[str, np.ndarray]]:
    """``(output, {name: activation})`` of one forward pass, recording ``names`` (default all)."""
    names = layout(model).names() if names is None else list(names)
    with Hooks(model, record=names) as h:
        out = run(model, inputs)
    return out, {n: h[n] for n in names}


def _put(source, index):
    """A replacement that copies ``source[index]`` into the activation at ``index``."""

    def patch(act):
        if source.shape != act.shape:
            raise ValueError(
                f"the clean activation has shape {source.shape} but the corrupted run's "
                f"has {act.shape}: clean and corrupted inputs must have the same shape"
            )
        act = act.copy()
        act[index] = source[index]
        return act

    return patch


def patch_residual(
    model,
    clean,
    corrupted,
    metric,
    where: str = "resid_pre",
    positions: bool = True,
    blocks: list[str] | None = None,
) -> np.ndarray:
    """Activation patching of the residual stream, block by block (and position by position).

    Parameters
    ----------
    model : TinyGPT, Llama, MiniLM or Transformer
    clean, corrupted : inputs of the same shape (token ids (B, T), or tuples)
    metric : function
        Of the model's output (its logits), e.g. :func:`logit_diff`.
    where : {"resid_pre", "resid_post", "mlp_out"}, optional
    positions : bool, optional
        One score per position (default) or per block only (every position patched).
    blocks : list of str, optional
        The blocks swept (default :attr:`Layout.stream`, the blocks that reach
        the output; ``["encoder.0", ...]`` for the translator's source side).

    Returns
    -------
    ndarray, shape (n_blocks, T) or (n_blocks,)
        The metric of the corrupted run with that activation taken from the
        clean run.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import TinyGPT
    >>> from attention_lib.interp import logit_diff, patch_residual
    >>> model = TinyGPT(n_vocab=10, d_model=8, n_heads=2, n_layers=2, d_ff=16,
    ...                 max_len=8, rng=np.random.default_rng(0))
    >>> clean, corrupted = np.array([[1, 2, 3]]), np.array([[4, 2, 3]])
    >>> scores = patch_residual(model, clean, corrupted, logit_diff(5, 6))
    >>> scores.shape     # the first token's stream in block 0 is the clean run itself
    (2, 3)
    >>> bool(np.isclose(scores[0, 0], logit_diff(5, 6)(model.forward(clean))))
    True
    """
    if where not in ("resid_pre", "resid_post", "mlp_out"):
        raise ValueError(f"where must be 'resid_pre', 'resid_post' or 'mlp_out', got {where!r}")
    lay = layout(model)
    blocks = lay.stream if blocks is None else list(blocks)
    names = [f"{p}.{where}" for p in blocks]
    _checked(lay, names)
    _aligned(clean, corrupted)
    _, src = record_all(model, clean, names)
    T = src[names[0]].shape[1]
    out = np.empty((len(names), T) if positions else (len(names),))
    for i, n in enumerate(names):
        for t in range(T) if positions else [None]:
            index = (slice(None), slice(None)) if t is None else (slice(None), t)
            with Hooks(model, replace={n: _put(src[n], index)}):
                score = metric(run(model, corrupted))
            out[(i, t) if positions else i] = score
    return out


def patch_heads(
    model,
    clean,
    corrupted,
    metric,
    what: str = "z",
    positions: bool = False,
    layers: list[str] | None = None,
) -> np.ndarray:
    """Activation patching of each head: its output (or its queries, keys, values, weights).

    Parameters
    ----------
    model, clean, corrupted, metric :
        As :func:`patch_residual`.
    what : {"z", "q", "k", "v", "pattern"}, optional
        The head's output before ``W_O`` (default), its queries, keys,
        values or attention weights. Keys and values count key/value heads:
        with grouped-query attention one patch changes a whole group.
    positions : bool, optional
        Patch each (query) position on its own (default False: all at once).
    layers : list of str, optional
        The attention layers swept (default :attr:`Layout.heads`, those of
        the blocks that reach the output).

    Returns
    -------
    ndarray, shape (n_layers, n_heads) or (n_layers, n_heads, T)
        A layer with fewer heads than the most has NaN in the rest.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.llama import Llama
    >>> from attention_lib.interp import logit_diff, patch_heads
    >>> model = Llama(n_vocab=10, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2,
    ...               d_ff=24, max_len=12, rng=np.random.default_rng(0))
    >>> clean, corrupted = np.array([[1, 2, 3]]), np.array([[4, 2, 3]])
    >>> patch_heads(model, clean, corrupted, logit_diff(5, 6), what="k").shape
    (2, 2)
    """
    if what not in _KINDS:
        raise ValueError(f"what must be one of {_KINDS}, got {what!r}")
    lay = layout(model)
    layers = lay.heads if layers is None else [lay.attn_of(a) for a in layers]
    _aligned(clean, corrupted)
    names = [f"{a}.{what}" for a in layers]
    _, src = record_all(model, clean, names)
    counts = [
        lay.attns[a].n_kv_heads if what in ("k", "v") else lay.attns[a].n_heads for a in layers
    ]
    T = src[names[0]].shape[2]
    out = np.empty((len(names), max(counts)) + ((T,) if positions else ()))
    out[:] = np.nan
    for i, n in enumerate(names):
        for h in range(counts[i]):
            for t in range(T) if positions else [None]:
                index = (slice(None), h) + (() if t is None else (t,))
                with Hooks(model, replace={n: _put(src[n], index)}):
                    out[(i, h) + (() if t is None else (t,))] = metric(run(model, corrupted))
    return out


def path_patch(model, clean, corrupted, metric, senders, receivers) -> float:
    """Path patching: the senders' clean outputs reach only the receivers' inputs.

    Three runs. The clean one records the senders. The corrupted one is run
    again with the senders' outputs from the clean run and every other head's
    output and every feed-forward output *frozen* at their corrupted values,
    so the senders' change reaches later layers only directly, through the
    residual stream; it records the receivers' queries, keys or values. The
    last run is the corrupted one with only the receivers' inputs replaced by
    those: the metric of its output is returned.

    Parameters
    ----------
    model, clean, corrupted, metric :
        As :func:`patch_residual`.
    senders : list
        ``(layer, head)`` pairs (a head's output), or activation names
        (e.g. ``"blocks.0.resid_pre"``: the embeddings, ``"blocks.0.mlp_out"``).
    receivers : list of (layer, head, kind)
        ``kind`` is ``"q"`` (``head`` a query head), ``"k"`` or ``"v"``
        (``head`` a key/value head: with grouped-query attention, the group).

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import TinyGPT
    >>> from attention_lib.interp import logit_diff, path_patch
    >>> model = TinyGPT(n_vocab=10, d_model=8, n_heads=2, n_layers=2, d_ff=16,
    ...                 max_len=8, rng=np.random.default_rng(0), attention_only=True)
    >>> clean, corrupted = np.array([[1, 2, 3]]), np.array([[4, 2, 3]])
    >>> score = path_patch(model, clean, corrupted, logit_diff(5, 6),
    ...                    senders=[(0, 1)], receivers=[(1, 0, "k")])
    >>> isinstance(score, float)
    True
    """
    lay = layout(model)
    _aligned(clean, corrupted)
    head_senders = checked_heads(lay, [s for s in senders if not isinstance(s, str)])
    name_senders = [s for s in senders if isinstance(s, str)]
    _checked(lay, name_senders)
    targets = []
    for spec in receivers:
        if isinstance(spec, (str, bytes)) or np.ndim(spec) != 1 or len(spec) != 3:
            raise ValueError(f"a receiver must be (layer, head, 'q' | 'k' | 'v'), got {spec!r}")
        if spec[2] not in ("q", "k", "v"):
            raise ValueError(f"a receiver's input must be 'q', 'k' or 'v', got {spec[2]!r}")
        name, h = lay.head(spec[:2], spec[2])
        targets.append((f"{name}.{spec[2]}", h))
    if not targets:
        raise ValueError("path_patch needs at least one receiver")
    frozen = [f"{a}.z" for a in lay.attns] + [f"{p}.mlp_out" for p in lay.ffns]
    _, clean_acts = record_all(model, clean, [f"{a}.z" for a in head_senders] + name_senders)
    _, corrupt_acts = record_all(model, corrupted, frozen)
    replace = {}
    for n in frozen:
        if n in name_senders:
            continue
        a = n[: -len(".z")] if n.endswith(".z") else None
        if a in head_senders:
            # the corrupted output, with the sender heads' clean
            mixed = corrupt_acts[n].copy()
            mixed[:, head_senders[a]] = clean_acts[n][:, head_senders[a]]
            replace[n] = _put(mixed, (slice(None),))
        else:
            replace[n] = _put(corrupt_acts[n], (slice(None),))
    for s in name_senders:
        replace[s] = _put(clean_acts[s], (slice(None),))
    receiver_names = sorted({n for n, _ in targets})
    with Hooks(model, record=receiver_names, replace=replace) as h:
        run(model, corrupted)
    mid = {n: h[n] for n in receiver_names}
    by_name: dict[str, list[int]] = {}
    for n, i in targets:
        by_name.setdefault(n, []).append(i)
    patches = {n: _put(mid[n], (slice(None), idx)) for n, idx in by_name.items()}
    with Hooks(model, replace=patches):
        return float(metric(run(model, corrupted)))
