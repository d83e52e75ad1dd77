"""SiTU, K3's bounded activation, and its gated unit: the reference the fused kernel
(fused.py) is checked against."""

from __future__ import annotations

import torch
from torch import Tensor



def situ(x: Tensor, beta: float = 4.0) -> Tensor:
    """Sigmoid-Tanh Unit: ``beta * tanh(x / beta) * sigmoid(x)``. SiLU-like near 0, bounded by beta."""
    return beta * torch.tanh(x / beta) * torch.sigmoid(x)


def situ_glu(x: Tensor, beta: float = 4.0, linear_beta: float | None = None) -> Tensor:
    """Gated unit of K3's experts. x is (..., 2F) = gate | up; returns (..., F) = situ(gate) * up,
    with the up branch soft-clamped to ``linear_beta * tanh(up / linear_beta)`` when given."""
    if x.shape[-1] % 2:
        raise ValueError(f"situ_glu needs an even last dimension (gate | up); got {x.shape[-1]}")
    gate, up = x.chunk(2, dim=-1)
    if linear_beta is not None:
        up = linear_beta * torch.tanh(up / linear_beta)
    return situ(gate, beta) * up
