"""Kimi Delta Attention: the gated delta rule with one decay per key channel."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import KDAConfig
from ..deltanet.module import DeltaNet
from ..gated_deltanet.module import init_decay_params


class KDA(DeltaNet):
    OP = "kda"

    def __init__(self, cfg: KDAConfig):
        super().__init__(cfg)
        H, K = cfg.n_heads, cfg.head_dim
        r = cfg.gate_rank or K
        # decay gate: hidden -> r -> H*K, low rank because a full H*K x d matrix buys little here
        self.f_a = nn.Linear(cfg.d_model, r, bias=False)
        self.f_b = nn.Linear(r, H * K, bias=False)
        self.A_log, self.dt_bias = init_decay_params(H, H * K)
        V = cfg.v_dim
        if cfg.output_gate_rank is None:                           # K3: full rank
            self.gate = nn.Linear(cfg.d_model, H * V, bias=False)
        else:                                                      # Kimi Linear: low rank
            self.gate = nn.Sequential(nn.Linear(cfg.d_model, cfg.output_gate_rank, bias=False),
                                      nn.Linear(cfg.output_gate_rank, H * V, bias=False))

    def _decay(self, x: Tensor) -> Tensor:
        H, K = self.cfg.n_heads, self.cfg.head_dim
        f = (self.f_b(self.f_a(x)) + self.dt_bias).view(*x.shape[:2], H, K)      # (B, T, H, K)
        A = self.A_log.exp()[:, None]                                             # (H, 1)
        if self.cfg.gate_form == "kimi":
            return -A * F.softplus(f)
        # bounded: alpha in [e^lower_bound, 1], which keeps in-chunk cumulative decays finite in kernels
        return self.cfg.lower_bound * torch.sigmoid(A * f)

    def _output(self, x: Tensor, o: Tensor) -> Tensor:
        gate = torch.sigmoid(self.gate(x)).view(o.shape)                          # (B, T, H, V)
        return self.o_proj((self.o_norm(o) * gate).flatten(-2))
