"""The naive versions the chapters show agree with the library.

Each chapter that writes a recipe out naively ("naive version, then agree with
the library") checks the agreement on the page; these tests run **the code
printed on the page** (read from the notebook's cell, by its id) against the
library, so that the page's code and the library cannot drift apart unseen, and
check that the comparison can fail (a deliberately wrong variant disagrees).
"""

import json
from pathlib import Path

import numpy as np
import pytest

from attention_lib import data_dir, softmax
from attention_lib.models.llama import Llama, load_stories260k
from attention_lib.nn.activations import SiLU
from attention_lib.positions import rotary

BOOK = Path(__file__).resolve().parents[1] / "book"


def page_code(notebook, cell_id, **namespace):
    """Run one code cell of a chapter in ``namespace``; return the namespace."""
    cells = json.loads((BOOK / notebook).read_text(encoding="utf-8"))["cells"]
    (cell,) = [c for c in cells if c.get("id") == cell_id]
    exec(compile("".join(cell["source"]), f"{notebook}:{cell_id}", "exec"), namespace)
    return namespace


# --- chapter 12: Llama's forward pass -------------------------------------------


@pytest.fixture(scope="module")
def llama():
    model, tok = load_stories260k()
    return model, tok


def naive_llama_from_page(model, repeat=np.repeat):
    ns = page_code(
        "12_stories260k.ipynb",
        "b13n0002",
        np=_NumpyWith(repeat),
        softmax=softmax,
        rotary=rotary,
        SiLU=SiLU,
    )

    def rms_norm(x, gamma, eps=1e-5):
        return gamma * x / np.sqrt((x**2).mean(-1, keepdims=True) + eps)

    ns["rms_norm"] = rms_norm
    block = ns["naive_block"]

    def forward(ids):
        E = model.parameter("tok.E").astype(np.float64)
        x = E[ids]
        for b in range(model.config["n_layers"]):
            x = block(x, lambda name: model.parameter(f"blocks.{b}.{name}").astype(np.float64))
        return rms_norm(x, model.parameter("norm.gamma").astype(np.float64)) @ E.T

    return forward


class _NumpyWith:
    """NumPy, with ``repeat`` replaced (to check that a wrong grouping is caught)."""

    def __init__(self, repeat):
        self._repeat = repeat

    def __getattr__(self, name):
        return self._repeat if name == "repeat" else getattr(np, name)


def test_the_pages_naive_llama_equals_the_library_in_float64(llama):
    model, tok = llama
    ids = tok.encode("Once upon a time, Lily saw a cat. She was happy.")
    naive = naive_llama_from_page(model)(ids)
    library = _float64_copy().forward(ids[None])[0]
    assert naive.shape == (len(ids), 512)
    np.testing.assert_allclose(naive, library, rtol=0, atol=1e-9)


def test_the_comparison_catches_a_wrong_grouping_of_heads(llama):
    # np.tile pairs query head r with key/value head r % 4 instead of r // 2
    model, tok = llama
    ids = tok.encode("Once upon a time, Lily saw a cat.")
    wrong = naive_llama_from_page(model, repeat=lambda a, n, axis: np.concatenate([a] * n, axis))
    library = _float64_copy().forward(ids[None])[0]
    assert np.abs(wrong(ids) - library).max() > 0.1


def _float64_copy():
    path = data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf"
    return Llama.from_gguf(path, dtype=np.float64)


# --- chapter 10: label smoothing and beam search ----------------------------------


def test_the_pages_label_smoothing_equals_the_library():
    from attention_lib.models.transformer import label_smoothed_cross_entropy
    from attention_lib.presentation.tables import order_of_magnitude
    from attention_lib.softmax import log_softmax

    ns = page_code(
        "10_translation.ipynb",
        "c11r0002",
        np=np,
        log_softmax=log_softmax,
        label_smoothed_cross_entropy=label_smoothed_cross_entropy,
        order_of_magnitude=order_of_magnitude,
        logits=np.zeros((1, 1, 3)),
        y_out=np.ones((1, 1), int),
    )
    naive = ns["naive_smoothed_ce"]
    rng = np.random.default_rng(0)
    o, y = rng.normal(size=(7, 11)) * 3, rng.integers(0, 11, size=7)
    for eps in (0.0, 0.1, 0.3):
        loss, grad = naive(o, y, eps)
        lib_loss, lib_grad = label_smoothed_cross_entropy(o, y, smoothing=eps, ignore=-1)
        assert loss == pytest.approx(lib_loss, rel=1e-12)
        np.testing.assert_allclose(grad, lib_grad, rtol=0, atol=1e-14)
    # the comparison can fail: another eps gives another loss
    assert naive(o, y, 0.2)[0] != pytest.approx(label_smoothed_cross_entropy(o, y, 0.1, -1)[0])


@pytest.fixture(scope="module")
def translator():
    from attention_lib.data.tatoeba import Tokenizer
    from attention_lib.translate import load_model

    model, _ = load_model("transformer", dtype=np.float64)
    return model, Tokenizer.load()


def test_the_pages_naive_beam_search_equals_the_library(translator):
    from attention_lib.train.translation import pad_batch
    from attention_lib.softmax import log_softmax

    model, tok = translator
    ns = page_code(
        "10_translation.ipynb",
        "c11m0002",
        np=np,
        model=model,
        pad_batch=pad_batch,
        log_softmax=log_softmax,
    )
    for sentence in ["Well done!", "I am cold.", "Where is the station?", "He is heroic."]:
        ids = tok.encode(sentence)
        src, lengths = pad_batch([ids])
        assert ns["naive_beam"](ids) == model.beam_search(src, lengths, beam=4)[0], sentence
    # and it is not greedy decoding in disguise: on this sentence they differ
    src, lengths = pad_batch([tok.encode("Well done!")])
    assert ns["naive_beam"](tok.encode("Well done!")) != model.greedy(src, lengths)[0]
