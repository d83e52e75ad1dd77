"""A heatmap that fills the space it is given, through the line API.

Large matrices draw with half-block cells: '▀' with the upper value as foreground and the lower
one as background, so one terminal cell holds two square pixels. Each value becomes a square of
pixels as large as the widget allows in both directions (fractional: a 32 x 32 state in 62
columns draws most values two pixels wide, a few one), centred in the widget, so a state grows
when its panel is maximised, other panels are hidden or the terminal is larger. Matrices of
8 x 8 or smaller print their values in cells as large as the room allows (a sweep's steps
stay a picture, magnified by whole columns). Strips are built once per `set_data` and cached.
Without colour (NO_COLOR) every value becomes a glyph whose shape carries sign and magnitude,
and printed values take one line a row.

A matrix larger than the widget is folded, never sampled: every drawn row (column) stands for
`rfold` (`fold`) neighbouring rows (columns), so every value counts in the picture, and the
map says so where it is read: the axis line ("↓ expert, 2 per row, max shown"), and the tick
labels give the ranges ("0-1" ... "30-31"); those texts are the map's `Axes` (axes.py). How a
block becomes one value is the panel's choice, named on the map (`fitting.fold`): the one that
never loses what the map is read for (routing the max: a chosen expert stays lit; decay the
min: a clearing channel stays dark; a state the largest |value|: a strong entry is not averaged
out by its neighbours' signs). The folded rows stretch to the height the panel has. The cursor
still moves one value at a time, and the panel's legend prints the value under it.

The mouse reads the map too: over a cell, the legend reads that cell instead of the cursor's
(`reading`), until the mouse leaves the map. A terminal cell draws two pixel rows (or a folded
block of several rows and columns), so the mouse names the block, and the value read is the one
the block is drawn with (its max, min or largest |value|, as the map's rule says), exact.
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
from .axes import AXIS, Axes, text_strip
from .fitting import RULES, Fit, fit, fold, folds, pick
from .legend import app_is_dark
from .reading import Reading

CURSOR = {True: Style(color="#ffffff", bold=True), False: Style(color="#000000", bold=True)}   # dark theme, light
NOW = {dark: Style(color=c, bold=True) for dark, c in palette.MARK.items()}   # the "now" caret: the mark
_PLAIN = Style()
_REVERSE = Style(reverse=True)
BLANK = -2                 # a cell drawn as background: the gap a sweep leaves after "now"


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

    @dataclass
    class Hovered(Message):
        """The mouse moved onto another cell of the map (`reading` says which), or off it (None)."""
        heatmap: "Heatmap"
        reading: "Reading | None"

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.data = np.zeros((0, 0))
        self.scale = "diverging"
        self.vmax, self.vmin = 1.0, 0.0
        self.blank: list[int] = []       # matrix columns drawn as background
        self.idx = np.zeros((0, 0), dtype=np.int64)     # the colour steps of the drawn (folded) values
        self.cursor = (0, 0)             # (row, col) of the matrix, whatever the fold
        self._strips: list[Strip] = []   # the axis line(s), the map's lines, the tick line
        self.fit = Fit()
        self.marker: int | None = None   # a column to mark with a caret on the tick line
        self.marker_text = "now"
        self._shown = None               # the colour steps on screen, to send only what changed
        # a height cap for auto height (the panel's share of the screen); None: the viewport's
        self.max_lines: int | None = None
        self.whole_zoom = False          # magnify by whole numbers only (sweeps: even time columns)
        self._room, self._tallest = None, 0   # the auto height's room, and the most lines it took there
        self.axes = Axes()               # what rows and columns are, how their labels read
        self._head, self._gutter = 0, 0  # lines above the map (the rows' name), columns left of it
        self._beside = True              # the rows' name is beside the map (else above it)
        self._ticks: list[str] = []      # the gutter's text beside each map line
        self._hover: tuple[range, range] | None = None   # the matrix block under the mouse
        self._mouse: tuple[int, int, int | None] | None = None   # where it is: x, y, half (block_at)

    # -- data -------------------------------------------------------------------------
    def set_axes(self, rows: str | None, cols: str | None, row_name=str, col_ticks: bool = True,
                 fold: str = "mean") -> None:
        """Name the axes (None: that axis has no label line, e.g. a single row). `row_name(r)`:
        the tick label of matrix row r (default its number). `fold`: how rows or columns
        folded together become one drawn value (fitting.RULES), said on the map."""
        if fold not in RULES:
            raise ValueError(f"fold rule {fold!r}: one of {', '.join(RULES)}")
        new = Axes(rows, cols, row_name, col_ticks, fold)
        if new != self.axes:
            self.axes = new
            self.refresh(layout=True)
            if self._strips:
                self._build()

    def set_marker(self, col: int | None, text: str = "now") -> None:
        if (col, text) == (self.marker, self.marker_text):
            return
        had = self.marker is not None
        self.marker, self.marker_text = col, text
        if had and col is not None and self._strips:
            n = len(self._strips) - 1
            self._strips[n] = self._foot_line()
            self.refresh(Region(0, self._top() + n, self.size.width, 1))
        else:
            self.refresh(layout=True)

    def set_data(self, data: np.ndarray, scale: str = "diverging", vmax: float | None = None,
                 vmin: float = 0.0, blank=()) -> None:
        """`blank`: columns drawn as background (a sweep's gap after "now")."""
        data = np.asarray(data, dtype=np.float64)
        if data.ndim == 1:
            data = data[None, :]
        shape_changed = data.shape != self.data.shape
        self.data, self.scale, self.blank = data, scale, list(blank)
        if scale == "diverging":
            self.vmax = float(np.abs(data).max()) if vmax is None else vmax
        else:
            self.vmax, self.vmin = (1.0 if vmax is None else vmax), vmin
        r, c = self.cursor
        self.cursor = (min(r, max(data.shape[0] - 1, 0)), min(c, max(data.shape[1] - 1, 0)))
        old = self._shown
        if shape_changed or old is None or self.fit.text or not self._strips:
            if shape_changed:
                self.refresh(layout=True)    # the new shape may want another height; resize rebuilds
            self._build()
            self.refresh()
            return
        self.idx = self._index(self.fit)
        self._shown = self.idx.copy()
        if old.shape != self.idx.shape:
            self._build()
            self.refresh()
            return
        # redraw only what changed: per terminal line, the span of cells whose colour step moved
        # (a sweeping map changes one column a step, so little is sent over SSH)
        changed = (old != self.idx)[:, self.fit.xs]                       # (drawn rows, picture columns)
        ox, oy = self._offset()
        for y in range(self._map_lines()):
            ra, rb = self._rows_of_line(y)
            row = changed[ra] | changed[rb] if rb is not None else changed[ra]
            xs = np.flatnonzero(row)
            if not xs.size:
                continue
            self._strips[self._head + y] = self._line(y)
            self.refresh(Region(ox + int(xs[0]), oy + y, int(xs[-1] - xs[0] + 1), 1))

    def _index(self, f: Fit) -> np.ndarray:
        """The colour steps of what is drawn under fit f: the matrix folded by the map's rule."""
        if not self.data.size:
            return np.zeros((0, 0), dtype=np.int64)
        if f.fold == 1 and f.rfold == 1:
            values, empty = self.data, np.zeros(self.data.shape, dtype=bool)
            empty[:, self.blank] = True
        else:
            values, empty = fold(self.data, f.rfold, f.fold, self.blank, self.axes.fold)
        if self.scale == "diverging":
            idx = palette.diverging_index(values, self.vmax)
        else:
            idx = palette.sequential_index(values, self.vmin, self.vmax)
        idx[empty] = BLANK
        return idx

    @property
    def value_under_cursor(self) -> float | None:
        r, c = self.cursor
        if self.data.size == 0:
            return None
        return float(self.data[r, c])

    @property
    def reading(self) -> Reading | None:
        """What the legend reads: the cell the mouse is over while it is on the map (the value
        its block is drawn with), else the keyboard cursor's; None for an empty map."""
        if self.data.size == 0:
            return None
        if self._hover is not None:
            rows, cols = self._hover
            r, c = pick(self.data, rows, cols, self.axes.fold, self.blank)
            return Reading("mouse", r, c, float(self.data[r, c]), rows, cols, self.axes.fold)
        r, c = self.cursor
        return Reading("cursor", r, c, float(self.data[r, c]), range(r, r + 1), range(c, c + 1), self.axes.fold)

    # -- axes -------------------------------------------------------------------------
    def _gutter_texts(self, f: Fit, beside: bool) -> list[str]:
        return self.axes.gutter(f, self._lines_for(f), self.data.shape[0], self._per(), beside)

    def _foot(self) -> int:
        return 1 if self.axes.cols or self.marker is not None else 0

    # -- geometry ---------------------------------------------------------------------
    def _per(self) -> int:
        return 1 if self.app.no_color else 2

    def _fit_for(self, width: int, height: int, fill: bool = True) -> tuple[Fit, bool, int]:
        """(fit, whether the rows' name goes beside the map, gutter columns) for width x height.
        Beside the map the name costs columns, above it a line: whichever folds less, beside
        where both fold alike (a sweep: whichever folds its steps less first). `fill`: the
        height is the widget's (folded rows stretch into it), not one being measured."""
        rows, cols = self.data.shape
        per, foot = self._per(), self._foot()
        best = None
        for beside in (True, False):
            h = height - foot - (0 if beside or not self.axes.rows else 1)
            # the gutter holds the row labels, which say the rows' fold: fold for the height first
            rfold = folds(rows, cols, width, per * max(h, 1))[0]
            probe = Fit(rfold=rfold, ys=np.arange(-(-rows // rfold))) if rows else Fit()
            gutter = self._gutter_width(probe, beside)
            f = fit(rows, cols, width - gutter, h, per, self.whole_zoom, fill)
            gutter = self._gutter_width(f, beside)
            # a sweep's columns are steps: folding two steps into one column would read as one
            cost = (f.fold, f.rfold, 0 if beside else 1) if self.whole_zoom else (f.rfold * f.fold, 0 if beside else 1)
            if best is None or cost < best[0]:
                best = (cost, f, beside, gutter)
            if not self.axes.rows:
                break
        return best[1], best[2], best[3]

    def _gutter_width(self, f: Fit, beside: bool) -> int:
        if not self.axes.rows or not self.data.size:
            return 0
        return max((len(t) for t in self._gutter_texts(f, beside)), default=-1) + 1

    def _lines_for(self, f: Fit) -> int:
        if not self.data.size:
            return 0
        if f.text:
            return len(f.ys) * f.ch
        return -(-len(f.ys) // self._per())

    def _left(self) -> int:
        """Where the gutter starts: the gutter and the picture are centred in the widget."""
        return max(0, (self.size.width - self._gutter - self.fit.width) // 2)

    def _top(self) -> int:
        return max(0, (self.size.height - len(self._strips)) // 2)

    def _offset(self) -> tuple[int, int]:
        """Where the picture starts: centred in the widget, right of its row labels and under
        its axis line."""
        return self._left() + self._gutter, self._top() + self._head

    def _map_lines(self) -> int:
        return self._lines_for(self.fit)

    def get_content_height(self, container, viewport, width) -> int:
        # auto height: as tall as the widest picture that fits this width and the height cap
        # (never fewer lines than the rows need: a panel of natural height scrolls rather than
        # folding rows; only a panel of fixed height folds them)
        extra = (1 if self.axes.rows else 0) + self._foot()
        cap = self.max_lines if self.max_lines is not None else max(8, viewport.height - 10)
        cap = max(cap, -(-self.data.shape[0] // self._per()) + extra)
        f, beside, _ = self._fit_for(width, cap, fill=False)
        lines = max(1, self._lines_for(f)) + len(self.axes.head(f, beside)) + self._foot()
        # never shorter than the tallest picture shown at this width: `t` (S to the one-row
        # error and back) or another layer's shape must not reflow every panel below this one
        room = (width, self.max_lines, viewport.height)
        if room != self._room:
            self._room, self._tallest = room, 0
        self._tallest = max(self._tallest, lines)
        return self._tallest

    def get_content_width(self, container, viewport) -> int:
        return max(1, self.data.shape[1] + self._gutter)

    def cell_at(self, x: int, y: int) -> tuple[int, int] | None:
        """The matrix cell drawn at (x, y) of the widget (a folded block's first), or None."""
        block = self.block_at(x, y, half=0)
        return None if block is None else (block[0].start, block[1].start)

    def block_at(self, x: int, y: int, half: int | None = None) -> tuple[range, range] | None:
        """The matrix rows and columns drawn at (x, y) of the widget, or None off the picture:
        a drawn cell's (rfold x fold of the matrix's), and on a half-block line both its pixels'
        (`half` 0 or 1: the upper or lower pixel's only)."""
        f = self.fit
        ox, oy = self._offset()
        x, y = x - ox, y - oy
        if f.text:
            x, pixels = x // f.cw, [y // f.ch]
        else:
            per = self._per()
            pixels = [y * per + k for k in range(per)] if half is None else [y * per + min(half, per - 1)]
        pixels = [p for p in pixels if 0 <= p < len(f.ys)]
        if not (0 <= x < len(f.xs) and pixels):
            return None
        rows, cols = self.data.shape
        a, b = int(f.ys[pixels[0]]) * f.rfold, min(rows, (int(f.ys[pixels[-1]]) + 1) * f.rfold)
        c = int(f.xs[x]) * f.fold
        return range(a, b), range(c, min(cols, c + f.fold))

    # -- drawing ----------------------------------------------------------------------
    def _zero(self) -> int:
        """The colour step of a zero value on this map's scale."""
        return len(palette.DIVERGING) // 2 if self.scale == "diverging" else 0

    def _colour(self, i: int):
        return palette.colour(i, self.scale, app_is_dark(self.app))

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
        """The drawn rows of line y's upper and lower pixel (None: no lower pixel)."""
        ys, per = self.fit.ys, self._per()
        lower = y * per + 1
        return int(ys[y * per]), (None if per == 1 or lower >= len(ys) else int(ys[lower]))

    def _block_line(self, y: int, base: Style) -> list[tuple[str, Style]]:
        f, per, dark = self.fit, self._per(), app_is_dark(self.app)
        ra, rb = self._rows_of_line(y)
        cr, cc = self.cursor[0] // f.rfold, self.cursor[1] // f.fold     # the drawn cell holding it
        cells = []
        for c in f.xs.tolist():
            top = int(self.idx[ra, c])
            bottom = None if rb is None else int(self.idx[rb, c])
            here = self.has_focus and c == cc and cr in (ra, rb)
            if per == 1:
                cells.append(("X" if here else (" " if top == BLANK else palette.glyph(top, self.scale)),
                              _REVERSE if here else _PLAIN))
            elif here:
                other = bottom if cr == ra else top
                cells.append(("▲" if cr == ra else "▼",
                              CURSOR[dark] + Style(bgcolor=self._colour(other if other not in (None, BLANK) else self._zero()))))
            elif top == BLANK and bottom in (None, BLANK):
                cells.append((" ", base))
            elif top == BLANK:
                cells.append(("▄", palette.half_block(bottom, None, self.scale, dark)))
            elif bottom == BLANK:
                cells.append(("▀", palette.half_block(top, None, self.scale, dark)))
            else:
                cells.append(("▀", palette.half_block(top, bottom, self.scale, dark)))
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
        ox = self._left() + self._gutter                   # centred, as _offset says
        if ox:
            tick = self._ticks[y][: max(0, self._gutter - 1)] if y < len(self._ticks) else ""
            segs.insert(0, Segment(" " * (ox - len(tick) - 1 if tick else ox), base))
            if tick:
                segs.insert(1, Segment(tick + " ", base + AXIS))
        # extended to the widget's width once here, so render_line hands out the cached strip
        return Strip(segs, n + ox).crop_extend(0, max(self.size.width, n + ox), base)

    def _foot_line(self) -> Strip:
        """Under the map: its columns' ticks and name, and the marker (axes.py)."""
        placed = self.axes.foot(self.fit, self._offset()[0], self.size.width, self.data.shape[1],
                                self.marker, self.marker_text, NOW[app_is_dark(self.app)])
        return text_strip(placed, self.size.width, self.rich_style)

    def _build(self) -> None:
        # no room (hidden, or not laid out yet): nothing drawn. A fit kept from before would index
        # the columns of the data it was made for, and new data may have fewer; the resize that
        # gives the map room builds it again
        if self.size.width and self.size.height and self.data.size:
            self.fit, self._beside, self._gutter = self._fit_for(self.size.width, self.size.height)
        else:
            self.fit, self._beside, self._gutter = Fit(), True, 0
        self.idx = self._index(self.fit)
        self._point()
        self._shown = self.idx.copy()
        heads = self.axes.head(self.fit, self._beside) if self.fit.xs.size else []
        self._head = len(heads)
        self._ticks = self._gutter_texts(self.fit, self._beside)
        # the strips' positions depend on how many there are (centred): count them first
        self._strips = [None] * (self._head + self._map_lines() + (self._foot() if self.fit.xs.size else 0))
        left = self._left()
        for k, text in enumerate(heads):      # over the map, moved left where it would be cut
            self._strips[k] = text_strip([(max(0, min(left, self.size.width - len(text))), text, AXIS)],
                                         self.size.width, self.rich_style)
        for y in range(self._map_lines()):
            self._strips[self._head + y] = self._line(y)
        if len(self._strips) > self._head + self._map_lines():
            self._strips[-1] = self._foot_line()

    def on_mount(self) -> None:
        # the caret's colour and the scales follow the theme (a deep orange on a light background)
        self.watch(self.app, "theme", lambda _: self.on_resize(), init=False)

    def on_resize(self) -> None:
        self._build()
        self.refresh()

    def render_line(self, y: int) -> Strip:
        # pad with the widget's own style: a None style trips Textual's NO_COLOR filter
        y -= self._top()
        if not 0 <= y < len(self._strips):
            return Strip.blank(self.size.width, self.rich_style)
        strip = self._strips[y]
        return strip if strip.cell_length == self.size.width else strip.crop_extend(0, self.size.width, self.rich_style)

    # -- cursor -----------------------------------------------------------------------
    def action_move(self, dr: int, dc: int) -> None:
        # one matrix value at a time, folded or not: the legend reads every value exactly
        if self.data.size == 0:
            return
        r, c = self.cursor
        r = max(0, min(self.data.shape[0] - 1, r + dr))
        c = max(0, min(self.data.shape[1] - 1, c + dc))
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

    # -- the mouse reads a cell (the legend says which and its value) -------------------------
    def on_mouse_move(self, event) -> None:
        # a terminal that reports the pointer within a cell says which half-block pixel it is on
        frac = event.pointer_y - event.y
        self._mouse = (event.x, event.y, int(frac * self._per()) if frac > 0 else None)
        self._point()

    def on_leave(self, event) -> None:
        self._mouse = None
        self._point()                    # the legend reads the keyboard cursor again

    def _point(self) -> None:
        """The block under the mouse, found again where the mouse or the picture moved (a
        resize, new data of another shape); the panel is told when it is another."""
        block = None
        if self._mouse is not None and self.data.size:
            x, y, half = self._mouse
            block = self.block_at(x, y, None if self.fit.text else half)
        if block == self._hover:
            return
        self._hover = block
        self.post_message(self.Hovered(self, self.reading if block is not None else None))

    def watch_has_focus(self, focused: bool) -> None:
        # the cursor is drawn on a focused map only. Built in on_focus / on_blur, the lines came
        # before Textual sets has_focus: a map the focus left (tab, a caption's panel) kept its cursor
        super().watch_has_focus(focused)
        self._build()
        self.refresh()
