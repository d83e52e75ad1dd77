"""What the panels' text forms share: glyph maps of arrays, byte sizes, token and model names,
the layer a panel shows. A text form (each panel file has one) is the `lineage snapshot -o
OUT.txt` output and the reference the coloured panel is checked against: shapes and numbers
carry the meaning, no colour needed.
"""
from __future__ import annotations

import numpy as np

from ..palette import NEG, POS

LEGEND = "legend: @ # * + strong..weak positive, & % = - strong..weak negative, . near zero"


def _glyph(x: float, scale: float) -> str:
    if scale <= 0:
        return "."
    r = min(abs(x) / scale, 1.0)
    level = 1 + int(r * 4.999) if r >= 0.05 else 1
    return (POS if x >= 0 else NEG)[level]


def heat_rows(m: np.ndarray, scale: float | None = None, max_cols: int = 64) -> list[str]:
    """A signed glyph map of a 2-D array, one character per cell (columns sub-sampled if wide)."""
    m = np.asarray(m, dtype=np.float64)
    scale = float(np.abs(m).max()) if scale is None else scale
    step = max(1, -(-m.shape[1] // max_cols))
    return ["".join(_glyph(v, scale) for v in row[::step]) for row in m]


def ramp_rows(M: np.ndarray) -> list[str]:
    """(rows, steps) values in [0, 1] as text: a glyph per step (blank 0 to @ 1), then the newest value."""
    ramp = " .:-=+*#%@"
    return [f"  {c:>3} " + "".join(ramp[min(9, int(a * 9.999))] for a in row) + f"  {row[-1]:.3f}"
            for c, row in enumerate(M)]


def fmt_bytes(n: float) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{int(n)} B"


def token_name(i: int) -> str:
    from lineage.tokenizer import ByteTokenizer
    return ByteTokenizer().token_str(i) if 0 <= i < 256 else f"#{i}"


def model_name(info: dict, m: int) -> str:
    return info["models"][m]["name"] if m < len(info.get("models", [])) else f"model {m}"


def pick_layer(cur, m: int, layer, kinds) -> int | None:
    cfg = cur.model_config(m)
    if cfg is None:             # a toy memory: one layer
        return 0
    if layer is not None:
        return layer
    return next((i for i, k in enumerate(cfg.mixers) if k in kinds), None)

