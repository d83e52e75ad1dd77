"""Where a matrix sits in a heatmap of width x height cells: how large each value is drawn,
whether it prints its numbers, and how it folds when it is larger than the room (each drawn
row or column stands for several, by a rule the map names: `fold`). Pure functions of sizes
and arrays, no Textual.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

TEXT_MAX = 8               # matrices up to this size in both directions may print their values
TEXT_CELL = 8              # columns a printed value needs, with the cursor's brackets: "[+0.12]"


@dataclass(frozen=True)
class Fit:
    """How a (rows, cols) matrix sits in the widget: `text` cells of cw x ch print values;
    otherwise picture column x draws drawn column xs[x] and pixel row p (two per line with half
    blocks) drawn row ys[p]. A drawn column stands for `fold` matrix columns and a drawn row for
    `rfold` rows (1 and 1: the matrix itself) when the matrix is larger than the widget (how:
    `fold`'s rule). `zoom` is how many columns a value gets (fractional: a 32-wide state in 62
    columns draws most values two wide, a few one)."""
    text: bool = False
    cw: int = 1
    ch: int = 1
    zoom: float = 1.0
    fold: int = 1
    rfold: int = 1
    xs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), compare=False, repr=False)
    ys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), compare=False, repr=False)

    @property
    def width(self) -> int:
        """Columns the picture takes (text cells included)."""
        return len(self.xs) * (self.cw if self.text else 1)


def _spread(n: int, size: int) -> np.ndarray:
    """`size` picture positions over n values, each value getting floor or ceil of size / n."""
    return np.arange(size, dtype=np.int64) * n // max(size, 1)


def folds(rows: int, cols: int, width: int, pixels: int) -> tuple[int, int]:
    """(rfold, fold): the fewest matrix rows and columns per drawn one that fit pixels x width."""
    return max(1, -(-rows // max(pixels, 1))), max(1, -(-cols // max(width, 1)))


def fit(rows: int, cols: int, width: int, height: int, per: int = 2, whole: bool = False,
        fill: bool = False) -> Fit:
    """The largest picture of a rows x cols matrix in width x height cells (per: pixel rows per
    line). A value stays about square: a terminal cell is about twice as tall as wide, so with
    half blocks (per 2) a value is as many pixel rows as columns, with one glyph a line (per 1)
    twice as many columns as lines. `whole`: a sweep, whose columns are steps: they magnify by
    whole numbers only, and its rows need not be square. Too large a matrix is folded (each
    drawn row or column stands for rfold or fold of the matrix's).
    `fill`: the height is the widget's own (a panel sharing the screen, maximised), so what
    need not be square (a folded axis, a sweep's rows) stretches to fill it rather than leave
    blank lines; without it (a height still being chosen) such a picture takes what it needs.
    Without colour (per 1) every zoom is whole: each glyph is one value, and a value drawn
    twice beside one drawn once would read as two. A sweep never prints its values: a still
    one of its first few steps (a slide) is a picture of time as it is at every later step,
    magnified to its frame, not a table."""
    width, height = max(width, 1), max(height, 1)
    if rows <= 0 or cols <= 0:
        return Fit()
    if rows <= TEXT_MAX and cols <= TEXT_MAX and width // cols >= TEXT_CELL and not whole:
        if per == 1:               # no colour: a cell is its number, one line a row
            return Fit(text=True, cw=min(width // cols, TEXT_CELL + 2), ch=1,
                       xs=np.arange(cols), ys=np.arange(rows))
        # square-looking cells, as large as the room allows: width or height, whichever binds
        ch = max(1, min(width // cols // 2, height // rows))
        cw = min(width // cols, max(TEXT_CELL, 2 * ch))
        return Fit(text=True, cw=cw, ch=ch, xs=np.arange(cols), ys=np.arange(rows))
    pixels = per * height
    rfold, fold = folds(rows, cols, width, pixels)
    R, C = -(-rows // rfold), -(-cols // fold)           # the drawn (folded) matrix
    aspect = 2 // per                      # columns per pixel row of a square
    zy = min(pixels / R, width / C / aspect)
    if zy < 1:                             # one glyph a line: not room for square values
        zy, zx = 1.0, min(width / C, aspect)
    else:
        zx = aspect * zy
    if rfold > 1 or fold > 1:              # a folded value is not square anyway: fill the width
        zx = width / C
    if whole or zx < 1.25:                 # a few doubled columns would read as data
        zx = float(int(zx))
        zy = max(1.0, zx / aspect)
    if fill and (rfold > 1 or fold > 1 or whole):
        zy = pixels / R                    # rows stretch to the height there is
        if zy < 1.25:                      # a few doubled rows would read as data too
            zy = 1.0
    if per == 1:                           # a glyph is a value: some drawn twice would read as two
        zx, zy = float(max(1, int(zx))), float(max(1, int(zy)))
    w, p = min(width, int(C * zx)), min(pixels, int(R * zy))
    return Fit(zoom=zx, fold=fold, rfold=rfold, xs=_spread(C, w), ys=_spread(R, p))


def row_ticks(ys: np.ndarray, per: int, every: int) -> list[tuple[int, int]]:
    """(line, drawn row) of each row tick of a picture whose pixel row p draws row ys[p] (ys:
    (pixel rows,), non-decreasing, as `fit` spreads them), `per` pixel rows a line: the first
    row, the last, and every s-th between, each on the line where its row begins (the first
    line whose upper pixel it is; a row drawn only as a lower pixel: that line). s is 1 where
    rows are two lines or taller (a map scaled up names every row), else the smallest round
    stride that keeps ticks `every` lines apart on average. (A tick every `every` lines, naming
    whatever row that line began with, skipped rows of a stretched map: "0 1 2 4 5 6 7".) A
    tick closer than two lines to the last one is left out."""
    ys = np.asarray(ys)
    if not len(ys):
        return []
    n, rows = -(-len(ys) // per), int(ys[-1]) + 1
    tall = len(ys) / rows / per                     # lines a row, on average

    def line(d: int) -> int:
        p = int(np.searchsorted(ys, d))             # the row's first pixel
        y = -(-p // per)
        return y if y < n and y * per < len(ys) and ys[y * per] == d else p // per

    s = 1
    if tall < 2:                                    # a round stride: 1 2 4 5 8 10 20 40 50 ...
        s = min(m * 10 ** k for k in range(7) for m in (1, 2, 4, 5, 8) if m * 10 ** k * tall >= every)
    last = line(rows - 1)
    ticks = [(line(d), d) for d in range(0, rows - 1, s)]
    ticks = [t for t in ticks if t[0] == 0 or t[0] <= last - 2 or s == 1]
    return ticks + [(last, rows - 1)] if rows > 1 else ticks


RULES = {"mean": "mean", "max": "max", "min": "min", "absmax": "largest |value|"}


def fold(data: np.ndarray, rfold: int, cfold: int, blank=(), how: str = "mean") -> tuple[np.ndarray, np.ndarray]:
    """Every rfold x cfold block of data (the last blocks may be smaller) as one value, leaving
    out the `blank` columns, and where a block holds only blank columns; both
    (ceil(rows / rfold), ceil(cols / cfold)). `how`: the block's mean, max, min, or the value
    of largest magnitude with its sign (absmax). A map chooses the rule that keeps what it is
    read for: routing the max (a token's expert is never dimmed by an idle neighbour), decay the
    min (a channel that clears is never hidden by one that holds), a state its largest |value|.
    A NaN in a block makes it NaN: a value that is not a number is never folded away."""
    if how not in RULES:
        raise ValueError(f"fold rule {how!r}: one of {', '.join(RULES)}")
    rows, cols = data.shape
    R, C = -(-rows // rfold), -(-cols // cfold)
    keep = np.zeros((R * rfold, C * cfold), dtype=bool)
    keep[:rows, :cols] = True
    keep[:, list(blank)] = False
    vals = np.zeros(keep.shape)
    vals[:rows, :cols] = data

    def blocks(a):                                                     # (R, C, rfold * cfold)
        return a.reshape(R, rfold, C, cfold).transpose(0, 2, 1, 3).reshape(R, C, rfold * cfold)

    v, k = blocks(vals), blocks(keep)
    count = k.sum(axis=2)                                              # (R, C)
    nan = (np.isnan(v) & k).any(axis=2)
    v = np.where(k & ~np.isnan(v), v, 0.0)
    if how == "mean":
        out = v.sum(axis=2) / np.maximum(count, 1)
    elif how == "max":
        out = np.where(k, v, -np.inf).max(axis=2)
    elif how == "min":
        out = np.where(k, v, np.inf).min(axis=2)
    else:
        at = np.where(k, np.abs(v), -1.0).argmax(axis=2)
        out = np.take_along_axis(v, at[..., None], axis=2)[..., 0]
    out = np.where(count == 0, 0.0, out)
    out[nan] = np.nan
    return out, count == 0


def span(first: str, last: str) -> str:
    return first if first == last else f"{first}-{last}"


def pick(data: np.ndarray, rows: range, cols: range, how: str = "mean", blank=()) -> tuple[int, int]:
    """The (row, col) of the block rows x cols whose value the block is drawn with, as `fold`
    draws it: its max, min or largest |value| (a NaN first: fold keeps it visible); a mean is no
    one value, so its first cell. Blank columns are left out where the block has others."""
    if how not in RULES:
        raise ValueError(f"fold rule {how!r}: one of {', '.join(RULES)}")
    cs = [c for c in cols if c not in blank] or list(cols)
    block = data[rows.start:rows.stop][:, cs]                          # (len(rows), len(cs))
    if how == "mean" or block.size == 1:
        at = 0
    elif np.isnan(block).any():
        at = int(np.flatnonzero(np.isnan(block))[0])
    else:
        at = int({"max": np.argmax, "min": np.argmin}.get(how, lambda b: np.argmax(np.abs(b)))(block))
    r, c = divmod(at, block.shape[1])
    return rows.start + r, cs[c]
