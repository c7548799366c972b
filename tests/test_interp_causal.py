"""The causal results of the chapter "What heads do", pinned on the committed checkpoints.

Each claim is tested against a control: the heads are found by where they
look (not by index), and a head outside the circuit, or drawn at random,
must not do what the circuit's heads do.
"""

import json

import numpy as np
import pytest

from attention_lib import TinyGPT, data_dir
from attention_lib.data.paths import sha256
from attention_lib.interp import (
    Hooks,
    ablate_heads,
    logit_diff,
    offset_attention,
    patch_heads,
    path_patch,
)
from attention_lib.train.induction import accuracy, checkpoint_dir, make_batch


@pytest.fixture(scope="module")
def induction():
    """The committed model, 200 held-out sequences, and their corrupted copies."""
    model, _ = TinyGPT.load(checkpoint_dir() / "induction.npz")
    tokens, where, segments = make_batch(100, np.random.default_rng(5))
    rng = np.random.default_rng(8)
    corrupted = tokens.copy()
    for k, (a, m) in enumerate(segments):  # the first copy replaced: nothing to copy
        unused = np.setdiff1d(np.arange(32), tokens[k])
        corrupted[k, a : a + m] = rng.choice(unused, size=m, replace=False)
    prev = offset_attention(model, tokens, offset=1)[0]  # layer 0's heads
    return model, tokens, where, corrupted, int(prev.argmax()), int(prev.argmin())


def test_the_induction_checkpoint_matches_its_manifest():
    manifest = json.loads((checkpoint_dir() / "manifest.json").read_text())
    assert sha256(checkpoint_dir() / manifest["file"]) == manifest["sha256"]
    model, _ = TinyGPT.load(checkpoint_dir() / manifest["file"])
    tokens, where, _ = make_batch(200, np.random.default_rng(manifest["config"]["held_out_seed"]))
    acc = accuracy(model.forward(tokens), tokens, where)  # a slice of the evaluation
    assert acc == pytest.approx(manifest["evaluation"]["copy_accuracy"], abs=0.02)


def test_the_previous_token_head_is_needed_and_the_other_head_of_its_layer_is_not(induction):
    model, tokens, where, _, prev, control = induction
    intact = accuracy(model.forward(tokens), tokens, where)
    with ablate_heads(model, [(0, prev)]):
        without_prev = accuracy(model.forward(tokens), tokens, where)
    with ablate_heads(model, [(0, control)]):
        without_control = accuracy(model.forward(tokens), tokens, where)
    assert intact > 0.95
    assert without_prev < intact - 0.5  # measured on 300: 0.998 -> 0.19
    assert without_control > intact - 0.05  # measured: 0.99


def test_the_two_induction_heads_back_each_other_up(induction):
    model, tokens, where, *_ = induction
    alone = []
    for head in range(2):
        with ablate_heads(model, [(1, head)]):
            alone.append(accuracy(model.forward(tokens), tokens, where))
    with ablate_heads(model, [(1, 0), (1, 1)]):
        both = accuracy(model.forward(tokens), tokens, where)
    assert min(alone) > 0.5  # measured: 0.66 and 0.81
    assert both < 0.1  # measured: 0.03


def test_the_previous_token_head_reaches_layer_1_through_its_keys(induction):
    model, tokens, where, corrupted, prev, control = induction

    def copied(logits):
        return accuracy(logits, tokens, where)

    def path(sender, kind):
        receivers = [(1, 0, kind), (1, 1, kind)]
        return path_patch(model, corrupted, tokens, copied, [(0, sender)], receivers)

    keys, queries, values = (path(prev, kind) for kind in "kqv")
    assert keys < 0.4  # measured: 0.20
    assert queries > 0.95 and values > 0.95
    assert path(control, "k") > 0.95  # the control head's output does not matter there


def test_patching_finds_the_heads_that_write_the_copied_token(induction):
    model, tokens, where, corrupted, prev, _ = induction
    restored = patch_heads(model, tokens, corrupted, lambda lg: accuracy(lg, tokens, where))
    # each induction head writes the answer (measured: 0.62 and 0.45, from 0.00)
    assert restored[1].min() > 0.3
    assert restored[0].max() < 0.05  # layer 0's heads only help layer 1: invisible here


@pytest.fixture(scope="module")
def small_models():
    path = data_dir() / "interp" / "small_models.json"
    manifest = json.loads((data_dir() / "interp" / "small_models.manifest.json").read_text())
    assert sha256(path) == manifest["output_sha256"]
    return json.loads(path.read_text())


def test_a_source_word_reaches_the_translation_through_cross_attention(small_models):
    from attention_lib.translate import load_model

    model, tok = load_model("transformer")
    word = small_models["translation"]["words"][0]
    en_clean, en_corrupt, prefix, fr_clean, fr_corrupt = word["pair"]
    length = np.array([len(tok.encode(en_clean))])
    tgt = np.array([[1] + list(tok.encode(prefix))])
    clean = (np.array([tok.encode(en_clean)]), length, tgt)
    corrupted = (np.array([tok.encode(en_corrupt)]), length, tgt)
    metric = logit_diff(tok.encode(fr_clean)[0], tok.encode(fr_corrupt)[0])
    patched = patch_heads(model, clean, corrupted, metric)  # rerun: the committed map reproduces
    np.testing.assert_allclose(patched, word["patched_logit_diff"], atol=2e-3)
    share = (patched - word["logit_diff_corrupt"]) / (
        word["logit_diff_clean"] - word["logit_diff_corrupt"]
    )
    cross = [i for i, a in enumerate(word["heads"]) if a.endswith("cross_attn")]
    self_ = [i for i, a in enumerate(word["heads"]) if a.endswith("self_attn")]
    assert share[cross].max() > 0.1  # measured: 0.19 (one head of decoder.2.cross_attn)
    assert share[self_].max() < 0.05  # the control: self-attention never sees the source


@pytest.fixture(scope="module")
def smollm2(smollm2_or_skip):
    model, tok = smollm2_or_skip
    sweep = json.loads((data_dir() / "interp" / "smollm2_sweep.json").read_text())
    return model, tok, sweep


def test_smollm2s_best_names_head_moves_the_name_and_random_heads_do_not(smollm2):
    model, tok, sweep = smollm2
    ioi = sweep["ioi"]
    clean = np.stack([tok.encode(p) for p in ioi["prompts"][:2]])
    corrupted = np.stack([tok.encode(p) for p in ioi["corrupted"][:2]])
    pairs = [p.removeprefix("When").split(" went")[0].split(" and") for p in ioi["prompts"][:2]]
    metric = logit_diff([tok.encode(a)[0] for a, _ in pairs], [tok.encode(b)[0] for _, b in pairs])
    patched = np.array(ioi["patched_logit_diff"])
    best = np.unravel_index(patched.argmax(), patched.shape)
    rng = np.random.default_rng(0)
    control = (int(rng.integers(30)), int(rng.integers(9)))
    names = [f"blocks.{layer}.attn.z" for layer in (best[0], control[0])]
    with Hooks(model, record=names) as h:
        base_clean = metric(model.forward(clean))
    acts = {n: h[n] for n in names}
    base_corrupt = metric(model.forward(corrupted))
    assert base_clean > 2 and base_corrupt < -2  # the task is solved, and flipped

    def patched_one(layer, head):  # head's output from the clean run, the rest corrupted
        name = f"blocks.{layer}.attn.z"

        def put(z):
            z = z.copy()
            z[:, head] = acts[name][:, head]
            return z

        with Hooks(model, replace={name: put}):
            return metric(model.forward(corrupted))

    gained = patched_one(*best) - base_corrupt
    assert gained > 0.2 * (base_clean - base_corrupt)
    assert abs(patched_one(*control) - base_corrupt) < 0.5 * gained
