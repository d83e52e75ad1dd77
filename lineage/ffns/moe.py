"""Latent mixture of experts (K3): sigmoid router, top-k routed experts in a narrow latent width,
shared experts at full width on every token.

Real checkpoints' routers are options: Kimi Linear's sigmoid scores with a learned choice bias
(`e_score_correction_bias`), grouped top-k and a routed scaling factor; Qwen3-Next's softmax
scores and a sigmoid gate on its shared expert."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..configs import MoEConfig
from .dense import gated_act
from ..observed import LayerObs, RoutingObs

# a CPU step copies its chosen experts when they are this small in all (a loop over views is
# cheaper only for experts of real checkpoints: Kimi Linear's are 14 MB each in bf16)
GATHER_BYTES = 1 << 20


def _grouped_mm_takes(rows: Tensor, *weights: Tensor) -> bool:
    """torch._grouped_mm (torch >= 2.8) multiplies bf16 on CUDA (Hopper and later) and float32
    or bf16 on the CPU, with every row 16-byte aligned."""
    if not hasattr(torch, "_grouped_mm"):
        return False
    if rows.is_cuda:
        ok = rows.dtype == torch.bfloat16 and torch.cuda.get_device_capability(rows.device)[0] >= 9
    else:
        ok = rows.dtype in (torch.float32, torch.bfloat16)
    return ok and all(n * rows.element_size() % 16 == 0 for w in weights for n in w.shape[1:])


class MoE(nn.Module):
    backend = "reference"       # "triton": the step's experts through kernels.moe_experts (set_backend)

    def __init__(self, cfg: MoEConfig):
        super().__init__()
        self.cfg = cfg
        E, Fe, d = cfg.n_experts, cfg.expert_dim, cfg.d_model
        L = cfg.latent_dim or d
        self.router = nn.Linear(d, E, bias=False)
        if cfg.score_bias:      # shifts which experts are chosen (load balance), never how much they weigh
            self.score_bias = nn.Parameter(torch.zeros(E))
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
            if cfg.shared_gate:
                self.shared_gate = nn.Linear(d, 1, bias=False)

    def _act(self, h: Tensor) -> Tensor:
        return gated_act(h, self.cfg.act, self.cfg.situ_beta, self.cfg.linear_beta)

    def route(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x (N, d) -> scores (N, E) in (0, 1), chosen experts (N, k), their weights (N, k)."""
        cfg = self.cfg
        if cfg.router_fp32:             # at least float32 (never lowering a float64 model)
            wide = torch.promote_types(x.dtype, torch.float32)
            logits = F.linear(x.to(wide), self.router.weight.to(wide))
        else:
            logits = self.router(x)
        scores = logits.softmax(-1) if cfg.router == "softmax" else torch.sigmoid(logits)
        choice = scores + self.score_bias if cfg.score_bias else scores
        if cfg.selection_bias:          # training's balancing bias: it picks experts, never weighs them
            choice = choice + self.expert_bias
        if cfg.n_group > 1:
            choice = self._best_groups(choice)
        idx = choice.topk(cfg.top_k, dim=-1).indices
        top = scores.gather(-1, idx)
        if cfg.norm_topk:
            top = top / top.sum(-1, keepdim=True)                          # sigmoid scores do not sum to 1
        return scores.to(x.dtype), idx, (top * cfg.routed_scale).to(x.dtype)

    def _best_groups(self, choice: Tensor) -> Tensor:
        """Grouped top-k (DeepSeek-V3, Kimi): a group scores the sum of its two best experts; experts
        outside the topk_group best groups cannot be chosen."""
        cfg = self.cfg
        N, E = choice.shape
        grouped = choice.view(N, cfg.n_group, E // cfg.n_group)                  # (N, G, E/G)
        group_score = grouped.topk(min(2, E // cfg.n_group), dim=-1).values.sum(-1)   # (N, G)
        keep = torch.zeros_like(group_score, dtype=torch.bool)
        keep.scatter_(1, group_score.topk(cfg.topk_group, dim=-1).indices, True)
        return grouped.masked_fill(~keep[..., None], float("-inf")).view(N, E)

    def _finish(self, x: Tensor, routed: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        if self.cfg.latent_dim is not None:
            routed = self.up(self.latent_norm(routed))
        shared = self.shared_out(self._act(self.shared_in(x))) if self.cfg.n_shared else None
        if shared is not None and self.cfg.shared_gate:
            shared = shared * torch.sigmoid(self.shared_gate(x))                # (N, d) * (N, 1)
        return (routed if shared is None else routed + shared), routed, shared

    def forward(self, x: Tensor, state: None = None) -> tuple[Tensor, None]:
        shape = x.shape
        x = x.reshape(-1, shape[-1])                                           # (N, d)
        _, idx, weights = self.route(x)
        xl = self.down(x) if self.cfg.latent_dim is not None else x            # (N, L)
        # training on a GPU: every expert on every token, weighted by zero where not chosen. The
        # loop below asks the host which experts were chosen (two syncs an expert); with several
        # trainings sharing one GPU each sync waits for the others' queued work (k3-mini trained at
        # 3.5 s a step). Exact, and for tiny experts the extra FLOPs cost less than the syncs.
        # (a real checkpoint put in training mode keeps the loop: E/k times its FLOPs would not fit)
        dense = self.training and xl.is_cuda and self.cfg.n_experts * xl.shape[0] * self.cfg.expert_dim <= 2**27
        if dense:
            routed = self._routed_dense(xl, idx, weights)
        elif self.training:
            routed = self._routed(xl, idx, weights)
        else:                # inference (a prefill): every token's choices at once, grouped by expert
            routed = self._grouped(xl, idx, weights)
        y, _, _ = self._finish(x, routed)
        return y.view(shape), None

    def _routed(self, xl: Tensor, idx: Tensor, weights: Tensor) -> Tensor:
        """xl (N, L), chosen experts idx (N, k) and their weights -> (N, L): a loop over the
        experts used, each with its tokens batched (its matrices are views, never copies)."""
        out = torch.zeros_like(xl)
        for e in idx.unique().tolist():
            tok, slot = (idx == e).nonzero(as_tuple=True)
            h = self._act(xl[tok] @ self.w_in[e].T) @ self.w_out[e].T          # (n_e, L)
            # a token picks an expert at most once, so tok has no repeats and a plain indexed add
            # is exact; index_add_ took 1 ms a call on two busy CPU threads (7 us on one)
            out[tok] += h * weights[tok, slot, None]
        return out

    def _grouped(self, xl: Tensor, idx: Tensor, weights: Tensor) -> Tensor:
        """As _routed, for many tokens: each token's row once per chosen expert, sorted by expert,
        so that each expert's rows are one contiguous block and its two matmuls one call each:
        one grouped matmul for all experts where torch has it for this dtype (no host sync), else
        a loop over the blocks after one sync for their sizes. Prefilling 1K tokens, the loop over
        `nonzero` per expert cost two syncs an expert: 0.4 s for Kimi Linear's 27 layers."""
        N, k = idx.shape
        flat = idx.flatten()                                                   # (N k,)
        order = flat.argsort(stable=True)
        rows = xl[order // k]                                                  # (N k, L), grouped by expert
        sizes = torch.bincount(flat, minlength=self.cfg.n_experts)             # (E,) rows per expert
        if _grouped_mm_takes(rows, self.w_in, self.w_out):
            ends = sizes.cumsum(0).to(torch.int32)
            h = self._act(torch._grouped_mm(rows, self.w_in.transpose(1, 2), offs=ends))   # (N k, F)
            y = torch._grouped_mm(h, self.w_out.transpose(1, 2), offs=ends)               # (N k, L)
        else:
            y = torch.empty_like(rows)
            lo = 0
            for e, n in enumerate(sizes.tolist()):
                if n:
                    y[lo:lo + n] = self._act(rows[lo:lo + n] @ self.w_in[e].T) @ self.w_out[e].T
                    lo += n
        # back to (token, choice) order by a gather, then each token's k rows weighed and summed in
        # one batched matmul: the scatter (index_put) it replaces took 8% of an 8K prefill on an H200
        back = y.index_select(0, order.argsort()).view(N, k, -1)               # (N, k, L)
        return torch.bmm(weights.unsqueeze(1).to(back.dtype), back).squeeze(1)  # (N, L)

    def _routed_dense(self, xl: Tensor, idx: Tensor, weights: Tensor) -> Tensor:
        """As _routed, without a host sync: all E experts on all N tokens. Costs E/k times the
        FLOPs and an (E, N, F) activation: for training small models only."""
        gate = torch.zeros(xl.shape[0], self.cfg.n_experts, dtype=xl.dtype, device=xl.device)
        gate.scatter_(1, idx, weights.to(gate.dtype))                          # (N, E): 0 where not chosen
        h = self._act(torch.einsum("nl,efl->enf", xl, self.w_in))              # (E, N, F)
        return torch.einsum("enf,elf,ne->nl", h, self.w_out, gate)             # (N, L)

    def step(self, x_t: Tensor, state: None = None, obs: LayerObs | None = None) -> tuple[Tensor, None]:
        # x_t: (B, d); gather each token's k experts: (B, k, 2F, L)
        scores, idx, weights = self.route(x_t)
        xl = self.down(x_t) if self.cfg.latent_dim is not None else x_t        # (B, L)
        B, k = idx.shape
        gathered = B * k * (self.w_in[0].numel() + self.w_out[0].numel()) * self.w_in.element_size()
        if self.backend == "triton" and self.cfg.act in ("silu", "situ"):
            # the chosen experts read where they lie (kernels.moe_step): a captured graph can
            # replay it, and no copy of 8 x 14 MB a layer is written and read again
            from lineage.ops import kernels
            out = kernels.moe_experts(xl, self.w_in, self.w_out, idx, weights, self.cfg.act,
                                      self.cfg.situ_beta, self.cfg.linear_beta)
        elif x_t.is_cuda or gathered <= GATHER_BYTES:
            # on a GPU the step is captured in a CUDA graph (and maybe compiled), which cannot ask
            # the host which experts were chosen: gather their matrices (a copy). On the CPU the
            # copy of small experts costs less than the loop's thirty-odd tiny ops (k3-mini: the
            # loop made its step 1.6x slower, and autoplay with it)
            w_in = self.w_in.index_select(0, idx.flatten()).view(B, k, *self.w_in.shape[1:])     # (B, k, 2F, L)
            w_out = self.w_out.index_select(0, idx.flatten()).view(B, k, *self.w_out.shape[1:])  # (B, k, L, F)
            h = self._act((w_in @ xl[:, None, :, None]).squeeze(-1))                # (B, k, F)
            out = ((w_out @ h[..., None]).squeeze(-1) * weights[..., None]).sum(1)  # (B, L)
        else:
            # on the CPU, large experts: each chosen expert's matrices as views, as forward does
            # (a real checkpoint's gather copied 8 experts x 3 matrices a layer: 40% of a CPU step)
            out = self._routed(xl, idx, weights)
        y, routed, shared = self._finish(x_t, out)
        if obs is not None:
            share = None
            if shared is not None:
                s, r = shared.norm(dim=-1), routed.norm(dim=-1)
                share = (s / (s + r)).detach()                                 # (B,): shared experts' part of the output
            obs.ffn = RoutingObs(scores.detach(), idx.detach(), weights.detach(), share)
        return y, None
