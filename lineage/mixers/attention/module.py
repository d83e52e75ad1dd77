"""GPT-2's causal softmax attention with a KV cache (grouped KV heads optional).

Options for real checkpoints (Qwen3-Next's gated attention): RMSNorm over each head's q and k,
rotary embedding on the first `rope_dim` channels of a head, and a sigmoid output gate. And the
short causal conv over q|k|v that the delta-rule tiny presets have (`conv_size`): with it a key
carries the token before it, so one layer can find "the token after this key" (MQAR) without
first growing a previous-token head. With a sliding window (Mistral v0.1) each query sees
only the last W positions and the cache keeps only W tokens; RoPE scaling is rope.py's. Gemma 3
sets its own softmax scale (`softmax_scale`) and rotates its windowed layers at their own theta
(`sliding_rope_theta`, applied per layer by AttentionConfig.layer)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .config import AttentionConfig
from ..causal import causal_attention
from ...observed import AttentionObs, LayerObs
from ..rope import rotate
from ..short_conv import ShortConv
from ..static_cache import StaticCache


@dataclass
class KVCache:
    k: Tensor   # (B, Hkv, T, D)
    v: Tensor   # (B, Hkv, T, D)
    conv: Tensor | None = None      # (B, conv_size - 1, (H + 2 Hkv) D): last inputs of the short conv
    start: int = 0                  # position of the first token held: > 0 once a sliding window dropped some
    window: int | None = None       # the sliding window the cache is bounded by (None: it keeps every token)

    @property
    def length(self) -> int:
        return self.k.shape[2]

    @property
    def end(self) -> int:
        """The position the next token takes (tokens seen, dropped ones included)."""
        return self.start + self.length

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()

    def to_static(self, capacity: int) -> "StaticKVCache":
        st = StaticKVCache.grown_from((self.k, self.v), capacity)
        st.conv = None if self.conv is None else self.conv.clone()
        st.start, st.window = self.start, self.window
        return st


@dataclass
class StaticKVCache(StaticCache):
    k: Tensor       # (B, Hkv, capacity, D)
    v: Tensor       # (B, Hkv, capacity, D)
    pos: Tensor
    length: int
    conv: Tensor | None = None      # as KVCache's, updated in place
    # with a sliding window: slot s holds position start + s, and only the last `window` written
    # slots are attended (the buffer itself keeps them all: its capacity is fixed for capture)
    start: int = 0
    window: int | None = None
    FIELDS, SEQ = ("k", "v"), 2

    @property
    def held(self) -> int:
        return self.length if self.window is None else min(self.length, self.window)

    def buffers(self) -> list[Tensor]:
        return super().buffers() + ([self.conv] if self.conv is not None else [])

    # copy_from (StaticCache's) has nothing to do: the static step writes k, v and conv in place


class SoftmaxAttention(nn.Module):
    def __init__(self, cfg: AttentionConfig):
        super().__init__()
        self.cfg = cfg
        H, Hkv, D = cfg.n_heads, cfg.kv_heads, cfg.dim
        if H % Hkv:
            raise ValueError(f"n_heads {H} must be a multiple of n_kv_heads {Hkv}")
        self.c_attn = nn.Linear(cfg.d_model, (H + 2 * Hkv) * D, bias=cfg.bias)   # q | k | v in one matmul, as GPT-2
        self.c_proj = nn.Linear(H * D, cfg.d_model, bias=cfg.bias)
        if cfg.qk_norm:     # per head (Qwen3), or over all heads at once (OLMo-2/3: qk_norm_all_heads)
            self.q_norm = nn.RMSNorm(H * D if cfg.qk_norm_all_heads else D, eps=cfg.norm_eps)
            self.k_norm = nn.RMSNorm(Hkv * D if cfg.qk_norm_all_heads else D, eps=cfg.norm_eps)
        self.g_proj = nn.Linear(cfg.d_model, H * D, bias=cfg.bias) if cfg.output_gate else None
        self.conv = ShortConv((H + 2 * Hkv) * D, cfg.conv_size) if cfg.conv_size else None

    def _qkv(self, x: Tensor, start: int | Tensor = 0,
             conv: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """x (B, T, d) at positions start .. start + T - 1 -> q, k, v, heads first, and the short
        conv's new cache (None without one). `start` may be a (1,) device tensor (a static
        cache's count), which a captured graph reads each replay."""
        B, T, _ = x.shape
        cfg = self.cfg
        H, Hkv, D = cfg.n_heads, cfg.kv_heads, cfg.dim
        qkv = self.c_attn(x)                                   # (B, T, (H + 2 Hkv) D)
        if self.conv is not None:
            qkv, conv = self.conv(qkv, conv)
        q, k, v = qkv.split([H * D, Hkv * D, Hkv * D], dim=-1)
        if cfg.qk_norm and cfg.qk_norm_all_heads:
            q, k = self.q_norm(q), self.k_norm(k)               # (B, T, H*D), (B, T, Hkv*D): one RMS each
        q = q.view(B, T, H, D).transpose(1, 2)                 # (B, H, T, D)
        k = k.view(B, T, Hkv, D).transpose(1, 2)               # (B, Hkv, T, D)
        if cfg.qk_norm and not cfg.qk_norm_all_heads:
            q, k = self.q_norm(q), self.k_norm(k)
        if cfg.rope_dim:
            pos = torch.arange(T, device=x.device) + start
            R = cfg.rope_dim
            q = torch.cat([rotate(q[..., :R], pos, cfg.rope_theta, cfg.rope_scaling), q[..., R:]], dim=-1)
            k = torch.cat([rotate(k[..., :R], pos, cfg.rope_theta, cfg.rope_scaling), k[..., R:]], dim=-1)
        return q, k, v.view(B, T, Hkv, D).transpose(1, 2), conv     # v: (B, Hkv, T, D)

    def _attend(self, q: Tensor, cache: KVCache | StaticKVCache, visible: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """q (B, H, T, D) are the last T positions of the cache (or, with `visible` (T, L), of
        its written prefix). Returns y (B, T, H*D), probs (B, H, T, L). With a sliding window W
        each query sees itself and the W - 1 keys before it."""
        B, H, T, D = q.shape
        G = self.cfg.kv_heads
        k, v = cache.k, cache.v                                 # (B, G, L, D): each KV head serves H / G query heads
        L = k.shape[2]
        # query heads g*H/G .. (g+1)*H/G - 1 read KV head g: as rows of one matrix per KV head,
        # never a copy of the cache per query head (repeat_interleave copied it H / G times a step)
        scale = self.cfg.softmax_scale or D ** -0.5
        scores = (q.reshape(B, G, H // G * T, D) @ k.transpose(-1, -2)).view(B, H, T, L) * scale   # (B, H, T, L)
        if visible is None:
            # query i sits at absolute position L - T + i and may see keys 0 .. L - T + i
            visible = torch.ones(T, L, dtype=torch.bool, device=q.device).tril(L - T)
            if W := self.cfg.sliding_window:        # ... and not keys 0 .. L - T + i - W
                visible = visible & ~torch.ones(T, L, dtype=torch.bool, device=q.device).tril(L - T - W)
        probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
        y = (probs.reshape(B, G, H // G * T, L) @ v).view(B, H, T, D).transpose(1, 2).reshape(B, T, H * D)   # (B, T, H*D)
        return y, probs

    def _append(self, x: Tensor, state: KVCache | None) -> tuple[Tensor, KVCache]:
        q, k, v, conv = self._qkv(x, 0 if state is None else state.end, None if state is None else state.conv)
        if state is not None:
            k, v = torch.cat([state.k, k], dim=2), torch.cat([state.v, v], dim=2)
        return q, KVCache(k, v, conv, 0 if state is None else state.start, self.cfg.sliding_window)

    def _bounded(self, cache: KVCache) -> KVCache:
        """With a sliding window W, only the last W tokens: no later query can see older ones.
        Copied, so the dropped tokens' memory is freed rather than kept under a view."""
        W = self.cfg.sliding_window
        if not W or cache.length <= W:
            return cache
        return KVCache(cache.k[:, :, -W:].clone(), cache.v[:, :, -W:].clone(), cache.conv, cache.end - W, W)

    def forward(self, x: Tensor, state: KVCache | None = None) -> tuple[Tensor, KVCache]:
        # x: (B, T, d_model); the weights are not shown, so no (T, L) matrix is made (causal.py)
        q, cache = self._append(x, state)
        B, H, T, D = q.shape
        rep = H // self.cfg.kv_heads
        k, v = (t.repeat_interleave(rep, dim=1) for t in (cache.k, cache.v))   # (B, H, L, D)
        if self.cfg.softmax_scale is not None:  # causal_attention scales by D^-0.5: the rest on q
            q = q * (self.cfg.softmax_scale * D ** 0.5)
        y = causal_attention(q, k, v, self.cfg.sliding_window).transpose(1, 2).reshape(B, T, H * D)
        return self.c_proj(self._gate(x, y)), self._bounded(cache)

    def _gate(self, x: Tensor, y: Tensor) -> Tensor:
        """Gated attention: how much of each head's retrieval to keep, per channel."""
        return y if self.g_proj is None else y * torch.sigmoid(self.g_proj(x))

    def step(self, x_t: Tensor, state: KVCache | None, obs: LayerObs | None = None) -> tuple[Tensor, KVCache]:
        # x_t: (B, d_model)
        if isinstance(state, StaticKVCache):
            return self._static_step(x_t[:, None], state, obs)
        q, cache = self._append(x_t[:, None], state)
        y, probs = self._attend(q, cache)
        attn = probs[:, :, 0]                                   # (B, H, L): over positions start .. pos
        cache = self._bounded(cache)
        if obs is not None:
            # attn (B, H, pos + 1): each query head's weights over positions 0 .. pos, this token
            # included; each row sums to 1. Positions a sliding window dropped get 0 (length
            # says how many positions the row covers; cache_len counts only the tokens kept)
            start = cache.end - attn.shape[-1]
            if start:
                attn = torch.cat([attn.new_zeros(*attn.shape[:2], start), attn], dim=-1)
            obs.mixer = AttentionObs(attn.detach(), attn.shape[-1], cache.length, cache.nbytes)
        return self.c_proj(self._gate(x_t[:, None], y)[:, 0]), cache

    def _static_step(self, x: Tensor, cache: StaticKVCache, obs: LayerObs | None) -> tuple[Tensor, StaticKVCache]:
        """Write this token's k and v at `pos` in place and attend over the written prefix; no
        shape depends on how many tokens came before, so the step can be graph-captured."""
        q, k, v, conv = self._qkv(x, cache.pos + cache.start, cache.conv)
        visible = cache.write(k, v)                             # (1, capacity); this token's slot is pos - 1
        if W := cache.window:
            visible = visible & (torch.arange(visible.shape[-1], device=visible.device) > cache.pos - 1 - W)
        y, probs = self._attend(q, cache, visible)
        if conv is not None:
            cache.conv.copy_(conv)
        if obs is not None:   # attention over the whole buffer (from position start); the caller trims to length
            attn = probs[:, :, 0]
            if cache.start:
                attn = torch.cat([attn.new_zeros(*attn.shape[:2], cache.start), attn], dim=-1)
            obs.mixer = AttentionObs(attn.detach(), cache.start + cache.length, cache.held, cache.nbytes)
        return self.c_proj(self._gate(x, y)[:, 0]), cache
