"""DeltaNet: a K x V memory per head that corrects what a key recalls instead of adding to it.

Gated DeltaNet and KDA subclass this layer and only change the decay (`_decay`) and the
output path (`_output`); the projections, short conv, beta and the step are shared.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ... import ops
from .config import DeltaNetConfig
from ..short_conv import ShortConv, l2norm
from ...observed import LayerObs, StateObs


@dataclass
class DeltaState:
    S: Tensor                   # (B, H, K, V) fp32 or the model dtype
    conv: Tensor | None = None  # (B, conv_size - 1, H*(2K + V)): last inputs of the short conv
    # The Triton step may update S (fp32) in place. A step normally leaves the caller's state as
    # it was (as the reference does), at the cost of one copy of S; a state whose buffers the
    # stepper owns (lineage.graph_step.to_static) says so here.
    in_place: bool = False

    @property
    def nbytes(self) -> int:
        return self.S.numel() * self.S.element_size()

    # -- the static form a captured step (lineage.graph_step) updates in place -------------
    def to_static(self, capacity: int) -> "DeltaState":
        """A copy marked in_place: the Triton step then writes S where it is."""
        return DeltaState(self.S.clone(), None if self.conv is None else self.conv.clone(), in_place=True)

    def buffers(self) -> list[Tensor]:
        return [self.S] + ([self.conv] if self.conv is not None else [])

    def copy_from(self, new: "DeltaState") -> None:
        if new.S is not self.S:                 # the Triton step updates S in place
            self.S.copy_(new.S)
        if self.conv is not None and new.conv is not self.conv:
            self.conv.copy_(new.conv)


class DeltaNet(nn.Module):
    OP = "delta_rule"           # the function in lineage.ops (reference) or kernels (triton)
    backend = "reference"       # set by lineage.backend.set_backend

    def __init__(self, cfg: DeltaNetConfig):
        super().__init__()
        self.cfg = cfg
        H, K = cfg.n_heads, cfg.head_dim
        Hk, V = cfg.key_heads, cfg.v_dim                            # = H and K unless a checkpoint says otherwise
        self.q_proj = nn.Linear(cfg.d_model, Hk * K, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, Hk * K, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, H * V, bias=False)
        self.b_proj = nn.Linear(cfg.d_model, H, bias=False)        # beta: how hard to correct, per head
        self.conv = ShortConv(cfg.conv_channels, cfg.conv_size) if cfg.conv_size > 0 else None
        self.o_norm = nn.RMSNorm(V, eps=cfg.norm_eps)                # per head, over V
        self.o_proj = nn.Linear(H * V, cfg.d_model, bias=False)

    # -- the parts subclasses change -------------------------------------------------------
    def _decay(self, x: Tensor) -> Tensor | None:
        """Log decay g <= 0: None (no decay), (B, T, H) per head, or (B, T, H, K) per channel."""
        return None

    def _output(self, x: Tensor, o: Tensor) -> Tensor:
        # o: (B, T, H, V) -> (B, T, d_model)
        return self.o_proj(self.o_norm(o).flatten(-2))

    def _op(self, q, k, v, g, beta, initial_state):
        """The whole-sequence recurrence: the chunked reference, or the Triton kernel (chunk 64,
        fp32 state) when the backend says so."""
        gates = (beta,) if g is None else (g, beta)
        if self.backend == "triton":
            from lineage.ops import kernels
            return getattr(kernels, self.OP)(q, k, v, *gates, initial_state=initial_state, chunk_size=64)
        return getattr(ops, self.OP)(q, k, v, *gates, initial_state=initial_state, chunk_size=self.cfg.chunk_size)

    # -- shared ----------------------------------------------------------------------------
    def _qkvb(self, x: Tensor, conv_cache: Tensor | None):
        """x (B, T, d) -> q, k (B, T, H, K) unit length; v (B, T, H, V); beta (B, T, H); new conv cache."""
        cfg = self.cfg
        H, K, Hk, V = cfg.n_heads, cfg.head_dim, cfg.key_heads, cfg.v_dim
        qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)   # (B, T, 2HkK + HV)
        if self.conv is not None:
            qkv, conv_cache = self.conv(qkv, conv_cache)
        q, k, v = F.silu(qkv).split([Hk * K, Hk * K, H * V], dim=-1)
        q, k = (l2norm(t.view(*x.shape[:2], Hk, K)) for t in (q, k))              # (B, T, Hk, K)
        if Hk != H:     # each q/k head serves H // Hk consecutive value heads (Qwen3-Next)
            q, k = q.repeat_interleave(H // Hk, dim=2), k.repeat_interleave(H // Hk, dim=2)   # (B, T, H, K)
        beta = torch.sigmoid(self.b_proj(x))                                      # (B, T, H)
        return q, k, v.view(*x.shape[:2], H, V), beta, conv_cache

    def forward(self, x: Tensor, state: DeltaState | None = None) -> tuple[Tensor, DeltaState]:
        q, k, v, beta, conv = self._qkvb(x, None if state is None else state.conv)
        g = self._decay(x)
        o, S = self._op(q, k, v, g, beta, None if state is None else state.S)
        return self._output(x, o), DeltaState(S, conv)

    def step(self, x_t: Tensor, state: DeltaState | None, obs: LayerObs | None = None) -> tuple[Tensor, DeltaState]:
        """One token, written out in full (not through `ops`) so tests compare two formulations."""
        x = x_t[:, None]                                                          # (B, 1, d)
        q, k, v, beta, conv = self._qkvb(x, None if state is None else state.conv)
        q, k, v, beta = q[:, 0], k[:, 0], v[:, 0], beta[:, 0]                      # (B, H, K), (B, H)
        B, H, K = q.shape
        g = self._decay(x)
        if self.backend == "triton":
            # one fused launch on an fp32 state; when observing, the kernel also writes the
            # read-back k S, from which the correction and the write follow
            from lineage.ops import kernels
            q, k, v, beta = q.contiguous(), k.contiguous(), v.contiguous(), beta.contiguous()
            if state is None:
                S = torch.zeros(B, H, K, v.shape[-1], device=q.device, dtype=torch.float32)
            elif state.in_place:
                S = state.S.float().contiguous()                                  # the caller's buffer
            else:
                S = state.S.to(torch.float32, copy=True).contiguous()
            read = None if obs is None else torch.empty_like(v)                   # (B, H, V)
            o = kernels.kda_step(q, k, v, None if g is None else g[:, 0], beta, S, read=read)
            if obs is not None:
                u = beta[..., None] * (v - read)                                  # (B, H, V)
                self._observe(obs, S, k[..., None] * u[:, :, None], read, v, k, beta,
                              None if g is None else g[:, 0].exp(), q * K ** -0.5)
            return self._output(x, o[:, None])[:, 0], DeltaState(S, conv)
        S = q.new_zeros(B, H, K, v.shape[-1]) if state is None else state.S.to(q.dtype)
        alpha = None
        if g is not None:
            alpha = g[:, 0].exp()                                                 # (B, H) or (B, H, K)
            S = S * (alpha[..., None, None] if alpha.dim() == 2 else alpha[..., None])
        read = (k[:, :, None] @ S).squeeze(2)                                     # (B, H, V): recall, after decay
        u = beta[..., None] * (v - read)                                          # (B, H, V): the correction
        dS = k[..., None] * u[:, :, None]                                         # (B, H, K, V): k^T u
        S = S + dS
        qs = q * K ** -0.5
        o = (qs[:, :, None] @ S).squeeze(2)                                       # (B, H, V), includes this token
        if obs is not None:
            self._observe(obs, S, dS, read, v, k, beta, alpha, qs)
        return self._output(x, o[:, None])[:, 0], DeltaState(S, conv)

    def _observe(self, obs: LayerObs, S, dS, read, v, k, beta, alpha, q):
        obs.mixer = StateObs(S.detach(), dS.detach(), k.detach(), v.detach(), read.detach(), beta.detach(),
                             None if alpha is None else alpha.detach(), S.numel() * S.element_size(),
                             q.detach(), corrects=True)
