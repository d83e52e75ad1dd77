"""Parameter and memory arithmetic from a config alone: no torch, no weights allocated.

Each count mirrors the module that owns the weights (tests check every runnable preset
against the real modules' numel). `active` is what one token touches: every weight except
the routed experts it was not sent to. Memory is what each mechanism keeps per token or per
sequence, and how many sequences a card holds; bytes are plain integers.
"""
from __future__ import annotations

from .configs import (AttentionConfig, DeltaNetConfig, DenseFFNConfig, GatedDeltaNetConfig, KDAConfig,
                      LinearAttentionConfig, MLAConfig, ModelConfig, MoEConfig)

H200_BYTES = 141 * 10**9


def attention_params(c: AttentionConfig) -> int:
    H, Hkv, D, d = c.n_heads, c.kv_heads, c.dim, c.d_model
    qkv = d * (H + 2 * Hkv) * D + (H + 2 * Hkv) * D * c.bias
    return qkv + H * D * d + d * c.bias


def linear_attention_params(c: LinearAttentionConfig) -> int:
    return 4 * c.d_model * c.n_heads * c.head_dim


def deltanet_params(c: DeltaNetConfig) -> int:
    d, H, K = c.d_model, c.n_heads, c.head_dim
    n = 3 * d * H * K + d * H + K + H * K * d                    # q, k, v, beta, o_norm, o_proj
    n += 3 * H * K * c.conv_size                                  # depthwise short conv
    if isinstance(c, KDAConfig):
        r = c.gate_rank or K
        n += d * r + r * H * K + H + H * K                        # decay f_a, f_b, A_log, dt_bias
        n += d * H * K if c.output_gate_rank is None else c.output_gate_rank * (d + H * K)
    elif isinstance(c, GatedDeltaNetConfig):
        n += d * H + 2 * H + d * H * K                            # a_proj, A_log, dt_bias, g_proj
    return n


def mla_params(c: MLAConfig) -> int:
    d, H = c.d_model, c.n_heads
    qk = c.qk_nope_head_dim + c.qk_rope_head_dim
    q = d * H * qk if c.q_lora_rank is None else d * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * H * qk
    kv = d * (c.kv_lora_rank + c.qk_rope_head_dim) + c.kv_lora_rank + c.kv_lora_rank * H * (c.qk_nope_head_dim + c.v_head_dim)
    o = H * c.v_head_dim * d + (d * H * c.v_head_dim if c.output_gate else 0)
    return q + kv + o


def dense_params(c: DenseFFNConfig) -> int:
    width = c.d_ff if c.act == "gelu" else 2 * c.d_ff
    return c.d_model * width + c.d_ff * c.d_model + (width + c.d_model) * c.bias


def moe_params(c: MoEConfig) -> tuple[int, int]:
    """(total, active per token)."""
    d, L = c.d_model, c.latent_dim or c.d_model
    one_expert = 3 * L * c.expert_dim                              # gate | up in, down out
    Fs = (c.shared_dim or c.expert_dim) * c.n_shared
    always = d * c.n_experts + 3 * d * Fs                          # router, shared experts
    if c.latent_dim is not None:
        always += 2 * d * L + L                                    # down, up, latent norm
    return always + c.n_experts * one_expert, always + c.top_k * one_expert


MIXER_PARAMS = {"softmax": attention_params, "linear": linear_attention_params, "deltanet": deltanet_params,
                "gdn": deltanet_params, "kda": deltanet_params, "mla": mla_params}


def count(cfg: ModelConfig) -> dict:
    """{'total', 'active', 'embedding', 'mixers', 'ffn_dense', 'moe_total', 'moe_active', 'norms', 'attnres', ...}"""
    cfg.check()
    d = cfg.d_model
    norm = 2 * d if cfg.norm == "layer" else d
    out = {"embedding": cfg.vocab_size * d + cfg.n_positions * d,
           "lm_head": 0 if cfg.tie_embeddings else cfg.vocab_size * d,
           "mixers": 0, "ffn_dense": 0, "moe_total": 0, "moe_active": 0,
           "norms": norm * (2 * cfg.n_layers + 1),
           "attnres": 2 * (2 * cfg.n_layers + 1) * d if cfg.attnres else 0}
    by_kind: dict[str, int] = {}
    for m, f in zip(cfg.mixers, cfg.ffns):
        n = MIXER_PARAMS[m](cfg.mixer_config(m))
        out["mixers"] += n
        by_kind[m] = by_kind.get(m, 0) + n
        if f == "dense":
            out["ffn_dense"] += dense_params(cfg.dense)
        else:
            tot, act = moe_params(cfg.moe)
            out["moe_total"] += tot
            out["moe_active"] += act
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

def kv_bytes_per_token(n_kv_heads: int, head_dim: int, dtype_bytes: int = 2) -> int:
    """Softmax attention, one layer: a key and a value per KV head (MHA: n_kv_heads = n_heads; GQA: fewer)."""
    return 2 * n_kv_heads * head_dim * dtype_bytes


def mla_bytes_per_token(kv_lora_rank: int, qk_rope_head_dim: int, dtype_bytes: int = 2) -> int:
    """MLA, one layer: the latent plus the shared key part, however many heads read it (512 + 64 = 576 elements)."""
    return (kv_lora_rank + qk_rope_head_dim) * dtype_bytes


def recurrent_state_bytes(n_heads: int, k_dim: int, v_dim: int, dtype_bytes: int = 4, normaliser: bool = False) -> int:
    """Linear attention, DeltaNet, Gated DeltaNet, KDA, one layer, one sequence: H x K x V, whatever the length."""
    return n_heads * k_dim * (v_dim + (1 if normaliser else 0)) * dtype_bytes


def layer_bytes(cfg: ModelConfig, kind: str, cache_dtype_bytes: int = 2, state_dtype_bytes: int = 4) -> tuple[int, int]:
    """(bytes per cached token, constant bytes per sequence) for one layer of `kind` in `cfg`."""
    c = cfg.mixer_config(kind)
    if kind == "softmax":
        return kv_bytes_per_token(c.kv_heads, c.dim, cache_dtype_bytes), 0
    if kind == "mla":
        return mla_bytes_per_token(c.kv_lora_rank, c.qk_rope_head_dim, cache_dtype_bytes), 0
    if isinstance(c, LinearAttentionConfig):
        return 0, recurrent_state_bytes(c.n_heads, c.head_dim, c.head_dim, state_dtype_bytes, normaliser=True)
    assert isinstance(c, DeltaNetConfig)
    conv = 3 * c.n_heads * c.head_dim * max(c.conv_size - 1, 0) * cache_dtype_bytes
    return 0, recurrent_state_bytes(c.n_heads, c.head_dim, c.head_dim, state_dtype_bytes) + conv


def model_memory(cfg: ModelConfig, context: int, cache_dtype_bytes: int = 2, state_dtype_bytes: int = 4) -> dict:
    """Per-sequence memory of a whole model at `context` tokens: cache (grows) and state (constant)."""
    per_token = state = 0
    for kind in cfg.mixers:
        t, s = layer_bytes(cfg, kind, cache_dtype_bytes, state_dtype_bytes)
        per_token += t
        state += s
    return {"context": context, "bytes_per_token": per_token, "cache_bytes": per_token * context,
            "state_bytes": state, "total_bytes": per_token * context + state}


def batch_per_card(context: int, bytes_per_token: int, weight_bytes: int, card_bytes: int = H200_BYTES,
                   state_bytes: int = 0) -> int:
    """Sequences that fit beside the weights. Weights are fixed, the cache grows with context,
    so once the cache dominates each doubling of context halves the batch."""
    free = card_bytes - weight_bytes
    per_seq = bytes_per_token * context + state_bytes
    return max(free // per_seq, 0) if per_seq else 0


def chunk_flops(L: int, d: int, C: int) -> int:
    """Chunked linear-attention arithmetic for one head: 2 L d^2 of state work (independent of C)
    plus 2 L C d for the in-chunk triangles. C = 1 is the recurrence, C = L is quadratic attention."""
    return 2 * L * d * d + 2 * L * C * d
