"""The seed essays' figures that are pure arithmetic or a toy run of a real op.

Each function returns the numbers a figure shows; scenarios and tests call the same code.
"""
from __future__ import annotations

import math

from .memory import batch_per_card, chunk_flops, kv_bytes_per_token


def two_unit_keys(cosine: float, dim: int = 2, dtype=None):
    """Two unit keys at the given cosine: k1 = e1, k2 = c e1 + sqrt(1 - c^2) e2. Shape (2, dim)."""
    import torch   # here, not at the top: the arithmetic figures must load without torch
    k = torch.zeros(2, dim, dtype=dtype or torch.float64)
    k[0, 0] = 1.0
    k[1, 0], k[1, 1] = cosine, math.sqrt(max(0.0, 1.0 - cosine ** 2))
    return k


def two_facts(cosine: float = 0.7, beta: float = 1.0, values=(1.0, 1.0)) -> dict:
    """Write fact 1 then fact 2 (scalar values) into one memory, then read each back with its key.

    Additive (linear attention, no normaliser): both reads are v + c v'. Delta rule: the newest
    fact reads back exactly (beta = 1); the older one keeps an error of c (1 - c) for unit values.
    """
    import torch
    from . import ops
    k = two_unit_keys(cosine).view(1, 2, 1, 2)                    # (B, T, H, K)
    v = torch.tensor(values, dtype=torch.float64).view(1, 2, 1, 1)
    ones = torch.ones(1, 2, 1, dtype=torch.float64)
    _, (S_add, _) = ops.linear_attention(k, k, v, normalize=False)
    _, S_delta = ops.delta_rule(k, k, v, ones * beta)
    keys = k[0, :, 0]                                             # (2, K)
    add = (keys @ S_add[0, 0])[:, 0]                              # read-back with each key
    delta = (keys @ S_delta[0, 0])[:, 0]
    return {"cosine": cosine, "beta": beta,
            "additive_old": add[0].item(), "additive_new": add[1].item(),
            "delta_old": delta[0].item(), "delta_new": delta[1].item(),
            "delta_old_error": abs(delta[0].item() - values[0])}


def chunk_dial(L: int = 8192, d: int = 128, chunks=(1, 16, 64, 128, 256, 1024, 8192)) -> list[dict]:
    """FLOPs of the chunked form against chunk size; 'vs64' is the ratio to the kernels' usual C = 64."""
    base = chunk_flops(L, d, 64)
    return [{"chunk": C, "flops": chunk_flops(L, d, C), "vs64": chunk_flops(L, d, C) / base} for C in chunks]


def param_ratio(big: float = 2.8e12, small: float = 124e6) -> int:
    """How many GPT-2 smalls fit in K3, by parameter count (rounded down: 22,580)."""
    return int(big // small)


def kv_batch(contexts=(8192, 16384, 32768, 65536, 131072, 262144), n_layers: int = 93, kv_heads: int = 8,
             head_dim: int = 128, dtype_bytes: int = 2, weight_bytes: int = 0, card_bytes: int = 8 * 141 * 10**9
             ) -> list[dict]:
    """The KV-cache slider: with weights fixed, the batch a node holds against context length.
    Defaults: the seed's 8 KV heads x 128 dims on every one of 93 layers, bf16, an 8 x H200 node
    with the weights left out (pass weight_bytes to include them)."""
    per_token = kv_bytes_per_token(kv_heads, head_dim, dtype_bytes) * n_layers
    return [{"context": n, "bytes_per_token": per_token, "cache_bytes": per_token * n,
             "batch": batch_per_card(n, per_token, weight_bytes, card_bytes)} for n in contexts]
