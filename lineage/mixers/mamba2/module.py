"""Mamba-2: a state per head that only fades and adds, the decayed sum the delta rule corrects.

Each step the whole state of a head keeps alpha = exp(dt A) of itself (one number per head) and
adds B^T (dt x): the step size dt both forgets and writes, so a large dt replaces the memory with
this token and a small one keeps it. Nothing reads the state before writing, so unlike the delta
rule a key written twice is summed, not corrected. B and C (the write and read vectors) are
computed once per group of heads. Not a DeltaNet subclass: nothing here runs on the Triton
kernels, and nothing should route it there (its descriptor says kernel=False).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ... import ops
from .config import Mamba2Config
from ..deltanet.module import DeltaState
from ..gated_deltanet.module import init_decay_params
from ...observed import LayerObs, StateObs
from ..short_conv import ShortConv


class GatedRMSNorm(nn.Module):
    """RMSNorm(y * silu(z)) over each group's channels (the gate before the norm, as Mamba-2 does),
    so a group's scale does not depend on the other groups'."""

    def __init__(self, channels: int, groups: int, eps: float):
        super().__init__()
        self.groups, self.eps = groups, eps
        self.weight = nn.Parameter(torch.ones(channels))

    def forward(self, y: Tensor, z: Tensor) -> Tensor:
        # y, z: (..., channels), in y's precision (float32 for a half-precision model's scan)
        h = (y * F.silu(z.to(y.dtype))).unflatten(-1, (self.groups, -1))       # (..., G, channels / G)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.flatten(-2) * self.weight.to(y.dtype)


class Mamba2(nn.Module):
    def __init__(self, cfg: Mamba2Config):
        super().__init__()
        self.cfg = cfg
        d, H, I = cfg.d_model, cfg.n_heads, cfg.inner
        self.in_proj = nn.Linear(d, I + cfg.conv_channels, bias=False)          # z | x | B | C
        # dt's rows of Mamba-2's in_proj, kept apart so that `_decay(x)` (which eval's probe wraps)
        # is a function of the layer input alone
        self.dt_proj = nn.Linear(d, H, bias=False)
        self.conv = ShortConv(cfg.conv_channels, cfg.conv_size) if cfg.conv_size > 0 else None
        self.conv_bias = nn.Parameter(torch.zeros(cfg.conv_channels)) if self.conv is not None else None
        self.A_log, self.dt_bias = init_decay_params(H, H)                      # as Gated DeltaNet's
        self.D = nn.Parameter(torch.ones(H))                                    # the skip, per head
        self.norm = GatedRMSNorm(I, cfg.n_groups, cfg.norm_eps)
        self.out_proj = nn.Linear(I, d, bias=False)

    # -- the step size and the decay, from the layer input --------------------------------
    def _dt(self, x: Tensor) -> Tensor:
        w = torch.promote_types(x.dtype, torch.float32)       # a bf16 step size rounds the decay the scan sums
        return F.softplus(self.dt_proj(x).to(w) + self.dt_bias.to(w))           # (B, T, H) > 0

    def _g(self, dt: Tensor) -> Tensor:
        """The log decay g = dt A <= 0 (A = -exp(A_log)) of step sizes dt: (B, T, H). Retention is exp(g)."""
        return -self.A_log.to(dt.dtype).exp() * dt

    def _decay(self, x: Tensor) -> Tensor:
        """g from the layer input, for what asks for a mixer's decay (eval's probe, has_decay)."""
        return self._g(self._dt(x))

    def _inputs(self, x: Tensor, conv_cache: Tensor | None):
        """x (B, T, d) -> z (B, T, H*P); xs (B, T, H, P); B, C (B, T, G, N); the new conv cache."""
        cfg = self.cfg
        H, P, G, N = cfg.n_heads, cfg.head_dim, cfg.n_groups, cfg.state_dim
        z, xbc = self.in_proj(x).split([cfg.inner, cfg.conv_channels], dim=-1)
        if self.conv is not None:
            xbc, conv_cache = self.conv(xbc, conv_cache)
            xbc = xbc + self.conv_bias
        xs, Bm, Cm = F.silu(xbc).split([cfg.inner, G * N, G * N], dim=-1)
        shape = x.shape[:2]
        return z, xs.view(*shape, H, P), Bm.view(*shape, G, N), Cm.view(*shape, G, N), conv_cache

    def _output(self, y: Tensor, z: Tensor) -> Tensor:
        # y: (B, T, H, P) -> (B, T, d_model)
        return self.out_proj(self.norm(y.flatten(-2), z).to(self.out_proj.weight.dtype))

    def forward(self, x: Tensor, state: DeltaState | None = None) -> tuple[Tensor, DeltaState]:
        z, xs, Bm, Cm, conv = self._inputs(x, None if state is None else state.conv)
        # the scan and the gated norm in at least float32, as published: in bf16 the state's sums
        # over a chunk and the norm's mean lose what a 64-layer model adds up
        w = torch.promote_types(x.dtype, torch.float32)
        dt = self._dt(x).to(w)                                # once: g is made from it
        y, S = ops.ssd(xs.to(w), dt, self._g(dt), Bm.to(w), Cm.to(w), D=self.D.to(w),
                       initial_state=None if state is None else state.S.to(w), chunk_size=self.cfg.chunk_size)
        return self._output(y, z), DeltaState(S, conv)      # DeltaState: the same S and conv cache

    def step(self, x_t: Tensor, state: DeltaState | None, obs: LayerObs | None = None) -> tuple[Tensor, DeltaState]:
        """One token, written out in full (not through `ops`) so tests compare two formulations."""
        cfg = self.cfg
        x = x_t[:, None]                                                        # (B, 1, d)
        z, xs, Bm, Cm, conv = self._inputs(x, None if state is None else state.conv)
        w = torch.promote_types(x.dtype, torch.float32)                        # as forward: float32 at least
        xs = xs[:, 0].to(w)                                                     # (B, H, P)
        k, q = (t[:, 0].repeat_interleave(cfg.n_heads // cfg.n_groups, dim=1).to(w) for t in (Bm, Cm))   # (B, H, N)
        dt = self._dt(x)[:, 0].to(w)                                            # (B, H)
        alpha = self._g(dt).exp()                                               # (B, H): retention
        Bsz, H, N = k.shape
        S = xs.new_zeros(Bsz, H, N, cfg.head_dim) if state is None else state.S.to(w)
        S = alpha[..., None, None] * S                                          # fade the whole state
        read = (k[:, :, None] @ S).squeeze(2)                                   # (B, H, P): B's recall, after decay
        dS = k[..., None] * (dt[..., None] * xs)[:, :, None]                    # (B, H, N, P): B^T (dt x)
        S = S + dS
        y = (q[:, :, None] @ S).squeeze(2) + self.D[:, None].to(w) * xs         # (B, H, P), includes this token
        if obs is not None:
            # dt is the write's strength: it goes where the delta family's beta goes
            obs.mixer = StateObs(S.detach(), dS.detach(), k.detach(), xs.detach(), read.detach(), dt.detach(),
                                 alpha.detach(), S.numel() * S.element_size(), q.detach())
        return self._output(y[:, None], z)[:, 0], DeltaState(S, conv)
