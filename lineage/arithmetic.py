"""Parameter and memory arithmetic: no torch, no weights allocated.

Each mechanism config says what one layer of it holds (`lineage.configs`: `params()`,
`cache_bytes_per_token()`, `state_bytes()`); here are the formulas they share and the sums
over a model: parameters in total and active per token (every weight except the routed experts
a token was not sent to), cache and state per sequence, sequences per card, and the bytes a
running model reported in a frame. Bytes are plain integers.
"""
from __future__ import annotations

H200_BYTES = 141 * 10**9


# ---------------------------------------------------------------------- one layer's memory

def kv_bytes_per_token(n_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> int:
    """Softmax attention, one layer: a key and a value per KV head (MHA: n_kv_heads = n_heads; GQA: fewer)."""
    return 2 * n_kv_heads * head_dim * dtype_bytes


def mla_bytes_per_token(kv_lora_rank: int, qk_rope_head_dim: int, dtype_bytes: int = 2) -> int:
    """MLA, one layer: the latent plus the shared key part, however many heads read it (512 + 64 = 576 elements)."""
    return (kv_lora_rank + qk_rope_head_dim) * dtype_bytes


def recurrent_state_bytes(n_heads: int, k_dim: int, v_dim: int, dtype_bytes: int = 4, normaliser: bool = False) -> int:
    """Linear attention, DeltaNet, Gated DeltaNet, KDA, one layer, one sequence: H x K x V, whatever the length."""
    return n_heads * k_dim * (v_dim + (1 if normaliser else 0)) * dtype_bytes


# ---------------------------------------------------------------------------- a whole model

def count(cfg) -> dict:
    """{'total', 'active', 'embedding', 'mixers', 'ffn_dense', 'moe_total', 'moe_active', 'norms', 'attnres', ...}"""
    cfg.check()
    d = cfg.d_model
    norm = 2 * d if cfg.norm == "layer" else d
    out = {"embedding": cfg.vocab_size * d + cfg.n_positions * d,
           "lm_head": 0 if cfg.tie_embeddings else cfg.vocab_size * d,
           "mixers": 0, "ffn_dense": 0, "moe_total": 0, "moe_active": 0,
           # a block without an ffn has one norm; a sandwich block four
           "norms": norm * ((2 * cfg.n_layers - cfg.ffns.count("none")) * (2 if cfg.sandwich_norm else 1) + 1),
           "attnres": 2 * (2 * cfg.n_layers + 1) * d if cfg.attnres else 0}
    by_kind: dict[str, int] = {}
    for m, f in zip(cfg.mixers, cfg.ffns):
        n = cfg.mixer_config(m).params()
        out["mixers"] += n
        by_kind[m] = by_kind.get(m, 0) + n
        ffn = cfg.ffn_config(f)
        if f == "none":
            continue
        if cfg.ffn_routes(f):                  # routed experts: only top_k of them run per token
            out["moe_total"] += ffn.params()
            out["moe_active"] += ffn.active_params()
        else:
            out["ffn_dense"] += ffn.params()
    shared = out["embedding"] + out["lm_head"] + out["mixers"] + out["ffn_dense"] + out["norms"] + out["attnres"]
    out["total"] = shared + out["moe_total"]
    out["active"] = shared + out["moe_active"]
    out["mixers_by_kind"] = by_kind
    out["layers"] = cfg.n_layers
    return out


def human(n: float) -> str:
    """124439808 -> '124.4M'; 2.8e12 -> '2.80T'."""
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}" if unit in "TB" else f"{n / div:.1f}{unit}"
    return str(int(n))


def fmt_bytes(n: float) -> str:
    """Bytes in the largest binary unit of which there is at least 1 as printed, one decimal:
    '4.5 GiB', '123.0 KiB', '1000 B', 1,048,000 B as '1023.4 KiB' and 1,048,575 B as '1.0 MiB'
    (never '1024.0 KiB'). The one byte formatter: the panels, the numbers captions quote from
    them, and `lineage memory` (which printed '1,023 KiB' and '480 MiB') say a size alike."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size * (1 - 5e-5):           # would print as 1024.0 of the unit below
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


DTYPE_NAMES = {8: "fp64", 4: "fp32", 2: "bf16", 1: "fp8"}      # bytes per element -> the label the screen prints
# The dtypes lineage runs in, by torch's own name (a torch dtype is getattr(torch, name)), with
# their bytes per element: the one map; config.json's short names are read by dtype_name.
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}
SHORT_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}


def dtype_name(name) -> str | None:
    """torch's name for a dtype named either way ('bf16' or 'bfloat16'); None when it is not one of ours."""
    name = SHORT_NAMES.get(str(name), str(name))
    return name if name in DTYPE_BYTES else None


def model_memory(cfg, context: int, cache_dtype_bytes: int = 2, state_dtype_bytes: int = 4) -> dict:
    """The one accounting of a model's memory per sequence at `context` tokens (`lineage memory`,
    the cache panel and the figures all call it): the cache grows with every token; the fixed part
    is the state matrices S (linear attention's normaliser z too) in the state dtype plus the short
    convolutions' cached inputs in the cache dtype. `dtypes` says which, for the screen.
    A layer with a sliding window W caches min(context, W) tokens: `cache_bytes` counts that
    (`window_bytes` is the windowed layers' part), while `bytes_per_token` is every layer's rate
    while it grows, so bytes_per_token * context overstates a windowed model past W."""
    per_token = matrix = conv = windowed = window_rate = 0
    for i in range(cfg.n_layers):
        c = cfg.layer_mixer_config(i)
        per_token += c.cache_bytes_per_token(cache_dtype_bytes)
        if W := getattr(c, "sliding_window", None):
            window_rate += c.cache_bytes_per_token(cache_dtype_bytes)
            windowed += c.cache_bytes_per_token(cache_dtype_bytes) * min(context, W)
        s_only = c.state_bytes(state_dtype_bytes, 0)          # a zero-byte cache dtype leaves S alone
        matrix += s_only
        conv += c.state_bytes(state_dtype_bytes, cache_dtype_bytes) - s_only
    cache_name, state_name = (DTYPE_NAMES.get(b, f"{b}-byte") for b in (cache_dtype_bytes, state_dtype_bytes))
    cache = (per_token - window_rate) * context + windowed
    return {"context": context, "bytes_per_token": per_token, "cache_bytes": cache, "window_bytes": windowed,
            "state_bytes": matrix + conv, "matrix_bytes": matrix, "conv_bytes": conv,
            "total_bytes": cache + matrix + conv,
            "dtypes": f"{cache_name} cache, {state_name} state" + (f", {cache_name} conv cache" if conv else "")}


def layer_cache_bytes(cfg, context: int, cache_dtype_bytes: int = 2, state_dtype_bytes: int = 4) -> list[int]:
    """model_memory's total_bytes layer by layer: each layer's cache and fixed state for one
    sequence at `context` tokens (a device map places layers by them; a test holds the sum equal)."""
    out = []
    for i in range(cfg.n_layers):
        c = cfg.layer_mixer_config(i)
        W = getattr(c, "sliding_window", None)
        cached = min(context, W) if W else context
        out.append(c.cache_bytes_per_token(cache_dtype_bytes) * cached + c.state_bytes(state_dtype_bytes, cache_dtype_bytes))
    return out


def batch_per_card(cache_bytes: int, weight_bytes: int, card_bytes: int = H200_BYTES, state_bytes: int = 0) -> int:
    """Sequences that fit beside the weights, each holding `cache_bytes` of cache (at its context,
    model_memory's cache_bytes: a sliding window's part stops growing) and `state_bytes`. Weights
    are fixed, so once a growing cache dominates each doubling of context halves the batch."""
    free = card_bytes - weight_bytes
    per_seq = cache_bytes + state_bytes
    return max(free // per_seq, 0) if per_seq else 0


def chunk_flops(L: int, d: int, C: int) -> int:
    """Chunked linear-attention arithmetic for one head: 2 L d^2 of state work (independent of C)
    plus 2 L C d for the in-chunk triangles. C = 1 is the recurrence, C = L is quadratic attention."""
    return 2 * L * d * d + 2 * L * C * d


# ------------------------------------------------------------------- a running model's bytes

def measured_memory(layers: list[dict], cfg, dtype_bytes: int | None = None) -> dict:
    """What a running model held at one frame, from its layers' frame meta (cache_len,
    cache_bytes, state_bytes) and its ModelConfig (a replay rebuilds it from the trace's info):
    tokens cached, the MLA latent and softmax KV caches, the fixed part by `model_memory` in the
    element size the model ran in (S measured, plus the short-convolution caches), per-token
    rates to project with, and what the MLA layers would cache as plain multi-head K and V."""
    mixers = cfg.mixers
    n_tok = max((l.get("cache_len", 0) for l in layers), default=0)
    latent = sum(l.get("cache_bytes", 0) for l, k in zip(layers, mixers) if k == "mla")
    kv = sum(l.get("cache_bytes", 0) for l, k in zip(layers, mixers) if k == "softmax")
    measured_S = sum(l.get("state_bytes", 0) for l in layers)
    # plain MHA at the same heads and dims, in the element size the latent was measured in
    mla = cfg.mla
    n_mla = mixers.count("mla")
    elem = (latent / n_tok / n_mla / (mla.kv_lora_rank + mla.qk_rope_head_dim)) if (n_tok and n_mla) else 4
    kv_equiv = n_mla * mla.n_heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim) * elem if mla else 0
    if dtype_bytes is None:                 # the element size S was measured in, else the caches
        ones = model_memory(cfg, n_tok, 1, 1)      # element counts; a window's part stops at W
        elements, cached = ones["matrix_bytes"], ones["cache_bytes"]
        if measured_S and elements:
            dtype_bytes = round(measured_S / elements)
        elif cached and latent + kv:     # attention only (its short conv counted in this size)
            dtype_bytes = round((latent + kv) / cached)
        else:
            dtype_bytes = round(elem)
    account = model_memory(cfg, n_tok, int(dtype_bytes), int(dtype_bytes))
    conv, dtypes = account["conv_bytes"], account["dtypes"]
    # each softmax layer's rate and window: a windowed layer (Qwen3 windows some layers, not all)
    # stops growing at its W, so the caches project layer by layer, not as one rate
    rates: dict = {}
    for i, k in enumerate(mixers):
        if k == "softmax":
            c = cfg.layer_mixer_config(i)
            W = getattr(c, "sliding_window", None)
            rates[W] = rates.get(W, 0) + c.cache_bytes_per_token(int(dtype_bytes))
    windows = set(rates)
    window = windows.pop() if len(windows) == 1 else None
    return {"tokens": n_tok, "latent": latent, "kv": kv, "state": measured_S + conv, "conv": conv,
            "dtypes": dtypes, "kv_window": window,
            "kv_windows": tuple(sorted(((W, r) for W, r in rates.items() if W), key=lambda wr: wr[0])),
            "latent_per_tok": latent / n_tok if n_tok else 0.0, "kv_per_tok": kv / n_tok if n_tok else 0.0,
            "kv_equiv_per_tok": kv_equiv}
