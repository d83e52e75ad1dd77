"""Frames of the arithmetic figures: each step of the figure is one setting of its slider
(a context length, a chunk size, a preset). No torch: these are counts and bytes."""
from __future__ import annotations

from .figures import param_ratio
from .memory import batch_per_card, chunk_flops, kv_bytes_per_token, model_memory
from .params import count
from .presets import get_preset


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
        n = fig.contexts[i]
        per_token = kv_bytes_per_token(fig.kv_heads, fig.head_dim, fig.dtype_bytes) * fig.layers
        card = int(fig.card_gb * 1e9) * fig.cards
        weights = int(fig.weight_gb * 1e9)
        batch = batch_per_card(n, per_token, weights, card)
        prev = batch_per_card(fig.contexts[i - 1], per_token, weights, card) if i else None
        return {"kind": kind, "context": n, "bytes_per_token": per_token, "cache_bytes_per_seq": per_token * n,
                "batch": batch, "previous_batch": prev, "contexts": fig.contexts,
                "batches": [batch_per_card(c, per_token, weights, card) for c in fig.contexts]}
    if kind == "chunk_dial":
        C = fig.chunks[i]
        base = chunk_flops(fig.length, fig.dim, 64)
        return {"kind": kind, "chunk": C, "length": fig.length, "dim": fig.dim,
                "state_flops": 2 * fig.length * fig.dim ** 2, "intra_flops": 2 * fig.length * C * fig.dim,
                "flops": chunk_flops(fig.length, fig.dim, C), "vs64": chunk_flops(fig.length, fig.dim, C) / base,
                "chunks": fig.chunks}
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
