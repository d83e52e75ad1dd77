"""Memory arithmetic: what each mechanism keeps per token or per sequence, and how many
sequences a card holds. No torch; bytes are plain integers."""
from __future__ import annotations

from .configs import DeltaNetConfig, LinearAttentionConfig, ModelConfig

H200_BYTES = 141 * 10**9


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
