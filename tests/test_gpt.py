"""Tests for attention_lib.models.TinyGPT: gradients, the KV cache, generation."""

import numpy as np
import pytest

from attention_lib import TinyGPT
from attention_lib.gradcheck import check_gradients
from attention_lib.nn import Adam, softmax_cross_entropy


def _model(positions="learned", attention_only=False, n_layers=2, seed=0, d_model=8):
    rng = np.random.default_rng(seed)
    model = TinyGPT(
        n_vocab=7,
        d_model=d_model,
        n_heads=2,
        n_layers=n_layers,
        d_ff=6,
        max_len=9,
        rng=rng,
        positions=positions,
        attention_only=attention_only,
    )
    for layer in model.layers():  # biases and LayerNorms away from 0 and 1
        for a in layer.params.values():
            if a.ndim == 1:
                a[...] = rng.normal(size=a.shape)
    return model


TOKENS = np.array([[1, 4, 4, 0, 6, 2], [3, 3, 5, 1, 0, 6]])


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rotary", None])
def test_every_parameter_gradient_matches_finite_differences(positions):
    model = _model(positions, d_model=4)
    g = np.random.default_rng(1).normal(size=TOKENS.shape + (7,))
    check_gradients(
        model.layers(),
        lambda: np.sum(g * model.forward(TOKENS)),
        lambda: (model.forward(TOKENS), model.backward(g)) and (),
    )


def test_layers_lists_every_parameter_once():
    model = _model()
    arrays = [a for layer in model.layers() for a in layer.params.values()]
    assert len({id(a) for a in arrays}) == len(arrays)
    assert len(model.layers()) == 2 + 2 * 5 + 2
    assert len(_model("rotary", attention_only=True).layers()) == 1 + 2 * 2 + 2


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_model_matches_torch_autograd(positions):
    torch = pytest.importorskip("torch")
    import torch_reference as ref

    model = _model(positions)
    logits = model.forward(TOKENS)
    loss, dlogits = softmax_cross_entropy(logits, np.roll(TOKENS, -1, axis=1))
    model.backward(dlogits)
    ps = [ref.tensors(layer) for layer in model.layers()]
    lt = ref.model_logits(model, ps, TOKENS)
    loss_t = torch.nn.functional.cross_entropy(
        lt.reshape(-1, 7), torch.tensor(np.roll(TOKENS, -1, axis=1).reshape(-1))
    )
    loss_t.backward()
    assert np.allclose(logits, lt.detach().numpy(), rtol=0, atol=1e-10)
    assert abs(loss - loss_t.item()) < 1e-10
    for layer, p in zip(model.layers(), ps):
        for name, t in p.items():
            assert np.allclose(layer.grads[name], t.grad.numpy(), rtol=0, atol=1e-10), name


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rotary", None])
def test_incremental_logits_equal_the_full_forward(positions):
    model = _model(positions)
    full = model.forward(TOKENS)
    cache = model.new_cache()
    steps = [model.forward(TOKENS[:, :2], cache)]
    steps += [model.forward(TOKENS[:, t : t + 1], cache) for t in range(2, 6)]
    assert np.allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-10)
    assert [len(c) for c in cache] == [6, 6]


@pytest.mark.parametrize("temperature, top_k", [(0, None), (1.0, None), (0.7, 3)])
def test_cached_generation_gives_the_same_tokens_as_recomputing(temperature, top_k):
    model = _model("rotary")
    runs = [
        model.generate(
            TOKENS[:, :3], 6, temperature, top_k, np.random.default_rng(5), use_cache=use_cache
        )
        for use_cache in (True, False)
    ]
    assert runs[0].shape == (2, 9)
    assert np.array_equal(runs[0], runs[1])
    assert np.array_equal(runs[0][:, :3], TOKENS[:, :3])


def test_greedy_generation_picks_the_most_likely_token():
    model = _model()
    out = model.generate(TOKENS[0, :4], 1, temperature=0)
    assert out.shape == (5,)
    assert out[-1] == model.forward(TOKENS[:1, :4])[0, -1].argmax()


def test_top_k_sampling_never_leaves_the_top_k():
    model = _model()
    logits = model.forward(TOKENS[:1, :4])[0, -1]
    allowed = set(np.argsort(logits)[-2:])
    rng = np.random.default_rng(0)
    picks = {int(model.generate(TOKENS[0, :4], 1, 1.0, 2, rng)[-1]) for _ in range(30)}
    assert picks <= allowed and len(picks) == 2


def test_a_few_adam_steps_lower_the_loss():
    model = _model("rotary", seed=3)
    opt = Adam(model.layers(), lr=1e-2)
    targets = np.roll(TOKENS, -1, axis=1)
    losses = []
    for _ in range(30):
        loss, dlogits = softmax_cross_entropy(model.forward(TOKENS), targets)
        model.backward(dlogits)
        opt.step()
        losses.append(loss)
    assert losses[-1] < 0.5 * losses[0]


def test_dropout_is_off_while_generating_and_restored_after():
    model = TinyGPT(7, 8, 2, 1, 12, 9, np.random.default_rng(0), dropout=0.5)
    a = model.generate(TOKENS[0, :3], 4, temperature=0)
    b = model.generate(TOKENS[0, :3], 4, temperature=0, use_cache=False)
    assert np.array_equal(a, b)
    assert all(d.training for d in model.blocks[0].dropouts())
    model.train(False)
    assert np.array_equal(model.forward(TOKENS), model.forward(TOKENS))


def test_bad_arguments_get_clear_errors():
    model = _model()
    with pytest.raises(ValueError, match="positions must be one of"):
        TinyGPT(7, 8, 2, 1, 12, 9, np.random.default_rng(0), positions="relative")
    with pytest.raises(ValueError, match=r"tokens must have shape \(B, T\)"):
        model.forward(np.array([1, 2]))
    with pytest.raises(ValueError, match="would be 10 tokens long but max_len = 9"):
        model.forward(np.zeros((1, 10), dtype=int))
    with pytest.raises(ValueError, match=r"tokens must be integers in \[0, 7\)"):
        model.forward(np.array([[1, 7]]))
    with pytest.raises(ValueError, match="exceeds max_len = 9"):
        model.generate(TOKENS[0], 4, crop=False)
    with pytest.raises(ValueError, match="needs rng"):
        model.generate(TOKENS[0, :2], 2, temperature=1.0)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        model.generate(TOKENS[0, :2], 2, temperature=-1)


def test_shakespeare_checkpoint_keeps_the_fused_attention_names_and_loads(tmp_path):
    from attention_lib.train import shakespeare as ts

    cfg = {**ts.CONFIG, "d_model": 8, "n_heads": 2, "n_layers": 2, "d_ff": 12, "max_len": 6}
    model = ts.build_model(cfg, 5, np.random.default_rng(0))
    path = tmp_path / "model.npz"
    model.save(path, cfg, list("abcde"))
    with np.load(path, allow_pickle=False) as f:
        assert f["blocks.1.attn.W_QKV"].shape == (8, 24) and f["blocks.0.attn.b_QKV"].shape == (24,)
    loaded, chars = TinyGPT.load(path)
    assert chars == list("abcde")
    for (name, a), b in zip(ts.named_params(model).items(), ts.named_params(loaded).values()):
        assert np.array_equal(a.astype(np.float16), b), name
    attn = loaded.blocks[1].attn.params
    assert np.array_equal(
        np.concatenate([attn["W_Q"], attn["W_K"], attn["W_V"]], axis=1),
        ts.named_params(loaded)["blocks.1.attn.W_QKV"],
    )


def test_train_refuses_a_mode_that_is_not_a_bool():
    import numpy as np
    import pytest

    from attention_lib import TinyGPT

    model = TinyGPT(
        n_vocab=5,
        d_model=8,
        n_heads=2,
        n_layers=1,
        d_ff=16,
        max_len=4,
        rng=np.random.default_rng(0),
        dropout=0.1,
    )
    with pytest.raises(TypeError, match="mode must be True or False"):
        model.train("no")
