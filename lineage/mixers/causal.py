"""Causal softmax attention over a whole prompt without a T x L score matrix, for the forward
(prefill) of softmax and MLA layers: torch's fused kernels (flash, memory-efficient, the CPU's
flash) hold one tile of scores at a time. A 32K-token prompt's scores for 32 heads would be
32 x 32K x 32K floats (128 GiB in fp32); the step, which shows its weights, still computes them
(one row per head).

The queries are the last T of L positions (a chunk continuing a cache). Where no fused kernel
takes the mask whole, the queries go in blocks, each against only the keys it can see, so a
mask is at most a block's rows by its keys."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

BLOCK_ELEMENTS = 1 << 24       # mask entries per block (16 MB of bools)


def causal_attention(q: Tensor, k: Tensor, v: Tensor, window: int | None = None) -> Tensor:
    """q (B, H, T, D) at positions L - T .. L - 1; k (B, H, L, D), v (B, H, L, Dv) -> (B, H, T, Dv).
    Query i sees keys 0 .. its position, or with a sliding window W the W keys ending there.
    Scaled by D^-0.5."""
    T, L, D, Dv = q.shape[2], k.shape[2], q.shape[-1], v.shape[-1]
    if Dv < D:      # the fused kernels want one head width: zero channels read back as zeros
        v = F.pad(v, (0, D - Dv))
    elif Dv > D:
        raise ValueError(f"value width {Dv} wider than the keys' {D}")
    if window is None and T == L:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    elif window is None and q.is_cuda:
        out = _prefix_and_diagonal(q, k, v) if q.dtype in (torch.float16, torch.bfloat16) else None
        if out is None:
            # flash and memory-efficient attention align a causal mask to the bottom right themselves
            from torch.nn.attention.bias import causal_lower_right
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(T, L))
    else:
        out = torch.cat([_block(q, k, v, lo, hi, window) for lo, hi in _blocks(T, L, window)], dim=2)
    return out[..., :Dv]


def _prefix_and_diagonal(q: Tensor, k: Tensor, v: Tensor) -> Tensor | None:
    """A chunk continuing a cache, as two attentions cuDNN runs: the whole prefix (no mask) and
    the chunk's own keys (causal, square), merged by their log-sum-exps. On an H200 cuDNN's
    attention took half the time of flash's bottom-right causal kernel, the only fused one torch
    has for T < L (32K-token prefill in 4K chunks: 127 ms against 286 ms over 7 MLA layers).
    None where cuDNN does not take these inputs."""
    P = k.shape[2] - q.shape[2]
    try:
        o1, l1 = _cudnn(q, k[:, :, :P], v[:, :, :P], causal=False)
        o2, l2 = _cudnn(q, k[:, :, P:], v[:, :, P:], causal=True)
    except torch.OutOfMemoryError:
        raise               # the fallback needs more memory, not less
    except RuntimeError:    # a shape or dtype cuDNN does not take
        return None
    lse = torch.logaddexp(l1, l2)                                       # (B, H, T, 1) float32
    return (o1 * (l1 - lse).exp() + o2 * (l2 - lse).exp()).to(q.dtype)


def _cudnn(q: Tensor, k: Tensor, v: Tensor, causal: bool) -> tuple[Tensor, Tensor]:
    """-> softmax(q k^T / sqrt(D)) v (B, H, T, D) and each row's log-sum-exp (B, H, T, 1)."""
    B, H, T, _ = q.shape
    out, lse = torch.ops.aten._scaled_dot_product_cudnn_attention(
        q, k.contiguous(), v.contiguous(), None, True, 0.0, causal, False)[:2]
    return out, lse.reshape(B, H, T, 1).float()


def _blocks(T: int, L: int, window: int | None) -> list[tuple[int, int]]:
    span = L if window is None else min(L, window + T)
    rows = max(16, min(T, BLOCK_ELEMENTS // max(span, 1)))
    return [(lo, min(lo + rows, T)) for lo in range(0, T, rows)]


def _block(q: Tensor, k: Tensor, v: Tensor, lo: int, hi: int, window: int | None) -> Tensor:
    """Queries lo .. hi - 1 (of T) against the keys they can see."""
    T, L = q.shape[2], k.shape[2]
    first, last = L - T + lo, L - T + hi - 1                 # the block's query positions
    k0 = 0 if window is None else max(0, first - window + 1)
    pos = torch.arange(first, last + 1, device=q.device)[:, None]     # (rows, 1)
    key = torch.arange(k0, last + 1, device=q.device)[None, :]        # (1, keys)
    visible = key <= pos
    if window is not None:
        visible = visible & (key > pos - window)
    return F.scaled_dot_product_attention(q[:, :, lo:hi], k[:, :, k0:last + 1], v[:, :, k0:last + 1],
                                          attn_mask=visible)
