"""A step's observed tensors to the host in a few copies, not one copy each.

On a GPU every `.cpu()` waits for the device and pays a transfer's fixed cost. Kimi Linear's
27 layers read about 90 small tensors a frame (each MoE layer's scores, experts and weights,
the watched state, the top tokens): on an H200 a frame took 13.8 ms where the captured step's
replay took 6.7 (`profile_pretrained --layers 27 --experts 64`, 2026-12-03), and 435 `.cpu()`
calls over 5 frames were the largest part of the rest. Here the tensors are packed where they
live into one flat buffer per device and dtype, cast once, and each buffer crosses once, on a
copy stream, after an event: the next step can be queued behind the packing (`ahead`, the
captured step's GraphStep.launch) and computes while this one crosses and becomes a frame.
On the CPU each tensor is converted as it is.
"""
from __future__ import annotations

import numpy as np

HALF_MAX = 6e4          # float16's largest finite value is 65,504: a matrix reaching past it keeps float32


def to_host(want: dict, ahead=None) -> dict:
    """{key: (tensor, how)} -> {key: numpy array}. how: "compact" (a large float matrix: float16,
    3 significant digits, which is what a heatmap and its cursor show, unless its range needs
    float32; NaN and inf keep float32), "f32", or "i32". ahead(): called once the tensors are
    copied out on their device (packed), before the host waits for them: what it queues there
    (the next step's replay, GraphStep.launch) may overwrite them, and runs while this step's
    copies cross and the host builds its frame."""
    out = {k: _one(t, how) for k, (t, how) in want.items() if t.device.type != "cuda"}
    on_gpu = [(k, t.detach(), how) for k, (t, how) in want.items() if t.device.type == "cuda"]
    if on_gpu:
        out.update(_batched(on_gpu, ahead))
    elif ahead is not None:
        ahead()
    return {k: out[k] for k in want}         # in the order asked


_STREAMS: dict = {}                           # device -> the stream this module copies to the host on


def _batched(items: list, ahead=None) -> dict:
    """Every cast and pack is launched before the host waits, so on a GPU they queue behind the
    step and the host's launches overlap its replay (cast after the wait, 87 `.float()` and 29
    `.to()` a frame were launched while the device idled: 27 layers on an H200).
    Tensors of one source dtype are packed first and cast once; the large matrices are packed
    both as float16 and float32 (the range checks' answer, which picks one, comes later). The
    packs cross on a stream of their own, after an event: work queued after them (ahead) does
    not delay them."""
    import torch
    big = [(k, t) for k, t, how in items if how == "compact" and t.numel()]
    by: dict = {}                      # (device, dtype it has, dtype it is stored as) -> [(key, tensor)]
    for k, t, how in items:
        if how == "compact" and t.numel():
            continue
        want = torch.int32 if how == "i32" else torch.float32
        by.setdefault((t.device, t.dtype, want), []).append((k, t))
    packs = [(group, torch.cat([t.reshape(-1) for _, t in group]).to(want)) for (_, _, want), group in by.items()]
    if big:
        dev = big[0][1].device
        fits = torch.stack([t.abs().amax().float().to(dev) for _, t in big]).lt(HALF_MAX)
        half = torch.cat([t.reshape(-1).half().to(dev) for _, t in big])
        wide = torch.cat([t.reshape(-1).float().to(dev) for _, t in big])
    ready = {}                         # device -> an event after its packs
    for d in {flat.device for _, flat in packs} | ({dev} if big else set()):
        if d.type == "cuda":
            ready[d] = torch.cuda.Event()
            ready[d].record(torch.cuda.current_stream(d))
    if ahead is not None:
        ahead()
    hosts = _across([flat for _, flat in packs] + ([half, fits] if big else []), ready)
    out = {}
    for (group, _), flat in zip(packs, hosts):
        out.update(_unpack(group, flat))
    if big:
        ok = dict(zip((k for k, _ in big), hosts[-1].tolist()))
        out.update(_unpack(big, hosts[-2]))
        if not all(ok.values()):       # past float16's range (NaN, inf): those keep float32
            out.update((k, a) for k, a in _unpack(big, _across([wide], ready)[0]) if not ok[k])
    return out


def _unpack(group: list, flat: np.ndarray):
    """(key, array) for each (key, tensor) of `group`, in order, from their packed `flat`."""
    at = 0
    for k, t in group:
        yield k, flat[at:at + t.numel()].reshape(tuple(t.shape))
        at += t.numel()


def _across(flats: list, ready: dict) -> list:
    """The tensors as numpy arrays, each copied once: from a GPU on its device's copy stream
    after the device's event, through pinned host memory into a plain array (a frame outlives
    the pinned block)."""
    import torch
    copies = []
    for flat in flats:
        if flat.device.type != "cuda":
            copies.append((flat, None))
            continue
        side = _STREAMS.get(flat.device)
        if side is None:
            side = _STREAMS[flat.device] = torch.cuda.Stream(flat.device)
        side.wait_event(ready[flat.device])
        with torch.cuda.stream(side):
            host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
            host.copy_(flat, non_blocking=True)
        copies.append((host, side))
    for _, side in copies:
        if side is not None:
            side.synchronize()
    return [host.numpy().copy() for host, _ in copies]


def _one(t, how: str) -> np.ndarray:
    t = t.detach()
    if how == "compact":
        return compact(t)
    # copies numpy owns: a view would keep a torch tensor alive inside the frame, and a frame
    # freed by a daemon thread at interpreter exit then frees it without the GIL to come back to
    if how == "f32":
        return t.float().cpu().numpy().copy()
    return t.cpu().numpy().astype(np.int32)


def compact(a) -> np.ndarray:
    """A large float matrix in float16 unless its range needs float32, cast where it lives (numpy's
    float16 cast of one 32 x 128 x 128 state took milliseconds)."""
    a = a.detach()
    out = a.half() if a.numel() and float(a.abs().amax()) < HALF_MAX else a.float()   # NaN and inf fail the test
    out = out.cpu().numpy()
    # on the CPU a cast to the tensor's own dtype is the tensor: copy, so a frame never shares a live state's memory
    return out.copy() if a.device.type == "cpu" else out
