"""The decayed key-key and query-key scores of a chunk, computed without overflow: shared by the
chunked delta rule (naive.py) and the effective attention (../effective_attention.py)."""

from __future__ import annotations

import torch
from torch import Tensor


SUB_CHUNK = 8     # diagonal blocks of this size are computed pairwise (see _decayed_scores)


def _decayed_scores(q: Tensor, k: Tensor, G: Tensor, sub: int) -> tuple[Tensor, Tensor]:
    """kk[r, s] = sum_i k_r[i] k_s[i] e^(G_r[i] - G_s[i]) and qk[r, s] likewise with q_r, for s <= r
    (entries with s > r are junk; callers mask them). q, k (..., C, K); G (..., C, 1 or K), the
    cumulative log decay, non-increasing along C.

    Computing e^(G_r - G_s) for every pair costs a (C, C, K) tensor. Instead the chunk is cut
    into sub-chunks of `sub` tokens: for s in sub-chunk j and r after it, split the decay at the
    boundary b (the last token of j): e^(G_r - G_b) e^(G_b - G_s), both factors <= 1, so the
    block is one matmul and nothing overflows. Only the diagonal blocks go pairwise (sub, sub, K).
    """
    C = q.shape[-2]
    kk, qk = q.new_zeros(*q.shape[:-1], C), q.new_zeros(*q.shape[:-1], C)
    tri = torch.ones(sub, sub, dtype=torch.bool, device=q.device).tril()
    for j in range(C // sub):
        cols = slice(j * sub, (j + 1) * sub)
        G_b = G[..., (j + 1) * sub - 1:(j + 1) * sub, :]                       # (..., 1, K)
        to_b = (G - G_b).clamp(max=0).exp()           # rows at or before b are junk here, never overflow
        from_b = k[..., cols, :] * (G_b - G[..., cols, :]).exp()               # (..., sub, K)
        kk[..., :, cols] = (k * to_b) @ from_b.transpose(-1, -2)                # (..., C, sub)
        qk[..., :, cols] = (q * to_b) @ from_b.transpose(-1, -2)
        diff = G[..., cols, None, :] - G[..., None, cols, :]                    # (..., sub, sub, K)
        decay = diff.masked_fill(~tri[..., None], float("-inf")).exp()
        k_s = k[..., None, cols, :] * decay                                     # (..., sub, sub, K)
        kk[..., cols, cols] = (k[..., cols, None, :] * k_s).sum(-1)
        qk[..., cols, cols] = (q[..., cols, None, :] * k_s).sum(-1)
    return kk, qk
