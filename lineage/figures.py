"""The seed essays' figures that are pure arithmetic or a toy run of a real op.

Each function returns the numbers a figure shows; scenarios and tests call the same code.
A figure scenario's frames are its slider's settings (a context length, a chunk size, a
preset, an overlap and beta): `figure_steps` counts them and `figure_row` gives one. Memory is
counted by one function, `arithmetic.model_memory`, whose element sizes every row names.
No torch at import.
"""
from __future__ import annotations

import dataclasses
import math

from .arithmetic import batch_per_card, chunk_flops, count, kv_bytes_per_token, model_memory
from .presets import get_preset

# Published totals the configs are checked against (FACTS section 3): (total, active) parameters.
PUBLISHED = {"k3": (2.8e12, 104e9), "kimi-linear-48b": (48e9, 3e9), "gpt2-small": (124e6, 124e6),
             "gpt2-xl": (1.5e9, 1.5e9)}
# Kimi Linear's reported gains at 1M context (FACTS section 4, figure 9): not the same claim thrice.
KIMI_LINEAR_CLAIMS = ("up to 75% less KV cache than all-MLA", "up to 6x decoding throughput at 1M context",
                      "6.3x lower time per output token (TPOT)", "about 2.3x measured end to end")
SPARSE_BELOW = 0.2     # a mixture of experts is sparse when under this share of its weights fire per token
COPY_TBS = 4.14        # measured H200 device copy, bytes read + written (FACTS section 5)

# tests/benchmarks/bench_chunk_dial.py on the H200 (BENCHMARKS.md, "Figure 4's time against chunk
# size"): lineage.ops.delta_rule, fp32, B = 1, T = 8192, H = 16, K = V = 128; ms per call.
CHUNK_DIAL_MEASURED = {
    "machine": "NVIDIA H200", "date": "2026-12-01", "software": "torch 2.11, triton 3.6",
    "length": 8192, "dim": 128, "heads": 16, "recurrence_ms": 1066.2, "triton_64_ms": 7.67,
    "ms": {1: 1286.8, 16: 90.7, 32: 69.7, 64: 103.6, 128: 146.5, 256: 208.9, 512: 469.5, 1024: 458.2,
           2048: 520.9, 4096: 391.6, 8192: 408.9},
}


def two_unit_keys(cosine: float, dim: int = 2, dtype=None):
    """Two unit keys at the given cosine: k1 = e1, k2 = c e1 + sqrt(1 - c^2) e2. Shape (2, dim)."""
    import torch   # here, not at the top: the arithmetic figures must load without torch
    k = torch.zeros(2, dim, dtype=dtype or torch.float64)
    k[0, 0] = 1.0
    k[1, 0], k[1, 1] = cosine, math.sqrt(max(0.0, 1.0 - cosine ** 2))
    return k


def two_facts(cosine: float = 0.7, beta: float = 1.0, values=(1.0, 1.0)) -> dict:
    """Write fact 1 then fact 2 (scalar values) into one memory, then read each back with its key.

    Three memories, all through `lineage.ops`: the additive sum S read as k S (linear attention
    without its normaliser: both reads are v + c v'), linear attention as the project's layer runs
    it, k S / k z (a weighted average of the values: it cannot tell them apart when they are
    equal), and the delta rule (with beta = 1 the newest fact reads back exactly and the older one
    reads v1 + c (v2 - c v1): off by +c (1 - c) for equal values, by -c^2 for values 1 and 0).
    """
    import torch
    from . import ops
    k = two_unit_keys(cosine).view(1, 2, 1, 2)                    # (B, T, H, K)
    v = torch.tensor(values, dtype=torch.float64).view(1, 2, 1, 1)
    ones = torch.ones(1, 2, 1, dtype=torch.float64)
    _, (S_add, _) = ops.linear_attention(k, k, v * beta, normalize=False)
    _, (S_lin, z) = ops.linear_attention(k, k, v, normalize=False)   # the layer has no beta
    _, S_delta = ops.delta_rule(k, k, v, ones * beta)
    keys = k[0, :, 0]                                             # (2, K)
    add = (keys @ S_add[0, 0])[:, 0]                              # read-back with each key
    norm = (keys @ S_lin[0, 0])[:, 0] / (keys @ z[0, 0])         # what LinearAttention returns
    delta = (keys @ S_delta[0, 0])[:, 0]
    v1, v2 = values
    return {"cosine": cosine, "beta": beta, "values": list(values),
            "additive_old": add[0].item(), "additive_new": add[1].item(),
            "normalised_old": norm[0].item(), "normalised_new": norm[1].item(),
            "delta_old": delta[0].item(), "delta_new": delta[1].item(),
            "delta_old_error": abs(delta[0].item() - v1), "delta_new_error": abs(delta[1].item() - v2),
            # signed: the old read-back minus v1 (the error above is its size)
            "old_offset_formula": cosine * (v2 - cosine * v1)}


def chunk_dial(L: int = 8192, d: int = 128, chunks=(1, 16, 64, 128, 256, 1024, 8192)) -> list[dict]:
    """FLOPs of the chunked form against chunk size; 'vs64' is the ratio to the kernels' usual C = 64."""
    base = chunk_flops(L, d, 64)
    return [{"chunk": C, "flops": chunk_flops(L, d, C), "vs64": chunk_flops(L, d, C) / base} for C in chunks]


def param_ratio(big: float = 2.8e12, small: float = 124e6) -> int:
    """How many GPT-2 smalls fit in K3, by parameter count (rounded down: 22,580)."""
    return int(big // small)


def gpt2_xl():
    """GPT-2 XL's shape (48 layers, width 1600, 25 heads) from GPT-2 small's config: 1,557,611,200."""
    g, d = get_preset("gpt2-small"), 1600
    return dataclasses.replace(g, name="gpt2-xl", d_model=d, mixers=("softmax",) * 48, ffns=("dense",) * 48,
                               attention=dataclasses.replace(g.attention, d_model=d, n_heads=25),
                               dense=dataclasses.replace(g.dense, d_model=d, d_ff=4 * d))


def kv_batch(contexts=(8192, 16384, 32768, 65536, 131072, 262144), n_layers: int = 93, kv_heads: int = 8,
             head_dim: int = 128, dtype_bytes: int = 2, weight_bytes: int = 0, card_bytes: int = 8 * 141 * 10**9
             ) -> list[dict]:
    """The KV-cache slider: with weights fixed, the batch a node holds against context length.
    Defaults: the seed's 8 KV heads x 128 dims on every one of 93 layers, bf16, an 8 x H200 node
    with the weights left out (pass weight_bytes to include them)."""
    per_token = kv_bytes_per_token(kv_heads, head_dim, dtype_bytes) * n_layers
    return [{"context": n, "bytes_per_token": per_token, "cache_bytes": per_token * n,
             "batch": batch_per_card(per_token * n, weight_bytes, card_bytes)} for n in contexts]


def figure_steps(fig) -> int:
    """How many settings the figure's slider has."""
    if fig.kind == "param_ratio":
        return 1
    if fig.kind == "chunk_dial":
        return len(fig.chunks)
    if fig.kind == "two_facts":
        return len(fig.settings)
    if fig.kind in ("kv_cache", "memory_table", "decode_bytes"):
        return len(fig.contexts)
    return len(fig.presets)


def crossover(m: dict) -> float | None:
    """Tokens at which the growing cache reaches the fixed state (None: one of them is zero)."""
    return m["state_bytes"] / m["bytes_per_token"] if m["bytes_per_token"] and m["state_bytes"] else None


def figure_row(fig, i: int) -> dict:
    kind = fig.kind
    if kind == "param_ratio":
        big, small = count(get_preset(fig.big))["total"], count(get_preset(fig.small))["total"]
        return {"kind": kind, "big": fig.big, "small": fig.small, "big_params": big, "small_params": small,
                "published_big": fig.published_big, "published_small": fig.published_small,
                "ratio_published": param_ratio(fig.published_big, fig.published_small),
                "ratio_from_configs": big / small}
    if kind == "kv_cache":
        return _kv_cache_row(fig, i)
    if kind == "chunk_dial":
        return _chunk_dial_row(fig, i)
    if kind == "two_facts":
        rows = [two_facts(s[0], s[1], tuple(s[2:]) if len(s) == 4 else tuple(fig.values)) for s in fig.settings]
        return {"kind": kind, **rows[i], "step": i, "settings": [list(s) for s in fig.settings],
                "curve": [{"cosine": r["cosine"], "beta": r["beta"], "values": r["values"],
                           "delta_old_error": r["delta_old_error"], "delta_new_error": r["delta_new_error"]}
                          for r in rows]}
    cfgs = [get_preset(p) for p in fig.presets]
    if kind == "layer_map":
        cfg = cfgs[min(i, len(cfgs) - 1)]
        kinds = {k: cfg.mixers.count(k) for k in dict.fromkeys(cfg.mixers)}
        b = cfg.attnres.block_size if cfg.attnres else None
        # AttnRes: a new block starts at every layer_idx % block_size == 0; each layer reads the
        # embedding, the completed blocks and its block's partial sum
        blocks = [[s, min(s + b, cfg.n_layers) - 1] for s in range(0, cfg.n_layers, b)] if b else []
        return {"kind": kind, "preset": cfg.name, "mixers": list(cfg.mixers), "ffns": list(cfg.ffns),
                "counts": kinds, "attnres_block": b, "attnres_blocks": blocks, "layers": cfg.n_layers}
    if kind == "moe_sparsity":
        return _moe_row(cfgs[min(i, len(cfgs) - 1)])
    if kind == "active_ratio":
        return _active_row(cfgs, i)
    n = fig.contexts[min(i, len(fig.contexts) - 1)]
    if kind == "decode_bytes":
        return _decode_row(cfgs, n, fig.contexts)
    assert kind == "memory_table"
    return _memory_row(cfgs, n, fig.contexts)


def _kv_cache_row(fig, i: int) -> dict:
    weights, card = int(fig.weight_gb * 1e9), int(fig.card_gb * 1e9) * fig.cards
    rows = kv_batch(fig.contexts, fig.layers, fig.kv_heads, fig.head_dim, fig.dtype_bytes,
                    weight_bytes=weights, card_bytes=card)
    row = rows[i]
    out = {"kind": "kv_cache", "context": row["context"], "bytes_per_token": row["bytes_per_token"],
           "cache_bytes_per_seq": row["cache_bytes"], "batch": row["batch"],
           "previous_batch": rows[i - 1]["batch"] if i else None, "contexts": fig.contexts,
           "batches": [r["batch"] for r in rows], "weight_bytes": weights, "node_bytes": card,
           "layers": fig.layers, "kv_heads": fig.kv_heads, "head_dim": fig.head_dim, "dtype_bytes": fig.dtype_bytes}
    if fig.compare:
        # the model as published, counted by the one accounting (its cache and its fixed state)
        m = model_memory(get_preset(fig.compare), 0, fig.dtype_bytes)
        out["compare"] = {"preset": fig.compare, "bytes_per_token": m["bytes_per_token"],
                          "state_bytes": m["state_bytes"], "dtypes": m["dtypes"],
                          "less_per_token": row["bytes_per_token"] / m["bytes_per_token"],
                          "batches": [batch_per_card(model_memory(get_preset(fig.compare), n, fig.dtype_bytes)
                                                     ["cache_bytes"], weights, card, m["state_bytes"])
                                      for n in fig.contexts]}
    return out


def _chunk_dial_row(fig, i: int) -> dict:
    C = fig.chunks[i]
    flops = chunk_dial(fig.length, fig.dim, fig.chunks)
    m = CHUNK_DIAL_MEASURED
    measured = None
    if (fig.length, fig.dim) == (m["length"], m["dim"]):
        base = m["ms"][64]
        measured = {**{k: v for k, v in m.items() if k != "ms"},
                    "ms": [m["ms"].get(c) for c in fig.chunks], "vs64": [m["ms"].get(c, math.nan) / base for c in fig.chunks]}
    return {"kind": "chunk_dial", "chunk": C, "length": fig.length, "dim": fig.dim,
            "state_flops": 2 * fig.length * fig.dim ** 2, "intra_flops": 2 * fig.length * C * fig.dim,
            "flops": flops[i]["flops"], "vs64": flops[i]["vs64"], "chunks": fig.chunks,
            "flops_vs64": [r["vs64"] for r in flops], "step": i, "measured": measured}


def _moe_row(cfg) -> dict:
    c, moe = count(cfg), cfg.moe
    out = {"kind": "moe_sparsity", "preset": cfg.name, "total": c["total"], "active": c["active"],
           "active_fraction": c["active"] / c["total"], "experts": 0, "top_k": 0, "shared": 0, "sparsity": 1.0}
    if moe:
        latent = moe.latent_dim or cfg.d_model
        out.update(experts=moe.n_experts, top_k=moe.top_k, shared=moe.n_shared, sparsity=moe.n_experts / moe.top_k,
                   d_model=cfg.d_model, latent_dim=moe.latent_dim, expert_dim=moe.expert_dim,
                   shared_dim=moe.shared_dim or moe.expert_dim,
                   routed_expert_params=3 * latent * moe.expert_dim,
                   shared_expert_params=3 * cfg.d_model * (moe.shared_dim or moe.expert_dim),
                   moe_total=c["moe_total"], moe_active=c["moe_active"])
    # sparse in the sense that matters: most of the weights sit idle for any one token
    out["sparse"] = out["active_fraction"] < SPARSE_BELOW
    return out


def _active_row(cfgs, i: int) -> dict:
    smalls = {"gpt2-small": count(get_preset("gpt2-small"))["total"], "gpt2-xl": count(gpt2_xl())["total"]}
    rows = []
    for cfg in cfgs:
        c = count(cfg)
        pub = PUBLISHED.get(cfg.name)
        rows.append({"preset": cfg.name, "total": c["total"], "active": c["active"],
                     "published_total": pub[0] if pub else None, "published_active": pub[1] if pub else None,
                     "vs": {s: {"total": c["total"] / n, "active": c["active"] / n,
                                "published_total": pub[0] / PUBLISHED[s][0] if pub else None,
                                "published_active": pub[1] / PUBLISHED[s][0] if pub else None}
                            for s, n in smalls.items()}})
    return {"kind": "active_ratio", "step": i, "preset": cfgs[i].name, "rows": rows, "smalls": smalls}


def _decode_row(cfgs, n: int, contexts) -> dict:
    """Bytes one decoding step moves for one sequence at n tokens of context: the cache is read,
    the recurrent state is read and written back (every token, however short the context); the
    active weights are read once per step for the whole batch."""
    rows = []
    for cfg in cfgs:
        m = model_memory(cfg, n)
        state_rw = 2 * m["state_bytes"]
        per_seq = m["cache_bytes"] + state_rw
        rows.append({"preset": cfg.name, "cache_read": m["cache_bytes"], "state_read_write": state_rw,
                     "per_sequence": per_seq, "us_per_sequence": per_seq / (COPY_TBS * 1e12) * 1e6,
                     "weights_per_step": 2 * count(cfg)["active"], "dtypes": m["dtypes"],
                     "equal_at": 2 * m["state_bytes"] / m["bytes_per_token"] if m["bytes_per_token"] else None})
    return {"kind": "decode_bytes", "context": n, "contexts": list(contexts), "rows": rows, "copy_tbs": COPY_TBS}


def _memory_row(cfgs, n: int, contexts) -> dict:
    rows = []
    for cfg in cfgs:
        m32, m16 = model_memory(cfg, n, 2, 4), model_memory(cfg, n, 2, 2)
        mla = cfg.mla
        all_mla = mla and cfg.mixer_config("mla").cache_bytes_per_token(2) * cfg.n_layers
        rows.append({"preset": cfg.name, "cache_bytes": m32["cache_bytes"], "bytes_per_token": m32["bytes_per_token"],
                     "state_bytes": m32["state_bytes"], "state_bytes_bf16": m16["state_bytes"],
                     "total_bytes": m32["total_bytes"], "dtypes": m32["dtypes"], "dtypes_bf16": m16["dtypes"],
                     "crossover": crossover(m32), "crossover_bf16": crossover(m16),
                     "all_mla_per_token": all_mla or None,
                     "cache_saving": (1 - m32["bytes_per_token"] / all_mla) if all_mla else None})
    return {"kind": "memory_table", "context": n, "contexts": list(contexts), "rows": rows,
            "claims": list(KIMI_LINEAR_CLAIMS)}
