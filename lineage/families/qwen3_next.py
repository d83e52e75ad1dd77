"""Qwen3-Next (`model_type: qwen3_next`): Gated DeltaNet layers with GQA-shaped heads (fewer q/k
heads than value heads, values of their own width), gated softmax attention with q/k norms and
partial RoPE every `full_attention_interval` layers, softmax-routed MoE with a gated shared
expert.

Three layouts differ from ours and are undone here, once, at load: `in_proj_qkvz` and
`in_proj_ba` interleave q, k, v, z (and b, a) per key head; the attention `q_proj` interleaves
each head's query and gate; the decoder norms (and q/k norms) store `w` for a scale of `1 + w`.
"""
from __future__ import annotations

import re

from ..configs import AttentionConfig, DenseFFNConfig, GatedDeltaNetConfig, ModelConfig, MoEConfig
from .experts import experts
from .hfconfig import Fields
from .problems import ShapeError

MODEL_TYPES = ("qwen3_next",)


def config(f: Fields, name: str) -> ModelConfig:
    d, L = f.need("hidden_size"), f.need("num_hidden_layers")
    eps = f.get("rms_norm_eps", 1e-6, float)
    f.expect("hidden_act", ("silu",), "silu")
    types = f.list_of("layer_types", str)
    if types is None:
        every = f.get("full_attention_interval", 4, int)
        types = ["linear_attention" if (i + 1) % every else "full_attention" for i in range(L)]
    f.ignore("full_attention_interval")
    if len(types) != L or set(types) - {"linear_attention", "full_attention"}:
        raise f._bad("layer_types", f"expected {L} entries of linear_attention / full_attention")
    rope = f.sub("rope_parameters", required=False, generic=False)
    if rope.get("rope_type", "default", str) != "default" or f.get("rope_scaling") not in (None, {}):
        raise f._bad("rope_parameters", "only the default rope_type is supported")
    theta, part = rope_numbers(f, rope)
    H = f.need("num_attention_heads")
    D = f.get("head_dim", kind=int) or d // H
    R, theta = partial_rope(f, D, part, theta)
    E = f.get("num_experts", 0, int)
    sparse_every = f.get("decoder_sparse_step", 1, int)
    dense_only = set(f.list_of("mlp_only_layers", int, []))
    ffns = tuple("moe" if E > 0 and i not in dense_only and (i + 1) % sparse_every == 0 else "dense" for i in range(L))
    Fs = f.get("shared_expert_intermediate_size", 0, int)
    if E == 0:      # no MoE layer: its sizes are there but mean nothing
        f.ignore("moe_intermediate_size", "num_experts_per_tok", "norm_topk_prob")
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d,
        mixers=tuple("gdn" if t == "linear_attention" else "softmax" for t in types), ffns=ffns,
        attention=AttentionConfig(d_model=d, n_heads=H, n_kv_heads=f.need("num_key_value_heads"), head_dim=D,
                                  bias=f.get("attention_bias", False, bool), qk_norm=True,
                                  rope_dim=R, rope_theta=theta, output_gate=True, norm_eps=eps),
        gdn=GatedDeltaNetConfig(d_model=d, n_heads=f.need("linear_num_value_heads"),
                                head_dim=f.need("linear_key_head_dim"), conv_size=f.get("linear_conv_kernel_dim", 4, int),
                                norm_eps=eps, n_key_heads=f.need("linear_num_key_heads"),
                                value_dim=f.need("linear_value_head_dim")),
        dense=DenseFFNConfig(d_model=d, d_ff=f.need("intermediate_size"), act="silu"),
        moe=None if E == 0 else MoEConfig(
            d_model=d, n_experts=E, top_k=f.need("num_experts_per_tok"), n_shared=1 if Fs else 0,
            expert_dim=f.need("moe_intermediate_size"), shared_dim=Fs or None, act="silu", router="softmax",
            norm_topk=f.get("norm_topk_prob", True, bool), router_fp32=True, shared_gate=bool(Fs)),
        norm="rms", norm_eps=eps, tie_embeddings=f.get("tie_word_embeddings", False, bool),
        notes="Qwen3-Next checkpoint")


def rope_numbers(f: Fields, rope: Fields) -> tuple[float, float]:
    """(theta, partial_rotary_factor): rope_parameters' own, else the top-level fields' (both read)."""
    theta = rope.get("rope_theta", f.get("rope_theta", 10000.0, float), float)
    part = rope.get("partial_rotary_factor", f.get("partial_rotary_factor", 0.25, float), float)
    if not theta > 0:
        raise rope._bad("rope_theta", f"must be a positive number, got {theta}")
    if not 0 <= part <= 1:
        raise rope._bad("partial_rotary_factor", f"must be between 0 and 1, got {part}")
    return theta, part


def partial_rope(f: Fields, D: int, part: float, theta: float) -> tuple[int, float]:
    """(channels rotated, theta) for a partial_rotary_factor `part` of head_dim D, as transformers
    rotates them: for an odd R = int(D * part) it takes the frequencies theta^(-2i/R) for
    i < (R+1)/2, so it turns R + 1 channels; turning R + 1 at theta^((R+1)/R) gives exactly those."""
    R = int(D * part)
    if R % 2 == 0:
        return R, theta
    if R + 1 > D:
        raise f._bad("rope_parameters", f"partial_rotary_factor {part} of head_dim {D} rotates {R + 1} channels of {D}")
    return R + 1, theta ** ((R + 1) / R)


def _one_plus(t):
    return t.float() + 1.0          # Qwen3-Next's zero-centred norms scale by (1 + w)


_TOP = {"model.embed_tokens.weight": ("wte.weight", None), "model.norm.weight": ("norm_f.weight", _one_plus)}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown."""
    if name in _TOP:
        ours, fn = _TOP[name]
        return [(ours, (), t if fn is None else fn(t))]
    if name == "lm_head.weight":
        return [] if cfg.tie_embeddings else [("lm_head.weight", (), t)]
    if name.startswith("mtp."):             # multi-token-prediction head: not used to decode one token at a time
        return []
    m = _LAYER.fullmatch(name)
    if m is None:
        return None
    i, rest = int(m.group(1)), m.group(2)
    if i >= cfg.n_layers:
        return None
    b = f"blocks.{i}."
    if rest in ("input_layernorm.weight", "post_attention_layernorm.weight"):
        return [(b + ("norm1" if rest[0] == "i" else "norm2") + ".weight", (), _one_plus(t))]
    if rest.startswith("linear_attn.") and cfg.mixers[i] == "gdn":
        return _delta(b + "mixer.", rest.removeprefix("linear_attn."), t, cfg.gdn)
    if rest.startswith("self_attn.") and cfg.mixers[i] == "softmax":
        return _attention(b + "mixer.", rest.removeprefix("self_attn."), t, cfg.attention)
    if rest.startswith("mlp."):
        return _mlp(b + "ffn.", rest.removeprefix("mlp."), t, cfg, cfg.ffns[i])
    return None


def _fits(t, want: tuple) -> None:
    """A fused tensor is split by a view, which many wrong shapes pass: check its whole shape first."""
    if tuple(t.shape) != want:
        raise ShapeError(want)


def _delta(p: str, rest: str, t, c: GatedDeltaNetConfig):
    Hk, K, V, r = c.key_heads, c.head_dim, c.v_dim, c.n_heads // c.key_heads
    if rest == "in_proj_qkvz.weight":       # per key head: q (K), k (K), its r value heads' v, then z
        _fits(t, (Hk * (2 * K + 2 * r * V), c.d_model))   # before the view: a transposed one would pass it
        q, k, v, z = t.view(Hk, 2 * K + 2 * r * V, -1).split([K, K, r * V, r * V], dim=1)
        return [(p + "q_proj.weight", (), q.reshape(Hk * K, -1)), (p + "k_proj.weight", (), k.reshape(Hk * K, -1)),
                (p + "v_proj.weight", (), v.reshape(Hk * r * V, -1)), (p + "g_proj.weight", (), z.reshape(Hk * r * V, -1))]
    if rest == "in_proj_ba.weight":         # per key head: its r betas, then its r decay inputs
        _fits(t, (Hk * 2 * r, c.d_model))
        b_, a = t.view(Hk, 2 * r, -1).split([r, r], dim=1)
        return [(p + "b_proj.weight", (), b_.reshape(Hk * r, -1)), (p + "a_proj.weight", (), a.reshape(Hk * r, -1))]
    simple = {"conv1d.weight": "conv.weight", "A_log": "A_log", "dt_bias": "dt_bias", "norm.weight": "o_norm.weight",
              "out_proj.weight": "o_proj.weight"}
    return [(p + simple[rest], (), t)] if rest in simple else None


def _attention(p: str, rest: str, t, c: AttentionConfig):
    H, Hkv, D = c.n_heads, c.kv_heads, c.dim
    kind, _, leaf = rest.partition(".")
    if kind == "q_proj" and leaf in ("weight", "bias"):          # per head: its query (D), then its gate (D)
        _fits(t, (2 * H * D, c.d_model) if leaf == "weight" else (2 * H * D,))
        q, g = t.view(H, 2 * D, *t.shape[1:]).split([D, D], dim=1)
        return [(p + "c_attn." + leaf, (slice(0, H * D),), q.reshape(H * D, *t.shape[1:])),
                (p + "g_proj." + leaf, (), g.reshape(H * D, *t.shape[1:]))]
    if kind in ("k_proj", "v_proj") and leaf in ("weight", "bias"):
        start = H * D + (0 if kind == "k_proj" else Hkv * D)
        return [(p + "c_attn." + leaf, (slice(start, start + Hkv * D),), t)]
    if kind == "o_proj" and leaf in ("weight", "bias"):
        return [(p + "c_proj." + leaf, (), t)]
    if rest in ("q_norm.weight", "k_norm.weight"):
        return [(p + rest, (), _one_plus(t))]
    return None


def _mlp(p: str, rest: str, t, cfg: ModelConfig, kind: str):
    if kind == "dense":
        F = cfg.dense.d_ff
        gu = {"gate_proj.weight": slice(0, F), "up_proj.weight": slice(F, 2 * F)}
        if rest in gu:
            return [(p + "c_fc.weight", (gu[rest],), t)]
        return [(p + "c_proj.weight", (), t)] if rest == "down_proj.weight" else None
    if not cfg.moe.n_shared and (rest.startswith("shared_expert.") and t.numel() == 0 or
                                 rest == "shared_expert_gate.weight" and tuple(t.shape) == (1, cfg.d_model)):
        return []       # shared_expert_intermediate_size 0: transformers' empty expert adds zeros, gated or not
    return experts(p, rest, t, cfg.moe, router="gate.weight", expert="experts", shared="shared_expert",
                   names=("gate_proj", "up_proj", "down_proj"))
