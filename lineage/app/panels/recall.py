"""Every fact written so far, read back with its own key: what each memory still recalls.

One row per key and one column per memory, so a comparison shows both halves side by side
(every row, no scrolling); where the columns do not fit the width, the memories stack.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.style import Style
from rich.text import Text

from .base import TextPanel
from .common import model_name

HEAD = "recall: every fact written so far, read back with its own key"


def recall_table(cur, i: int):
    """(memory names, rows of (key, wanted, [(reads, error) or None per memory]))."""
    f, info = cur.frame(i), cur.info
    names, per_model = [], []
    for m in range(len(info["models"])):
        r = f.recall(m)
        if r is None:
            continue
        names.append(model_name(info, m))
        cells = {}
        for key, got, want in zip(r.keys, r.recall, r.target):
            err = float(np.linalg.norm(got - want))
            if got.size <= 4:
                shown = " ".join(f"{x:.2f}" for x in got)
            else:  # wide values: name the strongest component; the wanted one is in the key column
                shown = f"v{int(np.argmax(got))} {got.max():.2f}"
            cells[int(key)] = (shown, err, int(np.argmax(want)) if want.size > 4 else None)
        per_model.append(cells)
    keys = list(dict.fromkeys(k for cells in per_model for k in cells))
    rows = []
    for k in keys:
        want = next((c[k][2] for c in per_model if k in c), None)
        rows.append((k, want, [c.get(k) for c in per_model]))
    return names, rows


@dataclass(frozen=True, eq=False)
class RecallPanelView:
    names: list                # the memories that keep a fact table
    rows: list                 # (key, wanted value channel or None, [(reads, error, _) or None per memory])


def prepare(cur, i: int, p: dict, width: int) -> RecallPanelView:
    return RecallPanelView(*recall_table(cur, i))


def _key_head(rows) -> str:
    return "key want" if any(w is not None for _, w, _ in rows) else "key"


def _cell(c) -> str:
    return f"{c[0]}  {c[1]:.2f}"


def _columns(names, rows, width: int) -> tuple[int, list[int]]:
    """The key column's width and each memory's: its cells', widened for its name while the
    table still fits `width` (a longer name wraps onto more header rows)."""
    key_w = max([len(_key_head(rows))] + [len(_key(k, w)) for k, w, _ in rows])
    cells = [max([len(_cell(c)) for _, _, cs in rows if (c := cs[j])] + [len("reads, error")])
             for j in range(len(names))]
    share = (width - key_w) // max(len(names), 1) - 3
    return key_w, [max(w, min(len(n), share)) for w, n in zip(cells, names)]


def _name_rows(names, widths, group) -> list[list[str]]:
    """The header rows of a group of columns: each memory's name whole, wrapped at its width
    (a projected slide must name what each column is; a cut name cannot)."""
    import textwrap
    wrapped = {j: textwrap.wrap(names[j], widths[j], break_on_hyphens=False) or [""] for j in group}
    depth = max(len(w) for w in wrapped.values())
    return [[(wrapped[j][r] if r < len(wrapped[j]) else "").ljust(widths[j]) for j in group] for r in range(depth)]


def _key(k, want) -> str:
    return f"k{k}" + (f" v{want}" if want is not None else "")


def lines(view: RecallPanelView, width: int) -> list[str]:
    names, rows = view.names, view.rows
    out = [HEAD]
    if not names:
        return out + ["  (no memory here keeps a fact table)"]
    key_w, widths = _columns(names, rows, width - 2)
    for group in _groups(key_w, widths, width - 2):
        for row in _name_rows(names, widths, group):
            out.append(("  " + " " * key_w + "".join(" | " + cell for cell in row)).rstrip())
        out.append(("  " + _key_head(rows).ljust(key_w) + "".join(" | " + "reads, error".ljust(widths[j])
                                                              for j in group)).rstrip())
        for k, want, cells in rows:
            parts = [" | " + (_cell(cells[j]) if cells[j] else "-").ljust(widths[j]) for j in group]
            out.append("  " + _key(k, want).ljust(key_w) + "".join(parts).rstrip())
    return out


def _groups(key_w: int, widths: list[int], width: int) -> list[list[int]]:
    """All memories side by side when they fit the width, else one after the other."""
    if key_w + sum(3 + w for w in widths) <= width:
        return [list(range(len(widths)))]
    return [[j] for j in range(len(widths))]


# green, amber, red: bright on a dark theme, deep enough to read on a light one
ERROR_COLOURS = {True: ("#5fd75f", "#ffaf00", "#ff5f5f"), False: ("#005f00", "#875f00", "#af0000")}


def error_style(err: float, dark: bool = True) -> Style:
    """Green when the fact reads back (nearly) exact, amber when blurred, red when lost."""
    good, blurred, lost = ERROR_COLOURS[bool(dark)]
    return Style(color=good if err < 0.25 else blurred if err < 0.75 else lost, bold=err >= 0.75)


class RecallPanel(TextPanel):
    kind = "recall"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    DEFAULT_CSS = "RecallPanel { max-height: 100; }"     # every row of every memory, never scrolled
    THEMED = True              # the error colours

    def rich(self, view: RecallPanelView) -> Text:
        names, rows = view.names, view.rows
        if not names:
            return Text("\n".join(lines(view, self.size.width)))
        width = max(20, self.content_region.width or 80)
        key_w, widths = _columns(names, rows, width)
        dim, bar = Style(dim=True), " │ "
        dark = self.dark
        t = Text()
        for n, group in enumerate(_groups(key_w, widths, width)):
            if n:
                t.append("\n")
            for r, row in enumerate(_name_rows(names, widths, group)):
                t.append(("\n" if r else "") + " " * key_w)
                for cell in row:
                    t.append(bar, dim)
                    t.append(cell, Style(bold=True))
            t.append("\n" + _key_head(rows).ljust(key_w), dim)
            for j in group:
                t.append(bar, dim)
                t.append("reads, error".ljust(widths[j]), dim)
            for k, want, cells in rows:
                t.append("\n" + _key(k, want).ljust(key_w))
                for j in group:
                    t.append(bar, dim)
                    c = cells[j]
                    if c is None:
                        t.append("-".ljust(widths[j]))
                        continue
                    shown, err, _ = c
                    t.append(shown + "  ")
                    t.append(f"{err:.2f}", error_style(err, dark))
                    t.append(" " * (widths[j] - len(_cell(c))))
        return t
