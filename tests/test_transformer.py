"""The translation Transformer: gradients, PyTorch's nn.Transformer, decoding and checkpoints."""

import warnings

import numpy as np
import pytest

from attention_lib.gradcheck import check_gradients
from attention_lib.models.transformer import (
    EOS,
    Transformer,
    label_smoothed_cross_entropy,
    load,
    save,
)


def batch(rng, V=13, B=3, S=5, T=4):
    lengths = np.array([S, S - 2, 1])[:B]
    src = rng.integers(3, V, (B, S))
    src[np.arange(S) >= lengths[:, None]] = 0
    tgt = rng.integers(3, V, (B, T + 1))
    tgt[:, 0] = 1
    tgt[1, -2:] = 0  # a padded target
    return src, lengths, tgt[:, :-1], tgt[:, 1:]


def tiny(dtype=np.float64, **kw):
    args = {
        "n_vocab": 13,
        "d_model": 8,
        "n_heads": 2,
        "d_ff": 12,
        "n_layers": 2,
        "max_len": 12,
        "seed": 3,
    }
    return Transformer(**{**args, **kw}, dtype=dtype)


def test_every_parameter_matches_central_differences_float64():
    model = tiny()
    src, lengths, tin, tout = batch(np.random.default_rng(0))

    def loss():
        return model.loss(src, lengths, tin, tout, smoothing=0.1)

    def run_backward():
        loss()
        model.backward()
        return ()

    check_gradients(model.layers(), loss, run_backward)


def test_label_smoothing_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    z, t = rng.normal(size=(2, 5, 7)), rng.integers(0, 7, (2, 5))
    t[0, 0] = 0
    loss, grad = label_smoothed_cross_entropy(z, t, 0.1)
    zt = torch.tensor(z, requires_grad=True)
    ref = torch.nn.functional.cross_entropy(
        zt.reshape(-1, 7), torch.tensor(t).reshape(-1), ignore_index=0, label_smoothing=0.1
    )
    ref.backward()
    assert loss == pytest.approx(ref.item(), rel=1e-12)
    np.testing.assert_allclose(grad, zt.grad.numpy(), atol=1e-12)


def torch_copy(model):
    """``torch.nn.Transformer`` (pre-LN, GELU, no dropout) with ``model``'s weights."""
    torch = pytest.importorskip("torch")
    c = model.config
    with warnings.catch_warnings():  # "enable_nested_tensor is True, but ...": harmless
        warnings.simplefilter("ignore", UserWarning)
        net = torch.nn.Transformer(
            d_model=c["d_model"],
            nhead=c["n_heads"],
            num_encoder_layers=c["n_layers"],
            num_decoder_layers=c["n_layers"],
            dim_feedforward=c["d_ff"],
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        ).double()
    t = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))

    def attn(mha, ours):
        p = ours.params
        mha.in_proj_weight.data = t(np.concatenate([p["W_Q"], p["W_K"], p["W_V"]], axis=1).T)
        mha.in_proj_bias.data = t(np.concatenate([p["b_Q"], p["b_K"], p["b_V"]]))
        mha.out_proj.weight.data, mha.out_proj.bias.data = t(p["W_O"].T), t(p["b_O"])

    def ln(tl, ours):
        tl.weight.data, tl.bias.data = t(ours.params["gamma"]), t(ours.params["beta"])

    def ffn(tl, ours):
        tl.linear1.weight.data, tl.linear1.bias.data = (
            t(ours.fc1.params["W"].T),
            t(ours.fc1.params["b"]),
        )
        tl.linear2.weight.data, tl.linear2.bias.data = (
            t(ours.fc2.params["W"].T),
            t(ours.fc2.params["b"]),
        )

    for tl, ours in zip(net.encoder.layers, model.encoder):
        attn(tl.self_attn, ours.self_attn)
        ln(tl.norm1, ours.ln1)
        ln(tl.norm2, ours.ln2)
        ffn(tl, ours.ffn)
    for tl, ours in zip(net.decoder.layers, model.decoder):
        attn(tl.self_attn, ours.self_attn)
        attn(tl.multihead_attn, ours.cross_attn)
        ln(tl.norm1, ours.ln1)
        ln(tl.norm2, ours.ln2)
        ln(tl.norm3, ours.ln3)
        ffn(tl, ours.ffn)
    ln(net.encoder.norm, model.enc_ln)
    ln(net.decoder.norm, model.dec_ln)
    return net


def test_forward_and_gradients_match_torch_nn_transformer():
    torch = pytest.importorskip("torch")
    model = tiny(d_model=16, n_heads=4, d_ff=24)
    net = torch_copy(model)
    src, lengths, tin, tout = batch(np.random.default_rng(2))
    loss = model.loss(src, lengths, tin, tout, smoothing=0.1)
    model.backward()
    E = torch.tensor(model.emb.params["E"], requires_grad=True)
    pe = torch.tensor(model.pe)
    scale = np.sqrt(model.d_model)
    x = E[torch.tensor(src)] * scale + pe[: src.shape[1]]
    y = E[torch.tensor(tin)] * scale + pe[: tin.shape[1]]
    pad = torch.tensor(np.arange(src.shape[1]) >= lengths[:, None])  # True = padding in torch
    causal = net.generate_square_subsequent_mask(tin.shape[1], dtype=torch.float64)
    h = net(x, y, tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad)
    logits = h @ E.T
    ref = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        torch.tensor(tout).reshape(-1),
        ignore_index=0,
        label_smoothing=0.1,
    )
    ref.backward()
    assert loss == pytest.approx(ref.item(), rel=1e-10)
    np.testing.assert_allclose(model.emb.grads["E"], E.grad.numpy(), atol=1e-10)
    dec = model.decoder[0]
    tl = net.decoder.layers[0]
    np.testing.assert_allclose(
        dec.cross_attn.grads["W_Q"],
        tl.multihead_attn.in_proj_weight.grad.numpy()[:16].T,
        atol=1e-10,
    )
    np.testing.assert_allclose(
        model.encoder[1].ffn.fc1.grads["W"],
        net.encoder.layers[1].linear1.weight.grad.numpy().T,
        atol=1e-10,
    )
    np.testing.assert_allclose(
        model.enc_ln.grads["gamma"], net.encoder.norm.weight.grad.numpy(), atol=1e-10
    )


def test_cached_greedy_gives_the_uncached_tokens():
    model = tiny(np.float32, seed=5)
    src, lengths, _, _ = batch(np.random.default_rng(3))
    assert model.greedy(src, lengths, max_len=8) == model.greedy(
        src, lengths, max_len=8, cache=False
    )


def test_beam_of_one_is_greedy_and_beams_never_score_below_greedy():
    model = tiny(np.float64, seed=7)
    src, lengths, _, _ = batch(np.random.default_rng(4))
    greedy = model.greedy(src, lengths, max_len=8)
    assert model.beam_search(src, lengths, beam=1, length_penalty=0.0, max_len=8) == [
        g for g in greedy
    ]

    def logprob(ids, b):
        tgt = np.array([[1] + ids])
        logits = model.forward(src[b : b + 1], lengths[b : b + 1], tgt)[0]
        z = logits - logits.max(-1, keepdims=True)
        lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        return sum(lp[i, t] for i, t in enumerate(ids + [EOS]))

    beams = model.beam_search(src, lengths, beam=4, length_penalty=0.0, max_len=8)
    for b in range(len(src)):
        if len(greedy[b]) < 8:  # greedy finished: beam finds at least as likely
            assert logprob(beams[b], b) >= logprob(greedy[b], b) - 1e-9


def test_float16_checkpoint_round_trip(tmp_path):
    model = tiny(np.float32)
    path = tmp_path / "t.npz"
    save(model, path)
    again = load(path)
    for k, a in model.state_dict().items():
        np.testing.assert_array_equal(
            again.state_dict()[k], a.astype(np.float16).astype(np.float32)
        )
    with np.load(path, allow_pickle=False) as f:
        assert f["emb.E"].dtype == np.float16


def test_too_long_input_is_a_clear_error():
    model = tiny(np.float32)
    with pytest.raises(ValueError, match="longer than max_len"):
        model.encode(np.ones((1, 20), int), [20])
    with pytest.raises(ValueError, match="beam must be at least 1"):
        model.beam_search(np.ones((1, 2), int), [2], beam=0)


def test_rnnsearch_beam_of_one_is_its_greedy_decoding():
    from attention_lib.models import RNNsearch
    from attention_lib.models.decoding import rnnsearch_beam_search

    model = RNNsearch(13, 13, emb=6, hidden=8, attn=5, seed=2, dtype=np.float64)
    src, lengths, _, _ = batch(np.random.default_rng(5))
    greedy = model.translate(src, lengths, max_len=8)[0]
    assert (
        rnnsearch_beam_search(model, src, lengths, beam=1, length_penalty=0.0, max_len=8) == greedy
    )
    assert len(rnnsearch_beam_search(model, src, lengths, beam=3, max_len=8)) == len(src)
