"""A step's observed tensors to the host in a few copies, not one copy each.

On a GPU every `.cpu()` waits for the device and pays a transfer's fixed cost. Kimi Linear's
27 layers read about 90 small tensors a frame (each MoE layer's scores, experts and weights,
the watched state, the top tokens): on an H200 a frame took 13.8 ms where the captured step's
replay took 6.7 (`profile_pretrained --layers 27 --experts 64`, 2026-12-03), and 435 `.cpu()`
calls over 5 frames were the largest part of the rest. Here the tensors are cast where they
live, packed into one flat buffer per device and dtype, and each buffer crosses once; the large
matrices' range checks cross together first. On the CPU each tensor is converted as it is.
"""
from __future__ import annotations

import numpy as np

HALF_MAX = 6e4          # float16's largest finite value is 65,504: a matrix reaching past it keeps float32


def to_host(want: dict) -> dict:
    """{key: (tensor, how)} -> {key: numpy array}. how: "compact" (a large float matrix: float16,
    3 significant digits, which is what a heatmap and its cursor show, unless its range needs
    float32; NaN and inf keep float32), "f32", or "i32"."""
    out = {k: _one(t, how) for k, (t, how) in want.items() if t.device.type != "cuda"}
    on_gpu = [(k, t.detach(), how) for k, (t, how) in want.items() if t.device.type == "cuda"]
    if on_gpu:
        out.update(_batched(on_gpu))
    return {k: out[k] for k in want}         # in the order asked


def _batched(items: list) -> dict:
    import torch
    big = [t for _, t, how in items if how == "compact" and t.numel()]
    fits = iter(torch.stack([t.abs().amax().float().to(big[0].device) for t in big]).lt(HALF_MAX).tolist()
                if big else ())                                          # one wait for every matrix
    groups: dict = {}
    for k, t, how in items:
        if how == "compact":
            t = t.half() if t.numel() and next(fits) else t.float()
        else:
            t = t.float() if how == "f32" else t.to(torch.int32)
        groups.setdefault((t.device, t.dtype), []).append((k, t))
    out = {}
    for group in groups.values():
        flat = torch.cat([t.reshape(-1) for _, t in group]).cpu().numpy()       # one copy a group
        at = 0
        for k, t in group:
            out[k] = flat[at:at + t.numel()].reshape(tuple(t.shape))
            at += t.numel()
    return out


def _one(t, how: str) -> np.ndarray:
    t = t.detach()
    if how == "compact":
        return compact(t)
    if how == "f32":
        return t.float().cpu().numpy()
    return t.cpu().numpy().astype(np.int32)


def compact(a) -> np.ndarray:
    """A large float matrix in float16 unless its range needs float32, cast where it lives (numpy's
    float16 cast of one 32 x 128 x 128 state took milliseconds)."""
    a = a.detach()
    out = a.half() if a.numel() and float(a.abs().amax()) < HALF_MAX else a.float()   # NaN and inf fail the test
    out = out.cpu().numpy()
    # on the CPU a cast to the tensor's own dtype is the tensor: copy, so a frame never shares a live state's memory
    return out.copy() if a.device.type == "cpu" else out
