"""SmolLM2-135M-Instruct run by the library, checked against llama.cpp's and Hugging Face's code.

- Q4_1 blocks byte for byte equal to the ``gguf`` package's quantizer and
  dequantizer (llama.cpp's own Python code), and the real file's tensors
  dequantized as that package does;
- the tokenizer gives the ids of transformers' tokenizer built from the same
  GGUF on more than 2,000 texts, and ``decode(encode(t)) == t``;
- the logits within 1e-3 of transformers' ``AutoModelForCausalLM`` loaded
  from the same GGUF in float32, and 64 greedy tokens identical, on 5 prompts;
- every bad input of the issue is one clear error before anything large is built.
"""

import copy
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from attention_lib.data.bpe_tokenizer import BPETokenizer
from attention_lib.data.gguf import GGUFError, read_gguf
from attention_lib.data.gguf_quant import decode_blocks, encode_blocks, read_quantized, write_gguf
from attention_lib.data.paths import DataFileError
from attention_lib.models import smollm2
from attention_lib.models.llama import Llama

from _fixtures import tokenizer_texts

gguf = pytest.importorskip("gguf")

ROOT = Path(__file__).resolve().parents[1]
PARITY = ROOT / "data" / "smollm2" / "parity.json"
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):\n    ",
    "<|im_start|>user\nWhat is 17 times 3?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWrite a haiku about attention.<|im_end|>\n<|im_start|>assistant\n",
]


# -- Q4_1 blocks against llama.cpp's gguf package --------------------------------------


def _weights(rng, rows, cols):
    w = rng.normal(size=(rows, cols)) * rng.choice([1e-4, 0.02, 1.0, 300.0], size=(rows, 1))
    w = w.astype(np.float32)
    w[0, :32] = 0.25  # a constant block: d = 0
    w[-1, -32:] = np.linspace(-1, 1, 32)
    return w


@pytest.mark.parametrize("shape", [(2, 32), (5, 64), (64, 576)])
def test_q4_1_blocks_equal_gguf_packages(shape):
    rng = np.random.default_rng(sum(shape))
    w = _weights(rng, *shape)
    ours = encode_blocks(w, "Q4_1")
    theirs = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q4_1).reshape(-1)
    assert ours.dtype == np.uint8 and ours.size == shape[0] * shape[1] // 32 * 20
    np.testing.assert_array_equal(ours, theirs)
    back = decode_blocks(ours, "Q4_1", shape)
    ref = gguf.quants.dequantize(theirs.reshape(shape[0], -1), gguf.GGMLQuantizationType.Q4_1)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, ref)
    # within half a step (d / 2) of each weight, and exact at each block's minimum
    blocks = w.reshape(-1, 32)
    step = (blocks.max(1) - blocks.min(1)) / 15
    err = np.abs(back.reshape(-1, 32) - blocks).max(1)
    assert np.all(err <= step * 0.5 + np.abs(blocks).max(1) * 2e-3 + 1e-6)


def test_q4_1_nibble_order():
    """Weight j is the low nibble of byte j, weight j + 16 its high nibble."""
    w = np.arange(32, dtype=np.float32)[None] / 31  # min 0, d = 1/15 * 31/31
    b = encode_blocks(w, "Q4_1")
    assert b[4] & 0x0F == 0 and b[4] >> 4 == round(16 / 31 * 15)
    swapped = b.copy()
    swapped[4:] = (b[4:] >> 4) | ((b[4:] & 0x0F) << 4)
    assert not np.array_equal(
        decode_blocks(swapped, "Q4_1", (1, 32)), decode_blocks(b, "Q4_1", (1, 32))
    )


def test_q4_1_refuses_what_float16_cannot_hold():
    with pytest.raises(ValueError, match="float16"):
        encode_blocks(np.full((1, 32), 1e6, np.float32) * np.arange(32), "Q4_1")
    with pytest.raises(ValueError, match="finite"):
        encode_blocks(np.full((1, 32), np.nan, np.float32), "Q4_1")


def test_q4_1_damaged_block_names_the_block():
    b = encode_blocks(np.linspace(-1, 1, 64, dtype=np.float32)[None], "Q4_1")
    b[20:22] = np.array([np.inf], "<f2").view(np.uint8)  # block 1's scale
    with pytest.raises(GGUFError, match="block 1 of row 0 has a scale that is not finite"):
        decode_blocks(b, "Q4_1", (1, 64))
    b = encode_blocks(np.linspace(-1, 1, 64, dtype=np.float32)[None], "Q4_1")
    b[2:4] = np.array([np.nan], "<f2").view(np.uint8)  # block 0's minimum
    with pytest.raises(GGUFError, match="block 0 of row 0 has a minimum that is not finite"):
        decode_blocks(b, "Q4_1", (1, 64))
    with pytest.raises(GGUFError, match="truncated"):
        decode_blocks(b[:30], "Q4_1", (1, 64))


def test_q4_1_round_trip_through_a_gguf_file(tmp_path):
    w = _weights(np.random.default_rng(3), 4, 64)
    path = tmp_path / "q.gguf"
    write_gguf(path, {"w": (w, "Q4_1")})
    f = read_gguf(path)
    assert f.tensor_infos["w"].type_name == "Q4_1"
    ref = gguf.GGUFReader(str(path)).tensors[0]
    want = gguf.quants.dequantize(ref.data, gguf.GGMLQuantizationType.Q4_1)
    np.testing.assert_array_equal(read_quantized(f, "w"), want.reshape(4, 64))


# -- the real file ------------------------------------------------------------------


@pytest.fixture(scope="module")
def path():
    return smollm2.gguf_path()


@pytest.fixture(scope="module")
def loaded():
    return smollm2.load_smollm2()


def test_file_tensors_dequantize_as_gguf_does(path):
    f = read_gguf(path)
    reader = gguf.GGUFReader(str(path))
    kinds = set()
    for t in reader.tensors:
        if t.name not in ("token_embd.weight", "blk.7.attn_q.weight", "blk.29.ffn_down.weight"):
            continue
        rows = slice(0, 2048)  # gguf's Python dequantizer takes seconds for all 49,152
        want = gguf.quants.dequantize(t.data[rows], t.tensor_type)
        got = read_quantized(f, t.name)[rows]
        kinds.add(f.tensor_infos[t.name].type_name)
        np.testing.assert_array_equal(got, want.reshape(got.shape))
    assert kinds == {"Q8_0", "Q4_1"}


def test_model_holds_smollm2(loaded):
    model, tok = loaded
    n = sum(a.size for layer in model.layers() for a in layer.params.values())
    assert n == smollm2.N_PARAMS == 134_515_008
    for key, want in smollm2.CONFIG.items():
        assert model.config[key] == want
    assert all(a.dtype == np.float32 for layer in model.layers() for a in layer.params.values())
    assert tok.n_vocab == 49152 and tok.eos_id == 2
    assert tok.pieces(tok.encode("<|im_start|>user<|im_end|>")) == [
        "<|im_start|>",
        "user",
        "<|im_end|>",
    ]


# -- against transformers -----------------------------------------------------------


@pytest.fixture(scope="module")
def hf(path):
    pytest.importorskip("accelerate")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    folder, name = str(path.parent), path.name
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, dtype=torch.float32
    )
    model.eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    return model, tok


def _texts():
    return tokenizer_texts()


def _space_before_number(text):
    """Whether whitespace directly precedes a numeric character (\\p{N}) in ``text``."""
    return any(a.isspace() and b.isnumeric() for a, b in zip(text, text[1:]))


def test_tokenizer_equals_transformers(loaded, hf):
    """The ids of transformers' tokenizer built from the same GGUF, on 2,000+ texts.

    transformers' GGUF loader (5.24) has no entry for ``tokenizer.ggml.pre =
    "smollm"``, so it splits text with GPT-2's pattern alone, without SmolLM2's
    first step (every digit on its own: ``Digits(individual_digits=True)`` in
    SmolLM2's ``tokenizer.json``, ``"\\p{N}"`` in llama.cpp's "smollm"
    pre-tokenizer). The two differ only where two or more whitespace characters
    precede a digit ("\\n\\t0": GPT-2's ``\\s+(?!\\S)`` keeps one of them for the
    digit's chunk; split off first, the run stays whole), or one whitespace
    character precedes a number that the vocabulary joins to it. So: with SmolLM2's
    pre-tokenizer set on transformers' tokenizer, every text gives the same ids;
    as transformers builds it, every text but those does, and those do exist.
    """
    from tokenizers import pre_tokenizers

    _, tok = loaded
    _, ref = hf
    smollm = copy.deepcopy(ref.backend_tokenizer)
    smollm.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    texts = _texts()
    assert len(texts) >= 2000
    differ, wrong = [], []
    for t in texts:
        ours = tok.encode(t)
        assert ours.dtype == np.int64
        if ours.tolist() != smollm.encode(t, add_special_tokens=False).ids:
            wrong.append(t)
        if ours.tolist() != ref(t, add_special_tokens=False)["input_ids"]:
            differ.append(t)
        assert tok.decode(ours) == t
    assert wrong == []
    assert differ and all(_space_before_number(t) for t in differ)
    assert len(differ) < len(texts) // 100


def test_chat_template_equals_transformers(loaded, hf):
    _, tok = loaded
    _, ref = hf
    for messages in (
        [{"role": "user", "content": "What is 2 + 2?"}],
        [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Bonjour"},
            {"role": "user", "content": "Thanks"},
        ],
    ):
        for gen in (True, False):
            assert tok.chat(messages, add_generation_prompt=gen) == ref.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=gen
            )


def _hf_greedy(model, ids, n):
    import torch

    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        new = []
        for _ in range(n):
            nxt = int(out.logits[0, -1].argmax())
            new.append(nxt)
            out = model(torch.tensor([[nxt]]), past_key_values=out.past_key_values, use_cache=True)
    return new


def logits_of_both(model, tok, ref, prompt):
    """``(ids, ours, theirs)``: the library's and transformers' logits (T, V) for ``prompt``
    (scripts/make_smollm2_parity.py records the largest difference)."""
    import torch

    ids = tok.encode(prompt)
    with torch.no_grad():
        theirs = ref(torch.tensor(ids[None])).logits.numpy()[0]
    return ids, model.forward(ids[None])[0], theirs


def test_logits_and_greedy_tokens_equal_transformers(loaded, hf):
    from attention_lib.models.kv_cache import decoder_for

    model, tok = loaded
    ref, _ = hf
    worst = 0.0
    for prompt in PROMPTS:
        ids, got, want = logits_of_both(model, tok, ref, prompt)
        worst = max(worst, float(np.abs(got - want).max()))
        decoder = decoder_for(model, 1, len(ids) + 64)
        fast = decoder.prefill(ids[None])[0]
        assert np.abs(fast - want[-1]).max() < 1e-3
        ours = model.generate(ids, 64, temperature=0)[len(ids) :].tolist()
        assert ours == _hf_greedy(ref, ids.tolist(), 64), prompt
    assert worst < 1e-3
    # the chapter quotes this figure from data/smollm2/parity.json
    committed = json.loads(PARITY.read_text())
    assert committed["prompts"] == len(PROMPTS)
    assert committed["max_logit_diff"] < 1e-3
    assert worst / 3 < committed["max_logit_diff"] < worst * 3


# -- bad input ----------------------------------------------------------------------


def test_missing_wheel_says_how_to_install(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(DataFileError, match="requirements-model.txt"):
        smollm2.gguf_path()


def test_altered_file_refused_by_sha256_and_damaged_block_named(path, tmp_path):
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    f = read_gguf(copy)
    info = f.tensor_infos["blk.3.attn_q.weight"]
    del f
    with open(copy, "r+b") as fh:  # block 5's float16 scale becomes inf
        fh.seek(info.offset + 5 * 20)
        fh.write(np.array([np.inf], "<f2").tobytes())
    with pytest.raises(DataFileError, match="SHA-256"):
        smollm2.load_smollm2(copy)
    with pytest.raises(
        GGUFError, match=r"blk\.3\.attn_q\.weight.*block 5 of row 0 has a scale that is not finite"
    ):
        smollm2.load_smollm2(copy, verify=False)


def test_truncated_file_refused_from_its_headers(path, tmp_path):
    copy = tmp_path / "cut.gguf"
    with open(path, "rb") as src, open(copy, "wb") as dst:
        dst.write(src.read(os.path.getsize(path) // 2))
    with pytest.raises(ValueError, match="truncated"):
        smollm2.load_smollm2(copy, verify=False)


def test_another_model_or_architecture_refused(tmp_path):
    from attention_lib.data.paths import verified_path
    from attention_lib.models.llama import STORIES260K

    with pytest.raises(ValueError, match="n_vocab is 512, but SmolLM2-135M-Instruct's is 49152"):
        smollm2.load_smollm2(verified_path(STORIES260K), verify=False)
    other = tmp_path / "gpt2.gguf"
    write_gguf(
        other, {"w": (np.zeros((2, 32), np.float32), "F32")}, {"general.architecture": "gpt2"}
    )
    with pytest.raises(ValueError, match="general.architecture is 'gpt2', not 'llama'"):
        Llama.from_gguf(other)
    with pytest.raises(ValueError, match="tokenizer.ggml.model"):
        BPETokenizer.from_gguf(read_gguf(other))


def test_prompt_past_the_context_without_cropping(loaded):
    model, _ = loaded
    with pytest.raises(ValueError, match="exceeds max_len = 8192"):
        model.generate(np.zeros(8190, dtype=np.int64), 5, temperature=0, crop=False)


def test_tokenizer_bad_input(loaded):
    _, tok = loaded
    with pytest.raises(ValueError, match="lone surrogate"):
        tok.encode("a\ud800b")
    with pytest.raises(TypeError, match="str"):
        tok.encode(b"bytes")
    with pytest.raises(ValueError, match=r"\[0, 49152\)"):
        tok.decode([1, 49152])
    with pytest.raises(ValueError, match="no chat template"):
        BPETokenizer(["a"], [], chat_template=None).chat("hi")
    with pytest.raises(ValueError, match="merge 0"):
        BPETokenizer(["a", "b"], ["a b"])


def test_cli_chat(capsys):
    from attention_lib import generate

    status = generate.main(
        [
            "--model",
            "smollm2",
            "--chat",
            "--prompt",
            "What is the capital of France?",
            "--max-new-tokens",
            "20",
            "--temperature",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert status in (0, None)
    assert out.startswith("What is the capital of France?\n") and "Paris" in out
    assert "<|im_end|>" not in out and "<|im_start|>" not in out
    with pytest.raises(SystemExit) as e:
        generate.main(
            ["--model", "stories260k", "--chat", "--prompt", "x", "--max-new-tokens", "1"]
        )
    assert e.value.code == 2
    assert "no chat template" in capsys.readouterr().err


def test_generation_allocates_less_than_the_model_again(loaded):
    """The fast decoder keeps no copy of the weights (538 MB) to compare with, its cache
    holds the text's positions (not 8,192), and its rotary tables likewise."""
    import tracemalloc

    model, tok = loaded
    ids = tok.encode("The capital of France is")
    tracemalloc.start()
    try:
        model.generate(ids, 4, temperature=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    weights = sum(a.nbytes for layer in model.layers() for a in layer.params.values())
    assert peak < 0.9 * weights, f"{peak / 2**20:.0f} MiB"
