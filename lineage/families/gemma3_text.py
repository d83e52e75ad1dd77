"""Gemma 3's text model (`model_type: gemma3_text`, `Gemma3ForCausalLM`: gemma-3-1b and the text
half saved alone): GQA softmax attention with RoPE on every layer, most layers windowed (`layer_types`,
or one global layer in every `sliding_window_pattern`), the windowed ones rotating at their own
theta (`rope_local_base_freq`) and the global ones at `rope_theta` with `rope_scaling` (linear,
factor 8, in the 4B and larger models).

What differs from Llama, each an option of lineage's modules: the softmax scale is
query_pre_attn_scalar^-0.5, not head_dim^-0.5; each head's q and k are RMS-normed before RoPE; every
norm scales by (1 + w) (folded into the weight as it loads, as Qwen3-Next's are); four norms a block,
each sublayer normed before and after (`sandwich_norm`); the embedding times sqrt(hidden_size),
rounded to the embedding's dtype; a GELU-tanh gated MLP; logits soft-capped when
`final_logit_softcapping` is set; the head tied to the embedding.

Refused: `attn_logit_softcapping` (Gemma 2's capped attention scores; Gemma 3 sets it null),
`use_bidirectional_attention`, scaled RoPE on the windowed layers. The multimodal
`Gemma3ForConditionalGeneration` (`model_type: gemma3`) is not opened: the loader says so.
"""
from __future__ import annotations

import re

from ..configs import AttentionConfig, DenseFFNConfig, ModelConfig
from .hfconfig import Fields
from . import llama
from .llama import rope_scaling

MODEL_TYPES = ("gemma3_text",)
_TYPES = ("full_attention", "sliding_attention")


def config(f: Fields, name: str) -> ModelConfig:
    d, L, H = f.need("hidden_size"), f.need("num_hidden_layers"), f.need("num_attention_heads")
    eps = f.get("rms_norm_eps", 1e-6, float)
    f.expect("hidden_activation", ("gelu_pytorch_tanh",), "gelu_pytorch_tanh")
    f.expect("use_bidirectional_attention", (False,), False)
    if f.get("attn_logit_softcapping", kind=float) is not None:
        raise f._bad("attn_logit_softcapping", "soft-capped attention scores (Gemma 2's) are not supported; "
                                               "Gemma 3 sets it null")
    f.ignore("cache_implementation")       # "hybrid": how transformers' generate keeps the cache
    D = f.get("head_dim", 256, int)
    window, windows = _window(f, L)
    (theta, scaling), local = _ropes(f)
    cap = f.get("final_logit_softcapping", kind=float)
    if cap is not None and not cap > 0:
        raise f._bad("final_logit_softcapping", f"must be positive or null, got {cap}")
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d, mixers=("softmax",) * L, ffns=("dense",) * L,
        attention=AttentionConfig(
            d_model=d, n_heads=H, n_kv_heads=f.get("num_key_value_heads", H, int), head_dim=D,
            bias=f.get("attention_bias", False, bool), qk_norm=True, rope_dim=D, rope_theta=theta,
            rope_scaling=None if scaling.kind == "default" else scaling, sliding_window=window,
            sliding_rope_theta=local if window else None,
            softmax_scale=f.get("query_pre_attn_scalar", 256.0, float, least=1e-30) ** -0.5, norm_eps=eps),
        dense=DenseFFNConfig(d_model=d, d_ff=f.need("intermediate_size"), act="geglu"),
        windows=windows, norm="rms", norm_eps=eps, sandwich_norm=True, embed_scale=d ** 0.5,
        logit_softcap=cap, tie_embeddings=f.get("tie_word_embeddings", True, bool),
        notes="Gemma 3 checkpoint")


def _window(f: Fields, L: int) -> tuple[int | None, tuple[str, ...] | None]:
    """(the sliding window, which layers use it: ModelConfig.windows, None for all). `layer_types`
    when given, else layer i is global when (i + 1) is a multiple of `sliding_window_pattern`
    (6 unless config.json says; transformers 5 also writes it as `_sliding_window_pattern`)."""
    every = f.get("sliding_window_pattern", kind=int, least=1) or f.get("_sliding_window_pattern", 6, int, least=1)
    f.ignore("_sliding_window_pattern")
    types = f.list_of("layer_types", str)
    if types is not None and (len(types) != L or set(types) - set(_TYPES)):
        raise f._bad("layer_types", f"expected {L} entries of full_attention / sliding_attention")
    if types is None:
        types = ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(L)]
    if "sliding_attention" not in types:
        f.get("sliding_window", kind=int)
        return None, None
    window = f.get("sliding_window", kind=int)
    if window is None:
        raise f._bad("sliding_window", "missing or null, but the model has sliding layers (layer_types)")
    if "full_attention" not in types:
        return window, None
    return window, tuple("sliding" if t == "sliding_attention" else "full" for t in types)


def _ropes(f: Fields):
    """((theta, RopeScalingConfig) of the global layers, theta of the windowed ones). transformers 5
    writes `rope_parameters` keyed by layer type; older files `rope_theta`, `rope_scaling` (the
    global layers') and `rope_local_base_freq`."""
    params = f.get("rope_parameters", kind=dict)
    top = {k: f.raw[k] for k in ("max_position_embeddings", "original_max_position_embeddings") if k in f.raw}
    f.ignore("original_max_position_embeddings")      # read, checked, by rope_scaling below
    if params is None:
        local = f.get("rope_local_base_freq", 10000.0, float)
        glob = {"rope_theta": f.get("rope_theta", 1e6, float), "rope_scaling": f.get("rope_scaling", kind=dict), **top}
        return rope_scaling(Fields(glob, f.path, f.arch, f.prefix, generic=False)), _positive(f, "rope_local_base_freq", local)
    if set(params) != set(_TYPES):
        raise f._bad("rope_parameters", "expected one entry for full_attention and one for sliding_attention")
    for k in ("rope_theta", "rope_local_base_freq", "rope_scaling"):
        if f.get(k) is not None:
            raise f._bad(k, "given beside rope_parameters; give one of them")
    glob = params["full_attention"]
    if isinstance(glob, dict) and glob.get("rope_theta") is None:
        glob = dict(glob, rope_theta=1e6)   # transformers' default for the global layers, not llama's 10,000
    full = Fields({"rope_parameters": glob, **top}, f.path, f.arch, f.prefix, generic=False)
    local = f.sub("rope_parameters", generic=False).sub("sliding_attention", generic=False)
    if local.get("rope_type", "default", str) != "default":
        raise local._bad("rope_type", f"{local.raw['rope_type']!r} on the sliding layers is not supported "
                                      "(lineage rotates them unscaled)")
    theta = local.get("rope_theta", 10000.0, float)
    local.done()
    return rope_scaling(full), _positive(local, "rope_theta", theta)


def _positive(f: Fields, key: str, v: float) -> float:
    if not v > 0:
        raise f._bad(key, f"must be positive, got {v}")
    return v


_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
_NORMS = {"input_layernorm.weight": "norm1.weight", "post_attention_layernorm.weight": "norm1_out.weight",
          "pre_feedforward_layernorm.weight": "norm2.weight", "post_feedforward_layernorm.weight": "norm2_out.weight",
          "self_attn.q_norm.weight": "mixer.q_norm.weight", "self_attn.k_norm.weight": "mixer.k_norm.weight"}


def _scale(t):
    return t.float() + 1.0              # Gemma's norms store w for a scale of 1 + w


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown.
    Gemma's own are its norms (four a block, each stored as w for a scale of 1 + w); every other
    tensor is named as Llama's are (llama.pieces)."""
    if name == "model.norm.weight":
        return [("norm_f.weight", (), _scale(t))]
    m = _LAYER.fullmatch(name)
    if m is not None and int(m.group(1)) < cfg.n_layers and m.group(2) in _NORMS:
        return [(f"blocks.{m.group(1)}.{_NORMS[m.group(2)]}", (), _scale(t))]
    return llama.pieces(name, t, cfg)
