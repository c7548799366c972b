"""Time one training step of chapter 3's RNNsearch and RNNencdec, and where it goes.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_rnn.py            # about a minute
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_rnn.py --quick    # a smoke test

One training step (forward, backward, gradient clipping, Adam) of each model
at the chapter's sizes (embeddings 16, GRU 48 per direction, attention 32,
float32) on a fixed batch of 32 sentences of 25-29 source words (about 30 target
words). The NumPy step is split into where it goes: the encoder (embedding,
both GRUs, forward and backward), the attention (scores, softmax, context and
their backward), the decoder GRU steps, the output layer with the loss, and
the rest (Adam, clipping, concatenations).

The same model in PyTorch eager on the CPU (``nn.GRU`` bidirectional over
packed sequences, ``nn.GRUCell`` for the decoder, autograd, ``torch.optim.Adam``,
``clip_grad_norm_``), with the NumPy model's weights copied in, is timed in the
same run with the same number of threads, and its loss is compared with ours
(same weights, same batch: they must agree to float32 rounding). Without torch
the script times NumPy alone and says so.
"""

import argparse
import os
import statistics
import time
from collections import defaultdict

import numpy as np

from _common import describe_machine
from attention_lib.models import RNNencdec, RNNsearch
from attention_lib.models import seq2seq
from attention_lib.nn import Adam, clip_grad_norm
from attention_lib.data.toy_translation import (
    encode_batch,
    generate_pairs,
    source_vocab,
    target_vocab,
)

try:
    import torch
except ImportError:
    torch = None

SIZES = {"emb": 16, "hidden": 48, "attn": 32}


class PhaseTimer:
    """Wraps methods so that each call's wall time adds to its phase."""

    def __init__(self):
        self.totals = defaultdict(float)

    def wrap(self, obj, method, phase):
        inner = getattr(obj, method)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.totals[phase] += time.perf_counter() - t0

        setattr(obj, method, timed)


def numpy_step_fn(model, batch):
    layers = model.layers()
    opt = Adam(layers, lr=1e-3)
    timer = PhaseTimer()
    timer.wrap(model, "encode", "encoder")
    timer.wrap(model, "_encode_backward", "encoder")
    if model.att is not None:
        for m in ("set_keys", "step", "step_backward", "keys_backward"):
            timer.wrap(model.att, m, "attention")
    for m in ("step", "step_backward"):
        timer.wrap(model.dec, m, "decoder")
    timer.wrap(model.out, "forward", "output")
    timer.wrap(model.out, "backward", "output")
    loss_fn = seq2seq.softmax_cross_entropy

    def timed_loss(*a):
        t0 = time.perf_counter()
        try:
            return loss_fn(*a)
        finally:
            timer.totals["output"] += time.perf_counter() - t0

    def step():
        seq2seq.softmax_cross_entropy = timed_loss
        try:
            loss = model.loss(*batch)
            model.backward()
        finally:
            seq2seq.softmax_cross_entropy = loss_fn
        clip_grad_norm(layers, 1.0)
        opt.step()
        return loss

    return step, timer


class TorchSeq2Seq(torch.nn.Module if torch else object):
    """The same model in PyTorch, with the NumPy model's weights."""

    def __init__(self, np_model):
        super().__init__()
        H, e = np_model.hidden, np_model.emb
        self.attention = np_model.attention
        self.src_emb = torch.nn.Embedding(*np_model.src_emb.params["E"].shape)
        self.tgt_emb = torch.nn.Embedding(*np_model.tgt_emb.params["E"].shape)
        self.enc = torch.nn.GRU(e, H, batch_first=True, bidirectional=True)
        self.init = torch.nn.Linear(2 * H, H)
        self.dec = torch.nn.GRUCell(e + 2 * H, H)
        self.out = torch.nn.Linear(3 * H + e, np_model.out.params["W"].shape[1])
        t = lambda a: torch.tensor(np.ascontiguousarray(a))
        with torch.no_grad():
            self.src_emb.weight.copy_(t(np_model.src_emb.params["E"]))
            self.tgt_emb.weight.copy_(t(np_model.tgt_emb.params["E"]))
            for suffix, gru in (("", np_model.enc_fwd), ("_reverse", np_model.enc_bwd)):
                getattr(self.enc, "weight_ih_l0" + suffix).copy_(t(gru.params["W_ih"].T))
                getattr(self.enc, "weight_hh_l0" + suffix).copy_(t(gru.params["W_hh"].T))
                getattr(self.enc, "bias_ih_l0" + suffix).copy_(t(gru.params["b_ih"]))
                getattr(self.enc, "bias_hh_l0" + suffix).copy_(t(gru.params["b_hh"]))
            self.init.weight.copy_(t(np_model.init.params["W"].T))
            self.init.bias.copy_(t(np_model.init.params["b"]))
            d = np_model.dec.params
            self.dec.weight_ih.copy_(t(d["W_ih"].T))
            self.dec.weight_hh.copy_(t(d["W_hh"].T))
            self.dec.bias_ih.copy_(t(d["b_ih"]))
            self.dec.bias_hh.copy_(t(d["b_hh"]))
            self.out.weight.copy_(t(np_model.out.params["W"].T))
            self.out.bias.copy_(t(np_model.out.params["b"]))
        if self.attention:
            a = np_model.att.params
            self.U_a = torch.nn.Parameter(t(a["U_a"]))
            self.W_a = torch.nn.Parameter(t(a["W_a"]))
            self.v = torch.nn.Parameter(t(a["v"]))

    def forward(self, src, lengths, tgt_in, tgt_out):
        B, S = src.shape
        mask = torch.arange(S)[None, :] < lengths[:, None]
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            self.src_emb(src), lengths, batch_first=True, enforce_sorted=False
        )
        out, h_n = self.enc(packed)
        H_enc, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=S)
        summary = torch.cat([h_n[0], h_n[1]], dim=-1)
        s = torch.tanh(self.init(summary))
        Ey = self.tgt_emb(tgt_in)
        if self.attention:
            UH = H_enc @ self.U_a
        states, contexts = [], []
        for i in range(tgt_in.shape[1]):
            if self.attention:
                e = torch.tanh((s @ self.W_a)[:, None, :] + UH) @ self.v
                alpha = torch.softmax(e.masked_fill(~mask, float("-inf")), dim=-1)
                c = (alpha[:, :, None] * H_enc).sum(1)
            else:
                c = summary
            s = self.dec(torch.cat([Ey[:, i], c], dim=-1), s)
            states.append(s)
            contexts.append(c)
        logits = self.out(torch.cat([torch.stack(states, 1), torch.stack(contexts, 1), Ey], -1))
        keep = tgt_out != 0
        return torch.nn.functional.cross_entropy(logits[keep], tgt_out[keep])


def torch_step_fn(np_model, batch):
    model = TorchSeq2Seq(np_model)
    src, lengths, tgt_in, tgt_out = (torch.tensor(a) for a in batch)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with torch.no_grad():
        first = float(model(src, lengths, tgt_in, tgt_out))

    def step():
        opt.zero_grad()
        loss = model(src, lengths, tgt_in, tgt_out)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    return step, first


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 steps each: a smoke test")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per model")
    args = parser.parse_args()
    steps = 5 if args.quick else args.steps
    threads = int(os.environ.get("OPENBLAS_NUM_THREADS", "0") or 0) or os.cpu_count()
    if torch is not None:
        torch.set_num_threads(threads)
    print(describe_machine(torch))
    if torch is None:
        print("PyTorch is not installed: timing the NumPy models only (no ratio).")
    sv, tv = source_vocab(), target_vocab()
    batch = encode_batch(generate_pairs(32, 25, 29, seed=0), sv, tv)
    print(
        f"batch: 32 sentences, source {batch[0].shape[1]} words padded, "
        f"target {batch[2].shape[1]} steps; float32; {steps} timed steps, median"
    )
    print()
    print(
        f"{'model':10} {'numpy ms':>9} {'encoder':>8} {'attention':>9} {'decoder':>8} "
        f"{'output':>7} {'rest':>6} {'torch ms':>9} {'ratio':>6} {'|loss diff|':>11}"
    )
    for cls in (RNNsearch, RNNencdec):
        model = cls(len(sv), len(tv), **SIZES, seed=0)
        t_step, diff = None, None
        if torch is not None:
            t_fn, t_first = torch_step_fn(model, batch)
            diff = abs(t_first - model.loss(*batch))
        np_fn, timer = numpy_step_fn(model, batch)
        np_fn()  # untimed first step
        if torch is not None:
            t_fn()
        np_times, t_times = [], []
        phases = defaultdict(list)
        for _ in range(steps):
            timer.totals.clear()
            t0 = time.perf_counter()
            np_fn()
            np_times.append(time.perf_counter() - t0)
            for k in ("encoder", "attention", "decoder", "output"):
                phases[k].append(timer.totals[k])
            phases["rest"].append(np_times[-1] - sum(timer.totals.values()))
            if torch is not None:
                t0 = time.perf_counter()
                t_fn()
                t_times.append(time.perf_counter() - t0)
        med = statistics.median(np_times) * 1e3
        ph = {k: statistics.median(v) * 1e3 for k, v in phases.items()}
        line = (
            f"{cls.__name__:10} {med:9.1f} {ph['encoder']:8.1f} {ph['attention']:9.1f} "
            f"{ph['decoder']:8.1f} {ph['output']:7.1f} {ph['rest']:6.1f}"
        )
        if torch is not None:
            t_step = statistics.median(t_times) * 1e3
            line += f" {t_step:9.1f} {med / t_step:6.2f} {diff:11.1e}"
        else:
            line += f" {'skipped':>9} {'-':>6} {'-':>11}"
        print(line)
    print()
    print("phases are medians of each phase separately (they need not add up to the step);")
    print("ratio = NumPy step / PyTorch step (same weights, same batch, same threads).")


if __name__ == "__main__":
    main()
