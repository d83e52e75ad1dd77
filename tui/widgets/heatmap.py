"""A heatmap drawn with half-block cells: two values per terminal cell, through the line API.

Each terminal line shows two rows of the matrix: '▀' with the upper value as foreground and
the lower one as background, so a 32 x 32 state fits in 16 lines with square pixels. Strips
are built once per `set_data` and cached; moving the cursor rebuilds one line. Without colour
(NO_COLOR) every value becomes a glyph whose shape carries sign and magnitude.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.message import Message
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from .. import palette

CURSOR = Style(color="#ffffff", bold=True)
_PLAIN = Style()
_REVERSE = Style(reverse=True)


class Heatmap(Widget, can_focus=True):
    DEFAULT_CSS = """
    Heatmap { height: auto; width: 1fr; }
    Heatmap:focus { background: $boost; }
    """
    BINDINGS = [("h", "move(0, -1)", "cursor left"), ("l", "move(0, 1)", "cursor right"),
                ("k", "move(-1, 0)", "cursor up"), ("j", "move(1, 0)", "cursor down")]

    @dataclass
    class CursorMoved(Message):
        heatmap: "Heatmap"
        row: int
        col: int
        value: float

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.data = np.zeros((0, 0))
        self.scale = "diverging"
        self.vmax = 1.0
        self.idx = np.zeros((0, 0), dtype=np.int64)
        self.cursor = (0, 0)
        self._strips: list[Strip] = []
        self._shown = None          # colour steps on screen, to send only what changed
        self._stride = 1
        self.marker: int | None = None   # a column to mark with a caret on a line under the map

    # -- data -------------------------------------------------------------------------
    def set_marker(self, col: int | None) -> None:
        if col == self.marker:
            return
        self.marker = col
        n = self._map_lines()
        if self._strips and len(self._strips) > n:
            self._strips[n] = self._marker_line()
            self.refresh(Region(0, n, self.size.width, 1))

    def _map_lines(self) -> int:
        return -(-self.data.shape[0] // self._rows_per_line()) if self.data.size else 0

    def _marker_line(self) -> Strip:
        w = max(self.size.width, 1)
        if self.marker is None:
            return Strip.blank(w, self.rich_style)
        x = self.marker // self._stride
        return Strip([Segment(" " * x, self.rich_style), Segment("▲ now", Style(color="#ffd75f", bold=True))]).crop_extend(0, w, self.rich_style)

    def set_data(self, data: np.ndarray, scale: str = "diverging", vmax: float | None = None,
                 vmin: float = 0.0) -> None:
        data = np.asarray(data, dtype=np.float64)
        if data.ndim == 1:
            data = data[None, :]
        self.data, self.scale = data, scale
        if scale == "diverging":
            self.vmax = float(np.abs(data).max()) if vmax is None else vmax
            self.idx = palette.diverging_index(data, self.vmax)
        else:
            self.vmax = 1.0 if vmax is None else vmax
            self.idx = palette.sequential_index(data, vmin, self.vmax)
        r, c = self.cursor
        self.cursor = (min(r, max(data.shape[0] - 1, 0)), min(c, max(data.shape[1] - 1, 0)))
        old = self._shown
        self._shown = self.idx.copy()
        if old is None or old.shape != self.idx.shape or not self._strips:
            self._build()
            self.refresh(layout=old is None or old.shape != self.idx.shape)
            return
        # redraw only what changed: per terminal line, the span of cells whose colour step moved
        # (a scrolling decay map mostly shifts identical colours, so little is sent over SSH)
        per = self._rows_per_line()
        changed = old != self.idx                                          # (rows, cols)
        if per == 2 and changed.shape[0] % 2:
            changed = np.vstack([changed, np.zeros((1, changed.shape[1]), dtype=bool)])
        lines = changed.reshape(-1, per, changed.shape[1]).any(axis=1)     # (lines, cols)
        for y in np.flatnonzero(lines.any(axis=1)):
            cols = np.flatnonzero(lines[y])
            self._strips[y] = self._line(int(y))
            x0, x1 = cols[0] // self._stride, cols[-1] // self._stride
            self.refresh(Region(int(x0), int(y), int(x1 - x0 + 1), 1))

    @property
    def value_under_cursor(self) -> float | None:
        r, c = self.cursor
        if self.data.size == 0:
            return None
        return float(self.data[r, c])

    # -- drawing ----------------------------------------------------------------------
    def _rows_per_line(self) -> int:
        return 1 if self.app.no_color else 2

    def get_content_height(self, container, viewport, width) -> int:
        rows = self.data.shape[0]
        return max(1, -(-rows // self._rows_per_line())) + (1 if self.marker is not None else 0)

    def get_content_width(self, container, viewport) -> int:
        return max(1, self.data.shape[1])

    def _line(self, y: int) -> Strip:
        per = self._rows_per_line()
        rows, cols = self.idx.shape
        r0 = y * per
        cr, cc = self.cursor
        cells = []                                   # (text, style) per cell, merged into runs below
        for c in range(0, cols, self._stride):
            top = int(self.idx[r0, c])
            bottom = int(self.idx[r0 + 1, c]) if per == 2 and r0 + 1 < rows else None
            here = self.has_focus and c <= cc < c + self._stride and cr in (r0, r0 + per - 1)
            if per == 1:
                cells.append(("X" if here else palette.glyph(top, self.scale), _REVERSE if here else _PLAIN))
            elif here:
                other = bottom if cr == r0 else top
                cells.append(("▲" if cr == r0 else "▼",
                              CURSOR + Style(bgcolor=palette.colour(other if other is not None else 6, self.scale))))
            else:
                cells.append(("▀", palette.half_block(top, bottom, self.scale)))
        # runs of one style become one segment: one escape sequence instead of one per cell,
        # which is most of what a heatmap line costs over SSH
        segs: list[Segment] = []
        for text, style in cells:
            if segs and segs[-1].style is style:
                segs[-1] = Segment(segs[-1].text + text, style)
            else:
                segs.append(Segment(text, style))
        # extended to the widget's width once here, so render_line hands out the cached strip
        return Strip(segs, len(cells)).crop_extend(0, max(self.size.width, len(cells)), self.rich_style)

    def _build(self) -> None:
        width = self.size.width or self.data.shape[1] or 1
        self._stride = max(1, -(-self.data.shape[1] // max(width, 1)))
        self._strips = [self._line(y) for y in range(self._map_lines())]
        if self.marker is not None:
            self._strips.append(self._marker_line())

    def on_resize(self) -> None:
        self._build()
        self.refresh()

    def render_line(self, y: int) -> Strip:
        # pad with the widget's own style: a None style trips Textual's NO_COLOR filter
        if y >= len(self._strips):
            return Strip.blank(self.size.width, self.rich_style)
        strip = self._strips[y]
        return strip if strip.cell_length == self.size.width else strip.crop_extend(0, self.size.width, self.rich_style)

    # -- cursor -----------------------------------------------------------------------
    def action_move(self, dr: int, dc: int) -> None:
        if self.data.size == 0:
            return
        r, c = self.cursor
        old_line = r // self._rows_per_line()
        r = max(0, min(self.data.shape[0] - 1, r + dr))
        c = max(0, min(self.data.shape[1] - 1, c + dc * self._stride))
        self.cursor = (r, c)
        for y in {old_line, r // self._rows_per_line()}:
            self._strips[y] = self._line(y)
        self.refresh()
        self.post_message(self.CursorMoved(self, r, c, float(self.data[r, c])))

    def on_click(self, event) -> None:
        if self.data.size == 0:
            return
        r = event.y * self._rows_per_line()
        c = event.x * self._stride
        if r < self.data.shape[0] and c < self.data.shape[1]:
            self.cursor = (r, c)
            self._build()
            self.refresh()
            self.post_message(self.CursorMoved(self, r, c, float(self.data[r, c])))

    def on_focus(self) -> None:
        self._build()
        self.refresh()

    def on_blur(self) -> None:
        self._build()
        self.refresh()


def colour_bar(scale: str, vmax: float, width: int = 26, no_color: bool = False, vmin: float = 0.0):
    """A one-line legend: -vmax .. 0 .. +vmax (diverging) or vmin .. vmax (sequential)."""
    from rich.text import Text
    n = len(palette.DIVERGING if scale == "diverging" else palette.SEQUENTIAL)
    t = Text()
    lo = f"{-vmax:+.2g}" if scale == "diverging" else f"{vmin:.2g}"
    hi = f"{vmax:+.2g}" if scale == "diverging" else f"{vmax:.2g}"
    t.append(lo + " ")
    for i in range(n):
        if no_color:
            t.append(palette.glyph(i, scale) * 2)
        else:
            t.append("██", Style(color=palette.colour(i, scale)))
    t.append(" " + hi)
    return t
