"""Issue 38, section 4: the faults the fourth adversarial pass found in the loaders,
the trainers, the command lines, the threaded attention and the losses' checks.

Each test here fails on the code before the fix (the issue's reproduction).
"""

import multiprocessing

import numpy as np
import pytest

from attention_lib import MultiHeadAttention

FORK = "fork" in multiprocessing.get_all_start_methods()


# -- a hang after fork ---------------------------------------------------------------


def _threaded_attention():
    """A call that deals its sequences out to the thread pool (several groups, 2 BLAS threads)."""
    from threadpoolctl import threadpool_limits

    layer = MultiHeadAttention(8, 4, rng=0)
    x = np.random.default_rng(1).normal(size=(4, 1024, 8))
    with threadpool_limits(limits=2, user_api="blas"):
        out, _ = layer(x, x, x)
    return float(out.sum())


def _child(queue):
    queue.put(_threaded_attention())


@pytest.mark.skipif(not FORK, reason="fork is POSIX-only")
def test_threaded_attention_runs_in_a_forked_child():
    expected = _threaded_attention()  # the parent's pool now exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(queue,))
    child.start()
    child.join(60)
    hung = child.is_alive()
    if hung:
        child.kill()
        child.join()
    assert not hung, "the attention call hung in the fork child"
    assert child.exitcode == 0
    assert queue.get(timeout=5) == expected


# -- the encoder-decoder's inputs and label smoothing ----------------------------------


def _tiny_transformer():
    from attention_lib.models.transformer import Transformer

    return Transformer(n_vocab=11, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=8)


SRC, LENGTHS = np.array([[3, 4, 5], [6, 7, 0]]), np.array([3, 2])
TGT_IN, TGT_OUT = np.array([[1, 8, 9], [1, 10, 0]]), np.array([[8, 9, 2], [10, 2, 0]])


@pytest.mark.parametrize(
    "change, match",
    [
        ({"src": np.array([[3, 4, -1], [6, 7, 0]])}, r"src must be token ids in \[0, 11\), got -1"),
        ({"src": np.array([[3, 4, 11], [6, 7, 0]])}, r"src must be token ids in \[0, 11\), got 11"),
        ({"lengths": np.array([2.5, 2.0])}, "lengths must be integers"),
        ({"lengths": np.array([4, 2])}, "lengths must be at most the padded width S = 3"),
        ({"tgt_in": np.array([[1, 8, -1], [1, 10, 0]])}, r"tgt_in must be token ids"),
        ({"tgt_in": np.array([[1.0, 8, 9], [1, 10, 0]])}, "tgt_in must be integer"),
        ({"tgt_out": np.array([[8, 9, -1], [10, 2, 0]])}, r"tgt_out must be token ids"),
        ({"tgt_out": np.array([[8, 9, 12], [10, 2, 0]])}, r"tgt_out must be token ids"),
    ],
)
def test_the_encoder_decoder_refuses_bad_ids_lengths_and_targets(change, match):
    model = _tiny_transformer()
    args = {"src": SRC, "lengths": LENGTHS, "tgt_in": TGT_IN, "tgt_out": TGT_OUT, **change}
    with pytest.raises((ValueError, TypeError), match=match):
        model.loss(**args)


def test_the_encoder_decoder_checks_its_batch_sizes_itself():
    model = _tiny_transformer()
    with pytest.raises(ValueError, match="tgt_in has 1 sentences but the source has 2"):
        model.forward(SRC, LENGTHS, TGT_IN[:1])
    with pytest.raises(ValueError, match=r"src must be \(B, S\) and lengths \(B,\)"):
        model.forward(SRC, [3], TGT_IN)


def _torch_cross_entropy(logits, targets, smoothing):
    torch = pytest.importorskip("torch")
    return torch.nn.functional.cross_entropy(
        torch.tensor(logits), torch.tensor(targets), label_smoothing=smoothing, ignore_index=0
    )


LOGITS = np.random.default_rng(0).normal(size=(6, 5))
TARGETS = np.array([1, 0, 4, 2, 0, 3])


@pytest.mark.parametrize("smoothing", [0.0, 0.3, 1.0, 1])
def test_label_smoothing_agrees_with_pytorch_inside_0_1(smoothing):
    from attention_lib.models.transformer import label_smoothed_cross_entropy

    loss, _ = label_smoothed_cross_entropy(LOGITS, TARGETS, smoothing)
    assert loss == pytest.approx(float(_torch_cross_entropy(LOGITS, TARGETS, smoothing)), rel=1e-12)


@pytest.mark.parametrize("smoothing", [1.5, 1.0000001, -0.1, float("nan"), float("inf")])
def test_label_smoothing_refuses_smoothing_outside_0_1(smoothing):
    """PyTorch refuses above 1 ("label_smoothing must be between 0.0 and 1.0"); below 0
    and NaN it silently computes the unsmoothed loss, which the library refuses too."""
    from attention_lib.models.transformer import label_smoothed_cross_entropy

    try:
        _torch_cross_entropy(LOGITS, TARGETS, smoothing)
    except RuntimeError as err:
        assert "between 0.0 and 1.0" in str(err)
    else:  # torch ignores it: the loss is the plain cross-entropy
        assert not smoothing >= 0
        plain = _torch_cross_entropy(LOGITS, TARGETS, 0.0)
        assert float(_torch_cross_entropy(LOGITS, TARGETS, smoothing)) == float(plain)
    with pytest.raises(ValueError, match="smoothing must be between 0.0 and 1.0"):
        label_smoothed_cross_entropy(LOGITS, TARGETS, smoothing)
    with pytest.raises(TypeError, match="smoothing must be a number"):
        label_smoothed_cross_entropy(LOGITS, TARGETS, "0.1")


def test_label_smoothing_refuses_targets_outside_the_classes():
    from attention_lib.models.transformer import label_smoothed_cross_entropy

    with pytest.raises(ValueError, match=r"targets must be class ids in \[0, 5\)"):
        label_smoothed_cross_entropy(np.zeros((2, 5)), np.array([1, -1]))
    with pytest.raises(ValueError, match="targets must be integers"):
        label_smoothed_cross_entropy(np.zeros((2, 5)), np.array([1.0, 2.0]))
