"""The seed essays' figures that are pure arithmetic or a toy run of a real op.

Each function returns the numbers a figure shows; scenarios and tests call the same code.
A figure scenario's frames are its slider's settings (a context length, a chunk size, a
preset): `figure_steps` counts them and `figure_row` gives one. No torch at import.
"""
from __future__ import annotations

import math

from .arithmetic import batch_per_card, chunk_flops, count, kv_bytes_per_token, model_memory
from .presets import get_preset


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

def figure_steps(fig) -> int:
    """How many settings the figure's slider has."""
    if fig.kind == "param_ratio":
        return 1
    if fig.kind == "chunk_dial":
        return len(fig.chunks)
    if fig.kind in ("kv_cache", "memory_table"):
        return len(fig.contexts)
    return len(fig.presets)


def figure_row(fig, i: int) -> dict:
    kind = fig.kind
    if kind == "param_ratio":
        big, small = count(get_preset(fig.big))["total"], count(get_preset(fig.small))["total"]
        return {"kind": kind, "big": fig.big, "small": fig.small, "big_params": big, "small_params": small,
                "published_big": fig.published_big, "published_small": fig.published_small,
                "ratio_published": param_ratio(fig.published_big, fig.published_small),
                "ratio_from_configs": big / small}
    if kind == "kv_cache":
        rows = kv_batch(fig.contexts, fig.layers, fig.kv_heads, fig.head_dim, fig.dtype_bytes,
                        weight_bytes=int(fig.weight_gb * 1e9), card_bytes=int(fig.card_gb * 1e9) * fig.cards)
        row = rows[i]
        return {"kind": kind, "context": row["context"], "bytes_per_token": row["bytes_per_token"],
                "cache_bytes_per_seq": row["cache_bytes"], "batch": row["batch"],
                "previous_batch": rows[i - 1]["batch"] if i else None, "contexts": fig.contexts,
                "batches": [r["batch"] for r in rows]}
    if kind == "chunk_dial":
        C = fig.chunks[i]
        row = chunk_dial(fig.length, fig.dim, [C])[0]
        return {"kind": kind, "chunk": C, "length": fig.length, "dim": fig.dim,
                "state_flops": 2 * fig.length * fig.dim ** 2, "intra_flops": 2 * fig.length * C * fig.dim,
                "flops": row["flops"], "vs64": row["vs64"], "chunks": fig.chunks}
    cfgs = [get_preset(p) for p in fig.presets]
    if kind == "layer_map":
        cfg = cfgs[min(i, len(cfgs) - 1)]
        kinds = {k: cfg.mixers.count(k) for k in dict.fromkeys(cfg.mixers)}
        return {"kind": kind, "preset": cfg.name, "mixers": list(cfg.mixers), "ffns": list(cfg.ffns),
                "counts": kinds, "attnres_block": cfg.attnres.block_size if cfg.attnres else None,
                "layers": cfg.n_layers}
    if kind == "moe_sparsity":
        cfg = cfgs[min(i, len(cfgs) - 1)]
        c = count(cfg)
        moe = cfg.moe
        return {"kind": kind, "preset": cfg.name, "experts": moe.n_experts if moe else 0,
                "top_k": moe.top_k if moe else 0, "shared": moe.n_shared if moe else 0,
                "sparsity": (moe.n_experts / moe.top_k) if moe else 1.0,
                "total": c["total"], "active": c["active"], "active_fraction": c["active"] / c["total"]}
    assert kind == "memory_table"
    n = fig.contexts[min(i, len(fig.contexts) - 1)]
    rows = []
    for cfg in cfgs:
        m = model_memory(cfg, n)
        rows.append({"preset": cfg.name, "cache_bytes": m["cache_bytes"], "state_bytes": m["state_bytes"],
                     "total_bytes": m["total_bytes"]})
    return {"kind": kind, "context": n, "rows": rows}
