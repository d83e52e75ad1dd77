"""Rotary position embedding as real checkpoints configure it (`RopeScalingConfig`): plain, or
stretched past the context the model was trained at (linear, Llama 3.1's llama3, YaRN).

The angles and their cos and sin are taken in float64 and only then cast to the model's dtype:
in bf16 an angle of 1000 radians is stored to within 4, which would leave cos and sin noise.
Every tensor is made on x's device by torch ops (no host copy), so a captured step can replay it.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ..configs import RopeScalingConfig


def inv_frequencies(R: int, theta: float, s: RopeScalingConfig, device) -> Tensor:
    """The R/2 angular speeds (radians per position), float64, of channel pairs (i, i + R/2)."""
    inv = theta ** (-torch.arange(0, R, 2, dtype=torch.float64, device=device) / R)      # (R/2,)
    if s.kind == "linear":
        return inv / s.factor
    if s.kind == "llama3":
        wavelen = 2 * math.pi / inv
        slow = s.original_context / s.low_freq_factor       # pairs slower than this: divided by factor
        fast = s.original_context / s.high_freq_factor      # faster than this: kept
        # between, blend by how many turns a pair makes in the original context
        w = (s.original_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
        blended = (1 - w) * inv / s.factor + w * inv
        return torch.where(wavelen > slow, inv / s.factor, torch.where(wavelen < fast, inv, blended))
    if s.kind == "yarn":
        lo, hi = (_pair_turning(n, R, theta, s.original_context) for n in (s.beta_fast, s.beta_slow))
        if s.truncate:
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, R - 1)
        hi = hi + 0.001 if hi == lo else hi                 # a ramp of no width would divide by zero
        # 0 for pairs turning more than beta_fast times (kept), 1 under beta_slow (divided)
        ramp = ((torch.arange(R // 2, dtype=torch.float64, device=device) - lo) / (hi - lo)).clamp(0, 1)
        return inv / s.factor * ramp + inv * (1 - ramp)
    return inv


def _pair_turning(turns: float, R: int, theta: float, context: int) -> float:
    """The (fractional) pair index that makes `turns` full turns over `context` positions."""
    return R * math.log(context / (turns * 2 * math.pi)) / (2 * math.log(theta))


def attention_factor(s: RopeScalingConfig) -> float:
    """YaRN's scale on cos and sin (so on q.k, squared): sharper attention at the stretched context."""
    if s.kind != "yarn":
        return 1.0
    if s.attention_factor is not None:
        return s.attention_factor
    return 0.1 * math.log(s.factor) + 1.0 if s.factor > 1 else 1.0


def rotate(x: Tensor, pos: Tensor, theta: float, s: RopeScalingConfig | None = None) -> Tensor:
    """Rotary embedding on the last dim (pairs of halves), at plain RoPE's frequencies or, with
    `s`, at its scaled ones. x (..., L, R), pos (L,)."""
    R = x.shape[-1]
    if s is None:
        inv, m = theta ** (-torch.arange(0, R, 2, dtype=torch.float64, device=x.device) / R), 1.0
    else:
        inv, m = inv_frequencies(R, theta, s, x.device), attention_factor(s)
    ang = pos.to(torch.float64)[:, None] * inv                                       # (L, R/2)
    cos, sin = (ang.cos() * m).to(x.dtype), (ang.sin() * m).to(x.dtype)
    a, b = x[..., : R // 2], x[..., R // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
