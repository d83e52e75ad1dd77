"""A time-by-channel picture that sweeps instead of scrolling.

Column `step % span` holds step `step` (the heatmap marks it with a caret under the map). The
GAP columns after it are blank, so what lies to the right of "now" (the previous sweep's
older steps) never reads as the future; before the first sweep completes, the columns not yet
reached are blank too.
Stepping forward rewrites one column, and only the cells whose colour differs from what that
column held a sweep ago are sent: rows that hold steady cost nothing (a scrolling map changes
every cell every step: 14 KB a step at 160 x 50). Jumps rebuild the buffer from the frames.

A still picture (a slide: nothing moves on it, so a sweep's "now" mid-picture only puzzles) is
drawn `ordered`: the steps oldest to newest, left to right, "now" the last column, and only
the steps there are (`picture`).
"""
from __future__ import annotations

import numpy as np

GAP = 3


class Sweep:
    def __init__(self):
        self.key = None
        self.last = None
        self.buf = None
        self.ordered = False

    def update(self, key, i: int, column, width: int, ordered: bool = False) -> np.ndarray:
        """column(j) -> 1-D array for step j. Returns the (channels, span) picture for step i."""
        span = max(8, min(96, (width or 52) - 4))
        if ordered or self.ordered:            # a still picture, built whole; a sweep resumes afresh
            self.ordered, self.key = ordered, None
            if ordered:
                first = max(0, i - span + 1)
                self.buf = np.zeros((column(i).shape[0], span))
                for j in range(first, i + 1):
                    self.buf[:, j - first] = column(j)
                self.last = i
                return self.buf
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

    def picture(self, i: int) -> tuple[np.ndarray, list[int]]:
        """What a heatmap draws at step i, after `update`: the (channels, columns) picture and
        its blank columns. A still picture of fewer steps than its span is only those steps (its
        blank columns are all after them), so the map magnifies them to its frame: 6 steps
        drawn one column each beside 85 blank ones were a sliver of a slide."""
        blank = self.blank(i)
        if self.ordered and blank:
            return self.buf[:, :self.shown(i)], []
        return self.buf, blank

    def column_of(self, i: int) -> int:
        span = self.buf.shape[1]
        return min(i, span - 1) if self.ordered else i % span

    def step_at(self, col: int) -> int | None:
        """The step column `col` shows now (None: a blank column, the gap or not yet reached)."""
        if self.buf is None or self.last is None or col in self.blank(self.last):
            return None
        span = self.buf.shape[1]
        if self.ordered:
            return max(0, self.last - span + 1) + col
        step = self.last - (self.last - col) % span
        return step if step >= 0 else None

    def shown(self, i: int) -> int:
        """How many steps the picture holds at step i: its columns less the blank ones (a
        title that counted the gap after "now" would claim steps the map does not show)."""
        return self.buf.shape[1] - len(self.blank(i))

    def blank(self, i: int) -> list[int]:
        """Columns to draw empty at step i: the gap after "now", or all not yet reached."""
        span = self.buf.shape[1]
        if i + 1 < span:
            return list(range(i + 1, span))
        if self.ordered:
            return []
        return [(i + d) % span for d in range(1, min(GAP, span - 1) + 1)]
