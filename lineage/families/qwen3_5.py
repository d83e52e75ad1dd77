"""Qwen3.5 (`model_type: qwen3_5`, `qwen3_5_moe`, and their text-only saves `qwen3_5_text`,
`qwen3_5_moe_text`): Qwen3-Next's layers (Gated DeltaNet with GQA-shaped heads, gated softmax
attention with q/k norms and partial RoPE, (1 + w) norms), a dense SwiGLU MLP in every layer
(dense) or softmax-routed experts with a gated shared expert in every layer (MoE).

What differs from Qwen3-Next, for the text:
- the DeltaNet's input projections are separate and plain: `in_proj_qkv` is q (all key heads),
  then k, then v (all value heads), already the order the short conv runs over, where Qwen3-Next
  interleaves q, k, v, z (and b, a) per key head;
- RoPE is multimodal (mRoPE: the rotary frequencies split into time, height and width sections,
  each turned by its own position). For text the three positions are the token's index, so every
  section turns by the same angle: plain 1-D RoPE on the first `rope_dim` channels, whether the
  sections are interleaved or not. `mrope_section` and `mrope_interleaved` change nothing here;
- the MoE always renormalises its top-k weights and has no dense layers (no `mlp_only_layers`).

The hub checkpoints are the multimodal composite (`*ForConditionalGeneration`): the text model's
config nested under `text_config`, its weights under `model.language_model.`, beside a vision tower
(`model.visual.`) and multi-token-prediction layers (`mtp.`) that a text-only step never runs.
"""
from __future__ import annotations

import re

from ..configs import AttentionConfig, DenseFFNConfig, GatedDeltaNetConfig, ModelConfig, MoEConfig
from . import qwen3_next
from .hfconfig import Fields

COMPOSITE = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}   # its text_config's model_type
MODEL_TYPES = (*COMPOSITE, *COMPOSITE.values())
# the rope_parameters keys transformers reads for this family (mrope_*: see the docstring)
ROPE_KEYS = {"rope_type", "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved"}


def config(f: Fields, name: str) -> ModelConfig:
    if f.arch not in COMPOSITE:
        return _text(f, name, moe=f.arch == "qwen3_5_moe_text", tie=f.get("tie_word_embeddings", False, bool))
    # the composite's head is tied by the top-level flag (transformers ties lm_head by the config
    # of the model that holds it); text_config's own flag belongs to a text model with no head
    tie = f.get("tie_word_embeddings", False, bool)
    f.ignore("vision_config", "image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    t = f.sub("text_config")
    t.expect("model_type", (COMPOSITE[f.arch],), COMPOSITE[f.arch])
    t.ignore("tie_word_embeddings")
    cfg = _text(t, name, moe=f.arch == "qwen3_5_moe", tie=tie)
    t.done()
    return cfg


def _text(f: Fields, name: str, moe: bool, tie: bool) -> ModelConfig:
    d, L = f.need("hidden_size"), f.need("num_hidden_layers")
    eps = f.get("rms_norm_eps", 1e-6, float)
    f.expect("hidden_act", ("silu",), "silu")
    # transformers gates every attention output whatever this says; a checkpoint saying false
    # means something transformers does not run either
    f.expect("attn_output_gate", (True,), True)
    f.ignore("mamba_ssm_dtype")         # other runtimes' recurrent-state dtype; transformers does not read it
    types = f.list_of("layer_types", str)
    if types is None:
        every = f.get("full_attention_interval", 4, int)
        types = ["linear_attention" if (i + 1) % every else "full_attention" for i in range(L)]
    f.ignore("full_attention_interval")
    if len(types) != L or set(types) - {"linear_attention", "full_attention"}:
        raise f._bad("layer_types", f"expected {L} entries of linear_attention / full_attention")
    if f.get("mlp_only_layers", [], list):       # any list: refused whatever it holds
        raise f._bad("mlp_only_layers", "Qwen3.5 has no per-layer MLP choice (transformers ignores this list); "
                                        "refusing rather than guessing which layers it meant")
    rope = f.sub("rope_parameters", required=False, generic=False)
    if set(rope.raw) - ROPE_KEYS:
        raise f._bad("rope_parameters", f"{sorted(set(rope.raw) - ROPE_KEYS)[0]!r} is not a key lineage implements")
    if rope.get("rope_type", "default", str) != "default" or f.get("rope_scaling") not in (None, {}):
        raise f._bad("rope_parameters", "only the default rope_type is supported")
    theta, part = qwen3_next.rope_numbers(f, rope)
    H, D = f.need("num_attention_heads"), f.need("head_dim")
    R, theta = qwen3_next.partial_rope(f, D, part, theta)
    if moe:
        f.ignore("intermediate_size")   # no dense layer in a Qwen3.5 MoE
        f.expect("norm_topk_prob", (True,), True)
        f.expect("decoder_sparse_step", (1,), 1)
        E, Fs = f.need("num_experts", least=0), f.need("shared_expert_intermediate_size", least=0)
        if E == 0 or Fs == 0:
            raise f._bad("num_experts" if E == 0 else "shared_expert_intermediate_size",
                         "0: transformers builds every layer's experts and shared expert regardless")
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d,
        mixers=tuple("gdn" if t == "linear_attention" else "softmax" for t in types), ffns=("moe" if moe else "dense",) * L,
        attention=AttentionConfig(d_model=d, n_heads=H, n_kv_heads=f.need("num_key_value_heads"), head_dim=D,
                                  bias=f.get("attention_bias", False, bool), qk_norm=True,
                                  rope_dim=R, rope_theta=theta, output_gate=True, norm_eps=eps),
        gdn=GatedDeltaNetConfig(d_model=d, n_heads=f.need("linear_num_value_heads"),
                                head_dim=f.need("linear_key_head_dim"), conv_size=f.get("linear_conv_kernel_dim", 4, int),
                                norm_eps=eps, n_key_heads=f.need("linear_num_key_heads"),
                                value_dim=f.need("linear_value_head_dim")),
        dense=None if moe else DenseFFNConfig(d_model=d, d_ff=f.need("intermediate_size"), act="silu"),
        moe=None if not moe else MoEConfig(
            d_model=d, n_experts=E, top_k=f.need("num_experts_per_tok"), n_shared=1, expert_dim=f.need("moe_intermediate_size"),
            shared_dim=Fs, act="silu", router="softmax", norm_topk=True, router_fp32=True, shared_gate=True),
        norm="rms", norm_eps=eps, tie_embeddings=tie, notes="Qwen3.5 MoE checkpoint" if moe else "Qwen3.5 checkpoint")


_LINEAR = re.compile(r"model\.layers\.(\d+)\.linear_attn\.(in_proj_\w+)\.weight")


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown."""
    if name.startswith(("model.visual.", "mtp.")):      # the vision tower; multi-token prediction
        return []
    if name.startswith("model.language_model."):        # the composite's text model
        name = "model." + name.removeprefix("model.language_model.")
    m = _LINEAR.fullmatch(name)
    if m is None:       # everything else is laid out as in Qwen3-Next
        return qwen3_next.pieces(name, t, cfg)
    i, proj = int(m.group(1)), m.group(2)
    if i >= cfg.n_layers or cfg.mixers[i] != "gdn":
        return None
    p, c = f"blocks.{i}.mixer.", cfg.gdn
    if proj == "in_proj_qkv":               # q (key heads x K), k (key heads x K), v (value heads x V)
        rows = [c.key_heads * c.head_dim, c.key_heads * c.head_dim, c.n_heads * c.v_dim]
        if t.dim() != 2 or t.shape[0] != sum(rows):
            return [(p + "q_proj.weight", (), t)]       # the loader names the shape config.json implies
        q, k, v = t.split(rows)
        return [(p + "q_proj.weight", (), q), (p + "k_proj.weight", (), k), (p + "v_proj.weight", (), v)]
    plain = {"in_proj_z": "g_proj", "in_proj_b": "b_proj", "in_proj_a": "a_proj"}
    return [(p + plain[proj] + ".weight", (), t)] if proj in plain else None    # Qwen3-Next's fused ones: not here
