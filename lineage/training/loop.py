"""The training loop: AdamW, linear warmup then cosine decay, batches drawn fresh every step.

Plain on purpose: one model, one task, one optimizer. The caller (the `lineage train` command)
gets a callback per step for its progress bar and one per checkpoint interval to save.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from ..ffns.moe import MoE
from .tasks import Batch, TaskSpec, batch, mqar


@dataclass(frozen=True)
class TrainSettings:
    steps: int = 2000
    batch: int = 128
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    seed: int = 0
    balance_rate: float = 1e-3      # how far an expert's selection bias moves per step (MoE only)
    stop_after: int | None = None   # stop after this step of the `steps` schedule (what a time limit cut)

    def lr_at(self, step: int) -> float:
        """Linear warmup to lr, then cosine down to a tenth of it at the last step."""
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        t = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * min(t, 1.0))))


class Diverged(ValueError):
    """The loss or the gradient at a step was NaN or inf. Raised before that step's update, so the
    model keeps the weights it had (and on_checkpoint never saw broken ones)."""

    def __init__(self, step: int, what: str, value: float):
        super().__init__(f"step {step + 1}: the {what} is {value}")
        self.step, self.what, self.value = step, what, value     # step: 0-based, as on_step counts


def to_device(b: Batch, device) -> dict:
    out = {k: torch.from_numpy(getattr(b, k)).to(device) for k in ("ids", "targets", "mask")}
    out["sep"] = None if b.sep is None else torch.from_numpy(b.sep).to(device)
    out["groups"] = {k: torch.from_numpy(v).to(device) for k, v in b.groups.items()}
    return out


def scored(model, b: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Loss over the scored positions, whether each was predicted right (B, T), and the logits."""
    logits, _ = model(b["ids"])                                               # (B, T, V)
    loss = F.cross_entropy(logits[b["mask"]].float(), b["targets"][b["mask"]])
    right = (logits.argmax(-1) == b["targets"]) & b["mask"]                   # (B, T)
    return loss, right, logits


def draw(spec: TaskSpec, rng: np.random.Generator, B: int, corpus=None, split: str = "train") -> Batch:
    """A training batch. The text task mixed with MQAR draws an MQAR batch with probability `mix`."""
    if spec.name == "text" and spec.mix > 0 and rng.random() < spec.mix:
        return mqar(rng, B, spec.pairs)
    return batch(spec, rng, B, corpus, split)


class _LoadCounter:
    """Counts, per MoE layer, how many tokens chose each expert in the last forward."""

    def __init__(self, model):
        self.layers = [m for m in model.modules() if isinstance(m, MoE) and m.cfg.selection_bias]
        self.load = {}
        for m in self.layers:
            route = m.route

            def counted(x, _route=route, _m=m):
                s, idx, w = _route(x)
                flat = idx.flatten()         # (bincount on a GPU asks the host for the max: a sync)
                self.load[_m] = torch.zeros(_m.cfg.n_experts, dtype=torch.long, device=flat.device).scatter_add_(
                    0, flat, torch.ones_like(flat))
                return s, idx, w
            m.route = counted

    def rebalance(self, rate: float) -> None:
        """DeepSeek-V3's rule: raise the bias of experts below the mean load, lower those above."""
        with torch.no_grad():
            for m, load in self.load.items():
                m.expert_bias += rate * torch.sign(load.float().mean() - load.float())

    def remove(self) -> None:
        for m in self.layers:
            del m.route          # back to the class's method


def train(model, spec: TaskSpec, st: TrainSettings, device, corpus=None, on_step=None, on_checkpoint=None,
          checkpoint_every: int = 250, time_limit: float | None = None) -> dict:
    """Train in place. on_step(step, loss, acc, tokens) after every step; on_checkpoint(step)
    every `checkpoint_every` steps. Past `time_limit` seconds it stops where it is: the result
    says how many steps were done, and `stop_after` that many reproduces it. Returns that
    count and the last 50 steps' mean loss and accuracy. Diverged at the first NaN or inf loss
    or gradient, before it reaches the weights."""
    t0 = time.perf_counter()
    last = st.steps if st.stop_after is None else min(st.steps, st.stop_after)
    rng = np.random.default_rng([st.seed, 0])          # data stream; the init was seeded by the caller
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": st.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=st.lr, betas=(0.9, 0.95))
    balance = _LoadCounter(model)
    model.train()
    recent: list[tuple[float, float]] = []
    try:
        done = 0
        for step in range(last):
            for g in opt.param_groups:
                g["lr"] = st.lr_at(step)
            b = to_device(draw(spec, rng, st.batch, corpus), device)
            loss, right, _ = scored(model, b)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), st.grad_clip)
            # one read back from the device per step (counts are exact in float32: a batch is < 2**24 tokens)
            l, n, hit, asked = torch.stack([loss.detach().float(), norm.float(), right.sum().float(),
                                            b["mask"].sum().float()]).tolist()
            if not math.isfinite(l):                 # one update with it would make every weight NaN
                raise Diverged(step, "loss", l)
            if not math.isfinite(n):
                raise Diverged(step, "gradient norm", n)
            opt.step()
            balance.rebalance(st.balance_rate)
            a = hit / max(1, asked)
            recent = (recent + [(l, a)])[-50:]
            if on_step is not None:
                on_step(step, l, a, b["ids"].numel())
            done = step + 1
            if on_checkpoint is not None and done % checkpoint_every == 0 and done < last:
                on_checkpoint(done)
            if time_limit is not None and time.perf_counter() - t0 > time_limit:
                break
    finally:
        balance.remove()
        model.eval()
    return {"steps_done": done, "train_loss": float(np.mean([r[0] for r in recent])), "train_acc": float(np.mean([r[1] for r in recent]))}


def timed_steps(model, spec: TaskSpec, st: TrainSettings, device, corpus=None) -> float:
    """Tokens per second over `st.steps` steps (for BENCHMARKS), after one warm-up step."""
    train(model, spec, replace(st, steps=1), device, corpus)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0, tokens = time.perf_counter(), [0]
    train(model, spec, st, device, corpus, on_step=lambda s, l, a, n: tokens.__setitem__(0, tokens[0] + n))
    if device.type == "cuda":
        torch.cuda.synchronize()
    return tokens[0] / (time.perf_counter() - t0)
