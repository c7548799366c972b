"""LoRA: finetune a frozen weight through a low-rank update (Hu et al., 2021).

A linear layer ``y = x W + b`` with ``W`` of shape (n_in, n_out) is finetuned
as ``y = x (W + scaling A B) + b``: ``W`` stays frozen, and only ``A``
(n_in, r) and ``B`` (r, n_out) learn, ``r (n_in + n_out)`` numbers instead of
``n_in n_out``. ``B`` starts at zero, so the adapted model starts as the base
model exactly; ``scaling = alpha / r`` keeps the update's size comparable
across ranks. The names and semantics are PEFT's (``lora_A``, ``lora_B``,
``scaling``, ``merge``, ``unmerge``); PEFT's ``lora_A.weight`` (r, n_in) and
``lora_B.weight`` (n_out, r) are this module's ``A.T`` and ``B.T``, since the
book's rows are vectors (``x @ W``).

Two ways in:

- :class:`LoRALinear` wraps one :class:`~attention_lib.nn.Linear`: the two
  paths ``x W + b`` and ``scaling (x A) B`` side by side, with a backward by
  hand that never forms ``dW``.
- :func:`apply` adapts the projections of a whole model (TinyGPT, Llama and
  SmolLM2, MiniLM) and returns the adapters, the only thing the optimiser
  is given; :func:`save` and :func:`load` write and read the adapters alone
  (``A`` and ``B``: a few hundred kilobytes beside a model of megabytes).

**Why apply is a parametrisation.** The attention layer keeps ``W_Q, W_K,
W_V, W_O`` as parameters of one layer (multiplied side by side, one product
for the three input projections), not as separate ``Linear`` layers, and
SwiGLU keeps ``W1, W3, W2`` likewise; a second path through the attention
layer would have to be a new branch inside its forward. Instead each
adapter is a :class:`LoRAWeight` attached at the layer's boundary: just
before the layer's ``forward`` it installs the effective weight

    ``layer.params["W_Q"] = W_Q0 + scaling A B``

and just after the layer's ``backward`` it maps the gradient the layer
computed for that weight, ``dW``, into its own:

    ``dA = scaling dW B^T``,   ``dB = scaling A^T dW``

(the chain rule through ``W = W0 + scaling A B``). This is exact, the same
for every layer whatever it does with the weight (fused products, grouped
heads, rotary), and the layers' code is unchanged. The price: the layer
still computes ``dW`` (n_in x n_out) for an adapted weight, and the frozen
layers still compute their own weight gradients, which the optimiser
ignores (:func:`freeze` stops the plain Linear and Embedding layers doing
so); and the forward adds ``scaling A B`` (r n_in n_out multiply-adds,
small beside a batch's products).

The model's ``params`` hold the effective weights as of the last forward
pass (or :func:`load`); after an optimiser step they are stale until the
next forward. ``generate`` is not affected: its fast decoders step aside
for a layer with a forward of its own, so it runs the model's forward.
:func:`merge` folds the adapters for good (until :func:`unmerge`, before
training again: the model's backward refuses to run while merged), and
:func:`merge_and_unload` gives back a plain model (the fast decoders again).
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.random import Generator
from numpy.typing import ArrayLike

from .._checks import as_float_input, as_rng
from .dropout import Dropout
from .layers import Linear, sum_to_matrix


def _check_rank_alpha(rank, alpha, n_in, n_out, what):
    """``(rank, alpha)`` checked: 1 <= rank <= min(n_in, n_out), alpha a positive finite number."""
    if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)):
        raise TypeError(f"rank must be a positive integer, got {rank!r}")
    if not 1 <= rank <= min(n_in, n_out):
        raise ValueError(
            f"rank must be in [1, {min(n_in, n_out)}], the smaller side of {what} "
            f"({n_in} x {n_out}), got {rank}"
        )
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"alpha must be a positive number, got {alpha!r}")
    if not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a positive finite number, got {alpha!r}")
    return int(rank), float(alpha)


def _draw_A(rng, n_in, rank, dtype):
    """``A`` (n_in, r) as PEFT draws ``lora_A.weight``: kaiming-uniform with ``a = sqrt(5)``.

    ``torch.nn.init.kaiming_uniform_(w, a=sqrt(5))`` on a (r, n_in) weight draws
    from ``U(-1/sqrt(n_in), 1/sqrt(n_in))`` (gain ``sqrt(2 / 6)`` times
    ``sqrt(3 / n_in)``), the default of ``torch.nn.Linear``.
    """
    bound = 1.0 / np.sqrt(n_in)
    return rng.uniform(-bound, bound, size=(n_in, rank)).astype(dtype)


class LoRALinear:
    """A frozen :class:`~attention_lib.nn.Linear` plus a trainable low-rank path.

    ``y = x W + b + scaling (dropout(x) A) B`` with ``scaling = alpha / rank``,
    as PEFT's ``lora.Linear`` (its ``W x + (alpha / r) B A x`` in column
    vectors).

    Parameters
    ----------
    base : Linear
        The layer adapted; its ``W`` and ``b`` are frozen (never given a
        gradient) and kept as they are.
    rank : int
        ``r``, between 1 and ``min(n_in, n_out)``.
    alpha : float
        Positive; ``scaling = alpha / rank``.
    dropout : float, optional
        Dropout on the adapter's input only, as PEFT's ``lora_dropout``
        (default 0).
    rng : numpy.random.Generator, optional
        Draws ``A`` (as PEFT: ``U(-1/sqrt(n_in), 1/sqrt(n_in))``) and the
        dropout masks; default ``np.random.default_rng(0)``.

    Attributes
    ----------
    params : dict
        ``lora_A`` (n_in, r) and ``lora_B`` (r, n_out, zeros at first), in the
        base weight's dtype: the only parameters an optimiser sees.
    scaling : float
        ``alpha / rank``.
    merged : bool
        True between :meth:`merge` and :meth:`unmerge`.

    Raises
    ------
    TypeError
        ``base`` is not a Linear, ``rank`` not an integer or ``alpha`` not a number.
    ValueError
        ``rank`` outside ``[1, min(n_in, n_out)]``, ``alpha <= 0`` or not
        finite, ``dropout`` outside ``[0, 1)``.

    Notes
    -----
    With ``g = d loss / d y``, ``x_d = dropout(x)``, ``h = x_d A`` (…, r)
    and ``g_h = scaling g B^T``::

        dB = scaling h^T g          dA = x_d^T g_h
        dx = g W^T + dropout'(g_h A^T)

    (sums over the batch): the input's gradient through both paths, and no
    ``dW``, ``db``: the frozen weight costs no gradient at all.

    :meth:`merge` folds the update into the weight, ``W <- W + scaling A B``
    (a new array; the original is kept), so that a forward pass is one
    product: its outputs equal the unmerged ones within float rounding (the
    sums are taken in another order: a few units in the last place).
    :meth:`unmerge` puts the original array back, bit for bit (not
    ``W - scaling A B``, which would be off by a rounding), at the cost of
    holding both while merged.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import Linear, LoRALinear
    >>> base = Linear(6, 4, np.random.default_rng(0))
    >>> lora = LoRALinear(base, rank=2, alpha=4)
    >>> x = np.random.default_rng(1).normal(size=(3, 6))
    >>> bool(np.array_equal(lora.forward(x), base.forward(x)))  # B = 0: the base model
    True
    >>> dx = lora.backward(np.ones((3, 4)))
    >>> sorted(lora.grads), lora.grads["lora_A"].shape, lora.scaling
    (['lora_A', 'lora_B'], (6, 2), 2.0)
    """

    def __init__(
        self,
        base: Linear,
        rank: int,
        alpha: float,
        dropout: float = 0.0,
        rng: Generator | None = None,
    ) -> None:
        if not isinstance(base, Linear):
            raise TypeError(f"base must be an attention_lib.nn.Linear, got {type(base).__name__}")
        n_in, n_out = base.params["W"].shape
        self.rank, self.alpha = _check_rank_alpha(rank, alpha, n_in, n_out, "the layer's W")
        rng = np.random.default_rng(0) if rng is None else as_rng(rng)
        self.dropout = Dropout(dropout, rng)
        self.base, self.scaling = base, self.alpha / self.rank
        dtype = base.params["W"].dtype
        self.params = {
            "lora_A": _draw_A(rng, n_in, self.rank, dtype),
            "lora_B": np.zeros((self.rank, n_out), dtype),
        }
        self.grads = {}
        self.merged, self._unmerged_W, self._saved = False, None, None

    def forward(self, x: ArrayLike) -> np.ndarray:
        """``x W + b + scaling (dropout(x) A) B`` for ``x`` (..., n_in); merged: ``x W' + b``."""
        x = as_float_input(x, "x")
        W = self.base.params["W"]
        if x.ndim == 0 or x.shape[-1] != W.shape[0]:
            got = f"{x.shape[-1]} features" if x.ndim else "no axes (a scalar)"
            raise ValueError(
                f"x has {got} but the layer expects {W.shape[0]}: x must have shape "
                f"(..., {W.shape[0]})"
            )
        x2 = x.reshape(-1, W.shape[0])
        y = x2 @ W
        if "b" in self.base.params:
            y += self.base.params["b"]
        if self.merged:  # the update is inside W already
            self._saved = None
            return y.reshape(x.shape[:-1] + (W.shape[1],))
        xd = self.dropout.forward(x2)
        h = xd @ self.params["lora_A"]  # (N, r)
        y += self.scaling * (h @ self.params["lora_B"])
        self._saved = (x.shape, xd, h)
        return y.reshape(x.shape[:-1] + (W.shape[1],))

    def backward(self, grad: np.ndarray) -> np.ndarray:
        """Gradients of ``lora_A`` and ``lora_B`` (into ``grads``) and of the input."""
        if self._saved is None:
            raise RuntimeError(
                "LoRALinear.backward() needs an unmerged forward() first"
                + (
                    ": the layer is merged (inference); call unmerge() to train"
                    if self.merged
                    else ""
                )
            )
        shape, xd, h = self._saved
        W = self.base.params["W"]
        grad = as_float_input(grad, "grad")
        if grad.shape != shape[:-1] + (W.shape[1],):
            raise ValueError(
                f"grad must have the shape of forward's output "
                f"{shape[:-1] + (W.shape[1],)}, got {grad.shape}"
            )
        g = grad.reshape(-1, W.shape[1])
        g_h = self.scaling * (g @ self.params["lora_B"].T)  # (N, r)
        self.grads["lora_B"] = self.scaling * sum_to_matrix(h, g)
        self.grads["lora_A"] = sum_to_matrix(xd, g_h)
        dx = g @ W.T + self.dropout.backward(g_h @ self.params["lora_A"].T)
        return dx.reshape(shape)

    def delta(self) -> np.ndarray:
        """The update ``scaling A B`` (n_in, n_out), in the weight's dtype."""
        A, B = self.params["lora_A"], self.params["lora_B"]
        return (self.scaling * (A @ B)).astype(self.base.params["W"].dtype, copy=False)

    def merge(self) -> None:
        """Fold the update into the base: ``W <- W + scaling A B`` (see Notes of the class).

        Raises ``RuntimeError`` if already merged.

        Examples
        --------
        >>> import numpy as np
        >>> from attention_lib.nn import Linear, LoRALinear
        >>> lora = LoRALinear(Linear(4, 3, np.random.default_rng(0)), rank=1, alpha=2)
        >>> lora.params["lora_B"][:] = 0.5
        >>> x = np.ones((2, 4))
        >>> y, W = lora.forward(x), lora.base.params["W"]
        >>> lora.merge()
        >>> bool(np.allclose(lora.forward(x), y, rtol=1e-15, atol=1e-15))
        True
        >>> lora.unmerge()
        >>> lora.base.params["W"] is W
        True
        """
        if self.merged:
            raise RuntimeError("this LoRALinear is already merged: unmerge() first")
        W = self.base.params["W"]
        self._unmerged_W, self.base.params["W"] = W, W + self.delta()
        self.merged, self._saved = True, None

    def unmerge(self) -> None:
        """Put the original ``W`` back, bit for bit; raises ``RuntimeError`` if not merged."""
        if not self.merged:
            raise RuntimeError("this LoRALinear is not merged: there is nothing to unmerge")
        self.base.params["W"], self._unmerged_W = self._unmerged_W, None
        self.merged = False


class LoRAWeight:
    """A low-rank update of one weight matrix inside a layer: ``W = W0 + scaling A B``.

    Made by :func:`apply`, which attaches it to the layer (see the module's
    notes); it has ``params`` (``lora_A``, ``lora_B``) and, after the
    model's backward, ``grads``, so :class:`~attention_lib.nn.Adam` takes a
    list of them.

    Attributes
    ----------
    name : str
        Where the weight sits, e.g. ``"blocks.0.attn.W_Q"``.
    layer, key
        The layer and its ``params`` key.
    base : ndarray
        ``W0``, the frozen weight (the original array).
    scaling : float
        ``alpha / rank``.
    merged : bool
        True after :func:`merge`.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import lora
    >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    >>> adapters = lora.apply(model, ("q", "v"), rank=2, alpha=4)
    >>> adapters[0]
    LoRAWeight(blocks.0.attn.W_Q, 8 x 8, rank 2, scaling 2.0)
    """

    def __init__(self, layer, key, name, rank, alpha, rng):
        self.layer, self.key, self.name = layer, key, name
        self.base = layer.params[key]
        n_in, n_out = self.base.shape
        self.rank, self.alpha, self.scaling = rank, alpha, alpha / rank
        self.params = {
            "lora_A": _draw_A(rng, n_in, rank, self.base.dtype),
            "lora_B": np.zeros((rank, n_out), self.base.dtype),
        }
        self.grads = {}
        self.merged = False

    def __repr__(self):
        n_in, n_out = self.base.shape
        return (
            f"LoRAWeight({self.name}, {n_in} x {n_out}, rank {self.rank}, scaling {self.scaling})"
        )

    def weight(self) -> np.ndarray:
        """``W0 + scaling A B``, a new array in ``W0``'s dtype.

        Examples
        --------
        >>> import numpy as np
        >>> from attention_lib.models.gpt import TinyGPT
        >>> from attention_lib.nn import lora
        >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
        >>> a = lora.apply(model, ("v",), rank=2)[0]
        >>> bool(np.array_equal(a.weight(), a.base)), a.weight() is a.base  # B = 0
        (True, False)
        """
        A, B = self.params["lora_A"], self.params["lora_B"]
        return self.base + (self.scaling * (A @ B)).astype(self.base.dtype, copy=False)

    def grads_from(self, dW: np.ndarray) -> None:
        """``dA = scaling dW B^T`` and ``dB = scaling A^T dW`` from the layer's ``dW``.

        Examples
        --------
        >>> import numpy as np
        >>> from attention_lib.models.gpt import TinyGPT
        >>> from attention_lib.nn import lora
        >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
        >>> a = lora.apply(model, ("q",), rank=2, alpha=2)[0]
        >>> a.grads_from(np.ones((8, 8)))
        >>> a.grads["lora_B"].shape, float(np.abs(a.grads["lora_A"]).max())  # B = 0: dA = 0
        ((2, 8), 0.0)
        """
        A, B = self.params["lora_A"], self.params["lora_B"]
        self.grads["lora_A"] = self.scaling * (dW @ B.T)
        self.grads["lora_B"] = self.scaling * (A.T @ dW)


def _attach(layer, adapters):
    """Wrap ``layer``'s forward and backward (instance attributes; its class is unchanged)."""
    forward, backward = layer.forward, layer.backward

    def lora_forward(*args, **kwargs):
        for a in adapters:
            if not a.merged:
                layer.params[a.key] = a.weight()
        return forward(*args, **kwargs)

    def lora_backward(*args, **kwargs):
        if any(a.merged for a in adapters):
            raise RuntimeError(
                "the LoRA adapters are merged (for inference): call lora.unmerge(model) to train"
            )
        out = backward(*args, **kwargs)
        for a in adapters:
            a.grads_from(layer.grads[a.key])
        return out

    layer.forward, layer.backward, layer._lora = lora_forward, lora_backward, adapters


def targets_of(model) -> dict[str, list[tuple[str, object, str]]]:
    """``{target: [(name, layer, key), ...]}``: every projection :func:`apply` can adapt.

    The targets are ``q, k, v, o`` (the attention's ``W_Q, W_K, W_V, W_O``)
    and the feed-forward's ``fc1, fc2`` (GPT and BERT blocks) or ``gate, up,
    down`` (SwiGLU's ``W1, W3, W2``, Llama's names), one entry per block.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.llama import Llama
    >>> from attention_lib.nn.lora import targets_of
    >>> m = Llama(10, 8, 2, 2, 1, 12, 16, np.random.default_rng(0))
    >>> list(targets_of(m)), targets_of(m)["down"][1][0]
    (['q', 'k', 'v', 'o', 'gate', 'up', 'down'], 'blocks.1.ffn.W2')
    """
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, list) or not blocks:
        raise TypeError(
            f"apply adapts TinyGPT, Llama (SmolLM2) and MiniLM models (a list of blocks), "
            f"got {type(model).__name__}"
        )
    out = {}
    for i, block in enumerate(blocks):
        found = []
        attn = getattr(block, "attn", None)
        if attn is not None and "W_Q" in getattr(attn, "params", {}):
            found += [(t, f"blocks.{i}.attn", attn, "W_" + t.upper()) for t in "qkvo"]
        ffn = getattr(block, "ffn", None)
        if ffn is not None and hasattr(ffn, "fc1"):
            found += [(t, f"blocks.{i}.ffn.{t}", getattr(ffn, t), "W") for t in ("fc1", "fc2")]
        elif ffn is not None and "W1" in getattr(ffn, "params", {}):
            swiglu = (("gate", "W1"), ("up", "W3"), ("down", "W2"))
            found += [(t, f"blocks.{i}.ffn", ffn, k) for t, k in swiglu]
        for t, owner, layer, key in found:
            out.setdefault(t, []).append((f"{owner}.{key}", layer, key))
    return out


def apply(
    model,
    targets: tuple[str, ...] = ("q", "v"),
    rank: int = 8,
    alpha: float = 16,
    rng: Generator | None = None,
) -> list[LoRAWeight]:
    """Attach LoRA adapters to the named projections of every block; return them.

    Parameters
    ----------
    model : TinyGPT, Llama or MiniLM
        Changed in place: each adapted layer's forward installs
        ``W0 + scaling A B`` and its backward fills the adapters' gradients
        (see the module's notes). Every other weight stays as it is.
    targets : sequence of str, optional
        Projections to adapt, from ``q, k, v, o`` and the feed-forward's
        ``fc1, fc2`` (TinyGPT, MiniLM) or ``gate, up, down`` (Llama);
        default ``("q", "v")``, the LoRA paper's choice.
    rank : int, optional
        ``r`` (default 8), at most the smaller side of every adapted weight.
    alpha : float, optional
        ``scaling = alpha / rank`` (default 16).
    rng : numpy.random.Generator, optional
        Draws every ``A``; default ``np.random.default_rng(0)``.

    Returns
    -------
    list of LoRAWeight
        One per adapted weight, in block order: what the optimiser is given,
        ``Adam(adapters)``. ``B = 0``, so the model computes exactly what it
        computed before.

    Raises
    ------
    TypeError
        A model without blocks, a ``rank`` or ``alpha`` of the wrong type.
    ValueError
        An unknown target (the message lists the model's), no target, a rank
        outside ``[1, min(n_in, n_out)]``, ``alpha <= 0``, or a model that
        already has adapters. Nothing is changed when any check fails.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import Adam, lora
    >>> model = TinyGPT(10, 16, 2, 2, 32, 8, np.random.default_rng(0))
    >>> tokens = np.array([[1, 2, 3, 4]])
    >>> before = model.forward(tokens)
    >>> adapters = lora.apply(model, ("q", "v"), rank=4, alpha=8)
    >>> bool(np.array_equal(model.forward(tokens), before))
    True
    >>> sum(a.params["lora_A"].size + a.params["lora_B"].size for a in adapters)
    512
    >>> lora.apply(model, ("q",))
    Traceback (most recent call last):
    ...
    ValueError: this model already has LoRA adapters (blocks.0.attn.W_Q, ...): apply once
    """
    available = targets_of(model)
    if isinstance(targets, str):
        targets = (targets,)
    targets = tuple(targets)
    if not targets:
        raise ValueError(f"targets is empty: name at least one of {', '.join(available)}")
    for t in targets:
        if t not in available:
            raise ValueError(
                f"unknown target {t!r}: this {type(model).__name__} has {', '.join(available)}"
            )
    if len(set(targets)) != len(targets):
        raise ValueError(f"targets names a projection twice: {targets}")
    chosen = [entry for t in targets for entry in available[t]]
    for name, layer, key in chosen:
        _check_rank_alpha(rank, alpha, *layer.params[key].shape, name)
    adapted = adapters_of(model)
    if adapted:
        raise ValueError(
            f"this model already has LoRA adapters ({adapted[0].name}, ...): apply once"
        )
    frozen = [name for name, layer, _ in chosen if hasattr(layer, "_frozen")]
    if frozen:
        raise ValueError(f"{frozen[0]} is frozen (lora.freeze): lora.unfreeze(model) first")
    rng = np.random.default_rng(0) if rng is None else as_rng(rng)
    rank, alpha = int(rank), float(alpha)
    by_layer = {}
    adapters = []
    for name, layer, key in sorted(chosen, key=lambda e: _block_order(e[0])):
        a = LoRAWeight(layer, key, name, rank, alpha, rng)
        adapters.append(a)
        by_layer.setdefault(id(layer), (layer, []))[1].append(a)
    for layer, own in by_layer.values():
        _attach(layer, own)
    return adapters


def _block_order(name):
    """Sort key: block index, then the name (so q, k, v, o of a block come together)."""
    return int(name.split(".")[1]), name


def adapters_of(model) -> list[LoRAWeight]:
    """The :class:`LoRAWeight` adapters :func:`apply` attached to ``model`` (empty if none).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import lora
    >>> model = TinyGPT(10, 8, 2, 2, 16, 6, np.random.default_rng(0))
    >>> len(lora.adapters_of(model)), len(lora.apply(model)) == len(lora.adapters_of(model))
    (0, True)
    """
    seen, out = set(), []
    for entries in targets_of(model).values():
        for _, layer, _ in entries:
            if hasattr(layer, "_lora") and id(layer) not in seen:
                seen.add(id(layer))
                out += layer._lora
    return sorted(out, key=lambda a: _block_order(a.name))


def merge(model) -> None:
    """Fold every adapter into its weight: ``W = W0 + scaling A B``, fixed until :func:`unmerge`.

    The model then computes what the adapted model computes (the same
    arrays), its ``params`` hold the merged weights (to save, or for the
    fast decoders), and its backward refuses to run.

    Raises
    ------
    ValueError
        The model has no adapters, or they are merged already.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import lora
    >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    >>> a = lora.apply(model, ("q",), rank=2)[0]
    >>> a.params["lora_B"][:] = 1.0
    >>> lora.merge(model)
    >>> bool(np.array_equal(model.blocks[0].attn.params["W_Q"], a.weight()))
    True
    >>> lora.unmerge(model)
    >>> model.blocks[0].attn.params["W_Q"] is a.base
    True
    """
    adapters = adapters_of(model)
    if not adapters:
        raise ValueError("the model has no LoRA adapters: lora.apply(model) first")
    if any(a.merged for a in adapters):
        raise ValueError("the LoRA adapters are merged already: lora.unmerge(model) first")
    for a in adapters:
        a.layer.params[a.key] = a.weight()
        a.merged = True


def unmerge(model) -> None:
    """Undo :func:`merge`: every weight back to ``W0`` (the original array), adapters active.

    Raises ``ValueError`` if the model has no adapters or they are not merged.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import lora
    >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    >>> a = lora.apply(model, ("v",), rank=2)[0]
    >>> lora.merge(model)
    >>> lora.unmerge(model)
    >>> model.blocks[0].attn.params["W_V"] is a.base, a.merged
    (True, False)
    """
    adapters = adapters_of(model)
    if not adapters:
        raise ValueError("the model has no LoRA adapters: lora.apply(model) first")
    if not all(a.merged for a in adapters):
        raise ValueError("the LoRA adapters are not merged: there is nothing to unmerge")
    for a in adapters:
        a.layer.params[a.key] = a.base
        a.merged = False


def _frozen_candidates(model):
    """``(name, layer)`` of every Linear and Embedding of ``model`` that :func:`freeze` freezes."""
    from .layers import Embedding

    if not hasattr(model, "named_leaves"):
        raise TypeError(
            f"freeze takes a TinyGPT, Llama (SmolLM2) or MiniLM model, got {type(model).__name__}"
        )
    tied = getattr(model, "head", False) is None  # Llama's output layer is tok.E: its grads stay
    unused = getattr(model, "pooler", None)  # MiniLM's: never run, a zero gradient
    out = []
    for name, layer in model.named_leaves():
        if layer is unused:
            continue
        if type(layer) is Linear and not hasattr(layer, "_lora"):
            out.append((name, layer))
        elif type(layer) is Embedding and not (tied and layer is getattr(model, "tok", None)):
            out.append((name, layer))
    return out


def freeze(model) -> list[str]:
    """Stop the model's plain Linear and Embedding layers computing weight gradients.

    LoRA trains only the adapters, but every layer's backward still
    computes its own ``dW`` (``x^T g``, a third of a linear layer's
    arithmetic), which the optimiser then ignores. After ``freeze``, each
    :class:`~attention_lib.nn.Linear` without an adapter returns ``g W^T``
    alone and each embedding table does nothing (nothing comes before it),
    at the layer's boundary: the layers' code is unchanged. Their ``grads``
    are emptied, so an optimiser given them refuses to step. The
    attention's and SwiGLU's weights, and the norms', still get gradients
    (one layer's forward and backward computes them all), as does a tied
    output layer's table (Llama's ``tok``: a Llama has nothing to freeze)
    and MiniLM's unused pooler (a zero gradient). The adapters' gradients
    are the same, bit for bit.

    Returns
    -------
    list of str
        The frozen layers' names.

    Raises
    ------
    TypeError
        A model that is not TinyGPT, Llama or MiniLM.
    ValueError
        A model frozen already.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import lora
    >>> model = TinyGPT(10, 8, 2, 2, 16, 6, np.random.default_rng(0))
    >>> adapters = lora.apply(model, ("q", "v"), rank=2)
    >>> lora.freeze(model)[:3]
    ['0', '1', '5']
    >>> logits = model.forward(np.array([[1, 2, 3]]))
    >>> model.backward(np.ones_like(logits))
    >>> model.head.grads, adapters[0].grads["lora_B"].shape
    ({}, (2, 8))
    >>> lora.unfreeze(model)
    """
    layers = _frozen_candidates(model)
    if any(hasattr(layer, "_frozen") for _, layer in layers):
        raise ValueError("the model is frozen already: lora.unfreeze(model) first")
    for _, layer in layers:
        if type(layer) is Linear:

            def dx_only(grad, layer=layer):
                return grad @ layer.params["W"].T

            layer.backward = dx_only
        else:
            layer.backward = lambda grad: None
        layer.grads, layer._frozen = {}, True
    return [name for name, _ in layers]


def unfreeze(model) -> None:
    """Undo :func:`freeze`: every layer computes its weight gradients again.

    Raises ``ValueError`` if the model is not frozen.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import lora
    >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    >>> names = lora.freeze(model)
    >>> lora.unfreeze(model)
    >>> "backward" in vars(model.head)
    False
    """
    layers = [layer for _, layer in _frozen_candidates(model) if hasattr(layer, "_frozen")]
    if not layers:
        raise ValueError("the model is not frozen: there is nothing to unfreeze")
    for layer in layers:
        del layer.backward, layer._frozen


def merge_and_unload(model):
    """Fold every adapter into its weight for good and detach them: a plain model again.

    PEFT's ``merge_and_unload``: ``W = W0 + scaling A B`` in the model's
    ``params``, the layers' own forward and backward back (so ``generate``
    uses its fast decoder), the adapters gone. Returns the model.

    Raises ``ValueError`` if the model has no adapters.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import lora
    >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    >>> a = lora.apply(model, ("q",), rank=2)[0]
    >>> a.params["lora_B"][:] = 1.0
    >>> t = np.array([[1, 2, 3]])
    >>> before = model.forward(t)
    >>> lora.merge_and_unload(model) is model, lora.adapters_of(model)
    (True, [])
    >>> bool(np.array_equal(model.forward(t), before)), "forward" in vars(model.blocks[0].attn)
    (True, False)
    """
    adapters = adapters_of(model)
    if not adapters:
        raise ValueError("the model has no LoRA adapters: lora.apply(model) first")
    for a in adapters:
        a.layer.params[a.key] = a.weight()
    for layer in {id(a.layer): a.layer for a in adapters}.values():
        del layer.forward, layer.backward, layer._lora
    return model


def step(adapters, optimizer, max_norm: float = 1.0) -> float:
    """Clip the adapters' gradients to norm ``max_norm``, then take the optimiser's step.

    A gradient holding NaN or infinity (a NaN in the batch, a loss that
    overflowed) is refused before anything changes: the adapters, their
    gradients and the optimiser's moments stay as they were, so the run can
    go on from the next batch.

    Parameters
    ----------
    adapters : list of LoRAWeight
        What :func:`apply` returned, after the model's backward.
    optimizer : Adam or SGD
        Built on ``adapters``.
    max_norm : float, optional
        The largest norm of all the adapters' gradients together (default 1).

    Returns
    -------
    float
        The gradients' norm before clipping.

    Raises
    ------
    ValueError
        A gradient holds NaN or infinity (the step is refused), or
        ``max_norm`` is not a positive number.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import Adam, lora
    >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    >>> adapters = lora.apply(model, ("q", "v"), rank=2)
    >>> opt = Adam(adapters, lr=0.01)
    >>> logits = model.forward(np.array([[1, 2, 3]]))
    >>> model.backward(np.full_like(logits, np.nan))
    >>> lora.step(adapters, opt)
    Traceback (most recent call last):
    ...
    ValueError: the adapters' gradients hold NaN or infinity (a NaN in the batch?): the step is refused and the adapters are unchanged
    """
    from .utils import clip_grad_norm

    try:
        norm = clip_grad_norm(adapters, max_norm, error_if_nonfinite=True)
    except FloatingPointError:
        raise ValueError(
            "the adapters' gradients hold NaN or infinity (a NaN in the batch?): "
            "the step is refused and the adapters are unchanged"
        ) from None
    optimizer.step()
    return norm


#: What :func:`save` writes in its ``config`` (the format, for :func:`load`).
FORMAT = "attention_lib.lora/1"


def _describe(model, adapters):
    """The config :func:`save` stores and :func:`load` compares: enough to refuse a misfit."""
    names = {a.name: list(a.base.shape) for a in adapters}
    return {
        "format": FORMAT,
        "model": type(model).__name__,
        "n_blocks": len(model.blocks),
        "rank": adapters[0].rank,
        "alpha": adapters[0].alpha,
        "weights": names,
    }


def save(model, path) -> None:
    """Write the model's adapters (only ``A`` and ``B``) to ``path``, an ``.npz``.

    Each adapter's ``lora_A`` and ``lora_B`` under ``"<weight>.lora_A"`` and
    ``"<weight>.lora_B"``, and a JSON ``config`` (the model's class and
    blocks, rank, alpha, every adapted weight and its shape), read back by
    :func:`load`. Written beside ``path`` and renamed into place.

    Raises
    ------
    ValueError
        The model has no adapters.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import lora
    >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    >>> adapters = lora.apply(model, ("q", "v"), rank=2)
    >>> path = os.path.join(tempfile.mkdtemp(), "adapter.npz")
    >>> lora.save(model, path)
    >>> sorted(np.load(path))[:2]
    ['blocks.0.attn.W_Q.lora_A', 'blocks.0.attn.W_Q.lora_B']
    """
    import json

    from ..data.paths import write_atomic

    adapters = adapters_of(model)
    if not adapters:
        raise ValueError("the model has no LoRA adapters to save: lora.apply(model) first")
    arrays = {f"{a.name}.{k}": v for a in adapters for k, v in a.params.items()}
    arrays["config"] = np.array(json.dumps(_describe(model, adapters)))
    write_atomic(path, lambda f: np.savez(f, **arrays), mode="wb")


def load(model, path) -> list[LoRAWeight]:
    """Read adapters written by :func:`save` into ``model``; return them.

    A model without adapters gets them (:func:`apply` with the file's
    targets, rank and alpha), then the file's values; a model with adapters
    must have the same ones (weights, rank, alpha), and takes the values.

    Raises
    ------
    ValueError
        Naming the file: not an adapter file (not a ``.npz`` of arrays and a
        JSON config), adapters saved for another model (its class, blocks,
        or a weight's shape differ), for another rank or alpha or other
        weights than the model's adapters, an array of the wrong shape or
        with NaN or infinity. Every check runs before the model changes: no
        half-applied adapter.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from attention_lib.models.gpt import TinyGPT
    >>> from attention_lib.nn import lora
    >>> model = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    >>> lora.apply(model, ("q", "v"), rank=2)[0].params["lora_B"][:] = 1
    >>> path = os.path.join(tempfile.mkdtemp(), "adapter.npz")
    >>> lora.save(model, path)
    >>> other = TinyGPT(10, 8, 2, 1, 16, 6, np.random.default_rng(0))
    >>> t = np.array([[1, 2, 3]])
    >>> bool(np.array_equal(lora.load(other, path)[0].params["lora_B"], np.ones((2, 8))))
    True
    >>> bool(np.array_equal(other.forward(t), model.forward(t)))
    True
    """
    import json
    import zipfile

    where = str(path)
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise ValueError(f"{where}: not an adapter file written by lora.save ({err})") from None
    config_text = arrays.pop("config", None)
    try:
        if config_text is None or config_text.shape != () or config_text.dtype.kind != "U":
            raise ValueError("no config")
        config = json.loads(str(config_text))
        if not isinstance(config, dict) or config.get("format") != FORMAT:
            raise ValueError("another format")
        rank, alpha, weights = config["rank"], config["alpha"], dict(config["weights"])
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"{where}: not an adapter file written by lora.save (its config: {err})"
        ) from None
    available = {n: layer.params[k].shape for e in targets_of(model).values() for n, layer, k in e}
    model_name = type(model).__name__
    if config.get("model") != model_name or config.get("n_blocks") != len(model.blocks):
        raise ValueError(
            f"{where}: the adapter was saved for a {config.get('model')} of "
            f"{config.get('n_blocks')} blocks, but this model is a {model_name} of "
            f"{len(model.blocks)} blocks"
        )
    for name, shape in weights.items():
        if name not in available or list(available[name]) != list(shape):
            have = "no such weight" if name not in available else f"{available[name]}"
            raise ValueError(
                f"{where}: the adapter was saved for another model: its {name} is "
                f"{tuple(shape)}, this model's is {have}"
            )
    current = adapters_of(model)
    if any(a.merged for a in current):
        raise ValueError(f"{where}: the model's adapters are merged: lora.unmerge(model) first")
    if current:
        mine = {a.name for a in current}
        if mine != set(weights) or current[0].rank != rank or current[0].alpha != alpha:
            raise ValueError(
                f"{where}: the file holds rank-{rank} adapters (alpha {alpha}) on "
                f"{len(weights)} weights, but the model's are rank {current[0].rank} "
                f"(alpha {current[0].alpha}) on {len(mine)}: load into a model without adapters"
            )
    expected = set()
    for name, (n_in, n_out) in weights.items():
        for k, want in (("lora_A", (n_in, rank)), ("lora_B", (rank, n_out))):
            key = f"{name}.{k}"
            expected.add(key)
            got = arrays.get(key)
            if got is None or got.shape != want or got.dtype.kind != "f":
                what = "missing" if got is None else f"{got.dtype} {got.shape}"
                raise ValueError(f"{where}: {key} is {what}; rank {rank} needs floats {want}")
            if not np.isfinite(got).all():
                raise ValueError(f"{where}: {key} holds NaN or infinity")
    if set(arrays) != expected:
        extra = sorted(set(arrays) - expected)
        raise ValueError(f"{where}: unexpected arrays {extra[:3]}: not one model's adapters")
    if not current:
        target_of = {n: t for t, entries in targets_of(model).items() for n, _, _ in entries}
        targets = tuple(dict.fromkeys(target_of[n] for n in weights))
        covered = {n for n, t in target_of.items() if t in targets}
        if covered != set(weights):
            raise ValueError(
                f"{where}: the adapters cover only some blocks of {', '.join(targets)}: "
                "lora.load reads what lora.save writes"
            )
        current = apply(model, targets, rank, alpha)
    for a in current:
        for k in ("lora_A", "lora_B"):
            a.params[k][...] = arrays[f"{a.name}.{k}"]
        a.layer.params[a.key] = a.weight()  # for readers of params before any forward
    return current


__all__ = [
    "FORMAT",
    "LoRALinear",
    "LoRAWeight",
    "adapters_of",
    "apply",
    "freeze",
    "load",
    "merge",
    "merge_and_unload",
    "save",
    "step",
    "targets_of",
    "unfreeze",
    "unmerge",
]
