"""Mamba-2 (`model_type: mamba2`, e.g. state-spaces/mamba2-2.8b as transformers stores it): blocks
of an RMSNorm and the Mamba-2 mixer alone (no FFN), a final norm, an optionally tied head.

The one layout that differs from ours is undone here at load: the checkpoint's in_proj stacks
z | x | B | C | dt; ours keeps dt's rows apart (dt_proj), so the decay is a function of the
layer input alone. The gated norm is RMSNorm(y * silu(z)) per group of inner / n_groups channels,
as ours. Biases on in_proj/out_proj (use_bias) and a clamp on dt (time_step_limit) are refused.
"""
from __future__ import annotations

import re

import torch

from ..configs import Mamba2Config, ModelConfig
from .hfconfig import Fields
from .problems import PretrainedError

MODEL_TYPES = ("mamba2",)


def config(f: Fields, name: str) -> ModelConfig:
    d, L = f.need("hidden_size"), f.need("num_hidden_layers")
    H, P = f.need("num_heads"), f.need("head_dim")
    expand = f.get("expand", 2, int)
    if d * expand != H * P:
        raise f._bad("num_heads", f"num_heads {H} * head_dim {P} must equal hidden_size {d} * expand {expand}")
    f.expect("hidden_act", ("silu",), "silu")
    f.expect("use_bias", (False,), False)
    if not f.get("use_conv_bias", True, bool):
        raise f._bad("use_conv_bias", "only a conv with its bias (true) is supported")
    limit = f.get("time_step_limit", [0.0, float("inf")], list)
    # transformers writes inf as {"__float__": "Infinity"}; older files as a bare Infinity
    limit = [v.get("__float__") if isinstance(v, dict) else v for v in limit]
    if limit not in ([0.0, float("inf")], [0.0, "Infinity"]):      # compared, never converted
        raise f._bad("time_step_limit", "only the unclamped (0.0, inf) step size is supported")
    eps = f.get("layer_norm_epsilon", 1e-5, float)
    f.ignore("time_step_rank", "time_step_min", "time_step_max", "time_step_floor", "initializer_range",
             "rescale_prenorm_residual")      # init-only
    G = f.get("n_groups", 1, int)
    if H % G:
        raise f._bad("n_groups", f"num_heads {H} must be a multiple of n_groups {G}")
    return ModelConfig(
        name=name, vocab_size=f.need("vocab_size"), d_model=d, mixers=("mamba2",) * L, ffns=("none",) * L,
        mamba2=Mamba2Config(d_model=d, n_heads=H, head_dim=P, state_dim=f.need("state_size"), n_groups=G,
                            conv_size=f.get("conv_kernel", 4, int), chunk_size=f.get("chunk_size", 256, int),
                            norm_eps=eps),
        norm="rms", norm_eps=eps, tie_embeddings=f.get("tie_word_embeddings", False, bool),
        residual_fp32=f.get("residual_in_fp32", True, bool),
        notes="Mamba-2 checkpoint")


_TOP = {"backbone.embeddings.weight": "wte.weight", "backbone.norm_f.weight": "norm_f.weight"}
_LAYER = re.compile(r"backbone\.layers\.(\d+)\.(.+)")
_MIXER = {"conv1d.weight": "conv.weight", "conv1d.bias": "conv_bias", "A_log": "A_log", "dt_bias": "dt_bias",
          "D": "D", "norm.weight": "norm.weight", "out_proj.weight": "out_proj.weight"}


def pieces(name: str, t, cfg: ModelConfig):
    """[(our parameter, index into it, tensor)], [] for a tensor we do not need, None if unknown."""
    if name in _TOP:
        return [(_TOP[name], (), t)]
    if name == "lm_head.weight":
        return [] if cfg.tie_embeddings else [("lm_head.weight", (), t)]
    m = _LAYER.fullmatch(name)
    if m is None or int(m.group(1)) >= cfg.n_layers:
        return None
    b, rest = f"blocks.{m.group(1)}.", m.group(2)
    if rest == "norm.weight":
        return [(b + "norm1.weight", (), t)]
    rest = rest.removeprefix("mixer.")
    c = cfg.mamba2
    if rest == "in_proj.weight":        # z | x B C | dt rows
        want = (c.inner + c.conv_channels + c.n_heads, c.d_model)
        if tuple(t.shape) != want:      # before the split: a transposed tensor would pass it
            raise PretrainedError(f"tensor {name} has shape {tuple(t.shape)}; config.json implies {want}")
        zxbc, dt = t.split([c.inner + c.conv_channels, c.n_heads], dim=0)
        return [(b + "mixer.in_proj.weight", (), zxbc), (b + "mixer.dt_proj.weight", (), dt)]
    if rest in _MIXER:
        return [(b + "mixer." + _MIXER[rest], (), t)]
    return None
