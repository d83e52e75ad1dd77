"""A heatmap that fills the space it is given, through the line API.

Large matrices draw with half-block cells: '▀' with the upper value as foreground and the lower
one as background, so one terminal cell holds two square pixels. Each value becomes a square of
`zoom` x `zoom` pixels, the largest that fits, so a state grows when its panel is maximised or
other panels are hidden; a matrix wider than the widget is sub-sampled (`stride`). Matrices of
8 x 8 or smaller print their values in the cells when the cells are wide enough for the number.
Strips are built once per `set_data` and cached. Without colour (NO_COLOR) every value becomes a
glyph whose shape carries sign and magnitude.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from .. import palette

CURSOR = Style(color="#ffffff", bold=True)
NOW = Style(color="#ffaf00", bold=True)
_PLAIN = Style()
_REVERSE = Style(reverse=True)
BLANK = -2                 # a cell drawn as background: the gap a sweep leaves after "now"
TEXT_MAX = 8               # matrices up to this size in both directions may print their values
TEXT_CELL = 8              # columns a printed value needs, with the cursor's brackets: "[+0.12]"


@dataclass(frozen=True)
class Fit:
    """How a (rows, cols) matrix sits in the widget: `text` cells of cw x ch print values;
    otherwise each value is zoom x zoom pixels (two pixel rows per line), or every `stride`th
    column when the matrix is wider than the widget."""
    text: bool = False
    cw: int = 1
    ch: int = 1
    zoom: int = 1
    stride: int = 1
    rstride: int = 1          # every rstride-th row, when the rows outnumber the pixel rows


def fit(rows: int, cols: int, width: int, height: int, per: int = 2) -> Fit:
    """The largest picture of a rows x cols matrix in width x height cells (per: pixel rows per line)."""
    width, height = max(width, 1), max(height, 1)
    if 0 < rows <= TEXT_MAX and 0 < cols <= TEXT_MAX and width // cols >= TEXT_CELL:
        cw = min(width // cols, 14)
        # square-looking cells: a terminal cell is about twice as tall as wide
        ch = max(1, min(cw // 2, height // rows))
        return Fit(text=True, cw=cw, ch=ch)
    rstride = max(1, -(-rows // (per * height)))
    if cols > width or rstride > 1:
        return Fit(stride=max(1, -(-cols // width)), rstride=rstride)
    zoom = max(1, min(width // max(cols, 1), per * height // max(rows, 1)))
    return Fit(zoom=zoom)


class Heatmap(Widget, can_focus=True):
    DEFAULT_CSS = """
    Heatmap { height: auto; width: 1fr; }
    Heatmap:focus { background: $boost; }
    """
    # the cursor keys work on the focused map; they are listed in the panel's subtitle and the
    # help, not in the footer, where they would push `? help` and `q quit` off an 80-column screen
    BINDINGS = [Binding("h", "move(0, -1)", "cursor left", show=False),
                Binding("l", "move(0, 1)", "cursor right", show=False),
                Binding("k", "move(-1, 0)", "cursor up", show=False),
                Binding("j", "move(1, 0)", "cursor down", show=False)]

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
        self.fit = Fit()
        self.marker: int | None = None   # a column to mark with a caret on a line under the map
        self._shown = None               # the colour steps on screen, to send only what changed
        # a height cap for auto height (the panel's share of the screen); None: the viewport's
        self.max_lines: int | None = None

    # -- data -------------------------------------------------------------------------
    def set_marker(self, col: int | None) -> None:
        if col == self.marker:
            return
        had = self.marker is not None
        self.marker = col
        n = self._map_lines()
        if had and col is not None and self._strips and len(self._strips) > n:
            self._strips[n] = self._marker_line()
            self.refresh(Region(0, n, self.size.width, 1))
        else:
            self.refresh(layout=True)

    def set_data(self, data: np.ndarray, scale: str = "diverging", vmax: float | None = None,
                 vmin: float = 0.0, blank=()) -> None:
        """`blank`: columns drawn as background (a sweep's gap after "now")."""
        data = np.asarray(data, dtype=np.float64)
        if data.ndim == 1:
            data = data[None, :]
        shape_changed = data.shape != self.data.shape
        self.data, self.scale = data, scale
        if scale == "diverging":
            self.vmax = float(np.abs(data).max()) if vmax is None else vmax
            self.idx = palette.diverging_index(data, self.vmax)
        else:
            self.vmax = 1.0 if vmax is None else vmax
            self.idx = palette.sequential_index(data, vmin, self.vmax)
        if len(blank):
            self.idx[:, list(blank)] = BLANK
        r, c = self.cursor
        self.cursor = (min(r, max(data.shape[0] - 1, 0)), min(c, max(data.shape[1] - 1, 0)))
        old, self._shown = self._shown, self.idx.copy()
        if shape_changed or old is None or self.fit.text or not self._strips:
            if shape_changed:
                self.refresh(layout=True)    # the new shape may want another height; resize rebuilds
            self._build()
            self.refresh()
            return
        # redraw only what changed: per terminal line, the span of cells whose colour step moved
        # (a sweeping map changes one column a step, so little is sent over SSH)
        changed = old != self.idx                                          # (rows, cols)
        f = self.fit
        for y in range(self._map_lines()):
            ra, rb = self._rows_of_line(y)
            row = changed[ra] | changed[rb] if rb is not None else changed[ra]
            cols = np.flatnonzero(row)
            if not cols.size:
                continue
            self._strips[y] = self._line(y)
            x0, x1 = (cols[0] // f.stride, cols[-1] // f.stride + 1) if f.stride > 1 else \
                (cols[0] * f.zoom, (cols[-1] + 1) * f.zoom)
            self.refresh(Region(int(x0), y, int(x1 - x0), 1))

    @property
    def value_under_cursor(self) -> float | None:
        r, c = self.cursor
        if self.data.size == 0:
            return None
        return float(self.data[r, c])

    # -- geometry ---------------------------------------------------------------------
    def _per(self) -> int:
        return 1 if self.app.no_color else 2

    def _fit_for(self, width: int, height: int) -> Fit:
        rows, cols = self.data.shape
        return fit(rows, cols, width, height - (self.marker is not None), self._per())

    def _lines_for(self, f: Fit) -> int:
        rows = self.data.shape[0]
        if not self.data.size:
            return 0
        if f.text:
            return rows * f.ch
        return -(-(-(-rows // f.rstride)) * f.zoom // self._per())

    def _map_lines(self) -> int:
        return self._lines_for(self.fit)

    def get_content_height(self, container, viewport, width) -> int:
        # auto height: as tall as the widest picture that fits this width and the height cap
        # (never fewer lines than the rows need: a panel of natural height scrolls rather than
        # dropping rows; only a panel of fixed height samples every other row)
        cap = self.max_lines if self.max_lines is not None else max(8, viewport.height - 10)
        cap = max(cap, -(-self.data.shape[0] // self._per()) + (self.marker is not None))
        f = self._fit_for(width, cap)
        return max(1, self._lines_for(f)) + (1 if self.marker is not None else 0)

    def get_content_width(self, container, viewport) -> int:
        return max(1, self.data.shape[1])

    def cell_at(self, x: int, y: int) -> tuple[int, int] | None:
        """The matrix cell drawn at (x, y) of the widget, or None."""
        rows, cols = self.data.shape
        f = self.fit
        if f.text:
            r, c = y // f.ch, x // f.cw
        else:
            r = y * self._per() // f.zoom * f.rstride
            c = x // f.zoom if f.stride == 1 else x * f.stride
        return (r, c) if 0 <= r < rows and 0 <= c < cols else None

    # -- drawing ----------------------------------------------------------------------
    def _colour(self, i: int):
        return palette.colour(i, self.scale)

    def _text_line(self, y: int, base: Style) -> list[tuple[str, Style]]:
        f = self.fit
        r = y // f.ch
        middle = y % f.ch == (f.ch - 1) // 2
        cr, cc = self.cursor
        cells = []
        for c in range(self.data.shape[1]):
            i = int(self.idx[r, c])
            if i == BLANK:
                cells.append((" " * f.cw, base))
                continue
            here = self.has_focus and (r, c) == (cr, cc)
            value = f"{self.data[r, c]:+.2f}"
            text = (f"[{value}]" if here else value).center(f.cw) if middle else " " * f.cw
            if self.app.no_color:
                cells.append((text, _REVERSE if here else _PLAIN))
                continue
            bg = self._colour(i)
            r8, g8, b8 = bg.get_truecolor()
            ink = "#000000" if 0.299 * r8 + 0.587 * g8 + 0.114 * b8 > 140 else "#ffffff"
            cells.append((text, Style(color=ink, bgcolor=bg, bold=here)))
        return cells

    def _rows_of_line(self, y: int) -> tuple[int, int | None]:
        """The matrix rows of line y's upper and lower pixel (None: no lower pixel)."""
        f, per = self.fit, self._per()
        pixels = -(-self.idx.shape[0] // f.rstride) * f.zoom     # pixel rows in the picture
        ra = y * per // f.zoom * f.rstride
        lower = y * per + 1
        return ra, (None if per == 1 or lower >= pixels else lower // f.zoom * f.rstride)

    def _block_line(self, y: int, base: Style) -> list[tuple[str, Style]]:
        f, per = self.fit, self._per()
        rows, cols = self.idx.shape
        ra, rb = self._rows_of_line(y)
        cr, cc = self.cursor
        cells = []
        xs = range(0, cols, f.stride) if f.stride > 1 else [c for c in range(cols) for _ in range(f.zoom)]
        for c in xs:
            top = int(self.idx[ra, c])
            bottom = None if rb is None else int(self.idx[rb, c])
            here = self.has_focus and c <= cc < c + f.stride and (ra <= cr < ra + f.rstride or
                                                                  (rb is not None and rb <= cr < rb + f.rstride))
            if per == 1:
                cells.append(("X" if here else (" " if top == BLANK else palette.glyph(top, self.scale)),
                              _REVERSE if here else _PLAIN))
            elif here:
                other = bottom if cr == ra else top
                cells.append(("▲" if cr == ra else "▼",
                              CURSOR + Style(bgcolor=self._colour(other if other not in (None, BLANK) else 6))))
            elif top == BLANK and bottom in (None, BLANK):
                cells.append((" ", base))
            elif top == BLANK:
                cells.append(("▄", palette.half_block(bottom, None, self.scale)))
            elif bottom == BLANK:
                cells.append(("▀", palette.half_block(top, None, self.scale)))
            else:
                cells.append(("▀", palette.half_block(top, bottom, self.scale)))
        return cells

    def _line(self, y: int) -> Strip:
        base = self.rich_style           # computed once a line: it walks the widget's ancestors
        cells = self._text_line(y, base) if self.fit.text else self._block_line(y, base)
        # runs of one style become one segment: one escape sequence instead of one per cell,
        # which is most of what a heatmap line costs over SSH
        segs: list[Segment] = []
        for text, style in cells:
            if segs and segs[-1].style is style:          # cached styles: identity is equality
                segs[-1] = Segment(segs[-1].text + text, style)
            else:
                segs.append(Segment(text, style))
        n = sum(len(t) for t, _ in cells)
        # extended to the widget's width once here, so render_line hands out the cached strip
        return Strip(segs, n).crop_extend(0, max(self.size.width, n), base)

    def _marker_line(self) -> Strip:
        w = max(self.size.width, 1)
        if self.marker is None:
            return Strip.blank(w, self.rich_style)
        f = self.fit
        if f.text:
            x = self.marker * f.cw + f.cw // 2
        else:
            x = self.marker * f.zoom if f.stride == 1 else self.marker // f.stride
        return Strip([Segment(" " * x, self.rich_style), Segment("▲ now", self.rich_style + NOW)]).crop_extend(0, w, self.rich_style)

    def _build(self) -> None:
        if self.size.width and self.size.height:
            self.fit = self._fit_for(self.size.width, self.size.height)
        elif not self.data.size:
            self.fit = Fit()
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
        r = max(0, min(self.data.shape[0] - 1, r + dr))
        c = max(0, min(self.data.shape[1] - 1, c + dc * self.fit.stride))
        self._move_to(r, c)

    def _move_to(self, r: int, c: int) -> None:
        self.cursor = (r, c)
        self._build()
        self.refresh()
        self.post_message(self.CursorMoved(self, r, c, float(self.data[r, c])))

    def on_click(self, event) -> None:
        if self.data.size == 0:
            return
        cell = self.cell_at(event.x, event.y)
        if cell is not None:
            self._move_to(*cell)

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
