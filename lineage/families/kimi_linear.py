"""Kimi Linear (`model_type: kimi_linear`): KDA layers (q/k/v short convolutions, per-channel
forget gate from `A_log`, `dt_bias`, `f_a`/`f_b`, a low-rank sigmoid output gate on an RMSNorm)
with an MLA layer every fourth (NoPE, no query LoRA), a dense first layer, then sigmoid-routed
MoE with `e_score_correction_bias`, grouped top-k and `routed_scaling_factor`.

Config fields come under two spellings (the hub's and transformers' attribute names); the
layer pattern from `layer_types`, or the hub's `linear_attn_config` (1-based layer numbers).
"""
from __future__ import annotations

import re

from ..configs import DenseFFNConfig, KDAConfig, MLAConfig, ModelConfig, MoEConfig
from .experts import experts
from .hfconfig import Fields

MODEL_TYPES = ("kimi_linear",)


def _either(f: Fields, names: tuple, default=None, kind=int):
    """A field under any of its spellings (the first given wins); all are read."""
    got = [f.get(n, kind=kind) for n in names]
    return next((g for g in got if g is not None), default)


def _layer_types(f: Fields, L: int, lin: Fields) -> list[str]:
    types = f.list_of("layer_types", str)
    if types is None and "full_attn_layers" in lin.raw and "kda_layers" in lin.raw:
        types = [None] * L
        for key, kind in (("full_attn_layers", "full_attention"), ("kda_layers", "linear_attention")):
            for n in lin.list_of(key, int):
                if not 1 <= n <= L:
                    raise f._bad("linear_attn_config", f"{key} names layer {n!r}; layers are 1..{L}")
                types[n - 1] = kind
    if types is None:
        types = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(L)]
    if len(types) != L or set(types) - {"linear_attention", "full_attention"}:
        raise f._bad("layer_types", f"expected {L} entries of linear_attention / full_attention")
    return types


def config(f: Fields, name: str) -> ModelConfig:
    d, L = f.need("hidden_size"), f.need("num_hidden_layers")
    eps = f.get("rms_norm_eps", 1e-5, float)
    f.expect("hidden_act", ("silu",), "silu")
    f.expect("attention_bias", (False,), False)
    f.expect("mla_use_nope", (True,), True)
    f.expect("moe_router_activation_func", ("sigmoid",), "sigmoid")
    f.expect("moe_layer_freq", (1,), 1)
    f.expect("use_grouped_topk", (True,), True)
    if f.get("rope_scaling") not in (None, {}):
        raise f._bad("rope_scaling", "Kimi Linear's MLA uses no positions (NoPE); a rope_scaling is not understood")
    # head_dim / qk_head_dim are derived copies; num_key_value_heads is not used by MLA; rope_theta by NoPE
    f.ignore("head_dim", "qk_head_dim", "num_key_value_heads", "rope_theta")
    lin = f.sub("linear_attn_config", required=False, generic=False)
    unknown = set(lin.raw) - {"full_attn_layers", "kda_layers", "head_dim", "num_heads", "short_conv_kernel_size"}
    if unknown:
        raise f._bad("linear_attn_config", f"field {sorted(unknown)[0]!r} is not understood")
    types = _layer_types(f, L, lin)
    mlp_types = f.list_of("mlp_layer_types", str)
    if mlp_types is None:
        first = f.get("first_k_dense_replace", 1, int)
        mlp_types = ["dense" if i < first else "sparse" for i in range(L)]
    f.ignore("first_k_dense_replace")
    if len(mlp_types) != L or set(mlp_types) - {"dense", "sparse"}:
        raise f._bad("mlp_layer_types", f"expected {L} entries of dense / sparse")
    K = lin.get("head_dim", f.get("linear_head_dim", 128, int), int)
    Hl = lin.get("num_heads", f.get("linear_num_heads", 32, int), int)
    n_shared = _either(f, ("num_shared_experts", "n_shared_experts"), 1)
    Fe = f.need("moe_intermediate_size")
    # transformers' Kimi Linear never ties its head, whatever this says, and saves it: the file's
    # lm_head.weight is the head (read only to check its type)
    f.get("tie_word_embeddings", False, bool)
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d,
        mixers=tuple("kda" if t == "linear_attention" else "mla" for t in types),
        ffns=tuple("dense" if t == "dense" else "moe" for t in mlp_types),
        kda=KDAConfig(d_model=d, n_heads=Hl, head_dim=K, norm_eps=eps, gate_rank=K, gate_form="kimi", output_gate_rank=K,
                      conv_size=lin.get("short_conv_kernel_size", f.get("linear_conv_kernel_dim", 4, int), int)),
        mla=MLAConfig(d_model=d, n_heads=f.need("num_attention_heads"), q_lora_rank=f.get("q_lora_rank", kind=int),
                      kv_lora_rank=f.need("kv_lora_rank"), qk_nope_head_dim=f.need("qk_nope_head_dim"),
                      qk_rope_head_dim=f.need("qk_rope_head_dim"), v_head_dim=f.need("v_head_dim"), rope=False),
        dense=DenseFFNConfig(d_model=d, d_ff=f.need("intermediate_size"), act="silu"),
        moe=MoEConfig(d_model=d, n_experts=_either(f, ("num_experts", "num_local_experts"), 256),
                      top_k=_either(f, ("num_experts_per_token", "num_experts_per_tok"), 8),
                      n_shared=n_shared, expert_dim=Fe, shared_dim=Fe, act="silu",
                      routed_scale=f.get("routed_scaling_factor", 1.0, float), score_bias=True,
                      n_group=_either(f, ("num_expert_group", "n_group"), 1),
                      topk_group=_either(f, ("topk_group",), 1),
                      norm_topk=_either(f, ("moe_renormalize", "norm_topk_prob"), True, bool), router_fp32=True),
        norm="rms", norm_eps=eps, tie_embeddings=False,
        notes="Kimi Linear checkpoint")


_TOP = {"model.embed_tokens.weight": "wte.weight", "model.norm.weight": "norm_f.weight"}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
_KDA = {"q_proj.weight": "q_proj.weight", "k_proj.weight": "k_proj.weight", "v_proj.weight": "v_proj.weight",
        "dt_bias": "dt_bias", "f_a_proj.weight": "f_a.weight", "f_b_proj.weight": "f_b.weight",
        "b_proj.weight": "b_proj.weight", "g_a_proj.weight": "gate.0.weight", "g_b_proj.weight": "gate.1.weight",
        "o_norm.weight": "o_norm.weight", "o_proj.weight": "o_proj.weight"}
_MLA = {"q_proj.weight": "q_proj.weight", "q_a_proj.weight": "q_proj.0.weight", "q_a_layernorm.weight": "q_proj.1.weight",
        "q_b_proj.weight": "q_proj.2.weight", "kv_a_proj_with_mqa.weight": "kv_a.weight",
        "kv_a_layernorm.weight": "kv_norm.weight", "kv_b_proj.weight": "kv_b.weight", "o_proj.weight": "o_proj.weight"}
_DENSE = ("gate_proj.weight", "up_proj.weight", "down_proj.weight")


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown."""
    if name in _TOP:
        return [(_TOP[name], (), t)]
    if name == "lm_head.weight":
        return [("lm_head.weight", (), t)]
    m = _LAYER.fullmatch(name)
    if m is None or int(m.group(1)) >= cfg.n_layers:
        return None
    i, rest = int(m.group(1)), m.group(2)
    b = f"blocks.{i}."
    if rest in ("input_layernorm.weight", "post_attention_layernorm.weight"):
        return [(b + ("norm1" if rest[0] == "i" else "norm2") + ".weight", (), t)]
    if rest.startswith("self_attn."):
        rest = rest.removeprefix("self_attn.")
        if cfg.mixers[i] == "mla":
            return [(b + "mixer." + _MLA[rest], (), t)] if rest in _MLA else None
        HK = cfg.kda.n_heads * cfg.kda.head_dim
        if rest in _KDA:
            return [(b + "mixer." + _KDA[rest], (), t)]
        if rest == "A_log":                                     # (1, 1, H, 1) -> (H,)
            return [(b + "mixer.A_log", (), t.reshape(-1))]
        conv = {"q_conv1d.weight": 0, "k_conv1d.weight": 1, "v_conv1d.weight": 2}
        if rest in conv:                                        # three depthwise convs = one over q | k | v
            j = conv[rest]
            return [(b + "mixer.conv.weight", (slice(j * HK, (j + 1) * HK),), t)]
        return None
    for prefix in ("block_sparse_moe.", "mlp."):                # the hub's name and transformers' own
        if rest.startswith(prefix):
            rest = rest.removeprefix(prefix)
            if cfg.ffns[i] == "dense":
                F = cfg.dense.d_ff
                if rest == _DENSE[2]:
                    return [(b + "ffn.c_proj.weight", (), t)]
                return [(b + "ffn.c_fc.weight", (slice(0, F) if rest == _DENSE[0] else slice(F, 2 * F),), t)] \
                    if rest in _DENSE else None
            return experts(b + "ffn.", rest, t, cfg.moe, router="gate.weight", expert="experts",
                           shared="shared_experts", names=("w1", "w3", "w2"))
    return None
