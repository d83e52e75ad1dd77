"""GPT-2's causal softmax attention with a KV cache (grouped KV heads optional)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..configs import AttentionConfig


@dataclass
class KVCache:
    k: Tensor   # (B, Hkv, T, D)
    v: Tensor   # (B, Hkv, T, D)

    @property
    def length(self) -> int:
        return self.k.shape[2]

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()

    def to_static(self, capacity: int):
        raise ValueError("KVCache has no static form (softmax KV caches are not supported yet)")


class SoftmaxAttention(nn.Module):
    def __init__(self, cfg: AttentionConfig):
        super().__init__()
        self.cfg = cfg
        H, Hkv, D = cfg.n_heads, cfg.kv_heads, cfg.dim
        if H % Hkv:
            raise ValueError(f"n_heads {H} must be a multiple of n_kv_heads {Hkv}")
        self.c_attn = nn.Linear(cfg.d_model, (H + 2 * Hkv) * D, bias=cfg.bias)   # q | k | v in one matmul, as GPT-2
        self.c_proj = nn.Linear(H * D, cfg.d_model, bias=cfg.bias)

    def _qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        B, T, _ = x.shape
        H, Hkv, D = self.cfg.n_heads, self.cfg.kv_heads, self.cfg.dim
        q, k, v = self.c_attn(x).split([H * D, Hkv * D, Hkv * D], dim=-1)
        return (q.view(B, T, H, D).transpose(1, 2),            # (B, H, T, D)
                k.view(B, T, Hkv, D).transpose(1, 2),          # (B, Hkv, T, D)
                v.view(B, T, Hkv, D).transpose(1, 2))

    def _attend(self, q: Tensor, cache: KVCache) -> tuple[Tensor, Tensor]:
        """q (B, H, T, D) are the last T positions of the cache. Returns y (B, T, H*D), probs (B, H, T, L)."""
        B, H, T, D = q.shape
        rep = H // self.cfg.kv_heads
        k = cache.k.repeat_interleave(rep, dim=1)              # (B, H, L, D): each KV head serves `rep` query heads
        v = cache.v.repeat_interleave(rep, dim=1)
        L = k.shape[2]
        scores = (q @ k.transpose(-1, -2)) * D ** -0.5         # (B, H, T, L)
        # query i sits at absolute position L - T + i and may see keys 0 .. L - T + i
        visible = torch.ones(T, L, dtype=torch.bool, device=q.device).tril(L - T)
        probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
        y = (probs @ v).transpose(1, 2).reshape(B, T, H * D)   # (B, T, H*D)
        return y, probs

    def _append(self, x: Tensor, state: KVCache | None) -> tuple[Tensor, KVCache]:
        q, k, v = self._qkv(x)
        if state is not None:
            k, v = torch.cat([state.k, k], dim=2), torch.cat([state.v, v], dim=2)
        return q, KVCache(k, v)

    def forward(self, x: Tensor, state: KVCache | None = None) -> tuple[Tensor, KVCache]:
        # x: (B, T, d_model)
        q, cache = self._append(x, state)
        y, _ = self._attend(q, cache)
        return self.c_proj(y), cache

    def step(self, x_t: Tensor, state: KVCache | None, obs: dict | None = None) -> tuple[Tensor, KVCache]:
        # x_t: (B, d_model)
        q, cache = self._append(x_t[:, None], state)
        y, probs = self._attend(q, cache)
        if obs is not None:
            obs.update(kind="softmax", attn=probs[:, :, 0].detach(),          # (B, H, L)
                       cache_len=cache.length, cache_bytes=cache.nbytes)
        return self.c_proj(y[:, 0]), cache
