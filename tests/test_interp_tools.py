"""attention_lib.interp's tools on stories260K, each against a brute-force computation.

Ablation by hook against ablation by editing W_O; activation patching
against the blocks run one by one with the stream edited by hand; path
patching against activation patching (a sender that is the receiver's whole
input) and against the receiver's query recomputed by hand; the logit lens
against the model's logits; direct logit attribution against each head's
output projected alone. Then one causal result pinned with a random-head
control, and bad input refused in one line with the model left unchanged.
"""

import numpy as np
import pytest

from attention_lib.interp import (
    Hooks,
    ablate_heads,
    head_logit_attribution,
    logit_diff,
    logit_lens,
    offset_attention,
    patch_heads,
    patch_residual,
    path_patch,
    record_all,
    run_with_hooks,
)
from attention_lib.models import load_pretrained
from attention_lib.models.minilm import MiniLM

H, D = 8, 8  # stories260K: 8 query heads of 8 features, 4 key/value heads, 5 layers


@pytest.fixture(scope="module")
def stories():
    model, tok = load_pretrained("stories260k")
    clean = tok.encode("Lily and Tom went to the park. Lily gave the ball to")[None]
    corrupted = clean.copy()
    corrupted[0, 13] = 274  # the second "Lily" becomes another name's first piece
    return model, clean, corrupted, logit_diff(317, 274)


def installed(model):
    return [
        x
        for b in model.blocks
        for x in (b, b.attn, b.ffn)
        if {"forward", "_project"} & set(vars(x))
    ]


def by_hand(model, ids, edit=None):
    """Logits of ``model`` run block by block; ``edit(i, x)`` may change block i's input."""
    x = model.tok.forward(ids)
    for i, block in enumerate(model.blocks):
        if edit is not None:
            x = edit(i, x)
        x = block.forward(x)
    return model.norm.forward(x) @ model.tok.params["E"].T


# -- ablation ---------------------------------------------------------------


def test_zero_ablation_by_hook_equals_Llama_ablate(stories):
    model, ids, _, _ = stories
    heads = [(1, 3), (1, 6), (4, 0)]
    with ablate_heads(model, heads):
        hooked = model.forward(ids)
    with model.ablate(heads):
        edited = model.forward(ids)
    np.testing.assert_allclose(hooked, edited, rtol=1e-5, atol=1e-5)
    assert np.abs(hooked - model.forward(ids)).max() > 1e-2
    assert not installed(model)


@pytest.mark.parametrize(
    "kind, weight, index, rows, readers",
    [
        ("z", "W_O", 5, True, [5]),  # one query head's output: its rows of W_O
        ("q", "W_Q", 2, False, [2]),
        ("k", "W_K", 1, False, [2, 3]),  # key/value group 1 serves query heads 2 and 3
        ("v", "W_V", 3, False, [6, 7]),
    ],
)
def test_one_head_or_group_changed_by_hook_equals_a_model_rebuilt_with_its_weights_changed(
    stories, kind, weight, index, rows, readers
):
    model, ids, _, _ = stories

    def scale(a):
        a = a.copy()
        a[:, index] *= -0.5
        return a

    record = ["blocks.3.attn.z", "blocks.3.attn.out"]
    with Hooks(model, record=record, replace={f"blocks.3.attn.{kind}": scale}) as h:
        hooked = model.forward(ids)
    plain, acts = record_all(model, ids, record)
    rebuilt, _ = load_pretrained("stories260k")
    W = rebuilt.blocks[3].attn.params[weight]
    if rows:
        W[index * D : (index + 1) * D] *= -0.5
    else:
        W[:, index * D : (index + 1) * D] *= -0.5
    np.testing.assert_allclose(hooked, rebuilt.forward(ids), rtol=1e-5, atol=1e-5)
    assert np.abs(hooked - plain).max() > 1e-2
    if kind != "z":  # exactly the query heads that read it changed their output
        changed = np.abs(h["blocks.3.attn.z"] - acts["blocks.3.attn.z"]).max(axis=(0, 2, 3))
        assert np.flatnonzero(changed > 1e-6).tolist() == readers


def test_mean_ablation_equals_W_O_zeroed_plus_the_mean_output(stories):
    model, ids, corrupted, _ = stories
    reference = np.concatenate([ids, corrupted, ids[:, ::-1]])
    _, acts = record_all(model, reference, ["blocks.2.attn.z"])
    mean = acts["blocks.2.attn.z"][:, 5].mean(axis=(0, 1))  # head 5, over sequences and positions
    shift = mean @ model.blocks[2].attn.params["W_O"][5 * D : 6 * D]
    with ablate_heads(model, [(2, 5)], how="mean", reference=reference):
        hooked = model.forward(ids)
    with model.ablate([(2, 5)]), Hooks(model, add={"blocks.2.attn.out": shift}):
        expected = model.forward(ids)
    np.testing.assert_allclose(hooked, expected, rtol=1e-5, atol=1e-5)


def test_resample_ablation_takes_a_reference_sequences_output(stories):
    model, ids, corrupted, _ = stories
    rng = np.random.default_rng(0)
    plain = model.forward(ids)
    with ablate_heads(model, [(3, 1), (3, 2)], how="resample", reference=ids, rng=rng):
        np.testing.assert_array_equal(model.forward(ids), plain)  # its own outputs back
    # one reference sequence: the heads' outputs are the corrupted input's, position by position
    _, acts = record_all(model, corrupted, ["blocks.3.attn.z"])

    def patch(z):
        z = z.copy()
        z[:, [1, 2]] = acts["blocks.3.attn.z"][:, [1, 2]]
        return z

    with ablate_heads(model, [(3, 1), (3, 2)], how="resample", reference=corrupted, rng=rng):
        resampled = model.forward(ids)
    with Hooks(model, replace={"blocks.3.attn.z": patch}):
        np.testing.assert_array_equal(resampled, model.forward(ids))
    with pytest.raises(ValueError, match="reference has 21 positions but this input 5"):
        with ablate_heads(model, [(3, 1)], how="resample", reference=ids, rng=rng):
            model.forward(ids[:, :5])
    assert not installed(model)


# -- activation patching ------------------------------------------------------


def test_patching_the_stream_at_one_position_equals_editing_it_by_hand(stories):
    model, clean, corrupted, metric = stories
    scores = patch_residual(model, clean, corrupted, metric)
    assert scores.shape == (5, clean.shape[1])
    _, acts = record_all(model, clean, [f"blocks.{i}.resid_pre" for i in range(5)])
    for layer, t in [(0, 13), (2, 13), (3, 20), (4, 5)]:

        def edit(i, x):
            if i == layer:
                x = x.copy()
                x[:, t] = acts[f"blocks.{i}.resid_pre"][:, t]
            return x

        assert scores[layer, t] == pytest.approx(metric(by_hand(model, corrupted, edit)), abs=1e-4)
    # positions where clean and corrupted agree, before the swap, change nothing in block 0
    corrupt_score = metric(model.forward(corrupted))
    np.testing.assert_allclose(scores[0, :13], corrupt_score, atol=1e-5)
    # the whole stream patched in any block is the clean run
    whole = patch_residual(model, clean, corrupted, metric, positions=False)
    np.testing.assert_allclose(whole, metric(model.forward(clean)), atol=1e-4)


def test_patching_one_heads_output_adds_its_clean_minus_corrupted_write(stories):
    model, clean, corrupted, metric = stories
    scores = patch_heads(model, clean, corrupted, metric)
    assert scores.shape == (5, H)
    _, c = record_all(model, clean, ["blocks.3.attn.z", "blocks.1.attn.z"])
    _, x = record_all(model, corrupted, ["blocks.3.attn.z", "blocks.1.attn.z"])
    for layer, head in [(3, 6), (1, 0)]:
        n = f"blocks.{layer}.attn.z"
        W = model.blocks[layer].attn.params["W_O"][head * D : (head + 1) * D]
        delta = (c[n][:, head] - x[n][:, head]) @ W  # (B, T, d_model)
        with Hooks(model, add={f"blocks.{layer}.attn.out": delta}):
            expected = metric(model.forward(corrupted))
        assert scores[layer, head] == pytest.approx(expected, abs=1e-4)


def test_patching_a_key_value_group_counts_groups(stories):
    model, clean, corrupted, metric = stories
    keys = patch_heads(model, clean, corrupted, metric, what="k", positions=True)
    assert keys.shape == (5, 4, clean.shape[1])
    _, c = record_all(model, clean, ["blocks.4.attn.k"])

    def patch(k):
        k = k.copy()
        k[:, 3, 13] = c["blocks.4.attn.k"][:, 3, 13]
        return k

    with Hooks(model, replace={"blocks.4.attn.k": patch}):
        assert keys[4, 3, 13] == pytest.approx(metric(model.forward(corrupted)), abs=1e-5)


# -- path patching ----------------------------------------------------------------


@pytest.mark.parametrize("kind, index", [("q", 5), ("k", 2), ("v", 1)])
def test_path_patching_from_the_receivers_whole_input_equals_activation_patching(
    stories, kind, index
):
    model, clean, corrupted, metric = stories
    everything = ["blocks.0.resid_pre", "blocks.0.mlp_out", "blocks.1.mlp_out"]
    everything += [(layer, h) for layer in (0, 1) for h in range(H)]
    path = path_patch(model, clean, corrupted, metric, everything, [(2, index, kind)])
    _, c = record_all(model, clean, [f"blocks.2.attn.{kind}"])

    def patch(a):
        a = a.copy()
        a[:, index] = c[f"blocks.2.attn.{kind}"][:, index]
        return a

    with Hooks(model, replace={f"blocks.2.attn.{kind}": patch}):
        direct = metric(model.forward(corrupted))
    assert path == pytest.approx(direct, abs=1e-5)
    assert direct != pytest.approx(metric(model.forward(corrupted)), abs=1e-4)
    # no sender at all: the corrupted run
    nothing = path_patch(model, clean, corrupted, metric, [], [(2, index, kind)])
    assert nothing == pytest.approx(metric(model.forward(corrupted)), abs=1e-5)


def test_path_patching_one_head_into_a_later_query_recomputed_by_hand(stories):
    model, clean, corrupted, metric = stories
    score = path_patch(model, clean, corrupted, metric, [(0, 3)], [(2, 5, "q")])
    # only the direct path: the stream entering block 2 gains the head's clean-minus-corrupted write
    _, c = record_all(model, clean, ["blocks.0.attn.z"])
    _, x = record_all(model, corrupted, ["blocks.0.attn.z", "blocks.2.resid_pre"])
    W_O = model.blocks[0].attn.params["W_O"][3 * D : 4 * D]
    stream = (
        x["blocks.2.resid_pre"] + (c["blocks.0.attn.z"][:, 3] - x["blocks.0.attn.z"][:, 3]) @ W_O
    )
    att = model.blocks[2].attn
    q5 = model.blocks[2].attn_norm.forward(stream) @ att.params["W_Q"][:, 5 * D : 6 * D]

    def patch(q):
        q = q.copy()
        q[:, 5] = q5
        return q

    with Hooks(model, replace={"blocks.2.attn.q": patch}):
        assert score == pytest.approx(metric(model.forward(corrupted)), abs=1e-5)


# -- the logit lens and direct logit attribution ---------------------------------


def test_the_logit_lens_at_the_last_layer_is_the_models_logits(stories):
    model, ids, _, _ = stories
    lens = logit_lens(model, ids)
    assert lens.shape == (6, 1, 512)
    np.testing.assert_allclose(lens[-1], model.forward(ids)[:, -1], rtol=1e-5, atol=1e-5)
    x = model.tok.forward(ids)
    for block in model.blocks[:2]:
        x = block.forward(x)
    np.testing.assert_allclose(
        lens[2], model.norm.forward(x)[:, -1] @ model.tok.params["E"].T, rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        logit_lens(model, ids, position=4)[-1], model.forward(ids)[:, 4], atol=1e-5
    )


def test_head_attribution_is_each_heads_output_read_alone(stories):
    model, ids, _, _ = stories
    tokens = [317, 274, 265]
    dla = head_logit_attribution(model, ids, tokens)
    assert dla.shape == (5, H, 1, 3)
    logits = model.forward(ids)
    _, acts = record_all(model, ids, ["blocks.4.resid_post"])
    final = acts["blocks.4.resid_post"][:, -1]
    inv = 1 / np.sqrt((final * final).mean(-1, keepdims=True) + model.norm.eps)
    U = model.tok.params["E"].T[:, tokens] * model.norm.params["gamma"][:, None]
    for layer, head in [(4, 0), (2, 7)]:
        others = [(layer, h) for h in range(H) if h != head]
        with model.ablate(others):  # the layer's output is then this head's write alone
            _, alone = run_with_hooks(model, ids, record=[f"blocks.{layer}.attn.out"])
        write = alone[f"blocks.{layer}.attn.out"][:, -1]
        np.testing.assert_allclose(dla[layer, head], (write * inv) @ U, rtol=1e-4, atol=1e-5)
    # every head's part plus the rest of the stream's is the logit (RMSNorm: exactly linear)
    rest = final.astype(np.float64).copy()
    _, z = record_all(model, ids, [f"blocks.{i}.attn.z" for i in range(5)])
    for i in range(5):
        rest -= (
            z[f"blocks.{i}.attn.z"][:, :, -1].reshape(1, -1) @ model.blocks[i].attn.params["W_O"]
        )
    total = dla.sum(axis=(0, 1)) + (rest * inv) @ U
    np.testing.assert_allclose(total, logits[:, -1, tokens], rtol=1e-4, atol=1e-4)


# -- a causal result, with a random-head control -----------------------------------


def test_ablating_the_top_induction_head_hurts_a_repeat_more_than_random_heads(stories):
    model = stories[0]
    rng = np.random.default_rng(0)
    tok = load_pretrained("stories260k")[1]
    words = (
        "cat dog girl boy tree ball sun park happy big red blue mom dad bird fish cake toy box car"
    )
    words = words.split()
    pieces = [tok.encode(" ".join(rng.choice(words, 12)))[1:] for _ in range(16)]
    n = min(len(p) for p in pieces)
    seq = np.stack([p[:n] for p in pieces])
    ids = np.concatenate([np.ones((16, 1), int), seq, seq], axis=1)

    def repeat_loss(logits):  # mean loss on the second copy
        logp = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
        nll = -np.take_along_axis(logp[:, :-1], ids[:, 1:, None], -1)[..., 0]
        return float(nll[:, n + 1 :].mean())

    names = [f"blocks.{i}.attn.pattern" for i in range(5)]
    base, acts = record_all(model, ids, names)
    q = np.arange(n + 1, 2 * n + 1)  # the second copy: attend to the token after the first
    scores = np.stack([acts[p][:, :, q, q - n + 1].mean(axis=(0, 2)) for p in names])
    np.testing.assert_allclose(offset_attention(model, ids, n - 1, start=n + 1), scores, atol=1e-6)
    top = tuple(int(i) for i in np.unravel_index(scores.argmax(), scores.shape))
    assert top == (4, 0)
    with ablate_heads(model, [top]):
        ablated = repeat_loss(model.forward(ids))
    others = [(layer, head) for layer in range(5) for head in range(H) if (layer, head) != top]
    controls = []
    for k in rng.choice(len(others), size=8, replace=False):
        with ablate_heads(model, [others[k]]):
            controls.append(repeat_loss(model.forward(ids)))
    # measured: 4.39 nats on the repeat; 4.49 without head (4, 0); 4.27 to 4.48 (mean 4.37)
    # without each of 8 other heads
    assert ablated - repeat_loss(base) > 0.05 and np.mean(controls) - repeat_loss(base) < 0.02
    assert ablated > max(controls)


# -- bad input ----------------------------------------------------------------------


def test_clean_and_corrupted_of_different_lengths_are_refused_in_one_line(stories):
    model, clean, corrupted, metric = stories
    for call in (
        lambda: patch_residual(model, clean, corrupted[:, :-1], metric),
        lambda: patch_heads(model, clean[:, 1:], corrupted, metric),
        lambda: path_patch(model, clean, corrupted[:, :-2], metric, [(0, 0)], [(1, 0, "q")]),
    ):
        with pytest.raises(ValueError, match="same number of tokens") as err:
            call()
        assert "\n" not in str(err.value)
    assert not installed(model)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda m, c, x, f: ablate_heads(m, [(1, 8)]).__enter__(), ValueError, "head 8 is out of range: blocks.1.attn has 8 query heads"),
        (lambda m, c, x, f: ablate_heads(m, [(5, 0)]).__enter__(), ValueError, "layer 5 is outside this model's 5 attention layers"),
        (lambda m, c, x, f: ablate_heads(m, [(0, 1.5)]).__enter__(), TypeError, "head must be an integer"),
        (lambda m, c, x, f: ablate_heads(m, [(0, 1)], how="half").__enter__(), ValueError, "how must be one of"),
        (lambda m, c, x, f: ablate_heads(m, [(0, 1)], how="mean").__enter__(), ValueError, "needs reference inputs"),
        (lambda m, c, x, f: path_patch(m, c, x, f, [(0, 0)], [(1, 4, "k")]), ValueError, "blocks.1.attn has 4 key/value heads"),
        (lambda m, c, x, f: path_patch(m, c, x, f, [(0, 0)], [(1, 4, "o")]), ValueError, "must be 'q', 'k' or 'v'"),
        (lambda m, c, x, f: path_patch(m, c, x, f, ["blocks.0.resid"], [(1, 4, "q")]), KeyError, "it has blocks"),
        (lambda m, c, x, f: patch_heads(m, c, x, f, what="o"), ValueError, "what must be one of"),
        (lambda m, c, x, f: patch_residual(m, c, x, logit_diff(317, 600)), ValueError, r"in \[0, 512\)"),
        (lambda m, c, x, f: head_logit_attribution(m, c, [512]), ValueError, r"token ids in \[0, 512\)"),
        (lambda m, c, x, f: logit_lens(m, c, position=21), ValueError, "outside the input's 21 positions"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_in_one_line_and_nothing_stays_installed(
    stories, call, error, message
):
    model, clean, corrupted, metric = stories
    before = model.forward(clean)
    with pytest.raises(error, match=message) as err:
        call(model, clean, corrupted, metric)
    assert "\n" not in str(err.value)
    assert not installed(model)
    np.testing.assert_array_equal(model.forward(clean), before)


def test_a_model_without_an_output_layer_has_no_logit_lens():
    model = MiniLM(
        n_vocab=20, d_model=12, n_layers=2, n_heads=3, d_ff=24, max_len=16,
        rng=np.random.default_rng(2),
    )  # fmt: skip
    with pytest.raises(ValueError, match="MiniLM has no output layer"):
        logit_lens(model, np.array([[1, 2, 3]]))
