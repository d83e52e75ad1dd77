"""A log-log chart of a few series as half-block cells, ticks where their values are.

Both axes are logarithmic: x in decades (1, 10, 100, 1K: a count), y in powers of two (bytes:
1 KiB, 32 KiB, 1 MiB, as `lineage.arithmetic.fmt_bytes` names them). Ticks are chosen at even
powers and laid out on whole rows and columns, so equal steps are equal distances on screen,
and a tick's value is the centre of its row: what is drawn beside a tick has that value (to
half a row, the height of a half block). Drawn here rather than by a plotting library because
a library's tick placement and its line rasterising need not agree (they did not: a constant
line drew half a row below its value).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text


@dataclass(frozen=True)
class Series:
    label: str
    colour: str            # a colour Rich parses ("#d75f00")
    mark: str              # the glyph that stands for the series without colour
    y: object              # y(x) > 0 in data units, or None where the series has no value


@dataclass(frozen=True)
class Axes:
    """Where the chart's values sit: x is log10 of the count, y log2 of the bytes."""
    x0: float              # log10 of the leftmost x
    cols_per_decade: int
    y0: float              # log2 of the value at the centre of the bottom row
    rows_per_step: int
    step: int              # powers of two between y ticks
    rows: int              # plot rows
    cols: int              # plot columns

    def col(self, x: float) -> int:
        """The column whose centre is nearest log10 x."""
        return round((math.log10(x) - self.x0) * self.cols_per_decade)

    def sub_row(self, y: float) -> float:
        """Half rows above the bottom row's lower edge (row r spans 2r .. 2r + 2)."""
        return (math.log2(y) - self.y0) / self.step * self.rows_per_step * 2 + 1


Y_STEPS = (1, 2, 5, 10, 20, 30, 40)       # powers of two between ticks: even powers, 10 a unit
ROWS_PER_TICK = 2                         # at least this many rows from one y tick to the next


def y_ticks(lo: float, hi: float, rows: int) -> tuple[int, int, int, int, int, int]:
    """The y axis for values lo..hi (log2) in at most `rows` rows: (first tick, step, intervals,
    rows an interval, rows under the first tick, rows over the last). Ticks are the multiples of
    the step (powers of two) inside lo..hi, each the centre of its row; rows under and over them
    hold the rest of the values. The finest even step that leaves ROWS_PER_TICK rows an interval
    (else one row, steps of more than a unit last), then as many rows an interval as fit."""
    def layout(step: int, per: int):
        first, last = math.ceil(lo / step) * step, math.floor(hi / step) * step
        if last <= first:                              # fewer than two ticks inside: bracket lo..hi
            first, last = math.floor(lo / step) * step, max(math.ceil(hi / step) * step, first + step)
        row = step / per                               # log2 a row
        under = max(0, math.ceil((first - lo) / row - 0.5))
        over = max(0, math.ceil((hi - last) / row - 0.5))
        n = (last - first) // step
        return (first, step, n, per, under, over), under + n * per + 1 + over

    for units, least in ((False, ROWS_PER_TICK), (False, 1), (True, ROWS_PER_TICK), (True, 1)):
        for step in (s for s in Y_STEPS if (s > 10) == units):
            if layout(step, least)[1] <= rows:
                per = least
                while layout(step, per + 1)[1] <= rows:
                    per += 1
                (first, step, n, per, under, over), used = layout(step, per)
                return first, step, n, per, under, over + rows - used     # the rows left: above the top tick
    return layout(Y_STEPS[-1], 1)[0]


def chart(series: list[Series], x_max: float, vlines: list[float], width: int, height: int,
          y_label, x_label: list[str], no_color: bool = False) -> tuple[Text, Axes]:
    """The chart of `series` over x = 1 .. x_max in width x height cells: y tick labels at the
    left, a line of x tick labels and the x axis's name under the plot (the first of `x_label`
    that fits, else the last cropped). `y_label(exponent)` names 2 ** exponent. Vertical lines
    at `vlines`. Returns the text and its axes."""
    top = math.log10(max(x_max, 10))
    ys = [y for s in series for y in (s.y(1.0), s.y(x_max)) if y]
    lo, hi = (math.log2(min(ys)), math.log2(max(ys))) if ys else (0.0, 10.0)
    rows = max(3, height - 3)                            # less the axis, its labels and its name
    first, step, n, per, under, over = y_ticks(lo, hi, rows)
    total = under + n * per + 1 + over
    # every row a multiple of the step falls on, the rows left over above the data included
    labels = {under + r * per: y_label(first + r * step) for r in range(-(under // per), (total - 1 - under) // per + 1)}
    lw = max(len(t) for t in labels.values())
    cols_per_decade = max(1, int((width - lw - 3) / top))          # whole columns a decade: even ticks
    cols = min(width - lw - 2, math.ceil(top * cols_per_decade) + 1)
    ax = Axes(0.0, cols_per_decade, first - under * step / per, per, step, total, cols)

    # (half rows from the bottom, column) -> series index: half row k is the lower half of row k // 2
    cells: dict[tuple[int, int], int] = {}
    for k, s in enumerate(series):
        prev = None
        for c in range(cols):
            y = s.y(10 ** (c / cols_per_decade))
            if not y:
                prev = None
                continue
            h = math.floor(ax.sub_row(y))
            # a steep line fills the half rows between two columns' values: no gaps
            for hh in (range(min(prev, h) + 1, max(prev, h)) if prev is not None else ()):
                if 0 <= hh < 2 * ax.rows:
                    cells.setdefault((hh, c), k)
            if 0 <= h < 2 * ax.rows:
                cells[(h, c)] = k
            prev = h
    vcols = {ax.col(x) for x in vlines if x >= 1}
    out = Text(no_wrap=True, overflow="crop")
    axis = Style(dim=True)
    for r in range(ax.rows - 1, -1, -1):
        out.append(f"{labels.get(r, ''):>{lw}} " + ("┤" if r in labels else "│"), axis)
        for c in range(cols):
            up, down = cells.get((2 * r + 1, c)), cells.get((2 * r, c))
            if up is None and down is None:
                out.append("│" if c in vcols else " ")
            elif no_color:
                out.append(series[up if up is not None else down].mark)
            elif up is not None and down is not None:
                if up == down:
                    out.append("█", Style(color=series[up].colour))
                else:
                    out.append("▀", Style(color=series[up].colour, bgcolor=series[down].colour))
            elif up is not None:
                out.append("▀", Style(color=series[up].colour))
            else:
                out.append("▄", Style(color=series[down].colour))
        out.append("\n")
    ticks = {d * cols_per_decade: x_tick(d) for d in range(int(top) + 1) if d * cols_per_decade < cols}
    out.append(" " * (lw + 1) + "└" + "".join("┬" if c in ticks else "─" for c in range(cols)) + "\n", axis)
    line = ""
    for c, t in sorted(ticks.items()):
        at = lw + 2 + c - len(t) // 2
        if at > len(line):                     # a label that would touch the last one is left out
            line = line.ljust(at) + t
    out.append(line + "\n", axis)
    name = next((t for t in x_label if len(t) <= cols), x_label[-1][:cols])
    out.append(" " * (lw + 2) + name.center(cols).rstrip())
    return out, ax


def x_tick(decade: int) -> str:
    """10 ** decade as a count: 1, 10, 100, 1K, 10K, 100K, 1M, 10M (K = 1,000)."""
    for unit, d in (("G", 9), ("M", 6), ("K", 3)):
        if decade >= d:
            return f"{10 ** (decade - d)}{unit}"
    return str(10 ** decade)
