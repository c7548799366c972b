"""One training step of chapter 11's Shakespeare model, in the library and in PyTorch eager.

Used by ``bench_training.py --shakespeare``. The model and the step are those of
:mod:`attention_lib.train.shakespeare` (``CONFIG``): ``TinyGPT`` with 4 full
pre-LN blocks, width 192, 4 heads, feed-forward 768, learned positions, context 128,
dropout 0.1, float32; a batch of 32 windows of the text; cross-entropy, backward,
gradient clipping to norm 1, Adam (betas 0.9, 0.99). The PyTorch model is written with
``torch.nn.functional`` from the same weights (``F.scaled_dot_product_attention`` with
the same dropout on the attention weights, ``F.gelu``, ``F.layer_norm``), with
``torch.nn.utils.clip_grad_norm_`` and ``torch.optim.Adam``.
"""

import statistics
import time

import numpy as np

from attention_lib.train.shakespeare import (
    CONFIG,
    build_model,
    load_text,
    named_params,
    random_windows,
)
from attention_lib.nn import Adam, clip_grad_norm, softmax_cross_entropy


class NumpyShakespeareStep:
    def __init__(self, n_vocab):
        self.model = build_model(CONFIG, n_vocab)
        self.layers = self.model.layers()
        self.opt = Adam(self.layers, lr=CONFIG["lr"], betas=tuple(CONFIG["betas"]))

    def __call__(self, x, y, clock):
        t0 = time.perf_counter()
        self.model.train(True)
        logits = self.model.forward(x)
        t1 = time.perf_counter()
        loss, d = softmax_cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        t2 = time.perf_counter()
        self.model.backward(d.reshape(logits.shape).astype(np.float32))
        t3 = time.perf_counter()
        clip_grad_norm(self.layers, CONFIG["clip"])
        self.opt.step()
        t4 = time.perf_counter()
        clock.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
        return loss


def torch_step(torch, numpy_model):
    """A step function for the same model in PyTorch, from ``numpy_model``'s weights."""
    F = torch.nn.functional
    params = {
        k: torch.nn.Parameter(torch.tensor(a.copy())) for k, a in named_params(numpy_model).items()
    }
    opt = torch.optim.Adam(params.values(), lr=CONFIG["lr"], betas=tuple(CONFIG["betas"]), eps=1e-8)
    E, H, p = CONFIG["d_model"], CONFIG["n_heads"], CONFIG["dropout"]

    def forward(tokens, training=True):
        drop = p if training else 0.0
        B, T = tokens.shape
        x = params["tok.E"][tokens] + params["pos.E"][:T]
        for i in range(CONFIG["n_layers"]):
            w = {k.split(".", 2)[2]: v for k, v in params.items() if k.startswith(f"blocks.{i}.")}
            h = F.layer_norm(x, (E,), w["ln1.gamma"], w["ln1.beta"], 1e-5)
            qkv = (h @ w["attn.W_QKV"] + w["attn.b_QKV"]).reshape(B, T, 3, H, E // H)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)
            ctx = ctx.transpose(1, 2).reshape(B, T, E)
            x = x + F.dropout(ctx @ w["attn.W_O"] + w["attn.b_O"], drop)
            h = F.layer_norm(x, (E,), w["ln2.gamma"], w["ln2.beta"], 1e-5)
            h = F.gelu(h @ w["ffn.fc1.W"] + w["ffn.fc1.b"]) @ w["ffn.fc2.W"] + w["ffn.fc2.b"]
            x = x + F.dropout(h, drop)
        x = F.layer_norm(x, (E,), params["ln_f.gamma"], params["ln_f.beta"], 1e-5)
        return x @ params["head.W"] + params["head.b"]

    def step(x, y, clock):
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        t0 = time.perf_counter()
        logits = forward(x)
        t1 = time.perf_counter()
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        t2 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params.values(), CONFIG["clip"])
        opt.step()
        t4 = time.perf_counter()
        clock.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
        return loss.item()

    step.forward = forward
    step.optimizer, step.params = opt, params
    return step


def run(torch, steps, threads, goal):
    chars, train_ids, _ = load_text()
    ours = NumpyShakespeareStep(len(chars))
    print(
        f"Shakespeare TinyGPT (chapter 11): {CONFIG['n_layers']} full blocks, "
        f"d_model {CONFIG['d_model']}, {CONFIG['n_heads']} heads, d_ff {CONFIG['d_ff']}, "
        f"T {CONFIG['max_len']}, batch {CONFIG['batch']}, dropout {CONFIG['dropout']}, "
        f"float32, {threads} thread(s); one step = forward, loss, backward, clip, Adam"
    )
    steps_by_name = {"numpy (attention_lib)": ours}
    rng = np.random.default_rng(0)
    data = [
        random_windows(rng, train_ids, CONFIG["batch"], CONFIG["max_len"]) for _ in range(steps + 2)
    ]
    if torch is None:
        print("torch is not installed: timing the library alone, ratio skipped")
    else:
        theirs = torch_step(torch, ours.model)
        x = data[0][0][:4]
        with torch.no_grad():
            gap = np.abs(
                theirs.forward(torch.from_numpy(x), training=False).numpy()
                - ours.model.train(False).forward(x)
            ).max()
        print(f"same model: largest logit difference, dropout off: {gap:.1e}")
        steps_by_name["torch eager"] = theirs
    clocks = {name: [] for name in steps_by_name}
    for i, (x, y) in enumerate(data):  # in turns; 2 warm-up steps
        for name, step in steps_by_name.items():
            step(x, y, clocks[name] if i >= 2 else [])
    print(f"medians over {steps} steps after 2 warm-up steps, the two in turns\n")
    header = f"{'':<22} {'step ms':>8} {'forward':>8} {'loss':>8} {'backward':>9} {'clip+Adam':>9}"
    print(header)
    print("-" * len(header))
    medians = {}
    for name, clock in clocks.items():
        phases = [1e3 * statistics.median(c[j] for c in clock) for j in range(4)]
        medians[name] = 1e3 * statistics.median(sum(c) for c in clock)
        print(
            f"{name:<22} {medians[name]:8.1f} {phases[0]:8.1f} {phases[1]:8.1f} "
            f"{phases[2]:9.1f} {phases[3]:9.1f}"
        )
    if torch is not None:
        ratio = medians["numpy (attention_lib)"] / medians["torch eager"]
        print(
            f"\ngoal: numpy / torch = {ratio:.2f} (<= {goal}): "
            f"{'met' if ratio <= goal else 'NOT met'}"
        )
