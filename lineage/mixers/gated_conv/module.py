"""The gated short convolution (LFM2's conv layers): each channel mixes only the last few tokens.

in_proj makes three parts of d_model channels, B | C | x. The input gate B scales x channel by
channel, a depthwise causal conv sums that product over the last `conv_size` tokens, and the
output gate C scales the sum: y = out_proj(C * conv(B * x)). Nothing older than conv_size tokens
reaches the output, so between tokens the layer holds its last conv_size - 1 conv inputs and no
more; a model of these layers alone has a memory of a few tokens (LFM2 puts softmax attention
layers between them for the rest).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .config import GatedConvConfig
from ..short_conv import ShortConv
from ...observed import LayerObs


@dataclass
class ConvState:
    conv: Tensor                # (B, conv_size - 1, d_model): the last inputs B * x of the conv

    @property
    def nbytes(self) -> int:
        return self.conv.numel() * self.conv.element_size()

    # -- the static form a captured step (lineage.graph_step) updates in place -------------
    def to_static(self, capacity: int) -> "ConvState":
        return ConvState(self.conv.clone())         # a fixed size already: capacity does not matter

    def buffers(self) -> list[Tensor]:
        return [self.conv]

    def copy_from(self, new: "ConvState") -> None:
        if new.conv is not self.conv:
            self.conv.copy_(new.conv)


class GatedConv(nn.Module):
    def __init__(self, cfg: GatedConvConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.in_proj = nn.Linear(d, 3 * d, bias=cfg.bias)                  # B | C | x
        self.conv = ShortConv(d, cfg.conv_size)
        self.conv_bias = nn.Parameter(torch.zeros(d)) if cfg.bias else None
        self.out_proj = nn.Linear(d, d, bias=cfg.bias)

    def _mix(self, x: Tensor, conv_cache: Tensor | None) -> tuple[Tensor, Tensor]:
        """x (B, T, d) -> the layer's output (B, T, d) and the conv's new cache."""
        b, c, v = self.in_proj(x).chunk(3, dim=-1)                           # (B, T, d) each
        y, conv_cache = self.conv(b * v, conv_cache)                         # (B, T, d): the gated input, convolved
        if self.conv_bias is not None:
            y = y + self.conv_bias
        return self.out_proj(c * y), conv_cache

    def forward(self, x: Tensor, state: ConvState | None = None) -> tuple[Tensor, ConvState]:
        y, conv = self._mix(x, None if state is None else state.conv)
        return y, ConvState(conv)

    def step(self, x_t: Tensor, state: ConvState | None, obs: LayerObs | None = None) -> tuple[Tensor, ConvState]:
        """One token, written out as the conv's weighted sum of the cached inputs and this one's, so
        tests compare it with the whole-sequence form. It observes nothing: there is no state
        matrix to draw and no attention row; its cache is counted by lineage memory's accounting."""
        b, c, v = self.in_proj(x_t).chunk(3, dim=-1)                         # (B, d) each
        u = b * v                                                            # (B, d): this token's conv input
        B, d = u.shape
        old = u.new_zeros(B, self.cfg.conv_size - 1, d) if state is None else state.conv
        window = torch.cat([old, u[:, None]], dim=1)                         # (B, conv_size, d), oldest first
        y = (window * self.conv.weight[:, 0].T).sum(1)                       # (B, d): weight (d, 1, size) -> (size, d)
        if self.conv_bias is not None:
            y = y + self.conv_bias
        return self.out_proj(c * y), ConvState(window[:, 1:])
