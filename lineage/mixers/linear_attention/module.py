"""Linear attention (Katharopoulos et al.): an additive K x V memory per head plus a normaliser."""
from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from ... import ops
from .config import LinearAttentionConfig
from ...observed import LayerObs, StateObs


@dataclass
class LinearState:
    S: Tensor   # (B, H, K, V): sum of k^T v
    z: Tensor   # (B, H, K):    sum of k, the normaliser

    @property
    def nbytes(self) -> int:
        return self.S.numel() * self.S.element_size() + self.z.numel() * self.z.element_size()

    # -- the static form a captured step (lineage.graph_step) updates in place -------------
    def to_static(self, capacity: int) -> "LinearState":
        return LinearState(self.S.clone(), self.z.clone())

    def buffers(self) -> list[Tensor]:
        return [self.S, self.z]

    def copy_from(self, new: "LinearState") -> None:
        self.S.copy_(new.S)
        self.z.copy_(new.z)


def feature_map(x: Tensor) -> Tensor:
    """elu + 1: positive features, so the normaliser q . z never vanishes."""
    return F.elu(x) + 1


class LinearAttention(nn.Module):
    def __init__(self, cfg: LinearAttentionConfig):
        super().__init__()
        self.cfg = cfg
        HK = cfg.n_heads * cfg.head_dim
        self.q_proj = nn.Linear(cfg.d_model, HK, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, HK, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, HK, bias=False)
        self.o_proj = nn.Linear(HK, cfg.d_model, bias=False)

    def _qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        shape = (*x.shape[:-1], self.cfg.n_heads, self.cfg.head_dim)         # (B, T, H, K)
        return (feature_map(self.q_proj(x)).view(shape), feature_map(self.k_proj(x)).view(shape),
                self.v_proj(x).view(shape))

    def forward(self, x: Tensor, state: LinearState | None = None) -> tuple[Tensor, LinearState]:
        q, k, v = self._qkv(x)                                               # (B, T, H, K)
        init = None if state is None else (state.S, state.z)
        o, (S, z) = ops.linear_attention(q, k, v, initial_state=init)
        return self.o_proj(o.flatten(2)), LinearState(S, z)

    def step(self, x_t: Tensor, state: LinearState | None, obs: LayerObs | None = None) -> tuple[Tensor, LinearState]:
        q, k, v = (t.squeeze(1) for t in self._qkv(x_t[:, None]))            # (B, H, K)
        B, H, K = q.shape
        S = q.new_zeros(B, H, K, v.shape[-1]) if state is None else state.S
        z = q.new_zeros(B, H, K) if state is None else state.z
        read = (k[:, :, None] @ S).squeeze(2)                                # (B, H, V): what k recalls before writing
        dS = k[..., None] * v[:, :, None]                                    # (B, H, K, V): the write, k^T v
        S, z = S + dS, z + k
        qs = q * K ** -0.5
        o = (qs[:, :, None] @ S).squeeze(2) / (qs * z).sum(-1, keepdim=True)   # (B, H, V)
        if obs is not None:
            qn = qs / (qs * z).sum(-1, keepdim=True)                        # (B, H, K): o = qn S
            obs.mixer = StateObs(S.detach(), dS.detach(), k.detach(), v.detach(), read.detach(), None, None,
                                 S.numel() * S.element_size() + z.numel() * z.element_size(), qn.detach())
        return self.o_proj(o.flatten(1)), LinearState(S, z)
