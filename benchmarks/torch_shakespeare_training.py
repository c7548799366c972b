"""Chapter 12's model trained in PyTorch with the same size, data and budget; writes a manifest.

Run as ``python benchmarks/torch_shakespeare_training.py [--steps N] [--threads N]``.
The model, its initial weights, the batches (same seed), the learning-rate schedule
(warm-up, cosine decay), gradient clipping and Adam are those of
:mod:`attention_lib.train.shakespeare` (``CONFIG``); the PyTorch model is
``_shakespeare_step.torch_step`` (``torch.nn.functional``, float32). After training,
the weights are copied back into the library's ``TinyGPT`` and the held-out loss is
measured by the same function as the committed NumPy model's
(``validation_loss``: the last 10% of the text in consecutive windows of 128).

It writes ``benchmarks/results/torch_shakespeare_training.json``: configuration, steps,
threads, measured wall and CPU time, CPU model, load average before and after, torch
and NumPy versions, the loss curve, and the held-out loss. Chapter 12 reads it.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _shakespeare_step import torch_step  # noqa: E402

from attention_lib.models.gpt import _slots  # noqa: E402
from attention_lib.train.shakespeare import (  # noqa: E402
    CONFIG,
    build_model,
    learning_rate,
    load_text,
    random_windows,
    validation_loss,
)

OUT = Path(__file__).resolve().parent / "results" / "torch_shakespeare_training.json"


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    names = [line.split(":", 1)[1].strip() for line in out.splitlines() if "Model name" in line]
    return names[0] if names else platform.processor()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=CONFIG["steps"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    import torch

    torch.manual_seed(CONFIG["seed"])  # dropout's random numbers
    torch.set_num_threads(args.threads)
    cfg = {**CONFIG, "steps": args.steps}
    chars, train_ids, val_ids = load_text()
    model = build_model(cfg, len(chars))  # the NumPy model's initial weights
    step = torch_step(torch, model)
    data_rng = np.random.default_rng(cfg["seed"] + 1)  # the NumPy run's batches
    load_before = os.getloadavg()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    curve, recent = {"step": [], "train": []}, []
    for i in range(1, cfg["steps"] + 1):
        x, y = random_windows(data_rng, train_ids, cfg["batch"], cfg["max_len"])
        for group in step.optimizer.param_groups:
            group["lr"] = learning_rate(i, cfg)
        recent.append(step(x, y, []))
        if i % cfg["eval_every"] == 0 or i == cfg["steps"]:
            curve["step"].append(i)
            curve["train"].append(round(float(np.mean(recent)), 4))
            recent = []
            print(
                f"step {i:5d}  train {curve['train'][-1]:.4f}  "
                f"wall {time.perf_counter() - wall0:.0f}s",
                flush=True,
            )
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    load_after = os.getloadavg()
    with torch.no_grad():  # the trained weights back into the library's model
        for name, arrays in _slots(model).items():
            value = step.params[name].detach().numpy()
            widths = np.cumsum([a.shape[-1] for a in arrays])[:-1]
            for a, part in zip(arrays, np.split(value, widths, axis=-1)):
                a[...] = part
    val = validation_loss(model.train(False), val_ids, cfg["max_len"])
    manifest = {
        "script": "benchmarks/torch_shakespeare_training.py",
        "command": " ".join(
            ["python", "benchmarks/torch_shakespeare_training.py", *(argv or sys.argv[1:])]
        ),
        "model": "chapter 12's TinyGPT in torch.nn.functional (benchmarks/_shakespeare_step.py)",
        "config": cfg,
        "optimizer": "torch.optim.Adam, the NumPy run's betas and schedule",
        "threads": args.threads,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "cpu_model": cpu_model(),
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in load_after],
        "torch": torch.__version__,
        "numpy": np.__version__,
        "curve": curve,
        "evaluation": {
            "val_loss": round(float(val), 4),
            "measured_on": "last 10% of the text, consecutive windows of max_len "
            "(attention_lib.train.shakespeare.validation_loss)",
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"held-out loss {val:.4f}; {wall / 60:.1f} min wall; wrote {args.out}")
    return manifest


if __name__ == "__main__":
    main()
