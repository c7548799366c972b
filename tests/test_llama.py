"""The Llama model: stories260K reproduces llama2.c's reference text, agrees with an
independent PyTorch implementation, and its backward pass matches central differences."""

import numpy as np
import pytest

from attention_lib.gradcheck import check_gradients
from attention_lib.models.llama import (
    Llama,
    load_stories260k,
    stories260k_reference,
    tensor_names,
)

MODEL, TOK = load_stories260k()
PROMPTS = ["Once upon a time, there was a dog", "Tom and Sue went to the", "The sun"]


def test_stories260k_is_the_model_the_file_describes():
    c = MODEL.config
    assert (
        c["n_vocab"],
        c["d_model"],
        c["n_layers"],
        c["n_heads"],
        c["n_kv_heads"],
        c["d_ff"],
        c["max_len"],
        c["tied"],
    ) == (512, 64, 5, 8, 4, 172, 512, True)
    # 292,800 numbers in the file, of which the output layer's 32,768 repeat the embedding
    assert MODEL.n_params() == 292_800 - 512 * 64
    b = MODEL.blocks[0]
    assert b.attn.params["W_Q"].shape == (64, 64) and b.attn.params["W_K"].shape == (64, 32)
    assert b.ffn.params["W1"].shape == (64, 172) and b.ffn.params["W2"].shape == (172, 64)
    assert all(a.dtype == np.float32 for a in MODEL.params.values())
    assert len(tensor_names(5)) == 48


def test_greedy_decoding_reproduces_llama2c_token_for_token():
    reference = stories260k_reference()
    out = MODEL.generate(TOK.encode(""), 256, temperature=0)
    assert TOK.decode(out) == reference
    # and as token ids: the reference's own tokenization is the one the model chose
    np.testing.assert_array_equal(out, TOK.encode(reference))


def test_the_cache_changes_nothing():
    prompt = TOK.encode(PROMPTS[0])
    with_cache = MODEL.generate(prompt, 20, temperature=0)
    without = MODEL.generate(prompt, 20, temperature=0, use_cache=False)
    np.testing.assert_array_equal(with_cache, without)
    cache = MODEL.new_cache()
    full = MODEL.forward(prompt[None])
    steps = np.concatenate(
        [
            MODEL.forward(prompt[None, :5], cache),
            *(MODEL.forward(prompt[None, t : t + 1], cache) for t in range(5, len(prompt))),
        ],
        axis=1,
    )
    np.testing.assert_allclose(steps, full, rtol=0, atol=2e-4)
    assert sum(c.nbytes for c in cache) == len(prompt) * 5 * 2 * 4 * 8 * 4  # GQA: 4 kv heads


def test_logits_and_greedy_continuations_agree_with_pytorch():
    reference = pytest.importorskip("llama_reference")
    from attention_lib import data_dir

    torch_model = reference.TorchLlama(
        data_dir() / "stories260k" / "tinyllamas-stories-260k-f32.gguf"
    )
    for text in PROMPTS:
        prompt = TOK.encode(text)
        ours = MODEL.generate(prompt, 40, temperature=0)
        theirs = torch_model.forward(ours[None])[0]  # one pass, float64
        # every token we chose is PyTorch's argmax at that step
        np.testing.assert_array_equal(theirs[len(prompt) - 1 : -1].argmax(-1), ours[len(prompt) :])
        logits = MODEL.forward(ours[None])[0]
        np.testing.assert_allclose(logits, theirs, rtol=0, atol=1e-3)


def test_sampling_is_seeded_and_top_k_1_is_greedy():
    prompt = TOK.encode(PROMPTS[1])
    a = MODEL.generate(prompt, 15, temperature=1.0, top_p=0.9, rng=np.random.default_rng(5))
    b = MODEL.generate(prompt, 15, temperature=1.0, top_p=0.9, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    greedy = MODEL.generate(prompt, 15, temperature=0)
    k1 = MODEL.generate(prompt, 15, temperature=0.8, top_k=1, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(greedy, k1)
    batch = MODEL.generate(np.stack([prompt, prompt]), 15, temperature=0)
    np.testing.assert_array_equal(batch[1], greedy)


def _tiny(tied, rng):
    model = Llama(
        n_vocab=11,
        d_model=8,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        d_ff=12,
        max_len=10,
        rng=rng,
        tied=tied,
        dtype=np.float64,
    )
    for layer in model.layers():  # norms away from 1, so gamma matters
        if "gamma" in layer.params:
            layer.params["gamma"][:] = rng.normal(1, 0.3, size=layer.params["gamma"].shape)
    return model


@pytest.mark.parametrize("tied", [True, False])
def test_backward_matches_central_differences(tied):
    rng = np.random.default_rng(0)
    model = _tiny(tied, rng)
    tokens = rng.integers(0, 11, size=(2, 6))
    g = rng.normal(size=(2, 6, 11))
    check_gradients(
        model.layers(),
        lambda: np.sum(g * model.forward(tokens)),
        lambda: (model.forward(tokens), model.backward(g))[2:],
    )


def test_bad_input_is_refused_clearly():
    prompt = TOK.encode("Hi")
    with pytest.raises(ValueError, match="exceeds max_len = 512"):
        MODEL.generate(prompt, 511, temperature=0, crop=False)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        MODEL.generate(prompt, 3, temperature=-1)
    with pytest.raises(ValueError, match="top_p must be a probability in"):
        MODEL.generate(prompt, 3, top_p=1.5, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="needs rng"):
        MODEL.generate(prompt, 3)
    with pytest.raises(ValueError, match=r"tokens must be integers in \[0, 512\)"):
        MODEL.generate(np.array([1, 600]), 3, temperature=0)
    with pytest.raises(ValueError, match="non-empty prompt"):
        MODEL.generate(np.array([], dtype=int), 3, temperature=0)
    with pytest.raises(ValueError, match="tokens must have shape"):
        MODEL.forward(prompt)
    with pytest.raises(ValueError, match="would be 513 tokens long"):
        MODEL.forward(np.ones((1, 513), dtype=int))


def test_other_gguf_files_are_refused_by_name(tmp_path):
    from test_gguf import STR, build

    path = tmp_path / "gpt2.gguf"
    path.write_bytes(build(3, [("general.architecture", STR, "gpt2")]))
    with pytest.raises(ValueError, match="general.architecture is 'gpt2', not 'llama'"):
        Llama.from_gguf(path)
    path.write_bytes(
        build(
            3,
            [
                ("general.architecture", STR, "llama"),
                ("llama.tensor_data_layout", STR, "llama.cpp"),
            ],
        )
    )
    with pytest.raises(ValueError, match="only the original layout"):
        Llama.from_gguf(path)


def test_from_gguf_in_float64_casts_no_leftover_bits():
    """Llama.from_gguf builds its layers without drawing weights; a float64 model casts those
    placeholders before the file's weights replace them. Left uninitialised (np.empty), their
    bits could be a signalling NaN, whose cast warns under NumPy's baseline SIMD (chapter 12's
    Colab pass printed 'invalid value encountered in cast'). Run there, warnings as errors."""
    import os
    import subprocess
    import sys

    code = (
        "import warnings, numpy as np\n"
        "warnings.simplefilter('error')\n"
        "from attention_lib.data.paths import verified_path\n"
        "from attention_lib.models.llama import Llama, STORIES260K\n"
        "for _ in range(5):\n"
        "    Llama.from_gguf(verified_path(STORIES260K), dtype=np.float64)\n"
        "    junk = [np.random.rand(1000) for _ in range(50)]\n"
    )
    from _fixtures import load_script

    narrow = load_script("cpu_families").npy_disable(sys.executable)  # the Colab pass's
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=narrow)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-500:]
