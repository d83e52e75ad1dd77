"""Gated DeltaNet: DeltaNet plus one learned decay per head, so memory can fade without a key."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import GatedDeltaNetConfig
from ..deltanet.module import DeltaNet


def init_decay_params(n_a: int, n_dt: int) -> tuple[nn.Parameter, nn.Parameter]:
    """A_log = log U(1, 16); dt_bias = softplus^-1(dt), dt log-uniform in [1e-3, 1e-1] (as published).
    Shared by Gated DeltaNet and KDA."""
    A_log = nn.Parameter(torch.empty(n_a).uniform_(1, 16).log())
    dt = torch.exp(torch.empty(n_dt).uniform_(math.log(1e-3), math.log(1e-1)))
    dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))      # inverse softplus
    return A_log, dt_bias


class GatedDeltaNet(DeltaNet):
    OP = "gated_delta_rule"

    def __init__(self, cfg: GatedDeltaNetConfig):
        super().__init__(cfg)
        H, V = cfg.n_heads, cfg.v_dim
        self.a_proj = nn.Linear(cfg.d_model, H, bias=False)
        self.A_log, self.dt_bias = init_decay_params(H, H)
        self.g_proj = nn.Linear(cfg.d_model, H * V, bias=False)     # SiLU output gate, as published

    def _qkvb(self, x: Tensor, conv_cache: Tensor | None):
        q, k, v, beta, conv_cache = super()._qkvb(x, conv_cache)
        if self.cfg.allow_neg_eigval:       # beta in (0, 2): every path (ops, kernels, step) takes it as given
            beta = 2 * beta                                                       # (B, T, H)
        return q, k, v, beta, conv_cache

    def _decay(self, x: Tensor) -> Tensor:
        return -self.A_log.exp() * F.softplus(self.a_proj(x) + self.dt_bias)     # (B, T, H)

    def _output(self, x: Tensor, o: Tensor) -> Tensor:
        gate = F.silu(self.g_proj(x)).view(o.shape)                               # (B, T, H, V)
        return self.o_proj((self.o_norm(o) * gate).flatten(-2))
