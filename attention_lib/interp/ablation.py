"""Head ablation: remove heads' outputs and see what the model can no longer do.

A head is ablated by replacing its output ``z_h`` (before ``W_O``) with

- ``"zero"``: zeros, as if its rows of ``W_O`` were zero
  (:meth:`~attention_lib.models.llama.Llama.ablate` edits the weights; the
  tests check both give the same logits);
- ``"mean"``: its mean output over a reference set (every sequence and
  position), which keeps the average that later layers expect and removes
  only what the head says about *this* input;
- ``"resample"``: its output, position by position, on a reference sequence
  drawn at random for each sequence of the batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import numpy as np

from .hooks import Hooks, layout, run

__all__ = ["ablate_heads", "ABLATIONS"]

ABLATIONS = ("zero", "mean", "resample")


def checked_heads(lay, heads, kind: str = "z") -> dict[str, list[int]]:
    """``{attention name: [head, ...]}`` for ``(layer, head)`` pairs, every pair checked."""
    if isinstance(heads, (str, bytes)) or not isinstance(heads, Iterable):
        raise TypeError(f"heads must be a list of (layer, head) pairs, got {heads!r}")
    out: dict[str, list[int]] = {}
    for spec in heads:
        name, h = lay.head(spec, kind)
        if h not in out.setdefault(name, []):
            out[name].append(h)
    return out


@contextlib.contextmanager
def ablate_heads(model, heads, how: str = "zero", reference=None, rng=None):
    """Within the ``with`` block, the given heads' outputs are ablated.

    Parameters
    ----------
    model : TinyGPT, Llama, MiniLM or Transformer
    heads : iterable of (layer, head)
        ``layer`` counts the attention layers of the blocks that reach the
        output (:attr:`Layout.heads`) or names one (``"decoder.0.cross_attn"``);
        ``head`` is a query head.
    how : {"zero", "mean", "resample"}, optional
    reference : model inputs, optional
        For ``"mean"`` and ``"resample"``: the inputs whose head outputs
        stand in (token ids (B, T), or a tuple of ``forward``'s arguments).
        ``"resample"`` needs them as long as the ablated inputs.
    rng : numpy.random.Generator, optional
        For ``"resample"``: which reference sequence each sequence gets.

    Yields
    ------
    Hooks
        The installed hooks (the model runs ablated inside the block).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import TinyGPT
    >>> from attention_lib.interp import ablate_heads
    >>> model = TinyGPT(n_vocab=10, d_model=8, n_heads=2, n_layers=2, d_ff=16,
    ...                 max_len=8, rng=np.random.default_rng(0))
    >>> ids = np.array([[1, 2, 3, 1, 2]])
    >>> with ablate_heads(model, [(1, 0)], how="mean", reference=np.array([[4, 5, 6, 7, 8]])):
    ...     ablated = model.forward(ids)
    >>> bool(np.abs(ablated - model.forward(ids)).max() > 0)
    True
    """
    lay = layout(model)
    if how not in ABLATIONS:
        raise ValueError(f"how must be one of {ABLATIONS}, got {how!r}")
    chosen = checked_heads(lay, heads)
    if how != "zero" and reference is None:
        raise ValueError(f"how={how!r} needs reference inputs whose head outputs stand in")
    if how == "resample" and not isinstance(rng, np.random.Generator):
        raise TypeError("how='resample' needs rng, a numpy.random.Generator")
    names = [f"{a}.z" for a in chosen]
    stand_in = {}
    if how != "zero":
        with Hooks(model, record=names) as rec:
            run(model, reference)
        for n in names:
            z = rec[n]  # (B_ref, H, T_ref, d)
            stand_in[n] = z.mean(axis=(0, 2)) if how == "mean" else z

    def replacer(name, hs):
        def ablate(z):
            z = z.copy()
            if how == "zero":
                z[:, hs] = 0
            elif how == "mean":
                z[:, hs] = stand_in[name][hs][None, :, None, :]
            else:
                ref = stand_in[name]
                if ref.shape[2] != z.shape[2]:
                    raise ValueError(
                        f"resample ablation puts a reference sequence's head outputs at the "
                        f"same positions: the reference has {ref.shape[2]} positions but this "
                        f"input {z.shape[2]} (one-token steps of generate included); use "
                        f"how='mean' or 'zero' there"
                    )
                rows = rng.integers(ref.shape[0], size=z.shape[0])
                z[:, hs] = ref[rows][:, hs]
            return z

        return ablate

    with Hooks(model, replace={f"{a}.z": replacer(f"{a}.z", hs) for a, hs in chosen.items()}) as h:
        yield h
