"""LoRA (attention_lib.nn.lora): LoRALinear and apply.

LoRALinear against central differences in float64 and against PEFT's
``lora.Linear`` (a ``LoraLayer``) given the same A and B: outputs, the
gradients of A, B and the input by torch autograd, and merge. ``apply`` on
TinyGPT, Llama and MiniLM: B = 0 computes exactly what the base model does,
a training step moves only A and B, its gradients equal central differences,
and merge gives the same logits (and a plain model loaded from the merged
weights too). Every bad input is refused in one line, the model unchanged.
"""

import os

import numpy as np
import pytest

from attention_lib.gradcheck import check_gradients
from attention_lib.models.gpt import TinyGPT
from attention_lib.models.llama import Llama
from attention_lib.models.minilm import MiniLM
from attention_lib.nn import Adam, Linear, LoRALinear, lora, softmax_cross_entropy

REQUIRE_TORCH = os.environ.get("ATTENTION_REQUIRE_TORCH", "") not in ("", "0")


def adapted_linear(n_in=6, n_out=5, rank=3, alpha=6.0, seed=0, dropout=0.0):
    rng = np.random.default_rng(seed)
    base = Linear(n_in, n_out, rng)
    base.params["b"] = rng.normal(size=n_out)
    layer = LoRALinear(base, rank, alpha, dropout, rng)
    layer.params["lora_B"][:] = rng.normal(size=(rank, n_out))  # a trained B, not zero
    return layer


# -- LoRALinear --------------------------------------------------------------------


def test_starts_as_the_base_layer_and_counts_its_parameters():
    layer = adapted_linear()
    layer.params["lora_B"][:] = 0
    x = np.random.default_rng(1).normal(size=(2, 3, 6))
    assert np.array_equal(layer.forward(x), layer.base.forward(x))
    assert sum(a.size for a in layer.params.values()) == 3 * (6 + 5)
    assert layer.scaling == 2.0


def test_forward_is_w_x_plus_scaled_b_a_x():
    layer = adapted_linear()
    x = np.random.default_rng(1).normal(size=(4, 6))
    p, base = layer.params, layer.base.params
    expected = x @ base["W"] + base["b"] + 2.0 * x @ p["lora_A"] @ p["lora_B"]
    np.testing.assert_allclose(layer.forward(x), expected, rtol=1e-13, atol=1e-13)


def test_gradients_against_central_differences():
    layer = adapted_linear()
    x = np.random.default_rng(1).normal(size=(2, 3, 6))
    w = np.random.default_rng(2).normal(size=(2, 3, 5))
    err = check_gradients(
        [layer],
        lambda: float(np.sum(w * layer.forward(x))),
        lambda: [layer.forward(x) is not None and layer.backward(w)],
        [x],
    )
    assert err < 1e-6
    assert layer.base.grads == {}  # the frozen weight gets no gradient


def test_gradients_with_dropout_against_central_differences():
    """The same dropout mask each time (the generator reseeded): the masked path's gradients."""
    layer = adapted_linear(dropout=0.4)
    x = np.random.default_rng(1).normal(size=(5, 6))
    w = np.random.default_rng(2).normal(size=(5, 5))

    def forward():
        layer.dropout.rng = np.random.default_rng(7)
        return layer.forward(x)

    check_gradients(
        [layer],
        lambda: float(np.sum(w * forward())),
        lambda: [forward() is not None and layer.backward(w)],
        [x],
    )
    assert layer.dropout.mask is not None and (layer.dropout.mask == 0).any()


def test_lora_linear_step_moves_only_a_and_b():
    layer = adapted_linear()
    W, b = layer.base.params["W"].copy(), layer.base.params["b"].copy()
    A, B = layer.params["lora_A"].copy(), layer.params["lora_B"].copy()
    x = np.random.default_rng(1).normal(size=(4, 6))
    layer.forward(x)
    layer.backward(np.ones((4, 5)))
    Adam([layer], lr=0.1).step()
    assert np.array_equal(layer.base.params["W"], W) and np.array_equal(layer.base.params["b"], b)
    assert not np.array_equal(layer.params["lora_A"], A)
    assert not np.array_equal(layer.params["lora_B"], B)


def test_merge_within_rounding_and_unmerge_bit_for_bit():
    layer = adapted_linear()
    x = np.random.default_rng(1).normal(size=(4, 6))
    y = layer.forward(x)
    W = layer.base.params["W"]
    layer.merge()
    np.testing.assert_allclose(layer.forward(x), y, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(layer.base.params["W"], W + layer.delta(), rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="merged .*call unmerge"):
        layer.backward(np.ones((4, 5)))
    with pytest.raises(RuntimeError, match="already merged"):
        layer.merge()
    layer.unmerge()
    assert layer.base.params["W"] is W
    with pytest.raises(RuntimeError, match="not merged"):
        layer.unmerge()
    assert np.array_equal(layer.forward(x), y)


def test_a_is_drawn_as_peft_draws_it():
    """kaiming_uniform_(a=sqrt(5)) on PEFT's (r, n_in) weight: U(-1/sqrt(n_in), 1/sqrt(n_in))."""
    torch = _torch()
    n_in, r = 400, 64
    A = LoRALinear(Linear(n_in, 500, np.random.default_rng(0)), r, 8).params["lora_A"]
    w = torch.empty(r, n_in, dtype=torch.float64)
    torch.nn.init.kaiming_uniform_(w, a=np.sqrt(5))
    bound = 1 / np.sqrt(n_in)
    for sample in (A, w.numpy()):
        assert np.abs(sample).max() <= bound
        assert np.abs(sample).max() > 0.99 * bound
        assert np.std(sample) == pytest.approx(bound / np.sqrt(3), rel=0.02)


def _torch():
    if REQUIRE_TORCH:
        import torch
    else:
        torch = pytest.importorskip("torch")
    return torch


def _peft_twin(layer):
    """PEFT's lora.Linear around a torch Linear with the same W, b, A and B (float64)."""
    torch = _torch()
    if REQUIRE_TORCH:
        import peft
    else:
        peft = pytest.importorskip("peft")

    class Net(torch.nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.proj = torch.nn.Linear(n_in, n_out)

        def forward(self, x):
            return self.proj(x)

    W = layer.base.params["W"]
    net = Net(*W.shape).double()
    config = peft.LoraConfig(
        r=layer.rank, lora_alpha=layer.alpha, target_modules=["proj"], lora_dropout=0.0
    )
    twin = peft.get_peft_model(net, config)
    proj = twin.base_model.model.proj
    assert isinstance(proj, peft.tuners.lora.LoraLayer)
    with torch.no_grad():
        proj.base_layer.weight.copy_(torch.from_numpy(W.T))
        proj.base_layer.bias.copy_(torch.from_numpy(layer.base.params["b"]))
        proj.lora_A["default"].weight.copy_(torch.from_numpy(layer.params["lora_A"].T))
        proj.lora_B["default"].weight.copy_(torch.from_numpy(layer.params["lora_B"].T))
    assert proj.scaling["default"] == layer.scaling
    return torch, twin, proj


def test_matches_peft_lora_layer():
    layer = adapted_linear(n_in=7, n_out=4, rank=2, alpha=5.0)
    torch, twin, proj = _peft_twin(layer)
    x = np.random.default_rng(1).normal(size=(3, 5, 7))
    g = np.random.default_rng(2).normal(size=(3, 5, 4))
    tx = torch.tensor(x, requires_grad=True)
    ty = twin(tx)
    ty.backward(torch.from_numpy(g))
    y = layer.forward(x)
    dx = layer.backward(g)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    for ours, theirs in (("lora_A", proj.lora_A), ("lora_B", proj.lora_B)):
        ref = theirs["default"].weight.grad.numpy().T
        np.testing.assert_allclose(layer.grads[ours], ref, rtol=1e-12, atol=1e-12)
    assert proj.base_layer.weight.grad is None  # frozen in PEFT too
    proj.merge()
    layer.merge()
    np.testing.assert_allclose(
        layer.base.params["W"], proj.base_layer.weight.detach().numpy().T, rtol=1e-14, atol=1e-14
    )
    proj.unmerge()
    layer.unmerge()
    np.testing.assert_allclose(
        layer.base.params["W"], proj.base_layer.weight.detach().numpy().T, rtol=1e-12, atol=1e-14
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"rank": 0}, ValueError, r"rank must be in \[1, 4\]"),
        ({"rank": 5}, ValueError, r"rank must be in \[1, 4\], the smaller side of the layer's W"),
        ({"rank": 2.0}, TypeError, "rank must be a positive integer"),
        ({"alpha": 0}, ValueError, "alpha must be a positive finite number"),
        ({"alpha": -1.0}, ValueError, "alpha must be a positive finite number"),
        ({"alpha": float("nan")}, ValueError, "alpha must be a positive finite number"),
        ({"alpha": "16"}, TypeError, "alpha must be a positive number"),
        ({"dropout": 1.0}, ValueError, "p must be a probability"),
    ],
)
def test_lora_linear_refuses_bad_arguments(kwargs, error, message):
    base = Linear(6, 4, np.random.default_rng(0))
    with pytest.raises(error, match=message):
        LoRALinear(base, **{"rank": 2, "alpha": 4, **kwargs})


def test_lora_linear_refuses_another_layer():
    with pytest.raises(TypeError, match="base must be an attention_lib.nn.Linear"):
        LoRALinear(np.eye(3), 1, 1)


# -- apply -------------------------------------------------------------------------


def tiny_gpt():
    return TinyGPT(11, 8, 2, 2, 12, 8, np.random.default_rng(0))


def tiny_llama():
    return Llama(11, 8, 2, 2, 1, 12, 8, np.random.default_rng(0), dtype=np.float64)


def tiny_minilm():
    m = MiniLM(n_vocab=11, d_model=8, n_layers=2, n_heads=2, d_ff=12, max_len=8,
               rng=np.random.default_rng(0))  # fmt: skip
    for _, layer in m.named_leaves():
        for k, a in layer.params.items():
            layer.params[k] = a.astype(np.float64)
    return m


TOKENS = np.array([[1, 4, 2, 7, 3], [5, 9, 2, 1, 0]])
MASK = np.array([[True] * 5, [True] * 4 + [False]])
W_OUT = np.random.default_rng(5).normal(size=(2, 8))


def run(model):
    """The model's output on TOKENS: logits, or MiniLM's embeddings (kept for the backward)."""
    if isinstance(model, MiniLM):
        return model.embed(TOKENS, MASK, need_weights=True)
    return model.forward(TOKENS)


def loss_and_grad(model):
    out = run(model)
    if isinstance(model, MiniLM):
        return float(np.sum(W_OUT * out)), W_OUT
    return softmax_cross_entropy(out[:, :-1], TOKENS[:, 1:])[0], None


def backward(model):
    out = run(model)
    if isinstance(model, MiniLM):
        model.embed_backward(W_OUT)
        return
    dlogits = np.zeros_like(out)
    dlogits[:, :-1] = softmax_cross_entropy(out[:, :-1], TOKENS[:, 1:])[1]
    model.backward(dlogits)


MODELS = {
    "tinygpt": (tiny_gpt, ("q", "k", "v", "o", "fc1", "fc2")),
    "llama": (tiny_llama, ("q", "k", "v", "o", "gate", "up", "down")),
    "minilm": (tiny_minilm, ("q", "k", "v", "o", "fc1", "fc2")),
}


@pytest.mark.parametrize("kind", MODELS)
def test_b_zero_computes_exactly_the_base_model(kind):
    make, every = MODELS[kind]
    model = make()
    before = run(model)
    adapters = lora.apply(model, every, rank=2, alpha=4)
    assert np.array_equal(run(model), before)
    n_blocks = len(model.blocks)
    assert len(adapters) == len(every) * n_blocks
    assert lora.adapters_of(model) == adapters


@pytest.mark.parametrize("kind", MODELS)
def test_apply_gradients_against_central_differences(kind):
    make, every = MODELS[kind]
    model = make()
    adapters = lora.apply(model, every, rank=2, alpha=3, rng=np.random.default_rng(1))
    rng = np.random.default_rng(2)
    for a in adapters:  # a trained B, so that A has a gradient too
        a.params["lora_B"][:] = 0.3 * rng.normal(size=a.params["lora_B"].shape)
    err = check_gradients(adapters, lambda: loss_and_grad(model)[0], lambda: [backward(model)])
    assert err < 1e-6


@pytest.mark.parametrize("kind", MODELS)
def test_a_training_step_moves_only_a_and_b(kind):
    make, _ = MODELS[kind]
    model = make()
    arrays = dict(model.params)  # the arrays themselves, and their values
    before = {k: a.copy() for k, a in arrays.items()}
    adapters = lora.apply(model, ("q", "v"), rank=2, alpha=4)
    AB = [(a.params["lora_A"].copy(), a.params["lora_B"].copy()) for a in adapters]
    opt = Adam(adapters, lr=0.05)
    trained = sum(t.size for a in opt.layers for t in a.params.values())
    assert trained == sum(2 * sum(a.base.shape) for a in adapters)  # r (n_in + n_out) each
    for _ in range(2):
        backward(model)
        opt.step()
    bases = [a.base for a in adapters]
    for name, value in model.params.items():
        if value is not arrays[name]:  # an adapted weight: W0 + scaling A B, W0 kept
            assert any(base is arrays[name] for base in bases), name
        assert np.array_equal(arrays[name], before[name]), name
    for a, (A, B) in zip(adapters, AB):
        assert not np.array_equal(a.params["lora_A"], A)
        assert not np.array_equal(a.params["lora_B"], B)
    assert not np.array_equal(run(model), run(make()))  # and the model did change


@pytest.mark.parametrize("kind", ["tinygpt", "llama"])
def test_merge_gives_the_same_logits_and_a_plain_model_from_its_weights(kind):
    make, _ = MODELS[kind]
    model = make()
    adapters = lora.apply(model, ("q", "k", "v", "o"), rank=2, alpha=4)
    rng = np.random.default_rng(3)
    for a in adapters:
        a.params["lora_B"][:] = rng.normal(size=a.params["lora_B"].shape)
    logits = run(model)
    lora.merge(model)
    assert np.array_equal(run(model), logits)
    with pytest.raises(RuntimeError, match="merged .*lora.unmerge"):
        model.backward(np.zeros_like(logits))
    plain = make()
    plain.load_state_dict(model.state_dict())
    np.testing.assert_allclose(run(plain), logits, rtol=1e-12, atol=1e-12)
    # Against the two-path form: W x + scaling (x A) B, computed here in float64.
    a = adapters[0]
    x = np.random.default_rng(4).normal(size=(3, 8))
    two_paths = x @ a.base + a.scaling * (x @ a.params["lora_A"]) @ a.params["lora_B"]
    np.testing.assert_allclose(x @ a.layer.params[a.key], two_paths, rtol=1e-12, atol=1e-12)
    lora.unmerge(model)
    assert all(a.layer.params[a.key] is a.base for a in adapters)
    for a in adapters:
        a.params["lora_B"][:] = 0
    assert np.array_equal(run(model), run(make()))


def _unchanged(model, make):
    assert lora.adapters_of(model) == []
    fresh = make()
    assert all(np.array_equal(a, fresh.params[k]) for k, a in model.params.items())
    assert np.array_equal(run(model), run(fresh))


@pytest.mark.parametrize(
    "kind, kwargs, error, message",
    [
        ("tinygpt", {"targets": ("q", "gate")}, ValueError,
         "unknown target 'gate': this TinyGPT has q, k, v, o, fc1, fc2"),
        ("llama", {"targets": ("fc1",)}, ValueError,
         "unknown target 'fc1': this Llama has q, k, v, o, gate, up, down"),
        ("minilm", {"targets": ()}, ValueError, "targets is empty"),
        ("tinygpt", {"targets": ("q", "q")}, ValueError, "names a projection twice"),
        ("tinygpt", {"rank": 0}, ValueError, r"rank must be in \[1, 8\]"),
        ("llama", {"targets": ("q", "k"), "rank": 5}, ValueError,
         r"rank must be in \[1, 4\], the smaller side of blocks.0.attn.W_K \(8 x 4\)"),
        ("tinygpt", {"alpha": 0.0}, ValueError, "alpha must be a positive finite number"),
        ("minilm", {"rank": 1.5}, TypeError, "rank must be a positive integer"),
    ],
)  # fmt: skip
def test_apply_refuses_bad_arguments_and_leaves_the_model_unchanged(kind, kwargs, error, message):
    make, _ = MODELS[kind]
    model = make()
    with pytest.raises(error, match=message):
        lora.apply(model, **{"rank": 2, **kwargs})
    _unchanged(model, make)


def test_apply_twice_is_refused_and_changes_nothing():
    model = tiny_gpt()
    adapters = lora.apply(model, ("v",), rank=2)
    with pytest.raises(ValueError, match=r"already has LoRA adapters \(blocks.0.attn.W_V"):
        lora.apply(model, ("q",), rank=2)
    assert lora.adapters_of(model) == adapters


def test_apply_refuses_a_model_without_blocks_and_merge_without_adapters():
    with pytest.raises(TypeError, match="apply adapts TinyGPT, Llama"):
        lora.apply(Linear(3, 3, np.random.default_rng(0)))
    model = tiny_gpt()
    with pytest.raises(ValueError, match="no LoRA adapters"):
        lora.merge(model)
    lora.apply(model)
    with pytest.raises(ValueError, match="not merged"):
        lora.unmerge(model)
    lora.merge(model)
    with pytest.raises(ValueError, match="merged already"):
        lora.merge(model)


# -- save and load -----------------------------------------------------------------


def trained_gpt(targets=("q", "v"), rank=2):
    model = tiny_gpt()
    rng = np.random.default_rng(9)
    for a in lora.apply(model, targets, rank=rank, alpha=4):
        a.params["lora_B"][:] = rng.normal(size=a.params["lora_B"].shape)
    return model


def test_save_and_load_round_trip(tmp_path):
    model = trained_gpt()
    path = tmp_path / "adapter.npz"
    lora.save(model, path)
    other = tiny_gpt()
    adapters = lora.load(other, path)
    assert [a.name for a in adapters] == [a.name for a in lora.adapters_of(model)]
    assert np.array_equal(run(other), run(model))
    again = trained_gpt()  # a model with the same adapters takes the values
    for a in lora.adapters_of(again):
        a.params["lora_A"][:] = 0
    lora.load(again, path)
    assert np.array_equal(run(again), run(model))


def _damaged(path, tmp_path, change):
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    change(arrays)
    out = tmp_path / "damaged.npz"
    np.savez(out, **arrays)
    return out


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: TinyGPT(11, 16, 2, 2, 12, 8, np.random.default_rng(0)),
         r"saved for another model: its blocks.0.attn.W_Q is \(8, 8\), this model's is \(16, 16\)"),
        (lambda: TinyGPT(11, 8, 2, 3, 12, 8, np.random.default_rng(0)),
         "saved for a TinyGPT of 2 blocks, but this model is a TinyGPT of 3 blocks"),
        (tiny_llama, "saved for a TinyGPT of 2 blocks, but this model is a Llama"),
        (lambda: trained_gpt(rank=4),
         r"holds rank-2 adapters \(alpha 4.0\) on 4 weights, but the model's are rank 4"),
        (lambda: trained_gpt(targets=("q",)), "rank-2 adapters .* on 4 weights, but .* on 2"),
    ],
)  # fmt: skip
def test_load_refuses_an_adapter_saved_for_another_model_or_rank(tmp_path, make, message):
    path = tmp_path / "adapter.npz"
    lora.save(trained_gpt(), path)
    model = make()
    before = [a.params["lora_A"].copy() for a in lora.adapters_of(model)]
    logits = run(model)
    with pytest.raises(ValueError, match=message):
        lora.load(model, path)
    after = lora.adapters_of(model)
    assert len(after) == len(before)  # no adapter added, none changed
    assert all(np.array_equal(a.params["lora_A"], b) for a, b in zip(after, before))
    assert np.array_equal(run(model), logits)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a["blocks.1.attn.W_V.lora_B"].__setitem__((0, 0), np.nan), "holds NaN"),
        (lambda a: a.__setitem__("blocks.1.attn.W_V.lora_B", np.zeros((3, 8))),
         r"blocks.1.attn.W_V.lora_B is float64 \(3, 8\); rank 2 needs floats \(2, 8\)"),
        (lambda a: a.pop("blocks.0.attn.W_Q.lora_A"), "blocks.0.attn.W_Q.lora_A is missing"),
        (lambda a: a.__setitem__("extra", np.zeros(2)), r"unexpected arrays \['extra'\]"),
        (lambda a: a.pop("config"), "not an adapter file written by lora.save"),
    ],
)  # fmt: skip
def test_load_refuses_a_damaged_file_and_adds_no_adapter(tmp_path, change, message):
    path = tmp_path / "adapter.npz"
    lora.save(trained_gpt(), path)
    model = tiny_gpt()
    with pytest.raises(ValueError, match=message):
        lora.load(model, _damaged(path, tmp_path, change))
    _unchanged(model, tiny_gpt)


def test_load_refuses_a_file_that_is_not_an_npz(tmp_path):
    path = tmp_path / "adapter.npz"
    path.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not an adapter file written by lora.save"):
        lora.load(tiny_gpt(), path)
    with pytest.raises(ValueError, match="no LoRA adapters to save"):
        lora.save(tiny_gpt(), path)


def test_generate_sees_the_adapters_loaded_merged_or_unloaded(tmp_path):
    """generate's fast decoders copy the weights from params: the adapters must be in them."""
    from attention_lib.models.kv_cache import replaced_forward

    model = trained_gpt(("q", "k", "v", "o", "fc1"))
    prompt = np.array([1, 2, 3])
    with_adapters = model.generate(prompt, 6, temperature=0)
    assert not np.array_equal(with_adapters, tiny_gpt().generate(prompt, 6, temperature=0))
    path = tmp_path / "adapter.npz"
    lora.save(model, path)
    loaded = tiny_gpt()
    lora.load(loaded, path)
    adapters = lora.adapters_of(loaded)
    assert all(np.array_equal(a.layer.params[a.key], a.weight()) for a in adapters)  # no forward
    assert np.array_equal(loaded.generate(prompt, 6, temperature=0), with_adapters)
    lora.merge(loaded)
    assert np.array_equal(loaded.generate(prompt, 6, temperature=0), with_adapters)
    lora.unmerge(loaded)
    logits = loaded.forward(prompt[None])
    assert lora.merge_and_unload(loaded) is loaded and lora.adapters_of(loaded) == []
    assert replaced_forward(loaded) is None  # the fast decoder runs again
    np.testing.assert_allclose(loaded.forward(prompt[None]), logits, rtol=0, atol=0)
    assert np.array_equal(loaded.generate(prompt, 6, temperature=0), with_adapters)
    with pytest.raises(ValueError, match="no LoRA adapters"):
        lora.merge_and_unload(loaded)


# -- freeze ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", MODELS)
def test_freeze_skips_frozen_weight_gradients_and_keeps_the_adapters_bit_for_bit(kind):
    make, _ = MODELS[kind]
    model = make()
    adapters = lora.apply(model, ("q", "v", "o"), rank=2, alpha=4)
    rng = np.random.default_rng(6)
    for a in adapters:
        a.params["lora_B"][:] = rng.normal(size=a.params["lora_B"].shape)
    backward(model)
    expected = [{k: g.copy() for k, g in a.grads.items()} for a in adapters]
    names = lora.freeze(model)
    leaves = dict(model.named_leaves())
    frozen = [leaves[n] for n in names]
    assert all(type(layer).__name__ in ("Linear", "Embedding") for layer in frozen)
    assert bool(frozen) == (kind != "llama")  # Llama: attention, SwiGLU, norms, a tied table
    backward(model)
    for a, want in zip(adapters, expected):
        for k in want:
            assert np.array_equal(a.grads[k], want[k]), (a.name, k)
    assert all(layer.grads == {} for layer in frozen)
    if kind == "llama":
        return
    with pytest.raises(ValueError, match="has no gradient for parameter"):
        Adam(model.layers()).step()
    with pytest.raises(ValueError, match="frozen already"):
        lora.freeze(model)
    lora.unfreeze(model)
    backward(model)
    assert all(set(layer.grads) == set(layer.params) for layer in frozen)
    with pytest.raises(ValueError, match="not frozen"):
        lora.unfreeze(model)


def test_apply_refuses_a_frozen_target_and_freeze_a_model_without_layers():
    model = tiny_gpt()
    lora.freeze(model)
    with pytest.raises(ValueError, match=r"blocks.0.ffn.fc1.W is frozen .*lora.unfreeze"):
        lora.apply(model, ("q", "fc1"))
    assert lora.adapters_of(model) == []
    lora.apply(model, ("q", "v"))  # the attention is never frozen
    with pytest.raises(TypeError, match="freeze takes a TinyGPT, Llama"):
        lora.freeze(Linear(2, 2, np.random.default_rng(0)))
