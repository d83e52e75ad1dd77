"""Dense feed-forward layers: GPT-2's GELU MLP and the gated units (SiLU-GLU, SiTU-GLU, Gemma's
GELU-tanh GLU)."""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from .. import ops
from ..configs import DenseFFNConfig


def gated_act(h: Tensor, act: str, beta: float, linear_beta: float | None) -> Tensor:
    """h (..., 2F) = gate | up -> (..., F). Shared by the dense FFN and the MoE experts."""
    if act == "situ":
        return ops.situ_glu(h, beta, linear_beta)
    gate, up = h.chunk(2, dim=-1)
    if act == "geglu":                  # Gemma's gelu_pytorch_tanh on the gate
        return F.gelu(gate, approximate="tanh") * up
    return F.silu(gate) * up


class DenseFFN(nn.Module):
    def __init__(self, cfg: DenseFFNConfig):
        super().__init__()
        self.cfg = cfg
        width = cfg.d_ff if cfg.act == "gelu" else 2 * cfg.d_ff     # gated units compute gate and up at once
        self.c_fc = nn.Linear(cfg.d_model, width, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)

    def forward(self, x: Tensor, state: None = None) -> tuple[Tensor, None]:
        h = self.c_fc(x)
        if self.cfg.act == "gelu":
            h = F.gelu(h, approximate="tanh" if self.cfg.gelu_form == "tanh" else "none")   # gelu_new or erf
        else:
            h = gated_act(h, self.cfg.act, self.cfg.situ_beta, self.cfg.linear_beta)
        return self.c_proj(h), None

    def step(self, x_t: Tensor, state: None = None, obs=None) -> tuple[Tensor, None]:
        return self.forward(x_t)        # nothing to observe: a dense FFN leaves obs.ffn None
