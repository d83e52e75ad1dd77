"""What the panels share: glyph maps of arrays, byte sizes, token and model names, the layer a
panel shows, a history of recent steps' columns. A text form (each panel file has one) is the `lineage snapshot -o
OUT.txt` output and the reference the coloured panel is checked against: shapes and numbers
carry the meaning, no colour needed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lineage.escapes import visible
from lineage.playback.frame import FrameProblem
from lineage.retention import Tally
from lineage.scenario.panels import MEMORY_PANELS, PanelLayers, panel_layers

from ..palette import NEG, POS
from ..widgets.fitting import fold

LEGEND = "legend: @ # * + strong..weak positive, & % = - strong..weak negative, . near zero"


def _glyph(x: float, scale: float) -> str:
    if scale <= 0:
        return "."
    r = min(abs(x) / scale, 1.0)
    level = 1 + int(r * 4.999) if r >= 0.05 else 1
    return (POS if x >= 0 else NEG)[level]


def heat_rows(m: np.ndarray, scale: float | None = None, max_cols: int = 64) -> tuple[list[str], int]:
    """A signed glyph map of a 2-D array, one character per cell, and how many columns each
    character stands for: wider than max_cols, neighbouring columns fold into their largest
    |value| (sign kept), as the heatmap folds them; none is skipped."""
    m = np.asarray(m, dtype=np.float64)
    scale = float(np.abs(m).max()) if scale is None else scale
    step = max(1, -(-m.shape[1] // max(max_cols, 1)))
    if step > 1:
        m = fold(m, 1, step, how="absmax")[0]
    return ["".join(_glyph(v, scale) for v in row) for row in m], step


def ramp_rows(M: np.ndarray, label=str) -> list[str]:
    """(rows, steps) values in [0, 1] as text: a glyph per step (blank 0 to @ 1, ? where a value is
    NaN or infinite, as the heatmap's uncoloured glyphs), then the newest value. `label(r)` names
    row r (its number by default), as the heatmap's row labels do."""
    ramp = " .:-=+*#%@"
    return [f"  {label(c):>3} " + "".join(ramp[min(9, max(0, int(a * 9.999)))] if np.isfinite(a) else "?" for a in row)
            + f"  {row[-1]:.3f}" for c, row in enumerate(M)]


def token_name(i: int) -> str:
    from lineage.tokenizer import ByteTokenizer
    return ByteTokenizer().token_str(i) if 0 <= i < 256 else f"#{i}"


# how a token's text is labelled: what prints as nothing or moves the cursor gets a visible sign
SIGNS = {"\n": "⏎", "\t": "⇥", "\r": "⇤"}
BYTE_ESCAPES = {"\\n": "⏎", "\\t": "⇥", "\\r": "⇤"}   # the byte tokenizer's names of the same bytes


def token_label(text: str, byte_names: bool = True) -> str:
    """A token's text as one visible label: newline ⏎, tab ⇥, a leading space ␣, control
    characters as escapes; the byte tokenizer's names "\\n", "\\t", "\\r" get the same signs."""
    if byte_names and text in BYTE_ESCAPES:
        return BYTE_ESCAPES[text]
    t = "".join(SIGNS.get(c, c) for c in text)
    if t.startswith(" "):
        t = "␣" + t[1:]
    return visible(t, keep_newlines=False) or "∅"


def model_name(info: dict, m: int) -> str:
    return info["models"][m]["name"] if m < len(info.get("models", [])) else f"model {m}"


def finite(x, what: str) -> float:
    """x as a float where a length or a count is made of it (a bar, a tally): FrameProblem if it
    is NaN or infinite (a diverging model, a stranger's trace). Numbers printed as numbers need
    no check: they print as nan."""
    x = float(x)
    if not np.isfinite(x):
        raise FrameProblem(f"{what} is {x}")
    return x


def check_options(cur, p: dict) -> None:
    """FrameProblem where a panel entry names a model, layer or head that is no whole number
    >= 0, or a model the file does not have: a scenario's entries are validated when it loads,
    a trace's come as its header holds them."""
    for key in ("model", "layer", "head"):
        x = p.get(key)
        if x is not None and not (isinstance(x, int) and not isinstance(x, bool) and x >= 0):
            raise FrameProblem(f"the panel's {key} {x!r} is not a whole number >= 0")
    n = len(cur.info.get("models") or ())
    if p.get("model", 0) >= n and n:
        raise FrameProblem(f"the panel asks for model {p['model']}; the file has {n}")


def layers_of(cur, p: dict, kind: str) -> PanelLayers:
    """The layers of model p["model"] a panel of this kind can draw and the one it draws (the
    layer p asks for, else the first): `panel_layers`, as validation and the recorder decide it."""
    m = p.get("model", 0)
    cfg = cur.model_config(m)
    if cfg is None:             # a toy memory: one layer
        return PanelLayers((0,), 0) if kind in MEMORY_PANELS else PanelLayers((), None)
    watch = cur.info["models"][m].get("watch")   # a real checkpoint's frames hold the watched layers only
    return panel_layers(cfg, kind, p.get("layer"), watch)


HISTORY = 96            # steps a history keeps: the widest sweep (widgets/sweep.py), more than any text form


@dataclass(frozen=True, eq=False)
class History:
    """One column per step for steps `first`..i (at most HISTORY of them), None where a frame
    has none: what a sweeping panel draws and its text form prints."""
    first: int
    columns: tuple

    def column(self, j: int) -> np.ndarray:
        c = self.columns[j - self.first] if j >= self.first else None
        if c is None:
            raise FrameProblem(f"step {j + 1} has nothing recorded for this panel")
        return c

    def last(self, n: int) -> list[np.ndarray]:
        """The columns of the last n steps that have one, oldest first."""
        return [c for c in self.columns[-n:] if c is not None]


@dataclass(frozen=True, eq=False)
class HeadSweep:
    """One layer and head of a model over recent steps: the view of the sweeping maps that show
    one head's channels (the decay panel's alpha, the gate panel's output gate)."""
    name: str                  # the model's
    model: int
    layer: int
    layers: tuple              # the layers the picker steps through
    head: int
    heads: int
    step: int
    columns: History           # per step: the head's values, one per channel (or one per head)
    tally: Tally | None = None  # the decay panel's: this step's holding and clearing counts, every head
    tokens: History | None = None   # per step: its token as the readout names it (step_tokens)


def history(i: int, column) -> History:
    """History of column(j) (an array or None) for the steps up to i."""
    first = max(0, i - HISTORY + 1)
    return History(first, tuple(column(j) for j in range(first, i + 1)))


def step_tokens(cur, i: int, m: int) -> History:
    """Each recent step's token as a sweep's readout names it, "'c'@10" (its text and position,
    as the attention panel writes them), None where a frame has no token (a toy memory's)."""
    models = cur.info.get("models") or []
    byte_names = not (m < len(models) and "pretrained" in models[m])

    def name(j):
        t = cur.frame(j).token()
        return None if t is None else f"'{token_label(t.text, byte_names)}'@{t.pos}"
    return history(i, name)


def step_token(tokens: History | None, step: int) -> str:
    """" ('c'@10)": the token of a sweep column's step (0-based), where the history knows it."""
    j = step - tokens.first if tokens is not None else -1
    tok = tokens.columns[j] if tokens is not None and 0 <= j < len(tokens.columns) else None
    return f" ({tok})" if tok else ""
