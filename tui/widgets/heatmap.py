"""A heatmap that fills the space it is given, through the line API.

Large matrices draw with half-block cells: '▀' with the upper value as foreground and the lower
one as background, so one terminal cell holds two square pixels. Each value becomes a square of
pixels as large as the widget allows in both directions (fractional: a 32 x 32 state in 62
columns draws most values two pixels wide, a few one), centred in the widget, so a state grows
when its panel is maximised, other panels are hidden or the terminal is larger; a matrix larger
than the widget is sub-sampled (`stride`). Matrices of 8 x 8 or smaller print their values in
cells as large as the room allows. Strips are built once per `set_data` and cached. Without
colour (NO_COLOR) every value becomes a glyph whose shape carries sign and magnitude, and
printed values take one line a row.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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
    otherwise picture column x draws matrix column xs[x] and pixel row p (two per line with
    half blocks) matrix row ys[p]. `zoom` is how many columns a value gets (fractional: a
    32-wide state in 62 columns draws most values two wide, a few one); `stride` and `rstride`
    say how many columns and rows one picture column or pixel row stands for when the matrix
    is larger than the widget."""
    text: bool = False
    cw: int = 1
    ch: int = 1
    zoom: float = 1.0
    stride: int = 1
    rstride: int = 1
    xs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), compare=False, repr=False)
    ys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), compare=False, repr=False)

    @property
    def width(self) -> int:
        """Columns the picture takes (text cells included)."""
        return len(self.xs) * (self.cw if self.text else 1)


def _spread(n: int, size: int) -> np.ndarray:
    """`size` picture positions over n values, each value getting floor or ceil of size / n."""
    return np.arange(size, dtype=np.int64) * n // max(size, 1)


def fit(rows: int, cols: int, width: int, height: int, per: int = 2, whole: bool = False) -> Fit:
    """The largest picture of a rows x cols matrix in width x height cells (per: pixel rows per
    line). A value stays about square: a terminal cell is about twice as tall as wide, so with
    half blocks (per 2) a value is as many pixel rows as columns, with one glyph a line (per 1)
    twice as many columns as lines. `whole`: magnify by whole numbers only (a sweep's time axis)."""
    width, height = max(width, 1), max(height, 1)
    if rows <= 0 or cols <= 0:
        return Fit()
    if rows <= TEXT_MAX and cols <= TEXT_MAX and width // cols >= TEXT_CELL:
        if per == 1:               # no colour: a cell is its number, one line a row
            return Fit(text=True, cw=min(width // cols, TEXT_CELL + 2), ch=1,
                       xs=np.arange(cols), ys=np.arange(rows))
        # square-looking cells, as large as the room allows: width or height, whichever binds
        ch = max(1, min(width // cols // 2, height // rows))
        cw = min(width // cols, max(TEXT_CELL, 2 * ch))
        return Fit(text=True, cw=cw, ch=ch, xs=np.arange(cols), ys=np.arange(rows))
    pixels = per * height
    if cols > width or rows > pixels:
        stride, rstride = max(1, -(-cols // width)), max(1, -(-rows // pixels))
        return Fit(stride=stride, rstride=rstride,
                   xs=np.arange(0, cols, stride), ys=np.arange(0, rows, rstride))
    aspect = 2 // per                      # columns per pixel row of a square
    zy = min(pixels / rows, width / cols / aspect)
    if zy < 1:                             # one glyph a line: not room for square values
        zy, zx = 1.0, min(width / cols, aspect)
    else:
        zx = aspect * zy
    if whole or zx < 1.25:                 # a few doubled columns would read as data
        zx = float(int(zx))
        zy = max(1.0, zx / aspect)
    w, p = min(width, int(cols * zx)), min(pixels, int(rows * zy))
    return Fit(zoom=zx, xs=_spread(cols, w), ys=_spread(rows, p))


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
        self.whole_zoom = False          # magnify by whole numbers only (sweeps: even time columns)
        self._room, self._tallest = None, 0   # the auto height's room, and the most lines it took there

    # -- data -------------------------------------------------------------------------
    def set_marker(self, col: int | None) -> None:
        if col == self.marker:
            return
        had = self.marker is not None
        self.marker = col
        n = self._map_lines()
        if had and col is not None and self._strips and len(self._strips) > n:
            self._strips[n] = self._marker_line()
            self.refresh(Region(0, self._offset()[1] + n, self.size.width, 1))
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
        changed = (old != self.idx)[:, self.fit.xs]                       # (rows, picture columns)
        ox, oy = self._offset()
        for y in range(self._map_lines()):
            ra, rb = self._rows_of_line(y)
            row = changed[ra] | changed[rb] if rb is not None else changed[ra]
            xs = np.flatnonzero(row)
            if not xs.size:
                continue
            self._strips[y] = self._line(y)
            self.refresh(Region(ox + int(xs[0]), oy + y, int(xs[-1] - xs[0] + 1), 1))

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
        return fit(rows, cols, width, height - (self.marker is not None), self._per(), self.whole_zoom)

    def _lines_for(self, f: Fit) -> int:
        if not self.data.size:
            return 0
        if f.text:
            return len(f.ys) * f.ch
        return -(-len(f.ys) // self._per())

    def _offset(self) -> tuple[int, int]:
        """Where the picture starts: centred in the widget (the marker line goes with it)."""
        lines = len(self._strips)
        return max(0, (self.size.width - self.fit.width) // 2), max(0, (self.size.height - lines) // 2)

    def _map_lines(self) -> int:
        return self._lines_for(self.fit)

    def get_content_height(self, container, viewport, width) -> int:
        # auto height: as tall as the widest picture that fits this width and the height cap
        # (never fewer lines than the rows need: a panel of natural height scrolls rather than
        # dropping rows; only a panel of fixed height samples every other row)
        cap = self.max_lines if self.max_lines is not None else max(8, viewport.height - 10)
        cap = max(cap, -(-self.data.shape[0] // self._per()) + (self.marker is not None))
        f = self._fit_for(width, cap)
        lines = max(1, self._lines_for(f)) + (1 if self.marker is not None else 0)
        # never shorter than the tallest picture shown at this width: `t` (S to the one-row
        # error and back) or another layer's shape must not reflow every panel below this one
        room = (width, self.max_lines, viewport.height)
        if room != self._room:
            self._room, self._tallest = room, 0
        self._tallest = max(self._tallest, lines)
        return self._tallest

    def get_content_width(self, container, viewport) -> int:
        return max(1, self.data.shape[1])

    def cell_at(self, x: int, y: int) -> tuple[int, int] | None:
        """The matrix cell drawn at (x, y) of the widget, or None."""
        f = self.fit
        ox, oy = self._offset()
        x, y = x - ox, y - oy
        if f.text:
            x, y = x // f.cw, y // f.ch
        else:
            y = y * self._per()
        if 0 <= x < len(f.xs) and 0 <= y < len(f.ys):
            return int(f.ys[y]), int(f.xs[x])
        return None

    # -- drawing ----------------------------------------------------------------------
    def _colour(self, i: int):
        return palette.colour(i, self.scale)

    def _text_line(self, y: int, base: Style) -> list[tuple[str, Style]]:
        f = self.fit
        r = int(f.ys[y // f.ch])
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
        ys, per = self.fit.ys, self._per()
        lower = y * per + 1
        return int(ys[y * per]), (None if per == 1 or lower >= len(ys) else int(ys[lower]))

    def _block_line(self, y: int, base: Style) -> list[tuple[str, Style]]:
        f, per = self.fit, self._per()
        ra, rb = self._rows_of_line(y)
        cr, cc = self.cursor
        cells = []
        for c in f.xs.tolist():
            top = int(self.idx[ra, c])
            bottom = None if rb is None else int(self.idx[rb, c])
            # a sampled picture marks the cursor on the column (row) that stands for it
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
        ox = max(0, (self.size.width - n) // 2)            # centred, as _offset says
        if ox:
            segs.insert(0, Segment(" " * ox, base))
        # extended to the widget's width once here, so render_line hands out the cached strip
        return Strip(segs, n + ox).crop_extend(0, max(self.size.width, n + ox), base)

    def _marker_line(self) -> Strip:
        w = max(self.size.width, 1)
        if self.marker is None:
            return Strip.blank(w, self.rich_style)
        f = self.fit
        if f.text:
            x = self.marker * f.cw + f.cw // 2
        else:
            x = int(np.searchsorted(f.xs, self.marker))    # the first picture column of that step
        x += max(0, (self.size.width - f.width) // 2)
        return Strip([Segment(" " * x, self.rich_style), Segment("▲ now", self.rich_style + NOW)]).crop_extend(0, w, self.rich_style)

    def _build(self) -> None:
        # no room (hidden, or not laid out yet): nothing drawn. A fit kept from before would index
        # the columns of the data it was made for, and new data may have fewer; the resize that
        # gives the map room builds it again
        self.fit = self._fit_for(self.size.width, self.size.height) if self.size.width and self.size.height else Fit()
        self._strips = [self._line(y) for y in range(self._map_lines())]
        if self.marker is not None:
            self._strips.append(self._marker_line())

    def on_resize(self) -> None:
        self._build()
        self.refresh()

    def render_line(self, y: int) -> Strip:
        # pad with the widget's own style: a None style trips Textual's NO_COLOR filter
        y -= self._offset()[1]
        if not 0 <= y < len(self._strips):
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
