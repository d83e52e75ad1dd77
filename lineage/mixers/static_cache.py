"""A cache of fixed capacity, written in place one token a step: the same tensors every step,
so a step can be captured in a CUDA graph. The MLA latent cache and the softmax KV cache take
this form (their growing caches' `to_static`); the unwritten tail is masked out of attention."""
from __future__ import annotations

import torch
from torch import Tensor


class StaticCache:
    """Subclasses are dataclasses: their tensor fields, named in FIELDS, hold the tokens along
    axis SEQ; then `pos`, (1,) int64 on the device, and `length`, the same count on the host
    (a captured graph cannot read `pos` back)."""
    FIELDS: tuple[str, ...] = ()
    SEQ = 1
    pos: Tensor
    length: int

    @classmethod
    def grown_from(cls, parts: tuple[Tensor, ...], capacity: int):
        """A static cache holding the tokens of a growing cache's tensors, with room up to capacity."""
        L = parts[0].shape[cls.SEQ]
        if L >= capacity:
            raise ValueError(f"cache holds {L} tokens; capacity {capacity} leaves no room")
        bufs = []
        for t in parts:
            buf = t.new_zeros(*t.shape[:cls.SEQ], capacity, *t.shape[cls.SEQ + 1:])
            buf.narrow(cls.SEQ, 0, L).copy_(t)
            bufs.append(buf)
        return cls(*bufs, torch.tensor([L], device=bufs[0].device), L)

    def tensors(self) -> list[Tensor]:
        return [getattr(self, f) for f in self.FIELDS]

    @property
    def held(self) -> int:
        """Tokens the growing cache would hold (all written ones, unless a window drops some)."""
        return self.length

    @property
    def nbytes(self) -> int:
        """Bytes of the tokens written, as the growing cache would hold them."""
        return self.held * sum(t.narrow(self.SEQ, 0, 1).numel() * t.element_size() for t in self.tensors())

    def write(self, *new: Tensor) -> Tensor:
        """Put this token's tensors at `pos` and advance; returns the written slots, (1, capacity)."""
        bufs = self.tensors()
        for buf, t in zip(bufs, new):
            buf.index_copy_(self.SEQ, self.pos, t)
        visible = (torch.arange(bufs[0].shape[self.SEQ], device=self.pos.device) <= self.pos)[None]
        self.pos.add_(1)
        self.length += 1
        return visible

    def buffers(self) -> list[Tensor]:
        return [*self.tensors(), self.pos]

    def copy_from(self, new: "StaticCache") -> None:
        pass                                    # the step wrote this token in place
