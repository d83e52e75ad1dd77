"""Colour scales that survive a 256-colour terminal, and glyphs for when there is no colour.

Every entry is a colour of the xterm 6x6x6 cube (components 00 5f 87 af d7 ff), so quantising
truecolor down to 256 colours maps each step to itself and no two steps merge. Zero sits at a
dark grey: magnitude reads as brightness, sign as hue (blue negative, red/orange positive).
On a light theme the scales turn over: zero sits at a light grey near the page and a value
reads as darker, more saturated ink the larger it is, with the same hues for sign, so a light
slide shows a quiet page where the memory is empty rather than a dark box. Text drawn in a
scale's colours (a bar, a number) keeps to the steps that read on the theme's page (`ink`).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from rich.color import Color
from rich.style import Style

# without colour: glyph ramps, |v| / max in five steps (the text panels use them too)
POS = " .+*#@"        # positive
NEG = " .-=%&"        # the same for negative values

DIVERGING = ["#87d7ff", "#5fafff", "#0087ff", "#005fd7", "#0000af", "#00005f",   # strong .. weak negative
             "#262626",                                                          # zero
             "#5f0000", "#870000", "#d70000", "#ff5f00", "#ffaf00", "#ffd75f"]   # weak .. strong positive
SEQUENTIAL = ["#262626", "#005f5f", "#008787", "#00af87", "#00d787", "#5fff87", "#d7ff87", "#ffffd7"]
# the light theme's: as many steps as the dark ones (the indices are shared), zero near the page
DIVERGING_LIGHT = ["#00005f", "#0000d7", "#005fff", "#5f87ff", "#87afff", "#afd7ff",   # strong .. weak negative
                   "#d7d7d7",                                                          # zero
                   "#ffd7af", "#ffaf87", "#ff875f", "#ff5f00", "#d70000", "#870000"]   # weak .. strong positive
SEQUENTIAL_LIGHT = ["#d7d7d7", "#afd7af", "#87d787", "#5faf87", "#00af87", "#008787", "#005f87", "#00005f"]

_SCALES = {(scale, dark): [Color.parse(c) for c in colours]
           for (scale, dark), colours in {("diverging", True): DIVERGING, ("sequential", True): SEQUENTIAL,
                                          ("diverging", False): DIVERGING_LIGHT,
                                          ("sequential", False): SEQUENTIAL_LIGHT}.items()}
NAN = -1                  # the index of a value that is not a number: drawn in a colour no scale uses
_NAN_STYLE = Color.parse("#ff00ff")
# the one highlight (a text panel's answer a query wants next, the heatmaps' "now" caret):
# amber on a dark page, a deep orange on a light one
MARK = {True: "#ffaf00", False: "#af5f00"}
# the page a theme draws on (textual-dark's and textual-light's background): what text must read against
PAGE = {True: Color.parse("#121212"), False: Color.parse("#e0e0e0")}


def diverging_index(x: np.ndarray, vmax: float) -> np.ndarray:
    """Map values to 0..12 (6 is zero) with a symmetric scale of +-vmax."""
    half = len(DIVERGING) // 2
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)                                                   # inf clips to the scale's ends
    if not np.isfinite(vmax) or vmax <= 0:
        return np.where(nan, NAN, half).astype(np.int64)
    r = np.clip(np.where(nan, 0.0, x) / vmax, -1.0, 1.0)
    steps = np.ceil(np.abs(r) * half - 1e-9).astype(np.int64)          # 0 only for |r| tiny
    steps[np.abs(r) < 0.02] = 0
    return np.where(nan, NAN, half + np.sign(r).astype(np.int64) * steps)


def sequential_index(x: np.ndarray, vmin: float = 0.0, vmax: float = 1.0) -> np.ndarray:
    n = len(SEQUENTIAL) - 1
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    span = vmax - vmin if np.isfinite(vmax - vmin) else 1.0
    r = np.clip((np.where(nan, vmin if np.isfinite(vmin) else 0.0, x) - vmin) / max(span, 1e-12), 0.0, 1.0)
    return np.where(nan, NAN, np.rint(np.nan_to_num(r) * n)).astype(np.int64)


def colours(scale: str, dark: bool = True) -> list[str]:
    """The steps of a scale as colour names, for the theme (`dark`: a dark theme's)."""
    if scale == "diverging":
        return DIVERGING if dark else DIVERGING_LIGHT
    return SEQUENTIAL if dark else SEQUENTIAL_LIGHT


def colour(idx: int, scale: str, dark: bool = True) -> Color:
    if idx < 0:
        return _NAN_STYLE
    return _SCALES["diverging" if scale == "diverging" else "sequential", bool(dark)][idx]


def contrast(a: Color, b: Color) -> float:
    """WCAG's contrast ratio of two colours, 1 (the same) .. 21 (black on white)."""
    def lum(c: Color) -> float:
        lin = [x / 255 for x in c.get_truecolor()]
        lin = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in lin]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def ink_on(idx: int, dark: bool = True) -> str:
    """Black or white: the text of a number printed on sequential step idx (a table cell coloured
    by its value), whichever has the higher WCAG contrast against the step on the theme: a fixed
    split of the scale left white on the dark theme's mid greens (under 3:1)."""
    bg = colour(idx, "sequential", dark)
    return max(("#000000", "#ffffff"), key=lambda c: contrast(Color.parse(c), bg))


def ink(idx: int, scale: str, dark: bool = True) -> Color | None:
    """A step's colour as text on the theme's page, or None where it would barely show there
    (the scale's end nearest the page: dark steps on a dark page, pale ones on a light page);
    such text takes the page's own text colour."""
    c = colour(idx, scale, dark)
    return c if contrast(c, PAGE[bool(dark)]) >= 3.0 else None


def inked(scale: str, dark: bool = True) -> list[int]:
    """The steps of a scale that read as text on the theme's page (`ink` is not None), in order:
    what a bar or a number drawn in a scale's colour picks from."""
    return [i for i in range(len(colours(scale, dark))) if ink(i, scale, dark) is not None]


@lru_cache(maxsize=2048)
def half_block(top: int, bottom: int | None, scale: str, dark: bool = True) -> Style:
    """Style of a '▀' cell showing two values: the top one in the foreground, the bottom one behind."""
    fg = colour(top, scale, dark)
    bg = colour(bottom, scale, dark) if bottom is not None else None
    return Style(color=fg, bgcolor=bg)


def glyph(idx: int, scale: str) -> str:
    """No-colour stand-in for one value: sign and magnitude as a character."""
    if idx < 0:
        return "?"                     # not a number
    if scale == "diverging":
        half = len(DIVERGING) // 2
        level = abs(idx - half)
        if level == 0:
            return "."
        return (POS if idx > half else NEG)[min(5, 1 + (level - 1) * 5 // half)]
    ramp = " .:-=+*#%@"
    return ramp[min(9, idx * 9 // (len(SEQUENTIAL) - 1))]
