"""The encoder's backward (attention_lib.models.minilm): BertBlock.backward,
MiniLM.backward and MiniLM.embed_backward.

Checked as every other block's backward is: against central differences in
float64 on a tiny random MiniLM (post-LayerNorm blocks, exact GELU, padding,
mean pooling and normalisation), and against torch autograd through
transformers' ``BertModel`` holding the same weights (every parameter's
gradient, with the pooling and normalisation written in torch).
"""

import os

import numpy as np
import pytest

from attention_lib.gradcheck import check_gradients
from attention_lib.models.minilm import MiniLM, tensor_names

REQUIRE_TORCH = os.environ.get("ATTENTION_REQUIRE_TORCH", "") not in ("", "0")

CONFIG = dict(n_vocab=13, d_model=8, n_layers=2, n_heads=2, d_ff=12, max_len=9)
IDS = np.array([[1, 5, 7, 2, 4, 3], [1, 6, 9, 2, 0, 0], [1, 11, 2, 0, 0, 0]])
MASK = IDS > 0
W_OUT = np.random.default_rng(7).normal(size=(3, 8))


def tiny(seed=0):
    """A random MiniLM in float64, with LayerNorm weights and biases away from 1 and 0."""
    model = MiniLM(**CONFIG, rng=np.random.default_rng(seed))
    rng = np.random.default_rng(seed + 1)
    for name, layer in model.named_leaves():
        for k, a in layer.params.items():
            layer.params[k] = a.astype(np.float64)
            if k in ("gamma", "beta", "b"):
                layer.params[k] += 0.3 * rng.normal(size=a.shape)
    return model


def test_embed_backward_against_central_differences():
    model = tiny()
    layers = [layer for _, layer in model.named_leaves()]

    def loss():
        return float(np.sum(W_OUT * model.embed(IDS, MASK, need_weights=True)))

    def run_backward():
        loss()
        model.embed_backward(W_OUT)
        return []

    assert check_gradients(layers, loss, run_backward) < 1e-6


def test_forward_backward_against_central_differences_unnormalised_and_no_padding():
    model = tiny(3)
    layers = [layer for _, layer in model.named_leaves()]
    ids = IDS[:1]
    w = np.random.default_rng(4).normal(size=(1, 6, 8))
    check_gradients(
        layers,
        lambda: float(np.sum(w * model.forward(ids, need_weights=True))),
        lambda: [model.forward(ids, need_weights=True) is not None and model.backward(w)],
    )
    pooled = np.random.default_rng(5).normal(size=(1, 8))
    check_gradients(
        layers,
        lambda: float(np.sum(pooled * model.embed(ids, normalize=False, need_weights=True))),
        lambda: [
            model.embed(ids, normalize=False, need_weights=True) is not None
            and model.embed_backward(pooled)
        ],
    )


def test_block_backward_returns_the_inputs_gradient():
    model = tiny()
    block = model.blocks[0]
    x = np.random.default_rng(2).normal(size=(2, 5, 8))
    g = np.random.default_rng(3).normal(size=(2, 5, 8))
    check_gradients(
        [block],
        lambda: float(np.sum(g * block.forward(x, None, True))),
        lambda: [block.forward(x, None, True) is not None and block.backward(g)],
        [x],
    )


def test_matches_torch_autograd_through_transformers_bert():
    if REQUIRE_TORCH:
        import torch
        from transformers import BertConfig, BertModel
    else:
        torch = pytest.importorskip("torch")
        transformers = pytest.importorskip("transformers")
        BertConfig, BertModel = transformers.BertConfig, transformers.BertModel
    model = tiny()
    config = BertConfig(
        vocab_size=CONFIG["n_vocab"],
        hidden_size=CONFIG["d_model"],
        num_hidden_layers=CONFIG["n_layers"],
        num_attention_heads=CONFIG["n_heads"],
        intermediate_size=CONFIG["d_ff"],
        max_position_embeddings=CONFIG["max_len"],
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    config._attn_implementation = "eager"
    bert = BertModel(config).double().eval()
    names = tensor_names(CONFIG["n_layers"])
    state = {
        st: torch.from_numpy(np.ascontiguousarray(model.parameter(book).T if t else model.parameter(book)))
        for st, book, t in names
    }  # fmt: skip
    missing, unexpected = bert.load_state_dict(state, strict=False)
    assert not unexpected and all("position_ids" in k for k in missing)

    ids, mask = torch.from_numpy(IDS), torch.from_numpy(MASK)
    h = bert(input_ids=ids, attention_mask=mask.long()).last_hidden_state
    m = mask[..., None].double()
    pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    e = torch.nn.functional.normalize(pooled, p=2, dim=1)
    (e * torch.from_numpy(W_OUT)).sum().backward()

    ours = model.embed(IDS, MASK, need_weights=True)
    np.testing.assert_allclose(ours, e.detach().numpy(), rtol=1e-12, atol=1e-12)
    model.embed_backward(W_OUT)
    grads = model.grads
    params = dict(bert.named_parameters())
    for st, book, t in names:
        theirs = params[st].grad
        theirs = np.zeros(params[st].shape) if theirs is None else theirs.numpy()  # the pooler
        np.testing.assert_allclose(
            grads[book], theirs.T if t else theirs, rtol=1e-9, atol=1e-12, err_msg=book
        )


def test_backward_without_a_training_forward_is_refused():
    model = tiny()
    model.embed(IDS, MASK)  # need_weights=False: inference, nothing kept
    with pytest.raises(RuntimeError, match="need_weights=True"):
        model.embed_backward(W_OUT)
    with pytest.raises(RuntimeError, match="need_weights=True"):
        MiniLM(**CONFIG, rng=np.random.default_rng(0)).embed_backward(W_OUT)
    model.embed(IDS, MASK, need_weights=True)
    with pytest.raises(ValueError, match=r"grad must have the shape of embed's output \(3, 8\)"):
        model.embed_backward(W_OUT[:2])
    with pytest.raises(ValueError, match=r"grad must have the shape of forward's output"):
        model.backward(np.zeros((3, 5, 8)))
