"""OLMo-Hybrid (`model_type: olmo_hybrid`, allenai/Olmo-Hybrid-7B): Gated DeltaNet layers with
beta = 2 sigmoid(b) in (0, 2) (negative eigenvalues), and every `layer_types` "full_attention"
layer (by default each fourth) an OLMo-3 attention layer.

The two kinds of layer are put together differently, and both differences are config options of
ours, not code here:
- the Gated DeltaNet layers are pre-norm (x + mixer(norm(x))), as Llama's;
- the attention layers are post-norm (x + norm(attn(x)), then x + norm(mlp(x))), as OLMo-2/3,
  and their q/k RMSNorm spans all heads of a token at once (q: H*D channels), not one head.
So `post_attention_layernorm` is the second pre-norm in a linear layer and the first post-norm in
an attention layer. The GDN output norm has its own eps (1e-5, fla's default), not rms_norm_eps.
Released checkpoints use no rotary embedding (rope_theta null); configs with default RoPE over the
whole head open too. The norms store their scale as is (no Qwen-style 1 + w).

On disk (the hub's layout, which transformers also writes back) three names differ from
transformers' modules, and both spellings open: `attention_layer_norm` is `input_layernorm`,
`feedforward_layer_norm` is `post_attention_layernorm` (in either kind of layer), and the short
conv is stored as `q_conv1d`, `k_conv1d`, `v_conv1d`, concatenated in that order into one conv.
transformers' save cuts the fused conv into three near-equal parts (torch.chunk) whatever the q/k/v widths, so
both cuts are accepted (see `_conv`).
"""
from __future__ import annotations

import re

from ..configs import AttentionConfig, DenseFFNConfig, GatedDeltaNetConfig, ModelConfig
from .hfconfig import Fields

MODEL_TYPES = ("olmo_hybrid",)

GDN_NORM_EPS = 1e-5     # the gated output norm's eps, fixed in the reference whatever rms_norm_eps says


def _rope(f: Fields, D: int) -> tuple[int, float]:
    """(rope_dim, theta). No rope_theta, or a null one, is no rotary embedding: the released
    checkpoints, whose OLMo-core conversion writes a top-level `rope_theta: null` (transformers
    folds that spelling into rope_parameters). Otherwise the default rope_type over the whole head."""
    rope = f.sub("rope_parameters", required=False, generic=False)
    if f.get("rope_scaling") not in (None, {}):
        raise f._bad("rope_scaling", "RoPE scaling is not supported for olmo_hybrid")
    top = f.get("rope_theta", kind=float)
    theta = rope.get("rope_theta", kind=float) if "rope_theta" in rope.raw else top
    if theta is None:
        return 0, 10000.0                   # transformers builds no rotary embedding at all then
    rope_type = rope.get("rope_type", "default", str)
    if rope_type != "default":
        raise f._bad("rope_parameters", f"rope_type {rope_type!r} is not supported for olmo_hybrid (only 'default')")
    if set(rope.raw) - {"rope_type", "rope_theta"}:
        raise f._bad("rope_parameters", f"{sorted(set(rope.raw) - {'rope_type', 'rope_theta'})[0]} is not supported "
                                        "(OLMo-Hybrid's default RoPE rotates the whole head)")
    if not theta > 0:
        raise f._bad("rope_parameters", f"rope_theta must be a positive number, got {theta!r}")
    if D % 2:
        raise f._bad("rope_parameters", f"RoPE over an odd head_dim {D} is not defined")
    return D, float(theta)


def config(f: Fields, name: str) -> ModelConfig:
    d, L = f.need("hidden_size"), f.need("num_hidden_layers")
    eps = f.get("rms_norm_eps", 1e-6, float)
    f.expect("hidden_act", ("silu",), "silu")       # the MLP's gate and the GDN conv's activation both
    types = f.list_of("layer_types", str)
    if types is None:                                # the reference's default: each fourth layer attends
        types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(L)]
        if "full_attention" not in types:
            types[-1] = "full_attention"
    if len(types) != L or set(types) - {"linear_attention", "full_attention"}:
        raise f._bad("layer_types", f"expected {L} entries of linear_attention / full_attention")
    H = f.need("num_attention_heads")
    Hkv = f.get("num_key_value_heads", kind=int) or H
    D = f.get("head_dim", kind=int) or d // H
    rope_dim, theta = _rope(f, D)
    Hv = f.get("linear_num_value_heads", kind=int) or H
    Hk = f.get("linear_num_key_heads", kind=int) or H
    K = f.get("linear_key_head_dim", kind=int) or int(0.75 * d / Hk)
    V = f.get("linear_value_head_dim", kind=int) or 2 * K
    # older configs say the GDN output is gated; transformers gates whatever they say, so only true is
    # what it runs
    f.expect("linear_use_gate", (True,), True)
    # the decay's and the projections' initialisation ranges: they shape training, not a step
    f.ignore("linear_a_log_min", "linear_a_log_max", "linear_dt_min", "linear_dt_max", "linear_dt_init_floor")
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d,
        mixers=tuple("gdn" if t == "linear_attention" else "softmax" for t in types), ffns=("dense",) * L,
        attention=AttentionConfig(d_model=d, n_heads=H, n_kv_heads=Hkv, head_dim=D,
                                  bias=f.get("attention_bias", False, bool), qk_norm=True, qk_norm_all_heads=True,
                                  rope_dim=rope_dim, rope_theta=theta, norm_eps=eps),
        gdn=GatedDeltaNetConfig(d_model=d, n_heads=Hv, head_dim=K, conv_size=f.get("linear_conv_kernel_dim", 4, int),
                                norm_eps=GDN_NORM_EPS, n_key_heads=Hk, value_dim=V,
                                allow_neg_eigval=f.get("linear_allow_neg_eigval", True, bool)),
        dense=DenseFFNConfig(d_model=d, d_ff=f.need("intermediate_size"), act="silu"),
        post_norm=("softmax",), norm="rms", norm_eps=eps, tie_embeddings=f.get("tie_word_embeddings", False, bool),
        notes="OLMo-Hybrid checkpoint")


_TOP = {"model.embed_tokens.weight": "wte.weight", "model.norm.weight": "norm_f.weight"}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
# the two norms of a layer, by its kind: (checkpoint name -> ours)
_NORMS = {"gdn": {"input_layernorm.weight": "norm1.weight", "attention_layer_norm.weight": "norm1.weight",
                  "post_attention_layernorm.weight": "norm2.weight", "feedforward_layer_norm.weight": "norm2.weight"},
          "softmax": {"post_attention_layernorm.weight": "norm1.weight", "feedforward_layer_norm.weight": "norm1.weight",
                      "post_feedforward_layernorm.weight": "norm2.weight"}}
_GDN = {"q_proj.weight": "q_proj.weight", "k_proj.weight": "k_proj.weight", "v_proj.weight": "v_proj.weight",
        "a_proj.weight": "a_proj.weight", "b_proj.weight": "b_proj.weight", "g_proj.weight": "g_proj.weight",
        "o_proj.weight": "o_proj.weight", "conv1d.weight": "conv.weight", "A_log": "A_log", "dt_bias": "dt_bias",
        "o_norm.weight": "o_norm.weight"}


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown."""
    if name in _TOP:
        return [(_TOP[name], (), t)]
    if name == "lm_head.weight":
        return [] if cfg.tie_embeddings else [("lm_head.weight", (), t)]
    m = _LAYER.fullmatch(name)
    if m is None or int(m.group(1)) >= cfg.n_layers:
        return None
    i, rest = int(m.group(1)), m.group(2)
    b, kind = f"blocks.{i}.", cfg.mixers[i]
    if rest in _NORMS[kind]:
        return [(b + _NORMS[kind][rest], (), t)]
    if rest.startswith("linear_attn.") and kind == "gdn":
        leaf = rest.removeprefix("linear_attn.")
        if leaf in ("q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"):
            return _conv(b + "mixer.conv.weight", leaf[0], t, cfg.gdn)
        return [(b + "mixer." + _GDN[leaf], (), t)] if leaf in _GDN else None
    if rest.startswith("self_attn.") and kind == "softmax":
        return _attention(b + "mixer.", rest.removeprefix("self_attn."), t, cfg.attention)
    if rest.startswith("mlp."):
        F = cfg.dense.d_ff
        gate_up = {"mlp.gate_proj.weight": slice(0, F), "mlp.up_proj.weight": slice(F, 2 * F)}
        if rest in gate_up:
            return [(b + "ffn.c_fc.weight", (gate_up[rest],), t)]
        return [(b + "ffn.c_proj.weight", (), t)] if rest == "mlp.down_proj.weight" else None
    return None


def _conv(ours: str, part: str, t, c: GatedDeltaNetConfig):
    """One third of the fused conv (q, k or v: rows in that order). Its rows are either its own
    channels (HkK, HkK, HV: the hub's cut) or a third of all C of them (transformers' save). A
    tensor of neither size, or a mix of the two cuts, leaves rows unwritten or written twice,
    which the loader refuses: its per-parameter count then differs from C."""
    qk, C, n = c.key_heads * c.head_dim, c.conv_channels, t.shape[0]
    own = qk if part in "qk" else C - 2 * qk
    third = -(-C // 3)                              # transformers' save cuts like torch.chunk: ceil, ceil, rest
    if n == ({"q": third, "k": third, "v": C - 2 * third}[part]) and n != own:
        start = {"q": 0, "k": third, "v": 2 * third}[part]
    else:                                           # its own rows; another size is refused against them
        n, start = own, {"q": 0, "k": qk, "v": 2 * qk}[part]
    return [(ours, (slice(start, start + n),), t)]


def _attention(p: str, rest: str, t, c: AttentionConfig):
    H, Hkv, D = c.n_heads, c.kv_heads, c.dim
    kind, _, leaf = rest.partition(".")
    if leaf not in ("weight", "bias"):
        return None
    start = {"q_proj": 0, "k_proj": H * D, "v_proj": (H + Hkv) * D}
    if kind in start:                                   # q | k | v are one matmul of ours
        width = H * D if kind == "q_proj" else Hkv * D
        return [(p + "c_attn." + leaf, (slice(start[kind], start[kind] + width),), t)]
    if kind == "o_proj":
        return [(p + "c_proj." + leaf, (), t)]
    if kind in ("q_norm", "k_norm") and leaf == "weight":
        return [(p + rest, (), t)]
    return None
