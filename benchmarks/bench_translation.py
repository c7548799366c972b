"""Time one training step of the translation Transformer: NumPy by hand against PyTorch eager.

    PYTHONPATH=. python benchmarks/bench_translation.py              # one thread each
    PYTHONPATH=. python benchmarks/bench_translation.py --threads 2

The model is the committed configuration of ``attention_lib.train.translation``
(shared 4,000-token vocabulary, pre-LN encoder-decoder, tied embeddings). The same
model in PyTorch is ``torch.nn.Transformer(norm_first=True, activation="gelu")`` with
the weights copied across (float32 both), on the same batch of real training pairs,
with label smoothing 0.1 and Adam. A step is forward, loss, backward and the Adam
update. It prints the median step of each, their ratio (goal: <= 1.0), and the
sentences per second of greedy and beam-4 decoding of 128 test sentences by the
NumPy model (the committed checkpoint if there is one, else fresh weights).
"""

import argparse
import sys
from pathlib import Path

from _threads import threads_from_argv

THREADS = threads_from_argv(1)

import statistics
import time

import numpy as np
from _common import describe_machine

from attention_lib.data.tatoeba import Tokenizer, load_pairs, load_references
from attention_lib.train.translation import (
    CONFIGS,
    build_model,
    encode_pairs,
    pad_batch,
)
from attention_lib.nn import Adam

GOAL, REPEAT, BATCH = 1.0, 5, 96


def numpy_step(model, opt, batch):
    model.loss(*batch, smoothing=0.1)
    model.backward()
    opt.step()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--threads", default=THREADS, help="threads for NumPy's BLAS and for torch (default 1)"
    )
    parser.parse_args(argv)  # --threads was read before NumPy's import (_threads.py)
    print(describe_machine())
    tok = Tokenizer.load()
    config = CONFIGS["transformer"]
    src, tgt = encode_pairs(tok, load_pairs("train")[:4000:4])
    batch = pad_batch(src[:BATCH], tgt[:BATCH])
    model = build_model("transformer", len(tok), config)
    opt = Adam(model.layers(), lr=1e-4)
    times = []
    for _ in range(REPEAT + 1):
        t0 = time.perf_counter()
        numpy_step(model, opt, batch)
        times.append(time.perf_counter() - t0)
    ours = statistics.median(times[1:])
    print(
        f"NumPy step:   {ours * 1000:8.1f} ms  (batch of {BATCH} pairs, "
        f"{int(batch[1].sum() + (batch[3] != 0).sum())} tokens)"
    )
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(int(THREADS))
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from test_transformer import torch_copy

        net = torch_copy(model).float()
        E = torch.nn.Parameter(torch.tensor(model.emb.params["E"]))
        pe = torch.tensor(model.pe)
        topt = torch.optim.Adam(list(net.parameters()) + [E], lr=1e-4)
        S, lengths, tin, tout = batch
        s, ti, to = torch.tensor(S), torch.tensor(tin), torch.tensor(tout)
        pad = torch.tensor(np.arange(S.shape[1]) >= lengths[:, None])
        causal = net.generate_square_subsequent_mask(tin.shape[1])
        scale = float(np.sqrt(model.d_model))

        def torch_step():
            x = E[s] * scale + pe[: S.shape[1]]
            y = E[ti] * scale + pe[: tin.shape[1]]
            h = net(x, y, tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad)
            loss = torch.nn.functional.cross_entropy(
                (h @ E.T).reshape(-1, E.shape[0]),
                to.reshape(-1),
                ignore_index=0,
                label_smoothing=0.1,
            )
            topt.zero_grad()
            loss.backward()
            topt.step()

        times = []
        for _ in range(REPEAT + 1):
            t0 = time.perf_counter()
            torch_step()
            times.append(time.perf_counter() - t0)
        theirs = statistics.median(times[1:])
        print(f"PyTorch step: {theirs * 1000:8.1f} ms")
        print(f"ratio NumPy / PyTorch: {ours / theirs:.2f}  (goal <= {GOAL})")
    try:
        from attention_lib.translate import load_model

        model, tok = load_model("transformer")
        which = "committed checkpoint"
    except (OSError, ValueError):
        which = "fresh weights"
    sources, _ = load_references("test", 1, 10)
    sources = sources[:128]
    from attention_lib.translate import translate_sentences

    for beam in (None, 4):
        t0 = time.perf_counter()
        translate_sentences(model, tok, sources, beam=beam)
        dt = time.perf_counter() - t0
        print(
            f"{'greedy' if beam is None else f'beam {beam}':>7} decoding ({which}): "
            f"{len(sources) / dt:6.1f} sentences/s"
        )


if __name__ == "__main__":
    main()
