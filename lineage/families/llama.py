"""Llama-style softmax models (`model_type: llama`, `qwen3`, `mistral`): GQA softmax attention
with RoPE (plain, linear, llama3 or YaRN), a SwiGLU MLP, RMSNorm, tied or untied head. Qwen3
adds an RMSNorm over each head's q and k before RoPE (its weight is the plain scale, unlike
Qwen3-Next's 1 + w).

The three differ in which config fields they have: Llama has `mlp_bias`, Llama and Qwen3
`attention_bias`, Qwen3's `head_dim` defaults to 128 rather than hidden_size // heads. A field
the family does not have is left unread, so `Fields.done()` refuses it.
"""
from __future__ import annotations

import math
import re

from ..configs import AttentionConfig, DenseFFNConfig, ModelConfig, RopeScalingConfig
from .hfconfig import Fields

MODEL_TYPES = ("llama", "qwen3", "mistral")
NOTES = {"llama": "Llama checkpoint", "qwen3": "Qwen3 checkpoint", "mistral": "Mistral checkpoint"}

# the keys of a rope_parameters (or older rope_scaling) dict each rope_type reads
_ROPE_KEYS = {
    "default": set(),
    "linear": {"factor"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
    "yarn": {"factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
             "original_max_position_embeddings", "truncate"},
}


def config(f: Fields, name: str) -> ModelConfig:
    kind = f.arch
    d, L, H = f.need("hidden_size"), f.need("num_hidden_layers"), f.need("num_attention_heads")
    eps = f.get("rms_norm_eps", 1e-6, float)
    f.expect("hidden_act", ("silu",), "silu")
    D = f.get("head_dim", kind=int) or (128 if kind == "qwen3" else d // H)
    bias = f.get("attention_bias", False, bool) if kind != "mistral" else False
    mlp_bias = f.get("mlp_bias", False, bool) if kind == "llama" else False
    theta, scaling = rope_scaling(f)
    window, windows = _window(f, kind, L)
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d, mixers=("softmax",) * L, ffns=("dense",) * L,
        attention=AttentionConfig(d_model=d, n_heads=H, n_kv_heads=f.get("num_key_value_heads", H, int), head_dim=D,
                                  bias=bias, qk_norm=kind == "qwen3", rope_dim=D, rope_theta=theta,
                                  rope_scaling=scaling, sliding_window=window, norm_eps=eps),
        dense=DenseFFNConfig(d_model=d, d_ff=f.need("intermediate_size"), act="silu", bias=mlp_bias),
        windows=windows, norm="rms", norm_eps=eps, tie_embeddings=f.get("tie_word_embeddings", False, bool),
        notes=NOTES[kind])


def rope_scaling(f: Fields) -> tuple[float, RopeScalingConfig]:
    """(theta, scaling) from `rope_parameters` (transformers 5) or `rope_scaling` (older files);
    transformers prefers rope_scaling when both are given, so two that disagree are refused."""
    params, old = f.get("rope_parameters", kind=dict), f.get("rope_scaling", kind=dict)
    if params and old and any(params.get(k, v) != v for k, v in old.items()):
        raise f._bad("rope_scaling", "disagrees with rope_parameters; give one of them")
    key = "rope_scaling" if old else "rope_parameters"
    r = Fields(dict(params or {}, **(old or {})), f.path, f.arch, f"{f.prefix}{key}.", generic=False)
    theta = r.get("rope_theta", kind=float)
    theta = f.get("rope_theta", 10000.0, float) if theta is None else theta
    rope_type = r.get("rope_type", kind=str) or r.get("type", "default", str)
    r.get("type", kind=str)
    part = r.get("partial_rotary_factor", kind=float)
    part = f.get("partial_rotary_factor", 1.0, float) if part is None else part
    if part != 1.0:
        raise f._bad(key, f"partial_rotary_factor {part}: these families rotate whole heads")
    if rope_type not in _ROPE_KEYS:
        raise f._bad(key, f"rope_type {rope_type!r} is not supported (lineage implements "
                          f"{', '.join(repr(t) for t in _ROPE_KEYS)})")
    unknown = sorted(set(r.raw) - _ROPE_KEYS[rope_type] - {"rope_theta", "rope_type", "type", "partial_rotary_factor"})
    if unknown:
        raise f._bad(key, f"{unknown[0]!r} is not understood for rope_type {rope_type!r}")
    nums = {k: r.get(k, kind=float) for k in sorted(_ROPE_KEYS[rope_type] - {"truncate"})}
    for k, v in nums.items():
        if v is not None and v <= 0:
            raise f._bad(key, f"{k} must be a positive number, got {v!r}")
    if theta <= 0:
        raise f._bad(key, f"rope_theta must be positive, got {theta}")
    # the pretraining length: a top-level field wins (as transformers reads it), else the dict's,
    # else max_position_embeddings
    top = f.get("original_max_position_embeddings", kind=int)
    orig = top or nums.get("original_max_position_embeddings") or f.get("max_position_embeddings", kind=int)
    factor = nums.get("factor")
    if rope_type == "yarn" and factor is None:
        factor = f.need("max_position_embeddings") / orig if orig else None
    if rope_type in ("linear", "llama3") and factor is None:
        raise f._bad(key, f"rope_type {rope_type!r} needs a factor")
    if rope_type in ("llama3", "yarn") and not orig:
        raise f._bad(key, "original_max_position_embeddings is needed")
    low, high = nums.get("low_freq_factor") or 1.0, nums.get("high_freq_factor") or 4.0
    if rope_type == "llama3" and not low < high:
        raise f._bad(key, "low_freq_factor must be less than high_freq_factor")
    truncate = r.get("truncate", True, bool)
    att = nums.get("attention_factor")
    if rope_type == "yarn" and att is None and nums.get("mscale") and nums.get("mscale_all_dim"):
        att = _mscale(factor, nums["mscale"]) / _mscale(factor, nums["mscale_all_dim"])
    return theta, RopeScalingConfig(
        kind=rope_type, factor=float(factor or 1.0), original_context=int(orig) if orig else None,
        low_freq_factor=low, high_freq_factor=high,
        beta_fast=nums.get("beta_fast") or 32.0, beta_slow=nums.get("beta_slow") or 1.0,
        attention_factor=att, truncate=truncate)


def _mscale(factor: float, m: float) -> float:
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def _window(f: Fields, kind: str, L: int) -> tuple[int | None, tuple[str, ...] | None]:
    """(the sliding window, which layers use it: ModelConfig.windows, None for all). Mistral:
    `sliding_window` on every layer. Qwen3: only with `use_sliding_window`, on the layers
    `layer_types` names sliding_attention (by default those from `max_window_layers` on)."""
    if kind == "llama":
        return None, None               # Llama has no window (the generic fields are not its own)
    window = f.get("sliding_window", kind=int)
    if kind == "mistral":
        return window or None, None
    on = f.get("use_sliding_window", False, bool)
    types = f.list_of("layer_types", str)
    if types is not None and (len(types) != L or set(types) - {"full_attention", "sliding_attention"}):
        raise f._bad("layer_types", f"expected {L} entries of full_attention / sliding_attention")
    window = window if on else None
    if types is None:
        types = ["sliding_attention" if window and i >= f.get("max_window_layers", 28, int) else "full_attention"
                 for i in range(L)]
    if not window or "sliding_attention" not in types:
        return None, None
    if "full_attention" not in types:
        return window, None
    return window, tuple("sliding" if t == "sliding_attention" else "full" for t in types)


_TOP = {"model.embed_tokens.weight": "wte.weight", "model.norm.weight": "norm_f.weight"}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
_NORMS = {"input_layernorm.weight": "norm1.weight", "post_attention_layernorm.weight": "norm2.weight",
          "self_attn.q_norm.weight": "mixer.q_norm.weight", "self_attn.k_norm.weight": "mixer.k_norm.weight"}


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown."""
    if name in _TOP:
        return [(_TOP[name], (), t)]
    if name == "lm_head.weight":        # with a tied head the loader checks it equals the embedding
        return [] if cfg.tie_embeddings else [("lm_head.weight", (), t)]
    m = _LAYER.fullmatch(name)
    if m is None or int(m.group(1)) >= cfg.n_layers:
        return None
    b, rest = f"blocks.{m.group(1)}.", m.group(2)
    if rest in _NORMS:
        return [(b + _NORMS[rest], (), t)]
    a, F = cfg.attention, cfg.dense.d_ff
    H, Hkv, D = a.n_heads, a.kv_heads, a.dim
    proj, _, leaf = rest.rpartition(".")
    if leaf not in ("weight", "bias"):
        return None
    rows = {"self_attn.q_proj": (0, H * D), "self_attn.k_proj": (H * D, Hkv * D),
            "self_attn.v_proj": ((H + Hkv) * D, Hkv * D)}
    if proj in rows:                    # q | k | v stacked in one c_attn
        start, n = rows[proj]
        return [(b + "mixer.c_attn." + leaf, (slice(start, start + n),), t)]
    if proj == "self_attn.o_proj":
        return [(b + "mixer.c_proj." + leaf, (), t)]
    gate_up = {"mlp.gate_proj": slice(0, F), "mlp.up_proj": slice(F, 2 * F)}
    if proj in gate_up:
        return [(b + "ffn.c_fc." + leaf, (gate_up[proj],), t)]
    if proj == "mlp.down_proj":
        return [(b + "ffn.c_proj." + leaf, (), t)]
    return None
