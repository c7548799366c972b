"""PyTorch's own sample inputs, run through the library: a peer suite.

PyTorch ships sample inputs for its modules, functions and optimisers
(``torch.testing._internal``: ``common_modules.module_db``,
``common_methods_invocations.op_db``, ``common_optimizers.optim_db``): the
edge cases its own tests use (no batch axis, empty batches, no bias, stacked
and bidirectional GRUs, several ``approximate`` and ``eps`` values, ...).
Every sample that the library's API can express is run through the library
and compared with torch at float64: the output and every gradient (of a
random weighting of the output, by the library's hand-written backward
against torch's autograd). Samples it cannot express are counted as
*unsupported*, each with its reason; the counts are printed at the end of
the module's run, and a single disagreement fails.

Covered: ``nn.Linear``, ``nn.GELU``, ``nn.LayerNorm``, ``nn.GRU`` (stacked and
bidirectional, assembled from the library's one-direction GRU), the
Transformer encoder layers (as :class:`~attention_lib.nn.TransformerBlock`),
``nn.RMSNorm`` (when the library has it); ``F.linear``, ``F.gelu``,
``F.layer_norm``, ``F.rms_norm``, ``F.dropout`` (by its law: it is random),
``F.scaled_dot_product_attention`` (grouped-query heads by repeating them);
``torch.optim.Adam``; ``clip_grad_norm_`` (which has no sample database: its
samples follow PyTorch's own test of it, every norm type and non-finite
gradients).
"""

import math
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # torch.testing._internal needs it

from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_modules import module_db
from torch.testing._internal.common_optimizers import optim_db

import attention_lib.nn as lnn
from attention_lib import scaled_dot_product_attention
from attention_lib.backward import scaled_dot_product_attention_backward

F = torch.nn.functional
DT = torch.float64
RTOL, ATOL = 1e-9, 1e-11
TALLY = {}  # family -> Counter of "agree" / "unsupported: reason"


class Unsupported(Exception):
    """The library's API cannot express this sample (the message says why)."""


def a(t):
    """A tensor as a float64 NumPy array (detached)."""
    return t.detach().to(DT).numpy().copy()


def close(ours, theirs, what):
    theirs = a(theirs) if torch.is_tensor(theirs) else np.asarray(theirs)
    assert np.shape(ours) == theirs.shape, f"{what}: shape {np.shape(ours)} vs {theirs.shape}"
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=what)


def weights_for(out, seed=0):
    """A random weighting ``R`` of an output: the loss is ``sum(R * out)``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(out.shape, generator=g, dtype=DT)


def run_family(family, samples, driver):
    """Drive every sample; tally agree / unsupported; let a disagreement fail."""
    tally = TALLY.setdefault(family, Counter())
    for i, sample in enumerate(samples):
        try:
            driver(sample)
        except Unsupported as why:
            tally[f"unsupported: {why}"] += 1
        except AssertionError as err:
            tally["disagree"] += 1
            raise AssertionError(f"{family}, sample {i}: {err}") from None
        else:
            tally["agree"] += 1
    assert tally["agree"] + sum(v for k, v in tally.items() if k != "agree") > 0


def module_samples(name, training=False):
    (info,) = [m for m in module_db if m.module_cls.__name__ == name]
    inputs = info.module_inputs_func(
        info, device="cpu", dtype=DT, requires_grad=True, training=training
    )
    return [(info.module_cls, mi) for mi in inputs]


def op_samples(name):
    (info,) = [o for o in op_db if o.name == name and o.variant_test_name == ""]
    return list(info.sample_inputs("cpu", DT, requires_grad=True))


def build(cls, mi):
    torch.manual_seed(0)
    return cls(*mi.constructor_input.args, **mi.constructor_input.kwargs).to(DT)


def forward_input(mi):
    args, kwargs = mi.forward_input.args, dict(mi.forward_input.kwargs)
    if "input" in kwargs:
        args = (kwargs.pop("input"),) + tuple(args)
    return args, kwargs


# -- Linear ----------------------------------------------------------------------


def _linear(x, weight, bias):
    """The library's Linear with torch's weights, against F.linear: output and every gradient."""
    if weight.ndim != 2:
        raise Unsupported("a 1-D weight (Linear maps rows to rows)")
    layer = lnn.Linear(
        weight.shape[1], weight.shape[0], np.random.default_rng(0), bias=bias is not None
    )
    layer.params["W"] = a(weight).T.copy()
    if bias is not None:
        layer.params["b"] = a(bias)
    xt = x.detach().clone().requires_grad_(True)
    wt = weight.detach().clone().requires_grad_(True)
    bt = None if bias is None else bias.detach().clone().requires_grad_(True)
    out = F.linear(xt, wt, bt)
    R = weights_for(out)
    (out * R).sum().backward()
    close(layer.forward(a(x)), out, "output")
    close(layer.backward(a(R)), xt.grad, "d input")
    close(layer.grads["W"], wt.grad.T, "d weight")
    if bias is not None:
        close(layer.grads["b"], bt.grad, "d bias")


def test_module_linear():
    def drive(sample):
        cls, mi = sample
        m = build(cls, mi)
        (x,), _ = forward_input(mi)
        _linear(x, m.weight, m.bias)

    run_family("nn.Linear", module_samples("Linear"), drive)


def test_op_linear():
    def drive(s):
        _linear(s.input, s.args[0], s.args[1] if len(s.args) > 1 else s.kwargs.get("bias"))

    run_family("F.linear", op_samples("nn.functional.linear"), drive)


# -- GELU ------------------------------------------------------------------------


def _gelu(x, approximate):
    layer = lnn.GELU(approximate)
    xt = x.detach().clone().requires_grad_(True)
    out = F.gelu(xt, approximate=approximate)
    R = weights_for(out)
    (out * R).sum().backward()
    close(layer.forward(a(x)), out, "output")
    close(layer.backward(a(R)), xt.grad, "d input")


def test_module_gelu():
    def drive(sample):
        cls, mi = sample
        (x,), _ = forward_input(mi)
        _gelu(x, build(cls, mi).approximate)

    run_family("nn.GELU", module_samples("GELU"), drive)


def test_op_gelu():
    run_family(
        "F.gelu",
        op_samples("nn.functional.gelu"),
        lambda s: _gelu(s.input, s.kwargs.get("approximate", "none")),
    )


# -- LayerNorm and RMSNorm ----------------------------------------------------------


def _norm(kind, x, shape, weight, bias, eps):
    """LayerNorm / RMSNorm over the trailing axes ``shape``, flattened into one."""
    shape = tuple(shape)
    d = math.prod(shape)
    if eps is None:
        eps = 1e-5 if kind == "layer" else None
    if kind == "rms":
        if not hasattr(lnn, "RMSNorm"):
            raise Unsupported("attention_lib.nn has no RMSNorm on this branch")
        if eps is None:  # torch: the dtype's machine epsilon
            eps = float(torch.finfo(DT).eps)
    if eps <= 0:
        raise Unsupported(f"eps = {eps} (the library requires eps > 0, torch accepts it)")
    layer = lnn.LayerNorm(d, eps) if kind == "layer" else lnn.RMSNorm(d, eps)
    if weight is not None:
        layer.params["gamma"] = a(weight).reshape(d)
    if kind == "layer" and bias is not None:
        layer.params["beta"] = a(bias).reshape(d)
    xt = x.detach().clone().requires_grad_(True)
    wt = None if weight is None else weight.detach().clone().requires_grad_(True)
    bt = None if bias is None else bias.detach().clone().requires_grad_(True)
    if kind == "layer":
        out = F.layer_norm(xt, shape, wt, bt, eps)
    else:
        out = F.rms_norm(xt, shape, wt, eps)
    R = weights_for(out)
    (out * R).sum().backward()
    lead = tuple(x.shape[: x.ndim - len(shape)])
    close(layer.forward(a(x).reshape(lead + (d,))).reshape(x.shape), out, "output")
    close(layer.backward(a(R).reshape(lead + (d,))).reshape(x.shape), xt.grad, "d input")
    if wt is not None:
        close(layer.grads["gamma"].reshape(shape), wt.grad, "d weight")
    if bt is not None:
        close(layer.grads["beta"].reshape(shape), bt.grad, "d bias")


def _norm_module(kind):
    def drive(sample):
        cls, mi = sample
        m = build(cls, mi)
        (x,), _ = forward_input(mi)
        _norm(kind, x, m.normalized_shape, m.weight, getattr(m, "bias", None), m.eps)

    return drive


def test_module_layer_norm():
    run_family("nn.LayerNorm", module_samples("LayerNorm"), _norm_module("layer"))


def test_module_rms_norm():
    run_family("nn.RMSNorm", module_samples("RMSNorm"), _norm_module("rms"))


def _norm_op(kind):
    def drive(s):
        args = list(s.args) + [None] * 3
        shape = args[0]
        weight = args[1] if args[1] is not None else s.kwargs.get("weight")
        if kind == "layer":
            bias = args[2] if args[2] is not None else s.kwargs.get("bias")
            eps = s.kwargs.get("eps", args[3] if args[3] is not None else 1e-5)
        else:
            bias, eps = None, s.kwargs.get("eps", args[2])
        _norm(kind, s.input, shape, weight, bias, eps)

    return drive


def test_op_layer_norm():
    run_family("F.layer_norm", op_samples("nn.functional.layer_norm"), _norm_op("layer"))


def test_op_rms_norm():
    run_family("F.rms_norm", op_samples("nn.functional.rms_norm"), _norm_op("rms"))


# -- GRU: stacked and bidirectional, from the library's one-direction GRU --------


def _library_gru(m):
    """The library's GRUs with the weights of torch GRU ``m``: ``[[fwd, bwd?] per layer]``."""
    H, layers = m.hidden_size, []
    for k in range(m.num_layers):
        dirs = []
        for suffix, reverse in (("", False), ("_reverse", True))[: 2 if m.bidirectional else 1]:
            w_ih = getattr(m, f"weight_ih_l{k}{suffix}")
            gru = lnn.GRU(w_ih.shape[1], H, np.random.default_rng(0), np.float64, reverse)
            gru.params["W_ih"] = a(w_ih).T.copy()
            gru.params["W_hh"] = a(getattr(m, f"weight_hh_l{k}{suffix}")).T.copy()
            for name in ("ih", "hh"):  # bias=False: zero biases, their gradients unused
                b = getattr(m, f"bias_{name}_l{k}{suffix}", None) if m.bias else None
                gru.params[f"b_{name}"] = np.zeros(3 * H) if b is None else a(b)
            dirs.append(gru)
        layers.append(dirs)
    return layers


def test_module_gru():
    def drive(sample):
        cls, mi = sample
        m = build(cls, mi)
        if m.training and m.dropout > 0 and m.num_layers > 1:
            raise Unsupported("dropout between GRU layers while training (random)")
        args, kwargs = forward_input(mi)
        x, h0 = args[0], (args[1] if len(args) > 1 else kwargs.get("hx"))
        xt = x.detach().clone().requires_grad_(True)
        h0t = None if h0 is None else h0.detach().clone().requires_grad_(True)
        out, hn = m(xt, h0t)
        R, Rh = weights_for(out, 1), weights_for(hn, 2)
        ((out * R).sum() + (hn * Rh).sum()).backward()
        # to the library's layout: (B, T, d); torch's unbatched and time-major inputs
        unbatched = x.ndim == 2
        to_btd = (
            (lambda t: t[None])
            if unbatched
            else ((lambda t: t) if m.batch_first else (lambda t: t.transpose(0, 1)))
        )
        X, dO = a(to_btd(x)), a(to_btd(R))
        D = 2 if m.bidirectional else 1
        B = X.shape[0]
        H0 = (
            np.zeros((m.num_layers * D, B, m.hidden_size))
            if h0 is None
            else (a(h0)[:, None] if unbatched else a(h0))
        )
        dHn = a(Rh)[:, None] if unbatched else a(Rh)
        grus, inp, outs = _library_gru(m), X, []
        for k, dirs in enumerate(grus):
            hs = [g.forward(inp, h0=H0[k * D + j]) for j, g in enumerate(dirs)]
            outs.append((inp, hs))
            inp = np.concatenate(hs, axis=-1)
        back = {"x": to_btd(xt.grad)}
        ours_out = inp
        hn_ours = np.stack(
            [
                hs[j][:, -1 if not g.reverse else 0]
                for (_, hs), dirs in zip(outs, grus)
                for j, g in enumerate(dirs)
            ]
        )
        close(ours_out, to_btd(out), "output")
        close(hn_ours, hn[:, None] if unbatched else hn, "h_n")
        d_in, dh0 = dO, np.zeros_like(H0)
        for k in range(len(grus) - 1, -1, -1):
            dirs = grus[k]
            H = m.hidden_size
            d_next = 0
            for j, g in enumerate(dirs):
                dhs = d_in[..., j * H : (j + 1) * H].copy()
                dhs[:, -1 if not g.reverse else 0] += dHn[k * D + j]
                d_next = d_next + g.backward(dhs)
                dh0[k * D + j] = g.dh0
                for name, ours in g.grads.items():
                    if name.startswith("b") and not m.bias:
                        continue
                    pt = name.replace("W_", "weight_").replace("b_", "bias_")
                    theirs = getattr(m, f"{pt}_l{k}{'_reverse' if g.reverse else ''}").grad
                    close(
                        ours,
                        theirs.T if name.startswith("W") else theirs,
                        f"layer {k} dir {j} {name}",
                    )
            d_in = d_next
        close(d_in, back["x"], "d input")
        if h0t is not None:
            close(dh0[:, 0] if unbatched else dh0, h0t.grad, "d h0")

    run_family("nn.GRU", module_samples("GRU") + module_samples("GRU", training=True), drive)


# -- Transformer encoder layers as TransformerBlock -------------------------------------


def _block_from(layer, causal):
    """A TransformerBlock with the weights of a torch TransformerEncoderLayer, or Unsupported."""
    if not layer.norm_first:
        raise Unsupported("post-LN (norm_first=False): TransformerBlock is pre-LN, as GPT-2")
    act = layer.activation
    if not (act is F.gelu or isinstance(act, torch.nn.GELU) and act.approximate == "none"):
        raise Unsupported(f"activation {getattr(act, '__name__', act)}: the block uses GELU")
    if layer.linear1.bias is None or layer.norm1.bias is None:
        raise Unsupported("no biases (bias=False): the block always has them")
    if layer.norm1.eps != 1e-5 or layer.norm2.eps != 1e-5:
        raise Unsupported("layer_norm_eps other than 1e-5")
    if layer.training and (layer.dropout.p > 0 or layer.dropout1.p > 0):
        raise Unsupported("dropout while training (random)")
    att = layer.self_attn
    d, h, d_ff = att.embed_dim, att.num_heads, layer.linear1.out_features
    block = lnn.TransformerBlock(d, h, d_ff, np.random.default_rng(0), causal=causal)
    p = block.attn.params
    p["W_QKV"], p["b_QKV"] = a(att.in_proj_weight).T.copy(), a(att.in_proj_bias)
    p["W_O"], p["b_O"] = a(att.out_proj.weight).T.copy(), a(att.out_proj.bias)
    for ours, theirs in ((block.ln1, layer.norm1), (block.ln2, layer.norm2)):
        ours.params = {"gamma": a(theirs.weight), "beta": a(theirs.bias)}
    for ours, theirs in ((block.ffn.fc1, layer.linear1), (block.ffn.fc2, layer.linear2)):
        ours.params = {"W": a(theirs.weight).T.copy(), "b": a(theirs.bias)}
    return block


def _causal_or_none(mask, is_causal, T):
    """True for a causal mask, False for none, Unsupported for any other mask."""
    if mask is None:
        return bool(is_causal)
    m = a(mask) if mask.dtype != torch.bool else mask.numpy()
    tri = np.tril(np.ones((T, T), bool))
    if mask.dtype == torch.bool and m.shape == (T, T) and np.array_equal(m, ~tri):
        return True
    if (
        mask.dtype != torch.bool
        and m.shape == (T, T)
        and np.array_equal(np.isneginf(m), ~tri)
        and not m[tri].any()
    ):
        return True
    raise Unsupported("an attention mask other than the causal one")


def _encoder(name):
    def drive(sample):
        cls, mi = sample
        m = build(cls, mi)
        args, kwargs = forward_input(mi)
        x = args[0]
        mask = args[1] if len(args) > 1 else kwargs.get("mask", kwargs.get("src_mask"))
        if kwargs.get("src_key_padding_mask") is not None or (
            len(args) > 2 and args[2] is not None
        ):
            raise Unsupported("a key-padding mask")
        layers = [m] if name == "TransformerEncoderLayer" else list(m.layers)
        if name == "TransformerEncoder" and m.norm is not None:
            raise Unsupported("a final norm in TransformerEncoder")
        first = layers[0]
        unbatched = x.ndim == 2
        to_btd = (
            (lambda t: t[None])
            if unbatched
            else ((lambda t: t) if first.self_attn.batch_first else (lambda t: t.transpose(0, 1)))
        )
        T = to_btd(x).shape[1]
        causal = _causal_or_none(mask, kwargs.get("is_causal", False), T)
        blocks = [_block_from(layer, causal) for layer in layers]
        xt = x.detach().clone().requires_grad_(True)
        out = m(xt, mask, **{k: v for k, v in kwargs.items() if k not in ("mask", "src_mask")})
        R = weights_for(out)
        (out * R).sum().backward()
        h = a(to_btd(x))
        for block in blocks:
            h = block.forward(h)
        close(h, to_btd(out), "output")
        g = a(to_btd(R))
        for block in reversed(blocks):
            g = block.backward(g)
        close(g, to_btd(xt.grad), "d input")
        for block, layer in zip(blocks, layers):
            att = layer.self_attn
            close(block.attn.grads["W_QKV"], att.in_proj_weight.grad.T, "d in_proj_weight")
            close(block.attn.grads["W_O"], att.out_proj.weight.grad.T, "d out_proj.weight")
            close(block.ffn.fc1.grads["W"], layer.linear1.weight.grad.T, "d linear1.weight")
            close(block.ln2.grads["gamma"], layer.norm2.weight.grad, "d norm2.weight")

    return drive


@pytest.mark.parametrize("name", ["TransformerEncoderLayer", "TransformerEncoder"])
def test_module_transformer_encoder(name):
    run_family(
        f"nn.{name}", module_samples(name) + module_samples(name, training=True), _encoder(name)
    )


@pytest.mark.parametrize("name", ["TransformerDecoderLayer", "Transformer"])
def test_module_transformer_with_cross_attention(name):
    def drive(sample):
        raise Unsupported(
            "cross-attention (encoder-decoder): TransformerBlock is "
            "decoder-only; attention_lib.nn.MultiHeadAttention brings it"
        )

    run_family(f"nn.{name}", module_samples(name), drive)


# -- Dropout, by its law ----------------------------------------------------------------


def test_op_dropout_by_its_law():
    def drive(s):
        p, training = s.kwargs.get("p", 0.5), s.kwargs.get("training", True)
        if p >= 1:
            raise Unsupported("p = 1 (the library refuses it: every entry would be dropped)")
        x = a(s.input)
        drop = lnn.Dropout(p, np.random.default_rng(0))
        drop.training = training
        y = drop.forward(x)
        theirs = F.dropout(s.input.detach(), p, training)
        if not training or p == 0:  # the identity, exactly, as torch
            np.testing.assert_array_equal(y, x)
            np.testing.assert_array_equal(a(theirs), x)
            return
        kept = y != 0
        close(y[kept], x[kept] / (1 - p), "kept entries scaled by 1 / (1 - p)")
        close(drop.backward(np.ones_like(x)), kept / (1 - p), "gradient: the same mask")
        # torch's law, the same: each entry 0 or x / (1 - p)
        t_kept = a(theirs) != 0
        close(a(theirs)[t_kept], x[t_kept] / (1 - p), "torch's kept entries")

    run_family("F.dropout", op_samples("nn.functional.dropout"), drive)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keeps_one_minus_p_of_the_entries_as_torch(p):
    n = 200_000
    ours = lnn.Dropout(p, np.random.default_rng(1)).forward(np.ones(n))
    theirs = F.dropout(torch.ones(n, dtype=DT), p, True).numpy()
    sd = math.sqrt(p * (1 - p) / n)
    for y in (ours, theirs):
        assert abs((y != 0).mean() - (1 - p)) < 5 * sd
        assert abs(y.mean() - 1) < 5 * sd / (1 - p)  # the expectation is kept


# -- scaled_dot_product_attention --------------------------------------------------------


def test_op_scaled_dot_product_attention():
    def drive(s):
        q, k, v = s.input, s.args[0], s.args[1]
        kw = dict(s.kwargs)
        if kw.get("dropout_p", 0.0) > 0:
            raise Unsupported("dropout_p > 0 (random)")
        mask, is_causal = kw.get("attn_mask"), kw.get("is_causal", False)
        scale, gqa = kw.get("scale"), kw.get("enable_gqa", False)
        rep = 1
        if gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
            rep = q.shape[-3] // k.shape[-3]
        qt, kt, vt = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        out = F.scaled_dot_product_attention(qt, kt, vt, **kw)
        R = weights_for(out)
        (out * R).sum().backward()
        K, V = a(k), a(v)
        if rep > 1:  # grouped-query heads: each K/V head serves rep
            K, V = np.repeat(K, rep, axis=-3), np.repeat(V, rep, axis=-3)
        M = None if mask is None else (mask.numpy() if mask.dtype == torch.bool else a(mask))
        ours = scaled_dot_product_attention(a(q), K, V, M, is_causal, scale)
        close(ours, out, "output")
        dq, dk, dv = scaled_dot_product_attention_backward(a(R), a(q), K, V, M, is_causal, scale)
        if rep > 1:
            dk = dk.reshape(dk.shape[:-3] + (-1, rep) + dk.shape[-2:]).sum(axis=-3)
            dv = dv.reshape(dv.shape[:-3] + (-1, rep) + dv.shape[-2:]).sum(axis=-3)
        close(dq, qt.grad, "d query")
        close(dk, kt.grad, "d key")
        close(dv, vt.grad, "d value")

    run_family(
        "F.scaled_dot_product_attention",
        op_samples("nn.functional.scaled_dot_product_attention"),
        drive,
    )


# -- Adam ------------------------------------------------------------------------------


class _Params:
    """A stand-in layer: ``params`` and ``grads`` dicts, as the library's optimiser reads."""

    def __init__(self, arrays):
        self.params = {str(i): x for i, x in enumerate(arrays)}
        self.grads = {}


def test_optim_adam():
    (info,) = [o for o in optim_db if o.optim_cls.__name__ == "Adam"]

    def drive(opt_input):
        kw = dict(opt_input.kwargs)
        for key, neutral in (("weight_decay", 0), ("amsgrad", False), ("maximize", False)):
            if kw.get(key, neutral) != neutral:
                raise Unsupported(f"{key}={kw[key]} (not in the library's Adam)")
        lr = float(kw.get("lr", 1e-3))
        betas = tuple(float(b) for b in kw.get("betas", (0.9, 0.999)))
        eps = float(kw.get("eps", 1e-8))
        rng = np.random.default_rng(0)
        shapes = [(3, 4), (4,), (2, 2, 2)]
        ours = _Params([rng.normal(size=sh) for sh in shapes])
        theirs = [torch.tensor(x, requires_grad=True) for x in ours.params.values()]
        opt_t = info.optim_cls(theirs, **kw)
        opt = lnn.Adam([ours], lr=lr, betas=betas, eps=eps)
        for _ in range(5):
            grads = [rng.normal(size=sh) for sh in shapes]
            ours.grads = {str(i): g.copy() for i, g in enumerate(grads)}
            for t, g in zip(theirs, grads):
                t.grad = torch.tensor(g)
            opt.step()
            opt_t.step()
            for i, t in enumerate(theirs):
                close(ours.params[str(i)], t, f"parameter {i}")

    inputs = info.optim_inputs_func(device="cpu")
    variants = [
        type(i)(params=None, kwargs={**i.kwargs, "foreach": f}, desc=i.desc)
        for i in inputs
        for f in (False, True)
    ]
    run_family("optim.Adam", variants, drive)


# -- clip_grad_norm_ ----------------------------------------------------------------


def _clip_samples():
    """PyTorch's test of clip_grad_norm_ as samples: norm types, sizes, non-finite grads."""
    return [
        {"norm_type": nt, "max_norm": mn, "bad": bad, "error": err}
        for nt in (0.5, 1.0, 2.0, 4.0, math.inf)
        for mn in (1.25, 1e-3, 100.0)
        for bad in (None, math.nan, math.inf)
        for err in (False, True)
    ]


def test_clip_grad_norm():
    def drive(s):
        if s["norm_type"] != 2.0:
            raise Unsupported(f"norm_type={s['norm_type']} (the library clips the 2-norm)")
        rng = np.random.default_rng(0)
        grads = [rng.normal(size=(10, 10)), rng.normal(size=10)]
        if s["bad"] is not None:
            grads[1][3] = s["bad"]
        layer = _Params([np.zeros_like(g) for g in grads])
        layer.grads = {str(i): g.copy() for i, g in enumerate(grads)}
        ts = [torch.zeros(g.shape, dtype=DT, requires_grad=True) for g in grads]
        for t, g in zip(ts, grads):
            t.grad = torch.tensor(g)
        kw = {"max_norm": s["max_norm"], "error_if_nonfinite": s["error"]}
        try:
            t_total = torch.nn.utils.clip_grad_norm_(ts, norm_type=2.0, **kw)
        except RuntimeError:
            with pytest.raises(FloatingPointError):
                lnn.clip_grad_norm([layer], **kw)
            for i, g in enumerate(grads):  # nothing changed on either side
                np.testing.assert_array_equal(layer.grads[str(i)], g)
            return
        total = lnn.clip_grad_norm([layer], **kw)
        close(total, t_total, "total norm") if math.isfinite(total) else np.testing.assert_equal(
            total, float(t_total)
        )
        for i, t in enumerate(ts):
            np.testing.assert_allclose(
                layer.grads[str(i)],
                a(t.grad),
                rtol=RTOL,
                atol=ATOL,
                equal_nan=True,
                err_msg=f"gradient {i}",
            )

    run_family("clip_grad_norm_", _clip_samples(), drive)


# -- nn.CrossEntropyLoss with label smoothing ---------------------------------------------


def _smoothing_samples():
    """PyTorch's CrossEntropyLoss samples, and smoothing values on and past [0, 1]'s edges."""
    samples = [("module", mi) for _, mi in module_samples("CrossEntropyLoss")]
    rng = np.random.default_rng(0)
    for eps in (0.0, 1.0, 1.5, -0.1, 1e-9, float("nan")):
        logits = torch.tensor(rng.normal(size=(4, 5)), requires_grad=True)
        target = torch.tensor([1, 0, 4, 2])
        samples.append(("edge", (logits, target, {"label_smoothing": eps, "ignore_index": 0})))
    return samples


def _refused(loss, *args):
    """Assert (counted as a disagreement if not) that the library refuses the smoothing."""
    try:
        loss(*args)
    except ValueError as err:
        assert "smoothing must be between 0.0 and 1.0" in str(err), str(err)
    else:
        raise AssertionError(f"smoothing {args[2]!r} accepted, which PyTorch refuses")


def test_label_smoothed_cross_entropy():
    """The translation model's loss against ``F.cross_entropy``: the loss and its gradient."""
    from attention_lib.models.transformer import label_smoothed_cross_entropy

    def drive(sample):
        kind, s = sample
        if kind == "module":
            kw = dict(s.constructor_input.kwargs)
            (logits, target), _ = forward_input(s)
        else:
            logits, target, kw = s
        if target.dtype != torch.int64:
            raise Unsupported("probabilities as targets (the library takes class ids)")
        if kw.get("weight") is not None:
            raise Unsupported("class weights")
        if kw.get("reduction", "mean") != "mean":
            raise Unsupported(f"reduction={kw['reduction']!r} (the library takes the mean)")
        eps = kw.get("label_smoothing", 0.0)
        ignore = kw.get("ignore_index", -100)
        z = np.moveaxis(a(logits), 1, -1) if logits.ndim > 1 else a(logits)
        t = target.numpy()
        try:
            theirs = F.cross_entropy(logits, target, **kw)
        except RuntimeError:  # PyTorch refuses it: so must the library
            _refused(label_smoothed_cross_entropy, z, t, eps, ignore)
            return
        if not eps >= 0:
            # PyTorch quietly computes the unsmoothed loss; the library refuses it.
            _refused(label_smoothed_cross_entropy, z, t, eps, ignore)
            raise Unsupported("smoothing < 0 or NaN (PyTorch ignores it, the library refuses)")
        if not (t != ignore).any():
            raise Unsupported("every target ignored (PyTorch's mean is NaN, 0/0)")
        loss, grad = label_smoothed_cross_entropy(z, t, eps, ignore)
        close(loss, theirs, "loss")
        theirs.backward()
        d = a(logits.grad)
        close(grad, np.moveaxis(d, 1, -1) if logits.ndim > 1 else d, "gradient")

    run_family("F.cross_entropy (label smoothing)", _smoothing_samples(), drive)


# -- the counts -------------------------------------------------------------------------


def test_peer_suite_counts(capsys):
    """Print agree / disagree / unsupported (with reasons) per family; 0 disagreements."""
    lines, totals = [], Counter()
    for family, tally in sorted(TALLY.items()):
        agree, disagree = tally["agree"], tally["disagree"]
        unsupported = {
            k[len("unsupported: ") :]: v for k, v in tally.items() if k.startswith("unsupported")
        }
        totals.update(agree=agree, disagree=disagree, unsupported=sum(unsupported.values()))
        lines.append(
            f"  {family}: {agree} agree, {disagree} disagree, "
            f"{sum(unsupported.values())} unsupported"
        )
        lines += [f"      unsupported x{v}: {k}" for k, v in sorted(unsupported.items())]
    with capsys.disabled():
        print(
            f"\nPyTorch peer suite: {totals['agree']} agree, {totals['disagree']} disagree, "
            f"{totals['unsupported']} unsupported"
        )
        print("\n".join(lines))
    assert totals["disagree"] == 0
