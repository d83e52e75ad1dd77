"""GPT-2 (`model_type: gpt2`): config fields and tensor names onto `LM` with softmax attention,
a GELU MLP (tanh, or exact for `activation_function: gelu`), LayerNorm, learned positions and a tied head.

GPT-2 stores its projections as `Conv1D` weights, (in, out): the transpose of `nn.Linear`'s.
Hub files name tensors `h.0.attn.c_attn.weight`; `save_pretrained` of `GPT2LMHeadModel`
prefixes `transformer.`; both are read.
"""
from __future__ import annotations

import re

from ..configs import AttentionConfig, DenseFFNConfig, ModelConfig
from .hfconfig import Fields

MODEL_TYPES = ("gpt2",)


def config(f: Fields, name: str) -> ModelConfig:
    d, L, H = f.need("n_embd"), f.need("n_layer"), f.need("n_head")
    if f.get("n_ctx", kind=int) not in (None, f.need("n_positions")):
        raise f._bad("n_ctx", "differs from n_positions")
    act = f.expect("activation_function", ("gelu_new", "gelu_pytorch_tanh", "gelu"), "gelu_new")
    f.expect("scale_attn_weights", (True,), True)
    f.expect("scale_attn_by_inverse_layer_idx", (False,), False)
    f.expect("add_cross_attention", (False,), False)
    # numerics (upcasting inside attention) or heads for other tasks: not what a decode step computes
    f.ignore("reorder_and_upcast_attn", "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type", "summary_use_proj",
             "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "n_ctx")
    if d % H:
        raise f._bad("n_head", f"{H} does not divide n_embd {d}")
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d, mixers=("softmax",) * L, ffns=("dense",) * L,
        attention=AttentionConfig(d_model=d, n_heads=H, bias=True),
        dense=DenseFFNConfig(d_model=d, d_ff=f.get("n_inner", kind=int) or 4 * d, act="gelu", bias=True,
                             gelu_form="erf" if act == "gelu" else "tanh"),
        norm="layer", norm_eps=f.get("layer_norm_epsilon", 1e-5, float), n_positions=f.need("n_positions"),
        tie_embeddings=f.get("tie_word_embeddings", True, bool), notes="GPT-2 checkpoint")


_LAYER = re.compile(r"h\.(\d+)\.(.+)")
_IN_LAYER = {"ln_1.weight": "norm1.weight", "ln_1.bias": "norm1.bias", "ln_2.weight": "norm2.weight",
             "ln_2.bias": "norm2.bias", "attn.c_attn.bias": "mixer.c_attn.bias", "attn.c_proj.bias": "mixer.c_proj.bias",
             "mlp.c_fc.bias": "ffn.c_fc.bias", "mlp.c_proj.bias": "ffn.c_proj.bias"}
_CONV1D = {"attn.c_attn.weight": "mixer.c_attn.weight", "attn.c_proj.weight": "mixer.c_proj.weight",
           "mlp.c_fc.weight": "ffn.c_fc.weight", "mlp.c_proj.weight": "ffn.c_proj.weight"}
_TOP = {"wte.weight": "wte.weight", "wpe.weight": "wpe.weight", "ln_f.weight": "norm_f.weight",
        "ln_f.bias": "norm_f.bias"}


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown."""
    name = name.removeprefix("transformer.")
    if name in _TOP:
        return [(_TOP[name], (), t)]
    if name == "lm_head.weight":
        return [] if cfg.tie_embeddings else [("lm_head.weight", (), t)]
    m = _LAYER.fullmatch(name)
    if m is None:
        return None
    i, rest = m.groups()
    if rest in ("attn.bias", "attn.masked_bias"):      # old files saved the causal mask as a buffer
        return []
    if rest in _IN_LAYER:
        return [(f"blocks.{i}.{_IN_LAYER[rest]}", (), t)]
    if rest in _CONV1D:
        # Conv1D (in, out) -> Linear (out, in); a tensor of another rank is refused by its shape
        return [(f"blocks.{i}.{_CONV1D[rest]}", (), t.transpose(0, 1) if t.dim() == 2 else t)]
    return None
