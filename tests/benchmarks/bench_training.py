"""Training throughput (tokens/s) per preset on one device: `python -m tests.benchmarks.bench_training
[cpu|cuda] [STEPS]`. Each preset trains on the task it ships with, at the batch it ships with,
after one warm-up step; the ratio column is against tiny-linear measured in the same run."""
from __future__ import annotations

import argparse
import time

import torch

from lineage.model import LM
from lineage.presets import get_preset
from lineage.training.loop import TrainSettings, timed_steps
from lineage.training.tasks import TaskSpec

RUNS = [("tiny-linear", TaskSpec("mqar", pairs=16), 128), ("tiny-softmax", TaskSpec("mqar", pairs=16), 128),
        ("tiny-deltanet", TaskSpec("mqar", pairs=16), 128), ("tiny-gated-deltanet", TaskSpec("mqar", pairs=16), 128),
        ("tiny-kda", TaskSpec("mqar", pairs=16), 128), ("k3-mini", TaskSpec("text", length=256), 32)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("device", nargs="?", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("steps", nargs="?", type=int, default=5)
    args = p.parse_args()
    device, steps = torch.device(args.device), args.steps
    corpus = None
    base = None
    print(f"| preset | task | batch x tokens | tokens/s | vs tiny-linear |  ({device}, {steps} steps, "
          f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}, {time.strftime('%Y-%m-%d')})")
    for preset, spec, B in RUNS:
        if spec.name == "text" and corpus is None:
            from lineage.training.corpus import corpus as load
            corpus = load()
        torch.manual_seed(0)
        model = LM(get_preset(preset)).to(device)
        T = spec.length if spec.name == "text" else 4 * spec.pairs
        tps = timed_steps(model, spec, TrainSettings(steps=steps, batch=B, warmup=1), device, corpus)
        base = base or tps
        print(f"| {preset} | {spec.name} | {B} x {T} | {tps:,.0f} | {tps / base:.2f} |", flush=True)


if __name__ == "__main__":
    main()
