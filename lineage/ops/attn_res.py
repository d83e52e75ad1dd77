"""Attention residuals: a layer reads a softmax mix of the earlier blocks' outputs (attention
over depth) where a plain residual adds them all with weight one."""

from __future__ import annotations

import torch
from torch import Tensor



def attn_res(query: Tensor, sources: Tensor, norm_weight: Tensor | None = None,
             eps: float = 1e-6) -> tuple[Tensor, Tensor]:
    """Attention over depth. sources (N, ..., D): the embedding, the completed block sums and the
    running partial sum. query (D,) is the aggregation point's learned pseudo-query.
    Keys are the RMS-normalised sources (so a source that is merely large cannot dominate),
    values the raw sources. Returns h (..., D) and weights (N, ...), summing to 1 over N.
    """
    if sources.shape[-1] != query.shape[-1]:
        raise ValueError(f"query dim {query.shape[-1]} != source dim {sources.shape[-1]}")
    w = query if norm_weight is None else query * norm_weight      # (D,)
    keys = sources * torch.rsqrt(sources.pow(2).mean(-1, keepdim=True) + eps)   # (N, ..., D)
    scores = keys @ w                                                # (N, ...)
    weights = scores.softmax(dim=0)                                  # (N, ...)
    h = (weights.unsqueeze(-1) * sources).sum(0)                     # (..., D)
    return h, weights
