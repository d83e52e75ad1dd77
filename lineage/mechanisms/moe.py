"""Latent mixture of experts (K3): sigmoid router, top-k routed experts in a narrow latent width,
shared experts at full width on every token."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..configs import MoEConfig
from .ffn import gated_act


class MoE(nn.Module):
    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.cfg = cfg
        E, Fe, d = cfg.n_experts, cfg.expert_dim, cfg.d_model
        L = cfg.latent_dim or d
        self.router = nn.Linear(d, E, bias=False)
        if cfg.selection_bias:       # a buffer: lineage.training.loop nudges it towards even load
            self.register_buffer("expert_bias", torch.zeros(E))
        if cfg.latent_dim is not None:
            self.down = nn.Linear(d, L, bias=False)                 # hidden -> latent, once per token
            self.latent_norm = nn.RMSNorm(L, eps=cfg.norm_eps)      # K3's guard before the up-projection
            self.up = nn.Linear(L, d, bias=False)
        # experts stacked so one token's k experts are a gather, not a Python loop
        self.w_in = nn.Parameter(torch.randn(E, 2 * Fe, L) * L ** -0.5)     # (E, 2F, L): gate | up
        self.w_out = nn.Parameter(torch.randn(E, L, Fe) * Fe ** -0.5)       # (E, L, F)
        Fs = (cfg.shared_dim or Fe) * cfg.n_shared
        if cfg.n_shared:
            # n_shared experts of width shared_dim summed == one gated unit of width n_shared * shared_dim
            self.shared_in = nn.Linear(d, 2 * Fs, bias=False)
            self.shared_out = nn.Linear(Fs, d, bias=False)

    def _act(self, h: Tensor) -> Tensor:
        return gated_act(h, self.cfg.act, self.cfg.situ_beta, self.cfg.linear_beta)

    def route(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x (N, d) -> scores (N, E) in (0, 1), chosen experts (N, k), their weights (N, k)."""
        scores = torch.sigmoid(self.router(x))
        if self.cfg.selection_bias:   # the bias picks the experts; their weights stay the plain scores
            idx = (scores + self.expert_bias).topk(self.cfg.top_k, dim=-1).indices
            top = scores.gather(-1, idx)
        else:
            top, idx = scores.topk(self.cfg.top_k, dim=-1)
        weights = top / top.sum(-1, keepdim=True) * self.cfg.routed_scale   # sigmoid scores do not sum to 1
        return scores, idx, weights

    def _finish(self, x: Tensor, routed: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        if self.cfg.latent_dim is not None:
            routed = self.up(self.latent_norm(routed))
        shared = self.shared_out(self._act(self.shared_in(x))) if self.cfg.n_shared else None
        return (routed if shared is None else routed + shared), routed, shared

    def forward(self, x: Tensor, state: None = None) -> tuple[Tensor, None]:
        shape = x.shape
        x = x.reshape(-1, shape[-1])                                           # (N, d)
        _, idx, weights = self.route(x)
        xl = self.down(x) if self.cfg.latent_dim is not None else x            # (N, L)
        out = torch.zeros_like(xl)
        for e in idx.unique().tolist():                                        # loop over experts, tokens batched
            tok, slot = (idx == e).nonzero(as_tuple=True)
            h = self._act(xl[tok] @ self.w_in[e].T) @ self.w_out[e].T          # (n_e, L)
            out.index_add_(0, tok, h * weights[tok, slot, None])
        y, _, _ = self._finish(x, out)
        return y.view(shape), None

    def step(self, x_t: Tensor, state: None = None, obs: dict | None = None) -> tuple[Tensor, None]:
        # x_t: (B, d); gather each token's k experts: (B, k, 2F, L)
        scores, idx, weights = self.route(x_t)
        xl = self.down(x_t) if self.cfg.latent_dim is not None else x_t        # (B, L)
        B, k = idx.shape
        w_in = self.w_in.index_select(0, idx.flatten()).view(B, k, *self.w_in.shape[1:])     # (B, k, 2F, L)
        w_out = self.w_out.index_select(0, idx.flatten()).view(B, k, *self.w_out.shape[1:])  # (B, k, L, F)
        h = self._act((w_in @ xl[:, None, :, None]).squeeze(-1))                # (B, k, F)
        out = ((w_out @ h[..., None]).squeeze(-1) * weights[..., None]).sum(1)  # (B, L)
        y, routed, shared = self._finish(x_t, out)
        if obs is not None:
            share = None
            if shared is not None:
                s, r = shared.norm(dim=-1), routed.norm(dim=-1)
                share = (s / (s + r)).detach()                                 # (B,): shared experts' part of the output
            obs.update(kind="moe", scores=scores.detach(), experts=idx.detach(), weights=weights.detach(),
                       shared_share=share)
        return y, None
