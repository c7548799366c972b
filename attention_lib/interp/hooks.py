"""Hooks: record, replace or add to any named activation of the book's models.

Every model of the book is a stack of blocks around attention layers, and
every attention layer is the library's
:class:`~attention_lib.nn.MultiHeadAttention`. Their activations get one
set of names, whatever the model:

=============================  ======================  =====================================
name                           shape                   what it is
=============================  ======================  =====================================
``{block}.resid_pre``          (B, T, d_model)         the block's input: the residual stream
``{block}.resid_post``         (B, T, d_model)         the block's output
``{block}.mlp_out``            (B, T, d_model)         the feed-forward layer's output
``{attn}.q``                   (B, H, T, d_head)       queries, before rotary positions
``{attn}.k``, ``{attn}.v``     (B, H_kv, S, d_head)    keys (before rotary) and values
``{attn}.pattern``             (B, H, T, S)            the attention weights
``{attn}.z``                   (B, H, T, d_head)       each head's output, before ``W_O``
``{attn}.out``                 (B, T, d_model)         the layer's output, after ``W_O``
=============================  ======================  =====================================

``{block}`` is ``blocks.{i}`` (TinyGPT, Llama, SmolLM2, MiniLM) or
``encoder.{i}`` and ``decoder.{i}`` (the translation Transformer);
``{attn}`` is ``{block}.attn``, or ``{block}.self_attn`` and
``decoder.{i}.cross_attn``. :func:`activation_names` lists a model's names.
With grouped-query attention (``H_kv < H``) the keys and values have one
head per group: query head ``h`` reads key/value head ``h // (H / H_kv)``.

Hooks attach at module boundaries, never inside the attention's arithmetic:
inside :class:`Hooks` each hooked layer (block, attention layer or
feed-forward layer) gets its ``forward`` wrapped on the instance, and an
attention layer also its projection step ``_project`` (which computes the
queries, keys and values from the layer's inputs, and the output from the
heads' outputs, ``z W_O + b_O``). Leaving the ``with`` block, even after an
error, removes every wrapper. A ``forward`` set on a layer makes
:func:`~attention_lib.models.kv_cache.decoder_for` return None, so
``generate`` runs the layers' own ``forward`` (and the hooks) at every step,
with the model's own KV cache: the fast decoder steps aside.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["Hooks", "Layout", "activation_names", "layout", "run", "run_with_hooks"]

ATTN_POINTS = ("q", "k", "v", "pattern", "z", "out")
BLOCK_POINTS = ("resid_pre", "resid_post", "mlp_out")


class Layout:
    """Where a model keeps its blocks, attention layers and output layer.

    Attributes
    ----------
    blocks : dict
        ``{"blocks.0": block, ...}`` (or ``encoder.i``, ``decoder.i``), in order.
    attns : dict
        ``{"blocks.0.attn": layer, ...}``: every attention layer, in order.
    ffns : dict
        ``{"blocks.0": feed-forward layer, ...}`` for the blocks that have one.
    stream : list of str
        The blocks whose residual stream reaches the output layer, in order
        (the decoder's, for the translation Transformer).
    heads : list of str
        The attention layers of those blocks, in order: what a layer index
        ``i`` in ``(i, head)`` counts.
    norm, W_U, b_U :
        The final norm and the output layer ``logits = norm(x) W_U + b_U``
        (``b_U`` may be None); all None for a model without one (MiniLM).
    """

    def __init__(self, model, blocks, attns, ffns, stream, heads, norm, W_U, b_U):
        self.model, self.blocks, self.attns, self.ffns = model, blocks, attns, ffns
        self.stream, self.heads = stream, heads
        self.norm, self.W_U, self.b_U = norm, W_U, b_U

    def names(self) -> list[str]:
        """Every activation name, block by block."""
        out = []
        for prefix in self.blocks:
            out += [f"{prefix}.resid_pre", f"{prefix}.resid_post"]
            if prefix in self.ffns:
                out.append(f"{prefix}.mlp_out")
            out += [
                f"{a}.{p}" for a in self.attns if a.rsplit(".", 1)[0] == prefix for p in ATTN_POINTS
            ]
        return out

    def summary(self) -> str:
        """The names, with block indices folded: ``blocks.{0..4}.attn.{q, k, ...}``."""
        groups: dict[str, list[str]] = {}
        counts: dict[str, list[int]] = {}
        for name in self.names():
            m = re.match(r"^(\w+)\.(\d+)\.(.*)$", name)
            stem, i, rest = m.group(1), int(m.group(2)), m.group(3)
            parent, _, leaf = rest.rpartition(".")
            key = f"{stem}.{{i}}." + (parent + "." if parent else "")
            groups.setdefault(key, [])
            if leaf not in groups[key]:
                groups[key].append(leaf)
            counts.setdefault(stem, []).append(i)
        parts = []
        for key, leaves in groups.items():
            stem = key.split(".")[0]
            n = max(counts[stem]) + 1
            parts.append(key.replace("{i}", f"{{0..{n - 1}}}") + "{" + ", ".join(leaves) + "}")
        return "; ".join(parts)

    def attn_of(self, layer) -> str:
        """The attention layer's name for ``layer``: an index into :attr:`heads` or a name."""
        if isinstance(layer, str):
            if layer not in self.attns:
                raise ValueError(
                    f"{layer!r} is not an attention layer of {type(self.model).__name__}; "
                    f"it has {', '.join(self.attns)}"
                )
            return layer
        if isinstance(layer, (bool, np.bool_)) or not isinstance(layer, (int, np.integer)):
            raise TypeError(
                f"a layer must be an integer or an attention layer's name, got {layer!r}"
            )
        if not 0 <= layer < len(self.heads):
            raise ValueError(
                f"layer {layer} is outside this model's {len(self.heads)} attention layers "
                f"(counted from 0: {self.heads[0]} .. {self.heads[-1]})"
            )
        return self.heads[int(layer)]

    def head(self, spec, kind: str = "q") -> tuple[str, int]:
        """``(attention name, index)`` for a ``(layer, head)`` pair, checked.

        ``kind`` ``"q"`` (or ``"z"``, ``"pattern"``) counts query heads; ``"k"``
        and ``"v"`` count key/value heads (the groups of grouped-query attention).
        """
        if isinstance(spec, (str, bytes)) or np.ndim(spec) != 1 or len(spec) != 2:
            raise ValueError(f"a head must be a (layer, head) pair, got {spec!r}")
        name = self.attn_of(spec[0])
        att = self.attns[name]
        head = spec[1]
        if isinstance(head, (bool, np.bool_)) or not isinstance(head, (int, np.integer)):
            raise TypeError(f"head must be an integer, got {head!r}")
        n = att.n_kv_heads if kind in ("k", "v") else att.n_heads
        if not 0 <= head < n:
            what = "key/value heads (groups)" if kind in ("k", "v") else "query heads"
            raise ValueError(f"head {head} is out of range: {name} has {n} {what}, counted from 0")
        return name, int(head)


def layout(model) -> Layout:
    """The :class:`Layout` of one of the book's models (TinyGPT, Llama, MiniLM, Transformer).

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.llama import Llama
    >>> from attention_lib.interp import layout
    >>> model = Llama(n_vocab=10, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2,
    ...               d_ff=24, max_len=12, rng=np.random.default_rng(0))
    >>> layout(model).heads
    ['blocks.0.attn', 'blocks.1.attn']
    """
    from ..nn.multi_head_attention import MultiHeadAttention

    blocks, attns, ffns = {}, {}, {}
    if isinstance(getattr(model, "blocks", None), list):
        stacks = [("blocks", model.blocks, ("attn",))]
    elif isinstance(getattr(model, "decoder", None), list) and isinstance(
        getattr(model, "encoder", None), list
    ):
        stacks = [
            ("encoder", model.encoder, ("self_attn",)),
            ("decoder", model.decoder, ("self_attn", "cross_attn")),
        ]
    else:
        raise TypeError(
            f"{type(model).__name__} is not one of the book's models (TinyGPT, Llama, "
            f"MiniLM, Transformer): hooks need a list of blocks holding attention layers"
        )
    for stem, layers, names in stacks:
        for i, block in enumerate(layers):
            prefix = f"{stem}.{i}"
            blocks[prefix] = block
            for n in names:
                att = getattr(block, n, None)
                if not isinstance(att, MultiHeadAttention):
                    raise TypeError(f"{prefix}.{n} is not a MultiHeadAttention layer")
                attns[f"{prefix}.{n}"] = att
            if getattr(block, "ffn", None) is not None and not getattr(
                block, "attention_only", False
            ):
                ffns[prefix] = block.ffn
    stream = [p for p in blocks if not p.startswith("encoder.")]
    heads = [a for a in attns if a.rsplit(".", 1)[0] in stream]
    norm = W_U = b_U = None
    if hasattr(model, "ln_f") and hasattr(model, "head"):  # TinyGPT
        norm, W_U, b_U = model.ln_f, model.head.params["W"], model.head.params.get("b")
    elif hasattr(model, "norm") and hasattr(model, "tok") and hasattr(model, "head"):  # Llama
        norm = model.norm
        W_U = model.tok.params["E"].T if model.head is None else model.head.params["W"]
        b_U = None if model.head is None else model.head.params.get("b")
    elif hasattr(model, "dec_ln") and hasattr(model, "emb"):  # Transformer, tied
        norm, W_U = model.dec_ln, model.emb.params["E"].T
    return Layout(model, blocks, attns, ffns, stream, heads, norm, W_U, b_U)


def activation_names(model) -> list[str]:
    """Every name :class:`Hooks` accepts for ``model``, block by block.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import TinyGPT
    >>> from attention_lib.interp import activation_names
    >>> model = TinyGPT(n_vocab=10, d_model=8, n_heads=2, n_layers=1, d_ff=16,
    ...                 max_len=8, rng=np.random.default_rng(0))
    >>> activation_names(model)[:5]
    ['blocks.0.resid_pre', 'blocks.0.resid_post', 'blocks.0.mlp_out', 'blocks.0.attn.q', 'blocks.0.attn.k']
    """
    return layout(model).names()


def _checked_names(lay: Layout, names: Iterable[str], what: str) -> list[str]:
    known = set(lay.names())
    out = []
    for name in names:
        if not isinstance(name, str) or name not in known:
            raise KeyError(
                f"{what} names {name!r}, which {type(lay.model).__name__} does not have; "
                f"it has {lay.summary()}"
            )
        out.append(name)
    return out


class Hooks:
    """Within a ``with`` block, record, replace or add to named activations.

    Parameters
    ----------
    model : TinyGPT, Llama, MiniLM or Transformer
    record : iterable of str, optional
        Names whose values are kept, one array per call (after any
        replacement or addition): ``hooks[name]`` is the last call's,
        ``hooks.calls[name]`` all of them (one per generated token).
    replace : dict, optional
        ``{name: array or function}``: the activation is replaced by the
        array (of the activation's shape) or by ``function(activation)``.
    add : dict, optional
        ``{name: array or function}``: added to the activation (an array
        broadcastable to it, or ``function(activation)``'s result).

    Raises
    ------
    KeyError
        A name the model does not have (the message lists those it has),
        before anything is installed.
    ValueError
        During a forward pass, a replacement or addition of the wrong shape;
        leaving the ``with`` block removes every hook all the same.

    Notes
    -----
    On one name the replacement comes first, then the addition, then the
    recording. A replaced ``pattern`` is used: the layer's heads' outputs
    are recomputed from the new weights and the values (``z = P V``). A
    ``pattern`` hook needs the weights, so a layer asked for
    ``need_weights=False`` computes them anyway, and a tiled layer
    (``block_size``) is refused.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib.models.llama import Llama
    >>> from attention_lib.interp import Hooks
    >>> model = Llama(n_vocab=10, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2,
    ...               d_ff=24, max_len=12, rng=np.random.default_rng(0))
    >>> ids = np.array([[1, 2, 3, 4]])
    >>> with Hooks(model, record=["blocks.1.attn.z", "blocks.1.attn.k"]) as h:
    ...     logits = model.forward(ids)
    >>> h["blocks.1.attn.z"].shape, h["blocks.1.attn.k"].shape    # 4 heads, 2 groups
    ((1, 4, 4, 4), (1, 2, 4, 4))
    >>> zero_head_2 = lambda z: np.concatenate([z[:, :2], 0 * z[:, 2:3], z[:, 3:]], axis=1)
    >>> with Hooks(model, replace={"blocks.1.attn.z": zero_head_2}):
    ...     ablated = model.forward(ids)
    >>> with model.ablate([(1, 2)]):
    ...     bool(np.allclose(model.forward(ids), ablated))
    True
    >>> "forward" in vars(model.blocks[1].attn)     # nothing left installed
    False
    """

    def __init__(
        self,
        model,
        record: Iterable[str] = (),
        replace: Mapping[str, object] | None = None,
        add: Mapping[str, object] | None = None,
    ) -> None:
        self.layout = lay = layout(model)
        if isinstance(record, str):
            record = [record]
        self.record = _checked_names(lay, record, "record")
        self.replace = dict(
            zip(_checked_names(lay, (replace or {}).keys(), "replace"), (replace or {}).values())
        )
        self.add = dict(zip(_checked_names(lay, (add or {}).keys(), "add"), (add or {}).values()))
        for kind, table in (("replace", self.replace), ("add", self.add)):
            for name, value in table.items():
                if not callable(value):
                    try:
                        arr = np.asarray(value)
                    except Exception:
                        arr = np.asarray(None)
                    if arr.dtype.kind not in "fiub":
                        raise TypeError(
                            f"{kind}[{name!r}] must be an array of numbers or a function, "
                            f"got {type(value).__name__}"
                        )
                    table[name] = arr
        hooked = set(self.record) | set(self.replace) | set(self.add)
        for name in hooked:
            if name.endswith(".pattern"):
                att = lay.attns[name.rsplit(".", 1)[0]]
                if att.block_size is not None:
                    raise ValueError(
                        f"{name}: this layer is tiled (block_size = {att.block_size}) and never "
                        f"holds its attention weights; set block_size = None to hook them"
                    )
        self.hooked = hooked
        self.calls: dict[str, list[np.ndarray]] = {n: [] for n in self.record}
        self._undo: list[tuple[object, str, object]] = []

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.calls:
            raise KeyError(f"{name!r} was not recorded; record= named {self.record}")
        if not self.calls[name]:
            raise KeyError(f"{name!r} was recorded but no forward pass has computed it yet")
        return self.calls[name][-1]

    # -- applying one hook -------------------------------------------------
    def apply(self, name: str, value: np.ndarray) -> np.ndarray:
        """``value`` replaced, added to and recorded as the hooks on ``name`` say."""
        if name in self.replace:
            new = self.replace[name]
            new = new(value) if callable(new) else new
            new = np.asarray(new)
            if new.shape != value.shape:
                raise ValueError(
                    f"replace[{name!r}] has shape {new.shape} but the activation has "
                    f"shape {value.shape}"
                )
            value = new.astype(value.dtype, copy=False)
        if name in self.add:
            delta = self.add[name]
            delta = np.asarray(delta(value) if callable(delta) else delta)
            try:
                fits = np.broadcast_shapes(delta.shape, value.shape) == value.shape
            except ValueError:
                fits = False
            if not fits:
                raise ValueError(
                    f"add[{name!r}] has shape {delta.shape}, which does not broadcast to "
                    f"the activation's shape {value.shape}"
                )
            value = (value + delta).astype(value.dtype, copy=False)
        if name in self.calls:
            self.calls[name].append(np.array(value, copy=True))
        return value

    # -- installing and removing -------------------------------------------
    def _set(self, obj, attr: str, fn) -> None:
        had = attr in vars(obj)
        self._undo.append((obj, attr, vars(obj)[attr] if had else _MISSING))
        setattr(obj, attr, fn)

    def __enter__(self) -> Hooks:
        if self._undo:
            raise RuntimeError("these Hooks are already installed; make a new Hooks to nest them")
        try:
            lay = self.layout
            for prefix, block in lay.blocks.items():
                points = {f"{prefix}.{p}" for p in BLOCK_POINTS} & self.hooked
                if points:  # (the block's rows tell the feed-forward hook its (B, T))
                    rows = {}
                    self._set(block, "forward", self._block_forward(prefix, block.forward, rows))
                if prefix in lay.ffns and f"{prefix}.mlp_out" in points:
                    ffn = lay.ffns[prefix]
                    self._set(ffn, "forward", self._ffn_forward(prefix, ffn.forward, rows))
            for name, att in lay.attns.items():
                if any(f"{name}.{p}" in self.hooked for p in ATTN_POINTS):
                    state = {}
                    self._set(att, "forward", self._attn_forward(name, att, state))
                    self._set(att, "_project", self._attn_project(name, att, state))
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._restore()

    def _restore(self) -> None:
        while self._undo:
            obj, attr, old = self._undo.pop()
            if old is _MISSING:
                vars(obj).pop(attr, None)
            else:
                setattr(obj, attr, old)

    # -- the wrappers --------------------------------------------------------
    def _block_forward(self, prefix, forward, rows):
        def hooked_block_forward(x, *args, **kwargs):
            x = self.apply(f"{prefix}.resid_pre", x)
            rows["shape"] = np.shape(x)
            try:
                out = forward(x, *args, **kwargs)
            finally:
                rows.clear()
            return self.apply(f"{prefix}.resid_post", out)

        return hooked_block_forward

    def _ffn_forward(self, prefix, forward, rows):
        def hooked_ffn_forward(x, *args, **kwargs):
            y = forward(x, *args, **kwargs)
            shape = rows.get("shape")
            if shape is not None and len(shape) == 3 and y.shape == (shape[0] * shape[1], shape[2]):
                # MiniLM's block runs the layer on (B T, d) rows: the hook sees (B, T, d)
                return self.apply(f"{prefix}.mlp_out", y.reshape(shape)).reshape(y.shape)
            return self.apply(f"{prefix}.mlp_out", y)

        return hooked_ffn_forward

    def _attn_forward(self, name, att, state):
        forward = att.forward
        signature = inspect.signature(forward)
        wants_pattern = any(f"{name}.pattern" in t for t in (self.replace, self.add))

        def hooked_attention_forward(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            extra = next(
                (
                    bound.arguments.setdefault(p.name, {})
                    for p in signature.parameters.values()
                    if p.kind is inspect.Parameter.VAR_KEYWORD
                ),
                {},
            )
            if f"{name}.pattern" in self.hooked:  # the pattern hook needs the weights
                if "need_weights" in signature.parameters:
                    bound.arguments["need_weights"] = True
                elif "need_weights" in extra:
                    extra["need_weights"] = True
            cache = bound.arguments.get("cache", extra.get("cache"))
            if wants_pattern and cache is not None and hasattr(cache, "window"):
                raise ValueError(
                    f"{name}.pattern: a RollingKVCache keeps only part of the values; "
                    f"replacing the weights needs them all"
                )
            state.update(cache=cache, v=None)
            try:
                out = forward(*bound.args, **bound.kwargs)
            finally:
                state.clear()
            return self.apply(f"{name}.out", out)

        return hooked_attention_forward

    def _attn_project(self, name, att, state):
        project = att._project

        def hooked_project(x, names):
            ys = project(x, names)
            if names == "O":
                return ys
            out = []
            for n, y in zip(names, ys):
                heads = att.n_heads if n == "Q" else att.n_kv_heads
                key = f"{name}.{n.lower()}"
                if key in self.hooked:
                    B, T, cols = y.shape
                    split = y.reshape(B, T, heads, cols // heads).transpose(0, 2, 1, 3)
                    split = self.apply(key, split)
                    y = np.ascontiguousarray(split.transpose(0, 2, 1, 3)).reshape(B, T, cols)
                if n == "V":
                    state["v"] = y
                out.append(y)
            return out

        def hooked_output(context, names):
            if names != "O":
                return hooked_project(context, names)
            B, T, cols = context.shape
            H, H_kv = att.n_heads, att.n_kv_heads
            if f"{name}.pattern" in self.hooked:
                P = att.weights  # (B, H, T, S), set before the output projection
                new = self.apply(f"{name}.pattern", P)
                if new is not P:
                    cache = state.get("cache")
                    if cache is not None and cache.v is not None:
                        v = cache.v  # (B, H_kv, S, d): every value the queries saw
                    else:
                        v = state["v"]
                        v = v.reshape(B, v.shape[1], H_kv, -1).transpose(0, 2, 1, 3)
                    S = v.shape[-2]
                    z = new.reshape(B, H_kv, H // H_kv, T, S) @ v[:, :, None]
                    context = z.reshape(B, H, T, -1).transpose(0, 2, 1, 3).reshape(B, T, -1)
                    context = context.astype(att.params["W_O"].dtype, copy=False)
                    att.weights = new
            if f"{name}.z" in self.hooked:
                z = context.reshape(B, T, H, cols // H).transpose(0, 2, 1, 3)
                z = self.apply(f"{name}.z", z)
                context = np.ascontiguousarray(z.transpose(0, 2, 1, 3)).reshape(B, T, cols)
            return project(context, "O")

        return hooked_output


_MISSING = object()


def run(model, inputs):
    """``model.forward`` on ``inputs``: a tuple is its arguments, a dict its keywords,
    anything else the one argument (token ids (T,) gain a batch axis)."""
    if isinstance(inputs, tuple):
        return model.forward(*inputs)
    if isinstance(inputs, Mapping):
        return model.forward(**inputs)
    if np.ndim(inputs) == 1:
        inputs = np.asarray(inputs)[None]
    return model.forward(inputs)


def run_with_hooks(
    model,
    inputs,
    record: Iterable[str] = (),
    replace: Mapping[str, object] | None = None,
    add: Mapping[str, object] | None = None,
) -> tuple[object, dict[str, np.ndarray]]:
    """One forward pass of ``model`` on ``inputs`` with :class:`Hooks`.

    Returns
    -------
    (output, dict)
        The model's output (its logits) and ``{name: array}`` of the recorded names.

    Examples
    --------
    >>> import numpy as np
    >>> from attention_lib import TinyGPT
    >>> from attention_lib.interp import run_with_hooks
    >>> model = TinyGPT(n_vocab=10, d_model=8, n_heads=2, n_layers=2, d_ff=16,
    ...                 max_len=8, rng=np.random.default_rng(0))
    >>> logits, acts = run_with_hooks(model, np.array([[1, 2, 3]]), record=["blocks.1.resid_pre"])
    >>> acts["blocks.1.resid_pre"].shape
    (1, 3, 8)
    """
    with Hooks(model, record, replace, add) as h:
        out = run(model, inputs)
    return out, {n: h[n] for n in h.record}
