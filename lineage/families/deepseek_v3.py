"""DeepSeek-V3 (`model_type: deepseek_v3`; Kimi K2 ships the same layout as `kimi_k2`, Moonlight as
`deepseek_v3`): MLA on every layer (a query LoRA unless `q_lora_rank` is null, RoPE on the shared
key part, YaRN in the published configs), the first `first_k_dense_replace` layers a dense SwiGLU,
then sigmoid-routed MoE with `e_score_correction_bias`, grouped top-k (`n_group`, `topk_group`),
`routed_scaling_factor` and shared experts.

Two things differ from Kimi Linear's MLA: the rotated channels come interleaved in pairs
(`rope_interleave`, true unless config.json says otherwise), which the mixer takes apart before
rotating, and YaRN's `mscale_all_dim` sharpens the softmax by mscale^2 on every channel, not only
the rotated ones (as DeepSeek's reference and transformers do).

Layers numbered at or past `num_hidden_layers` are DeepSeek's multi-token-prediction modules
(`num_nextn_predict_layers`, layer 61 of V3): a decoder stepping one token at a time never runs
them, so their tensors are skipped. FP8 block-quantized files (`quantization_config`, as
deepseek-ai and moonshotai publish them) are refused: a bf16 copy opens.
"""
from __future__ import annotations

import math
import re

from ..configs import DenseFFNConfig, MLAConfig, ModelConfig, MoEConfig
from .experts import experts
from .hfconfig import Fields
from .llama import rope_scaling

MODEL_TYPES = ("deepseek_v3", "kimi_k2")
NOTES = {"deepseek_v3": "DeepSeek-V3 checkpoint", "kimi_k2": "Kimi K2 checkpoint"}


def _either(f: Fields, names: tuple, default=None, kind=int):
    """A field under any of its spellings (the first given wins); all are read."""
    got = [f.get(n, kind=kind) for n in names]
    return next((g for g in got if g is not None), default)


def config(f: Fields, name: str) -> ModelConfig:
    if f.get("quantization_config") is not None:
        raise f._bad("quantization_config", "quantized weights (DeepSeek's and Kimi K2's FP8 blocks) are not "
                                            "supported; open a bf16 copy")
    d, L, H = f.need("hidden_size"), f.need("num_hidden_layers"), f.need("num_attention_heads")
    eps = f.get("rms_norm_eps", 1e-6, float)
    f.expect("hidden_act", ("silu",), "silu")
    f.expect("attention_bias", (False,), False)
    f.expect("scoring_func", ("sigmoid",), "sigmoid")
    f.expect("topk_method", ("noaux_tc",), "noaux_tc")
    f.expect("moe_layer_freq", (1,), 1)
    # num_key_value_heads is not used by MLA (every head reads the one latent); head_dim and
    # qk_head_dim are transformers' derived copies; aux_loss_alpha, seq_aux and ep_size are training
    # and parallelism settings
    f.ignore("num_key_value_heads", "head_dim", "qk_head_dim", "aux_loss_alpha", "seq_aux", "ep_size")
    dn, dr = f.need("qk_nope_head_dim"), f.need("qk_rope_head_dim")
    theta, scaling = rope_scaling(f)
    E = _either(f, ("n_routed_experts", "num_local_experts"), 256)
    Fe = f.need("moe_intermediate_size")
    first = f.get("first_k_dense_replace", 3, int)
    ffns = tuple("dense" if i < first else "moe" for i in range(L))
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d, mixers=("mla",) * L, ffns=ffns,
        mla=MLAConfig(d_model=d, n_heads=H, q_lora_rank=f.get("q_lora_rank", kind=int),
                      kv_lora_rank=f.need("kv_lora_rank"), qk_nope_head_dim=dn, qk_rope_head_dim=dr,
                      v_head_dim=f.need("v_head_dim"), rope=True, rope_theta=theta,
                      rope_scaling=None if scaling.kind == "default" else scaling,
                      rope_interleave=f.get("rope_interleave", True, bool),
                      softmax_scale=_softmax_scale(f, scaling, dn + dr), norm_eps=eps),
        dense=DenseFFNConfig(d_model=d, d_ff=f.need("intermediate_size"), act="silu"),
        moe=None if first >= L else MoEConfig(
            d_model=d, n_experts=E, top_k=f.get("num_experts_per_tok", 8, int),
            n_shared=f.get("n_shared_experts", 1, int), expert_dim=Fe, shared_dim=Fe, act="silu",
            routed_scale=f.get("routed_scaling_factor", 2.5, float), score_bias=True,
            n_group=f.get("n_group", 8, int), topk_group=f.get("topk_group", 4, int),
            norm_topk=f.get("norm_topk_prob", True, bool), router_fp32=True),
        norm="rms", norm_eps=eps, tie_embeddings=f.get("tie_word_embeddings", False, bool),
        notes=NOTES[f.arch])


def _softmax_scale(f: Fields, scaling, qk: int) -> float | None:
    """YaRN's mscale_all_dim folded into the softmax: qk^-0.5 * mscale^2, mscale = 0.1 m ln(factor) + 1
    (1 for a factor <= 1); None (the plain qk^-0.5) without it. `rope_scaling` has checked the dict's numbers."""
    if scaling.kind == "default":
        return None
    rope = dict(f.get("rope_parameters", kind=dict) or {}, **(f.get("rope_scaling", kind=dict) or {}))
    m = rope.get("mscale_all_dim")
    if not m:
        return None
    mscale = 1.0 if scaling.factor <= 1 else 0.1 * float(m) * math.log(scaling.factor) + 1.0
    return qk ** -0.5 * mscale * mscale


_TOP = {"model.embed_tokens.weight": "wte.weight", "model.norm.weight": "norm_f.weight"}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
_MLA = {"q_proj.weight": "q_proj.weight", "q_a_proj.weight": "q_proj.0.weight", "q_a_layernorm.weight": "q_proj.1.weight",
        "q_b_proj.weight": "q_proj.2.weight", "kv_a_proj_with_mqa.weight": "kv_a.weight",
        "kv_a_layernorm.weight": "kv_norm.weight", "kv_b_proj.weight": "kv_b.weight", "o_proj.weight": "o_proj.weight"}
_DENSE = ("gate_proj.weight", "up_proj.weight", "down_proj.weight")


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown."""
    if name in _TOP:
        return [(_TOP[name], (), t)]
    if name == "lm_head.weight":        # with a tied head the loader checks it equals the embedding
        return [] if cfg.tie_embeddings else [("lm_head.weight", (), t)]
    m = _LAYER.fullmatch(name)
    if m is None:
        return None
    i, rest = int(m.group(1)), m.group(2)
    if i >= cfg.n_layers:               # a multi-token-prediction module (see the docstring)
        return []
    b = f"blocks.{i}."
    if rest in ("input_layernorm.weight", "post_attention_layernorm.weight"):
        return [(b + ("norm1" if rest[0] == "i" else "norm2") + ".weight", (), t)]
    if rest.startswith("self_attn."):
        rest = rest.removeprefix("self_attn.")
        return [(b + "mixer." + _MLA[rest], (), t)] if rest in _MLA else None
    if not rest.startswith("mlp."):
        return None
    rest = rest.removeprefix("mlp.")
    if cfg.ffns[i] == "dense":
        F = cfg.dense.d_ff
        if rest == _DENSE[2]:
            return [(b + "ffn.c_proj.weight", (), t)]
        return [(b + "ffn.c_fc.weight", (slice(0, F) if rest == _DENSE[0] else slice(F, 2 * F),), t)] \
            if rest in _DENSE else None
    if not cfg.moe.n_shared and rest.startswith("shared_experts.") and t.numel() == 0:
        return []                       # n_shared_experts 0: transformers' empty shared MLP adds zeros
    return experts(b + "ffn.", rest, t, cfg.moe, router="gate.weight", expert="experts",
                   shared="shared_experts", names=("gate_proj", "up_proj", "down_proj"))
