"""The feed-forward layer and the Transformer block built from the other layers."""

from collections.abc import Mapping

import numpy as np
from numpy.random import Generator
from numpy.typing import ArrayLike

from .activations import GELU
from .dropout import Dropout
from .layers import Linear
from .norm import LayerNorm
from .multi_head_attention import KVCache, SelfAttention


class Composite:
    """A layer made of layers: ``params`` and ``grads`` gather theirs.

    A subclass defines :meth:`layers` or :meth:`named_layers`. ``params`` maps
    ``"name.k"`` to parameter ``k`` of each named layer (by default its index
    in :meth:`layers`): the same arrays, not copies, so :class:`Adam` can take
    a composite layer like any other.
    """

    def layers(self) -> list:
        return [layer for _, layer in self.named_layers()]

    def named_layers(self) -> list:
        if type(self).layers is Composite.layers:  # each default would call the other
            raise NotImplementedError(
                f"{type(self).__name__} must define layers() or named_layers()"
            )
        return [(str(i), layer) for i, layer in enumerate(self.layers())]

    @property
    def params(self) -> dict[str, np.ndarray]:
        return {f"{n}.{k}": a for n, layer in self.named_layers() for k, a in layer.params.items()}

    @property
    def grads(self) -> dict[str, np.ndarray]:
        return {f"{n}.{k}": a for n, layer in self.named_layers() for k, a in layer.grads.items()}

    def n_params(self) -> int:
        """How many numbers the parameters hold."""
        return sum(a.size for a in self.params.values())

    def named_leaves(self) -> list:
        """``(name, layer)`` for every layer that holds its own ``params``, through nested composites."""
        out = []
        for n, layer in self.named_layers():
            subs = layer.named_leaves() if isinstance(layer, Composite) else [("", layer)]
            out += [(f"{n}.{s}" if s else n, sub) for s, sub in subs]
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        """Every parameter as ``{"layer.param": array}``, the arrays themselves (as :attr:`params`)."""
        return self.params

    def load_state_dict(self, state: Mapping[str, ArrayLike], strict: bool = True) -> None:
        """Set every parameter from ``state`` (as :meth:`state_dict` gives it), in its dtype.

        As PyTorch's ``strict=True`` (the default): a key the model does not
        have, or one of its parameters missing from ``state``, is an error,
        so an RNNsearch's state cannot quietly lose its attention in an
        RNNencdec. ``strict=False`` loads the keys both have. Every array is
        checked (shape, real numbers, finite) before any parameter changes.
        """
        try:
            keys = set(state.keys())
        except AttributeError:
            raise TypeError(f"state must be a dict of arrays, got {type(state).__name__}") from None
        params = {f"{n}.{k}": (layer, k) for n, layer in self.named_leaves() for k in layer.params}
        missing, unexpected = sorted(set(params) - keys), sorted(keys - set(params))
        if strict and (missing or unexpected):
            raise KeyError(
                f"state does not fit {type(self).__name__}: "
                + "; ".join(
                    f"{what} key(s): {', '.join(names)}"
                    for what, names in (("missing", missing), ("unexpected", unexpected))
                    if names
                )
            )
        new = {}
        for name in sorted(set(params) & keys):
            layer, k = params[name]
            arr, want = np.asarray(state[name]), layer.params[k].shape
            if arr.shape != want:
                raise ValueError(
                    f"{name} has shape {arr.shape} in the checkpoint but {want} in the model"
                )
            if arr.dtype.kind not in "fiu" or not np.isfinite(arr).all():
                raise ValueError(
                    f"{name} must hold finite real numbers, got dtype "
                    f"{arr.dtype}" + (" with NaN or infinity" if arr.dtype.kind == "f" else "")
                )
            new[name] = arr
        for name, arr in new.items():
            layer, k = params[name]
            layer.params[k] = arr.astype(layer.params[k].dtype)


class FeedForward(Composite):
    """The position-wise feed-forward layer: ``Linear(d_model, d_ff)``, GELU, ``Linear(d_ff, d_model)``.

    Applied to every position separately (the same weights everywhere): it
    transforms what attention has gathered into each row, with ``d_ff``
    (usually ``4 d_model``) hidden units.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import FeedForward
    >>> ffn = FeedForward(8, 32, np.random.default_rng(0))
    >>> ffn.forward(np.ones((2, 5, 8))).shape, sorted(ffn.params)
    ((2, 5, 8), ['0.W', '0.b', '1.W', '1.b'])
    """

    def __init__(self, d_model: int, d_ff: int, rng: Generator, approximate: str = "none") -> None:
        self.fc1 = Linear(d_model, d_ff, rng)
        self.act = GELU(approximate)
        self.fc2 = Linear(d_ff, d_model, rng)

    def layers(self) -> list:
        return [self.fc1, self.fc2]

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self.fc2.forward(self.act.forward(self.fc1.forward(x)))

    def backward(self, grad: np.ndarray) -> np.ndarray:
        return self.fc1.backward(self.act.backward(self.fc2.backward(grad)))


class TransformerBlock(Composite):
    """A pre-LN Transformer block: ``x + MHA(LN(x))``, then ``x + FFN(LN(x))``.

    Parameters
    ----------
    d_model, n_heads, d_ff : int
        Row size, number of attention heads, hidden units of the feed-forward.
    rng : numpy.random.Generator
        Draws the weights and the dropout masks.
    dropout : float, optional
        Dropout probability (default 0) on the attention weights and on each
        branch's output before it is added back to ``x``, as in GPT-2.
    causal : bool, optional
        Causal self-attention (default True).
    rotary : bool, optional
        Rotary positions inside the attention (default False).
    attention_only : bool, optional
        Leave out the feed-forward half (default False).
    block_size, window, sinks, alibi : optional
        Passed to the attention layer
        (:class:`~attention_lib.nn.MultiHeadAttention`): tiled attention,
        a sliding window with attention sinks, ALiBi.

    Notes
    -----
    Each half adds to ``x`` rather than replacing it, so the backward of
    ``y = x + f(x)`` is ``dx = g + f'(x)^T g``: the gradient reaches every
    earlier layer through the identity, however deep the stack. The layer
    norm sits inside the branch (pre-LN, GPT-2), so the residual path itself
    is never normalised.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.nn import TransformerBlock
    >>> block = TransformerBlock(8, 2, 32, np.random.default_rng(0))
    >>> x = np.random.default_rng(1).normal(size=(3, 5, 8))
    >>> block.forward(x).shape, block.backward(np.ones((3, 5, 8))).shape
    ((3, 5, 8), (3, 5, 8))
    >>> len(block.layers())
    5
    """

    def __init__(
        self,
        d_model,
        n_heads,
        d_ff,
        rng,
        dropout=0.0,
        causal=True,
        rotary=False,
        attention_only=False,
        block_size=None,
        window=None,
        sinks=0,
        alibi=False,
    ):
        self.ln1 = LayerNorm(d_model)
        self.attn = SelfAttention(
            d_model,
            n_heads,
            rng,
            dropout,
            causal,
            rotary,
            block_size=block_size,
            window=window,
            sinks=sinks,
            alibi=alibi,
        )
        self.drop1 = Dropout(dropout, rng)
        self.attention_only = bool(attention_only)
        if not self.attention_only:
            self.ln2 = LayerNorm(d_model)
            self.ffn = FeedForward(d_model, d_ff, rng)
            self.drop2 = Dropout(dropout, rng)

    def layers(self) -> list:
        if self.attention_only:
            return [self.ln1, self.attn]
        return [self.ln1, self.attn, self.ln2] + self.ffn.layers()

    def dropouts(self) -> list:
        """The block's dropout layers (set their ``training`` flag)."""
        drops = [self.attn.dropout, self.drop1]
        return drops if self.attention_only else drops + [self.drop2]

    def forward(self, x: np.ndarray, cache: KVCache | None = None) -> np.ndarray:
        x = x + self.drop1.forward(self.attn.forward(self.ln1.forward(x), cache))
        if not self.attention_only:
            x = x + self.drop2.forward(self.ffn.forward(self.ln2.forward(x)))
        return x

    def backward(self, grad: np.ndarray) -> np.ndarray:
        if not self.attention_only:
            g = self.drop2.backward(grad)
            grad = grad + self.ln2.backward(self.ffn.backward(g))
        g = self.drop1.backward(grad)
        return grad + self.ln1.backward(self.attn.backward(g))
