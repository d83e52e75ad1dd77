"""A time-by-channel picture that sweeps instead of scrolling.

Column `step % span` holds step `step` (the heatmap marks it with a caret under the map).
Stepping forward rewrites one column, and only the cells whose colour differs from what that
column held a sweep ago are sent: rows that hold steady cost nothing (a scrolling map changes
every cell every step: 14 KB a step at 160 x 50). Jumps rebuild the buffer from the frames.
"""
from __future__ import annotations

import numpy as np


class Sweep:
    def __init__(self):
        self.key = None
        self.last = None
        self.buf = None

    def update(self, key, i: int, column, width: int) -> np.ndarray:
        """column(j) -> 1-D array for step j. Returns the (channels, span) picture for step i."""
        span = max(8, min(96, (width or 52) - 4))
        fresh = self.buf is None or key != self.key or self.buf.shape[1] != span
        if fresh or self.last is None or not (0 < i - self.last <= 2):
            first = column(i)
            self.buf = np.zeros((first.shape[0], span))
            for j in range(max(0, i - span + 1), i + 1):
                self.buf[:, j % span] = column(j) if j != i else first
        else:
            for j in range(self.last + 1, i + 1):
                self.buf[:, j % span] = column(j)
        self.key, self.last = key, i
        return self.buf

    def column_of(self, i: int) -> int:
        return i % self.buf.shape[1]

