"""A heatmap's axes: what its rows and columns are, and the texts that say so around the map.

Beside the map (the gutter) go the rows' name and tick labels, each on the line where its row
begins; above it the rows' name where it does not fit beside; under it the columns' tick labels
at the map's ends with their name between, and the marker's caret ("▲ now"). A folded map says
so in its labels: a drawn row of several matrix rows is labelled with their range ("0-1" ...
"30-31") and the name with how they fold ("2 per row, max shown"). Texts and the columns they
go at, computed from a Fit; the widget (heatmap.py) puts them on its lines.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from .fitting import RULES, Fit, row_ticks, span

AXIS = Style(dim=True)     # axis names and tick labels: read, not looked at
TICK_EVERY = 3             # fewest lines from one row tick to the next on a drawn map, on average,
                           # where rows are under two lines tall (taller ones each get a tick)

Placed = tuple[int, str, Style]    # a text at a column of the line, in a style


@dataclass(frozen=True)
class Axes:
    """`rows`/`cols`: what they are ("key channel"; None: that axis has no label line, e.g. a
    single row). `row_name(r)`: the tick label of matrix row r. `col_ticks`: whether the columns
    get tick labels at their ends (a sweep's get the marker instead). `fold`: how rows or
    columns folded together become one drawn value (fitting.RULES), said on the map."""
    rows: str | None = None
    cols: str | None = None
    row_name: Callable[[int], str] = str
    col_ticks: bool = True
    fold: str = "mean"

    def folded(self, n: int, per: str = "row") -> str:
        """How n rows (columns) fold into one drawn row (column): "2 per row, max shown"."""
        return f"{n} per {per}, {RULES[self.fold]} shown"

    def row_label(self, d: int, f: Fit, n_rows: int) -> str:
        """The tick label of drawn row d: its matrix row, or the range of rows it folds ("0-1")."""
        a = d * f.rfold
        return span(self.row_name(a), self.row_name(min(n_rows, a + f.rfold) - 1))

    def col_label(self, d: int, f: Fit, n_cols: int) -> str:
        a = d * f.fold
        return span(str(a), str(min(n_cols, a + f.fold) - 1))

    def gutter(self, f: Fit, lines: int, n_rows: int, per: int, beside: bool) -> list[str]:
        """The row labels left of each of the map's `lines`: the first and last rows' and rows
        at an even stride between, each on the line where it begins (fitting.row_ticks; every
        row of printed values), with the rows' name before the first (`beside`) and how they
        fold under it. `per`: pixel rows a line."""
        texts = [""] * lines
        if not self.rows or not lines or not len(f.ys):
            return texts
        if f.text:
            mid = (f.ch - 1) // 2
            for d in f.ys.tolist():
                texts[d * f.ch + mid] = self.row_label(d, f, n_rows)
            first = mid
        else:
            # ticks between the first and last rows, so a lit row can be read off the map (expert
            # 14), not counted down from the top; each where its row begins, at an even stride
            for y, d in row_ticks(f.ys, per, TICK_EVERY):
                texts[y] = self.row_label(d, f, n_rows)
            if lines == 1:                        # one line holds every row: their range
                a, b = int(f.ys[0]) * f.rfold, min(n_rows, (int(f.ys[-1]) + 1) * f.rfold) - 1
                texts[0] = span(self.row_name(a), self.row_name(b))
            first = 0
        if beside:
            texts[first] = f"↓ {self.rows} {texts[first]}"
            if f.rfold > 1:
                if lines >= 3 and not texts[1]:
                    texts[1] = f"({self.folded(f.rfold)})"
                else:
                    texts[first] += f" ({self.folded(f.rfold)})"
        return texts

    def head(self, f: Fit, beside: bool) -> list[str]:
        """The rows' name above the map, where it is not beside it."""
        if beside or not self.rows:
            return []
        return [f"↓ {self.rows}" + (f", {self.folded(f.rfold)}" if f.rfold > 1 else "")]

    def foot(self, f: Fit, ox: int, width: int, n_cols: int, marker: int | None, marker_text: str,
             caret: Style) -> list[Placed]:
        """Under a map whose picture starts at column ox of a line `width` wide: the columns'
        tick labels at its ends (every column of printed values) with their name between them,
        and the marker's caret (in style `caret`) with its text."""
        placed = []
        name = (f"→ {self.cols}" + (f" ({self.folded(f.fold, 'column')})" if f.fold > 1 else "")) if self.cols else ""
        right = ox + f.width                     # where the next free column is
        if self.cols and self.col_ticks and len(f.xs):
            if f.text:
                for d in f.xs.tolist():
                    t = self.col_label(d, f, n_cols)
                    placed.append((ox + d * f.cw + (f.cw - len(t)) // 2, t, AXIS))
            else:
                first, last = self.col_label(int(f.xs[0]), f, n_cols), self.col_label(int(f.xs[-1]), f, n_cols)
                placed.append((ox, first, AXIS))
                inner = f.width - len(first) - len(last) - 2
                if len(name) <= inner:            # the name between the ticks, centred
                    placed.append((ox + len(first) + 1 + (inner - len(name)) // 2, name, AXIS))
                    name = ""
                if f.width > len(first) + len(last):
                    placed.append((ox + f.width - len(last), last, AXIS))
        if marker is not None:
            if f.text:
                x = marker * f.cw + f.cw // 2
            else:
                x = int(np.searchsorted(f.xs, marker // f.fold))    # the first picture column of that step
            text, at = f"▲ {marker_text}", ox + x
            if at + len(text) > width:            # no room after the column: the text before the caret
                text = f"{marker_text} ▲"
                at = ox + x - len(text) + 1
            placed = [p for p in placed if p[0] + len(p[1]) < at or p[0] > at + len(text)]
            placed.append((max(at, 0), text, caret))
            if name and at + len(text) + 2 + len(name) > max(width, right):
                # no room after the caret: the name goes before it where it fits, or not at all
                # (the caret's "now, step N" says what the columns are)
                if at - 2 - len(name) >= 0:
                    placed.append((at - 2 - len(name), name, AXIS))
                name = ""
            right = max(right, at + len(text) + 1)
        if name:                                   # after everything else on the line
            end = max([p[0] + len(p[1]) for p in placed], default=ox - 1)
            at = end + 2 if placed else ox
            start = min([p[0] for p in placed], default=ox)
            if at + len(name) > width and start - 2 - len(name) >= 0:
                # no room after the ticks (a few columns zoomed to fill the width): before them,
                # under the row labels, rather than cut at the widget's edge
                at = start - 2 - len(name)
            placed.append((at, name, AXIS))
        return placed


def text_strip(placed: list[Placed], width: int, base: Style) -> Strip:
    """A line of texts at columns (later ones never overwrite earlier ones), `width` wide."""
    w = max(width, 1)
    segs, x = [], 0
    for at, text, style in sorted(placed, key=lambda p: p[0]):
        at = max(at, x + (1 if x else 0))
        if at + len(text) > w:
            text = text[: max(0, w - at)]
        if not text:
            continue
        segs += [Segment(" " * (at - x), base), Segment(text, base + style)]
        x = at + len(text)
    return Strip(segs, x).crop_extend(0, w, base)
