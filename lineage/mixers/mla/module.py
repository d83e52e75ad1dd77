"""Multi-head latent attention (DeepSeek-V2, used by Kimi): the cache holds one compressed latent
per token instead of per-head keys and values; K3 adds a sigmoid gate on the output."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .config import MLAConfig
from ..causal import causal_attention
from ...observed import AttentionObs, LayerObs
from ..rope import rotate
from ..static_cache import StaticCache


def _rows(t: Tensor) -> Tensor:
    """(B, H, T, n) -> (B, H*T, n): every head's queries as the rows of one matrix."""
    B, H, T, n = t.shape
    return t.reshape(B, H * T, n)


@dataclass
class LatentCache:
    c: Tensor       # (B, L, kv_lora_rank): normalised latent; the forward expands it to keys and
                    # values, the step reads it as it is (the absorbed form, MLA._attend)
    k_pe: Tensor    # (B, L, qk_rope_head_dim): the key part shared by all heads

    @property
    def length(self) -> int:
        return self.c.shape[1]

    @property
    def nbytes(self) -> int:
        return self.c.numel() * self.c.element_size() + self.k_pe.numel() * self.k_pe.element_size()

    def to_static(self, capacity: int) -> "StaticLatentCache":
        return StaticLatentCache.grown_from((self.c, self.k_pe), capacity)


@dataclass
class StaticLatentCache(StaticCache):
    c: Tensor       # (B, capacity, kv_lora_rank)
    k_pe: Tensor    # (B, capacity, qk_rope_head_dim)
    pos: Tensor
    length: int
    FIELDS, SEQ = ("c", "k_pe"), 1


class MLA(nn.Module):
    def __init__(self, cfg: MLAConfig):
        super().__init__()
        self.cfg = cfg
        H, dn, dr, dv = cfg.n_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
        if cfg.q_lora_rank is None:
            self.q_proj = nn.Linear(cfg.d_model, H * (dn + dr), bias=False)
        else:  # query LoRA: compress, normalise, expand
            self.q_proj = nn.Sequential(nn.Linear(cfg.d_model, cfg.q_lora_rank, bias=False),
                                        nn.RMSNorm(cfg.q_lora_rank, eps=cfg.norm_eps),
                                        nn.Linear(cfg.q_lora_rank, H * (dn + dr), bias=False))
        self.kv_a = nn.Linear(cfg.d_model, cfg.kv_lora_rank + dr, bias=False)   # -> latent | shared key part
        self.kv_norm = nn.RMSNorm(cfg.kv_lora_rank, eps=cfg.norm_eps)
        self.kv_b = nn.Linear(cfg.kv_lora_rank, H * (dn + dv), bias=False)      # latent -> per-head k_nope | v
        self.o_proj = nn.Linear(H * dv, cfg.d_model, bias=False)
        self.g_proj = nn.Linear(cfg.d_model, H * dv, bias=False) if cfg.output_gate else None

    def _project(self, x: Tensor, pos: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, d), positions pos (T,) -> q (B, H, T, dn + dr), latent c (B, T, r), k_pe (B, T, dr)."""
        cfg = self.cfg
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, cfg.n_heads, -1).transpose(1, 2)          # (B, H, T, dn + dr)
        c, k_pe = self.kv_a(x).split([cfg.kv_lora_rank, cfg.qk_rope_head_dim], dim=-1)
        c = self.kv_norm(c)                                                       # (B, T, kv_lora_rank)
        if cfg.rope:
            q_pe = q[..., cfg.qk_nope_head_dim:]
            if cfg.rope_interleave:     # pairs (0, 1), (2, 3), ... -> halves (0, 2, ...), (1, 3, ...), as rotate pairs them
                q_pe, k_pe = (torch.cat([t[..., 0::2], t[..., 1::2]], -1) for t in (q_pe, k_pe))
            k_pe = rotate(k_pe, pos, cfg.rope_theta, cfg.rope_scaling)
            q = torch.cat([q[..., :cfg.qk_nope_head_dim], rotate(q_pe, pos, cfg.rope_theta, cfg.rope_scaling)], -1)
        return q, c, k_pe

    @property
    def scale(self) -> float:
        """The softmax's scale on q . k: (qk_nope + qk_rope)^-0.5 unless the config sets its own."""
        cfg = self.cfg
        return cfg.softmax_scale or (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim) ** -0.5

    def _append(self, x: Tensor, state: LatentCache | None) -> tuple[Tensor, LatentCache]:
        start = 0 if state is None else state.length
        q, c, k_pe = self._project(x, torch.arange(start, start + x.shape[1], device=x.device))
        if state is not None:
            c, k_pe = torch.cat([state.c, c], dim=1), torch.cat([state.k_pe, k_pe], dim=1)
        return q, LatentCache(c, k_pe)

    def _attend(self, x: Tensor, q: Tensor, cache, visible: Tensor | None = None
                ) -> tuple[Tensor, Tensor, Tensor | None]:
        """The step's attention over the cached latents, in the absorbed form: each head's query is
        taken into the latent space through kv_b's key half (q_nope W_k . c = (q_nope W_k) . c),
        and the weighted sum of latents out through its value half, so the cache is never expanded
        to every head's keys and values. Expanded, a step at 32K cached tokens made and read
        1.5 GB a layer (32 heads x 256 per latent): 23 ms a token on an H200 against 13 at 32
        tokens. visible (T, L) bool, or None for causal over the whole cache. Returns the output,
        the attention and the output gate (None without one)."""
        cfg = self.cfg
        B, H, T, _ = q.shape
        dn, dv, r = cfg.qk_nope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
        L = cache.c.shape[1]
        w = self.kv_b.weight.view(H, dn + dv, r)                                  # per head: k_nope rows, v rows
        q_lat = torch.einsum("bhtn,hnr->bhtr", q[..., :dn], w[:, :dn])            # (B, H, T, r)
        # every head reads the same latents: heads and queries share one matrix's rows, (B, H*T, .),
        # as a (B, 1, L, r) cache broadcast over H would be copied H times by matmul
        scores = (_rows(q_lat) @ cache.c.transpose(1, 2)
                  + _rows(q[..., dn:]) @ cache.k_pe.transpose(1, 2)) * self.scale             # (B, H*T, L)
        scores = scores.view(B, H, T, L)
        if visible is None:
            visible = torch.ones(T, L, dtype=torch.bool, device=q.device).tril(L - T)
        probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)          # (B, H, T, L)
        read = (_rows(probs) @ cache.c).view(B, H, T, r)                           # (B, H, T, r): the latents read
        y = torch.einsum("bhtr,hvr->bthv", read, w[:, dn:]).reshape(B, T, H * dv)  # (B, T, H*dv)
        gate = None
        if self.g_proj is not None:                                               # gated MLA: how much retrieval to keep
            gate = torch.sigmoid(self.g_proj(x))                                  # (B, T, H*dv)
            y = y * gate
        return self.o_proj(y), probs, gate

    def forward(self, x: Tensor, state: LatentCache | None = None) -> tuple[Tensor, LatentCache]:
        """x (B, T, d): the latents expanded to every head's keys and values, attended without a
        (T, L) matrix (causal.py); the step, which shows the weights, goes through _attend."""
        cfg = self.cfg
        q, cache = self._append(x, state)
        B, H, T, _ = q.shape
        L = cache.length
        kv = self.kv_b(cache.c).view(B, L, H, -1).transpose(1, 2)                # (B, H, L, dn + dv)
        k_nope, v = kv.split([cfg.qk_nope_head_dim, cfg.v_head_dim], dim=-1)
        k = torch.cat([k_nope, cache.k_pe[:, None].expand(B, H, L, -1)], dim=-1)  # (B, H, L, dn + dr)
        if cfg.softmax_scale is not None:       # causal_attention scales by (dn + dr)^-0.5: the rest on q
            q = q * (cfg.softmax_scale * q.shape[-1] ** 0.5)
        y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, H * cfg.v_head_dim)
        if self.g_proj is not None:
            y = y * torch.sigmoid(self.g_proj(x))
        return self.o_proj(y), cache

    def step(self, x_t: Tensor, state: LatentCache | None, obs: LayerObs | None = None) -> tuple[Tensor, LatentCache]:
        x = x_t[:, None]
        if isinstance(state, StaticLatentCache):
            return self._static_step(x, state, obs)
        q, cache = self._append(x, state)
        y, probs, gate = self._attend(x, q, cache)
        if obs is not None:
            # attn (B, H, L): each head's weights over the latents of positions 0 .. pos, this
            # token included (L = pos + 1); each row sums to 1
            obs.mixer = AttentionObs(probs[:, :, 0].detach(), cache.length, cache.length, cache.nbytes,
                                     None if gate is None else gate[:, 0].detach())   # gate (B, H*dv)
        return y[:, 0], cache

    def _static_step(self, x: Tensor, cache: StaticLatentCache, obs: LayerObs | None):
        """Write this token's latent at `pos` in place and attend over the written prefix; no
        shape depends on how many tokens came before, so the step can be graph-captured."""
        q, c, k_pe = self._project(x, cache.pos)
        y, probs, gate = self._attend(x, q, cache, cache.write(c, k_pe))
        if obs is not None:   # attention over the whole buffer; the caller trims to length
            obs.mixer = AttentionObs(probs[:, :, 0].detach(), cache.length, cache.length, cache.nbytes,
                                     None if gate is None else gate[:, 0].detach())   # gate (B, H*dv)
        return y[:, 0], cache
