"""Tests for attention_lib.models.seq2seq, attention_lib.nn.additive and the evaluation helpers."""

import numpy as np
import pytest

from attention_lib import additive_attention
from attention_lib.gradcheck import TOLERANCE as FD_TOLERANCE
from attention_lib.models import RNNencdec, RNNsearch
from attention_lib.train.evaluation import alignment_error_rate, bleu, exact_accuracy
from attention_lib.models.seq2seq import load, save
from attention_lib.nn import AdditiveAttention
from attention_lib.data.toy_translation import Pair

TORCH_TOLERANCE = 1e-10

# Three sentences of different lengths, padded with 0; targets framed by <bos> (1) and <eos> (2).
SRC = np.array([[3, 4, 5, 6], [6, 3, 0, 0], [5, 5, 4, 0]])
LENGTHS = [4, 2, 3]
TGT_IN = np.array([[1, 3, 4, 5], [1, 5, 0, 0], [1, 4, 3, 5]])
TGT_OUT = np.array([[3, 4, 5, 2], [5, 2, 0, 0], [4, 3, 5, 2]])


def tiny(cls, seed=0):
    return cls(n_src=7, n_tgt=6, emb=3, hidden=4, attn=5, seed=seed, dtype=np.float64)


def directional_derivative(loss, param, direction, h=1e-6):
    """Central difference of loss() along ``direction`` in ``param`` (changed in place, restored)."""
    old = param.copy()
    param += h * direction
    up = loss()
    param[...] = old - h * direction
    down = loss()
    param[...] = old
    return (up - down) / (2 * h)


@pytest.mark.parametrize("cls", [RNNsearch, RNNencdec])
def test_every_parameter_gradient_matches_central_differences(cls):
    # Every parameter array, along three random directions (each direction
    # mixes every entry, so a wrong entry shows), plus a few single entries:
    # the whole entry-by-entry check takes ten times longer for no more power.
    model = tiny(cls)
    rng = np.random.default_rng(0)

    def loss():
        return model.loss(SRC, LENGTHS, TGT_IN, TGT_OUT)

    loss()
    model.backward()
    grads = {
        (n, k): layer.grads[k].copy() for n, layer in model.named_layers() for k in layer.params
    }
    checked = 0
    for n, layer in model.named_layers():
        for k, param in layer.params.items():
            g = grads[n, k]
            for _ in range(3):
                u = rng.normal(size=param.shape)
                numeric = directional_derivative(loss, param, u)
                assert abs(numeric - np.sum(g * u)) < FD_TOLERANCE * max(abs(numeric), 1e-3), (
                    f"{n}.{k}"
                )
            for _ in range(2):
                u = np.zeros(param.shape)
                u[tuple(rng.integers(d) for d in param.shape)] = 1.0
                numeric = directional_derivative(loss, param, u)
                assert abs(numeric - np.sum(g * u)) < FD_TOLERANCE * max(abs(numeric), 1e-3), (
                    f"{n}.{k}"
                )
            checked += param.size
    assert checked == model.n_params()


def test_padding_changes_nothing_for_the_real_words():
    model = tiny(RNNsearch)
    full = model.loss(SRC, LENGTHS, TGT_IN, TGT_OUT)
    alone = [
        model.loss(SRC[b : b + 1, :n], [n], TGT_IN[b : b + 1, :m], TGT_OUT[b : b + 1, :m])
        for b, (n, m) in enumerate(zip(LENGTHS, [4, 2, 4]))
    ]
    words = np.array([4, 2, 4])
    assert full == pytest.approx(np.dot(alone, words) / words.sum(), rel=1e-12)
    ids_batch, _ = model.translate(SRC, LENGTHS, max_len=6)
    for b, n in enumerate(LENGTHS):
        assert model.translate(SRC[b : b + 1, :n], [n], max_len=6)[0][0] == ids_batch[b]


def test_attention_weights_are_distributions_over_the_real_words():
    model = tiny(RNNsearch)
    model.loss(SRC, LENGTHS, TGT_IN, TGT_OUT)
    w = model.attention_weights
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=1e-12)
    for b, n in enumerate(LENGTHS):
        assert (w[b, :, n:] == 0).all()


def test_the_encdec_decoder_sees_only_the_final_states():
    model = tiny(RNNencdec)
    model.loss(SRC, LENGTHS, TGT_IN, TGT_OUT)
    changed = SRC.copy()
    changed[0, 1] = 5  # a middle word: it reaches c only through the GRUs
    a = model.loss(SRC, LENGTHS, TGT_IN, TGT_OUT)
    b = model.loss(changed, LENGTHS, TGT_IN, TGT_OUT)
    assert a != b and model.attention_weights is None


def test_additive_layer_with_one_sentence_equals_chapter_2s_function():
    rng = np.random.default_rng(0)
    att = AdditiveAttention(6, 6, 5, rng, np.float64)
    H, s = rng.normal(size=(4, 6)), rng.normal(size=6)
    att.set_keys(H[None])
    c, alpha, _ = att.step(s[None])
    W = np.concatenate([att.params["U_a"], att.params["W_a"]])  # [h ; s] @ W
    c_ref, alpha_ref = additive_attention(H, s, W, att.params["v"])
    np.testing.assert_allclose(c[0], c_ref, rtol=1e-12)
    np.testing.assert_allclose(alpha[0], alpha_ref, rtol=1e-12)


def test_additive_attention_step_matches_pytorch_autograd():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    att = AdditiveAttention(6, 4, 5, rng, np.float64)
    H, s, g = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 4)), rng.normal(size=(2, 6))
    mask = np.array([[True, True, True], [True, True, False]])
    att.set_keys(H, mask)
    c, alpha, cache = att.step(s)
    ds = att.step_backward(g, cache)
    dH = att.keys_backward()
    Ht, st = torch.tensor(H, requires_grad=True), torch.tensor(s, requires_grad=True)
    P = {k: torch.tensor(v, requires_grad=True) for k, v in att.params.items()}
    e = torch.tanh((st @ P["W_a"])[:, None, :] + Ht @ P["U_a"]) @ P["v"]
    e = e.masked_fill(~torch.tensor(mask), float("-inf"))
    a = torch.softmax(e, dim=-1)
    ct = (a[:, :, None] * Ht).sum(1)
    (ct * torch.tensor(g)).sum().backward()
    assert np.abs(c - ct.detach().numpy()).max() < TORCH_TOLERANCE
    assert np.abs(ds - st.grad.numpy()).max() < TORCH_TOLERANCE
    assert np.abs(dH - Ht.grad.numpy()).max() < TORCH_TOLERANCE
    for k in P:
        assert np.abs(att.grads[k] - P[k].grad.numpy()).max() < TORCH_TOLERANCE, k


def test_additive_layer_rejects_states_of_the_wrong_size():
    att = AdditiveAttention(6, 4, 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="H has 5 features but U_a expects 6"):
        att.set_keys(np.ones((1, 2, 5), np.float32))


def test_save_and_load_give_the_same_model(tmp_path):
    model = RNNsearch(n_src=7, n_tgt=6, emb=3, hidden=4, attn=5, seed=3)
    save(model, tmp_path / "m.npz", steps=0)
    again = load(tmp_path / "m.npz")
    assert again.config["steps"] == 0
    assert again.loss(SRC, LENGTHS, TGT_IN, TGT_OUT) == model.loss(SRC, LENGTHS, TGT_IN, TGT_OUT)


def test_bad_lengths_raise_errors_that_name_them():
    model = tiny(RNNsearch)
    with pytest.raises(ValueError, match="lengths"):
        model.loss(SRC, [4, 0, 3], TGT_IN, TGT_OUT)
    with pytest.raises(ValueError, match="lengths"):
        model.loss(SRC, [4, 2], TGT_IN, TGT_OUT)


def test_metrics_on_hand_made_cases():
    ref = [["le", "chat", "noir", "voit", "la", "fleur"]]
    assert bleu(ref, ref) == pytest.approx(100.0)
    assert bleu([["une", "table"]], ref) < 10
    assert exact_accuracy([ref[0], ["x"]], [ref[0], ["y"]]) == 0.5
    p = Pair(
        ("the", "black", "cat"),
        ("le", "chat", "noir"),
        ((0, 0), (2, 1), (1, 2)),
        ("determiner", "noun", "adjective"),
    )
    swapped = np.array([[1.0, 0, 0], [0, 0.1, 0.9], [0, 0.8, 0.2]])
    assert alignment_error_rate([p], [swapped]) == 0.0
    assert alignment_error_rate([p], [np.eye(3)]) == pytest.approx(1 - 2 / 6)
    assert alignment_error_rate([p], [np.eye(3)], ("noun",)) == 1.0
