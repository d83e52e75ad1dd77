"""Block Attention Residuals (K3): each layer reads a learned mixture of earlier depths
instead of the flat running sum."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from . import ops
from .configs import AttnResConfig


class AttnRes(nn.Module):
    """The pseudo-queries and norm gains of every aggregation point of a model.

    Point 2i reads before layer i's mixer, 2i + 1 before its FFN, the last one feeds the output
    norm. The published init is zero (uniform weights); a random model shows more with small
    random queries, so init_std (default d ** -0.5, scores of order 1) is a config choice.
    """

    def __init__(self, cfg: AttnResConfig, d_model: int, n_layers: int):
        super().__init__()
        self.cfg = cfg
        n_points = 2 * n_layers + 1
        std = d_model ** -0.5 if cfg.init_std is None else cfg.init_std
        self.queries = nn.Parameter(torch.randn(n_points, d_model) * std)   # (P, D)
        self.gains = nn.Parameter(torch.ones(n_points, d_model))           # (P, D)

    def aggregate(self, point: int, blocks: list[Tensor], partial: Tensor | None) -> tuple[Tensor, Tensor]:
        """blocks: completed block sums (embedding first), each (..., D); partial: running sum or None.
        Returns h (..., D) and weights (N, ...) over the sources in that order."""
        sources = torch.stack(blocks if partial is None else [*blocks, partial])   # (N, ..., D)
        return ops.attn_res(self.queries[point], sources, self.gains[point], self.cfg.eps)

    def starts_block(self, layer: int) -> bool:
        """At layer % block_size == 0 (not 0: the embedding is already block 0) the partial sum is closed."""
        return layer > 0 and layer % self.cfg.block_size == 0

    def stream(self, x: Tensor) -> "DepthResidual":
        """The residual stream of one forward or step, starting from the embedding x."""
        return DepthResidual(self, x)


class DepthResidual:
    """The residual stream under AttnRes: the completed block sums (the embedding is block 0) and
    the running partial sum of the current block. Each read is the next aggregation point's
    learned mixture of them; each sublayer output adds to the partial sum."""

    def __init__(self, attnres: AttnRes, x: Tensor):
        self.ar, self.blocks, self.partial, self.point = attnres, [x], None, 0

    def read(self) -> tuple[Tensor, Tensor]:
        """h (..., D) and the weights (N, ...) over the sources it mixed."""
        layer = self.point // 2
        if self.point % 2 == 0 and self.ar.starts_block(layer):              # the mixer input of a new block
            self.blocks, self.partial = [*self.blocks, self.partial], None
        h, w = self.ar.aggregate(self.point, self.blocks, self.partial)
        self.point += 1
        return h, w

    def add(self, y: Tensor) -> None:
        self.partial = y if self.partial is None else self.partial + y

    def out(self) -> tuple[Tensor, Tensor]:
        """The final aggregation point, which feeds the output norm (it closes no block)."""
        return self.ar.aggregate(self.point, self.blocks, self.partial)
