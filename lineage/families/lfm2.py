"""LFM2 (`model_type: lfm2`, LiquidAI/LFM2-350M ... 2.6B): gated short-convolution layers
(`layer_types` "conv": in_proj to B | C | x, C * conv(B * x), out_proj; our `gated_conv` mixer)
between GQA softmax attention layers (a per-head RMSNorm over q and k before RoPE; our `softmax`
with qk_norm), each layer pre-norm with a SwiGLU MLP, a tied head by default.

Three things are named unlike Llama's: the final norm is `embedding_norm` (it is applied after
the last layer, not to the embedding), the layer norms are `operator_norm` and `ffn_norm`, and the
MLP is w1 (gate), w3 (up), w2 (down). The MLP's width is not `intermediate_size` itself: with
`block_auto_adjust_ff_dim` (the default) it is two thirds of it, times `block_ffn_dim_multiplier`,
rounded up to a multiple of `block_multiple_of` (`ffn_width`). Liquid's own config files spell
two fields differently (`block_ff_dim` for intermediate_size, `tie_embedding` for
tie_word_embeddings), and transformers reads those spellings over the others; so do we. They also
carry fields of their training code: sizes that must equal hidden_size (`block_dim`, `conv_dim`,
`conv_dim_out`) or the head count (`num_heads`), switches that must be on (`block_use_swiglu`,
`use_pos_enc`), and ones transformers never reads (the init scales, `block_norm_eps` and `theta`,
whose values it takes from norm_eps and rope_theta instead).
"""
from __future__ import annotations

import re

from ..configs import AttentionConfig, DenseFFNConfig, GatedConvConfig, ModelConfig
from .hfconfig import MAX_WIDTH, Fields

MODEL_TYPES = ("lfm2",)

DEFAULT_THETA = 1e6         # LFM2's RoPE base when config.json gives none (transformers' default_theta)
DEFAULT_FF = 12288          # transformers' intermediate_size when config.json gives none


def ffn_width(f: Fields) -> int:
    """The SwiGLU's hidden width as transformers builds it from the config."""
    ff = f.get("block_ff_dim", kind=int, least=1)
    ff = f.get("intermediate_size", DEFAULT_FF, int) if ff is None else ff
    f.ignore("intermediate_size")       # block_ff_dim wins when both are given, as in transformers
    if not f.get("block_auto_adjust_ff_dim", True, bool):
        f.ignore("block_ffn_dim_multiplier", "block_multiple_of")    # only read when adjusting
        return ff
    ff = int(2 * ff / 3)
    if ff < 1:
        raise f._bad("block_ff_dim" if "block_ff_dim" in f.raw else "intermediate_size",
                     "leaves an MLP of 0 channels (two thirds of it, rounded down)")
    multiple = f.get("block_multiple_of", 256, int, least=1)
    scaled = f.get("block_ffn_dim_multiplier", 1.0, float) * ff
    if not 1 <= scaled <= MAX_WIDTH:     # checked before int(): a huge multiplier overflows to infinity
        raise f._bad("block_ffn_dim_multiplier", f"makes an MLP of {scaled:.4g} channels "
                                                 f"(lineage reads 1 to {MAX_WIDTH:,})")
    return multiple * -(-int(scaled) // multiple)                        # rounded up to a multiple


def _layer_types(f: Fields, L: int) -> list[str]:
    """`layer_types`, else the older `full_attn_idxs` (the attention layers' indices; without
    either, every layer attends, as transformers has it)."""
    types = f.list_of("layer_types", str)
    idxs = f.list_of("full_attn_idxs", int)
    if types is None:
        idxs = list(range(L)) if idxs is None else idxs
        if any(i >= L for i in idxs):
            raise f._bad("full_attn_idxs", f"names a layer past the {L} of num_hidden_layers")
        types = ["full_attention" if i in idxs else "conv" for i in range(L)]
    if len(types) != L or set(types) - {"conv", "full_attention"}:
        raise f._bad("layer_types", f"expected {L} entries of conv / full_attention")
    return types


def _rope(f: Fields, D: int) -> float:
    """The RoPE base. LFM2 rotates the whole head with the default RoPE; a scaled one is refused."""
    if f.get("rope_scaling") not in (None, {}):
        raise f._bad("rope_scaling", "RoPE scaling is not supported for lfm2")
    rope = f.sub("rope_parameters", required=False, generic=False)
    rope_type = rope.get("rope_type", "default", str)
    if rope_type != "default":
        raise f._bad("rope_parameters", f"rope_type {rope_type!r} is not supported for lfm2 (only 'default')")
    extra = sorted(set(rope.raw) - {"rope_type", "rope_theta"})
    if extra:
        raise f._bad("rope_parameters", f"{extra[0]} is not supported (LFM2's default RoPE rotates the whole head)")
    theta = rope.get("rope_theta", kind=float)
    theta = f.get("rope_theta", DEFAULT_THETA, float) if theta is None else theta
    f.ignore("rope_theta")              # rope_parameters' wins when both are given, as in transformers
    if not theta > 0:
        raise f._bad("rope_parameters", f"rope_theta must be a positive number, got {theta!r}")
    if D % 2:
        raise f._bad("head_dim", f"RoPE over an odd head_dim {D} is not defined")
    return theta


def config(f: Fields, name: str) -> ModelConfig:
    d, L, H = f.need("hidden_size"), f.need("num_hidden_layers"), f.need("num_attention_heads")
    eps = f.get("norm_eps", 1e-5, float)
    Hkv = f.get("num_key_value_heads", H, int)
    D = f.get("head_dim", kind=int) or d // H
    types = _layer_types(f, L)
    for key in ("block_dim", "conv_dim", "conv_dim_out"):       # Liquid's files: the width again
        f.expect(key, (d,), d)
    f.expect("num_heads", (H,), H)
    f.expect("block_use_swiglu", (True,), True)
    f.expect("use_pos_enc", (True,), True)
    f.ignore("block_mlp_init_scale", "block_out_init_scale", "block_use_xavier_init", "conv_use_xavier_init",
             "block_norm_eps", "theta")
    tied = f.get("tie_embedding", kind=bool)
    tied = f.get("tie_word_embeddings", True, bool) if tied is None else tied
    f.ignore("tie_word_embeddings")     # tie_embedding wins when both are given, as in transformers
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d,
        mixers=tuple("gated_conv" if t == "conv" else "softmax" for t in types), ffns=("dense",) * L,
        gated_conv=GatedConvConfig(d_model=d, conv_size=f.get("conv_L_cache", 3, int, least=1),
                                   bias=f.get("conv_bias", False, bool)),
        attention=AttentionConfig(d_model=d, n_heads=H, n_kv_heads=Hkv, head_dim=D, bias=False, qk_norm=True,
                                  rope_dim=D, rope_theta=_rope(f, D), norm_eps=eps),
        dense=DenseFFNConfig(d_model=d, d_ff=ffn_width(f), act="silu"),
        norm="rms", norm_eps=eps, tie_embeddings=tied, notes="LFM2 checkpoint")


_TOP = {"model.embed_tokens.weight": "wte.weight", "model.embedding_norm.weight": "norm_f.weight"}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
_NORMS = {"operator_norm.weight": "norm1.weight", "ffn_norm.weight": "norm2.weight"}
_CONV = {"conv.in_proj.weight": "in_proj.weight", "conv.in_proj.bias": "in_proj.bias",
         "conv.out_proj.weight": "out_proj.weight", "conv.out_proj.bias": "out_proj.bias",
         "conv.conv.weight": "conv.weight", "conv.conv.bias": "conv_bias"}


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown."""
    if name in _TOP:
        return [(_TOP[name], (), t)]
    if name == "lm_head.weight":        # with a tied head the loader checks it equals the embedding
        return [] if cfg.tie_embeddings else [("lm_head.weight", (), t)]
    m = _LAYER.fullmatch(name)
    if m is None or int(m.group(1)) >= cfg.n_layers:
        return None
    i, rest = int(m.group(1)), m.group(2)
    b, kind = f"blocks.{i}.", cfg.mixers[i]
    if rest in _NORMS:
        return [(b + _NORMS[rest], (), t)]
    if kind == "gated_conv" and rest in _CONV:
        return [(b + "mixer." + _CONV[rest], (), t)]
    if kind == "softmax" and rest.startswith("self_attn."):
        return _attention(b + "mixer.", rest.removeprefix("self_attn."), t, cfg.attention)
    F = cfg.dense.d_ff
    mlp = {"feed_forward.w1.weight": ("c_fc", (slice(0, F),)), "feed_forward.w3.weight": ("c_fc", (slice(F, 2 * F),)),
           "feed_forward.w2.weight": ("c_proj", ())}
    if rest in mlp:                     # gate | up stacked in one c_fc, as the dense FFN reads them
        ours, index = mlp[rest]
        return [(b + f"ffn.{ours}.weight", index, t)]
    return None


def _attention(p: str, rest: str, t, c: AttentionConfig):
    H, Hkv, D = c.n_heads, c.kv_heads, c.dim
    rows = {"q_proj.weight": (0, H * D), "k_proj.weight": (H * D, Hkv * D), "v_proj.weight": ((H + Hkv) * D, Hkv * D)}
    if rest in rows:                    # q | k | v are one matmul of ours
        start, n = rows[rest]
        return [(p + "c_attn.weight", (slice(start, start + n),), t)]
    names = {"out_proj.weight": "c_proj.weight", "q_layernorm.weight": "q_norm.weight",
             "k_layernorm.weight": "k_norm.weight"}
    return [(p + names[rest], (), t)] if rest in names else None
