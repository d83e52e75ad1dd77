"""The layout the stages of the chunked delta rule share (see ``chunk_delta``)."""
from __future__ import annotations

import triton
import triton.language as tl

BT = 64      # chunk length (tokens)
BC = 16      # sub-block of a chunk: the diagonal blocks of A are BC x BC
NB = BT // BC

GATE_NONE, GATE_HEAD, GATE_CHANNEL = 0, 1, 2
LOG2E = tl.constexpr(1.4426950408889634)


def pow2(n: int, lo: int = 16) -> int:
    """The tile that covers n: the next power of two, at least lo."""
    return max(lo, triton.next_power_of_2(n))
