"""Attention residuals: how much each layer reads from the embedding, each completed block and
the block so far (Kimi K3's depth-wise softmax over earlier layers' outputs)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.style import Style
from rich.text import Text

from .. import palette
from .base import TextPanel
from .common import model_name


@dataclass(frozen=True, eq=False)
class DepthPanelView:
    """The attention-residual weights at one step: column names and rows of (label,
    completed-block weights, partial-sum weight or None)."""
    name: str
    block_size: int
    title: str
    names: list
    rows: list


def prepare(cur, i: int, p: dict, width: int) -> DepthPanelView | None:
    """None for a model without attention residuals."""
    f, info = cur.frame(i), cur.info
    m = p.get("model", 0)
    cfg = cur.model_config(m)
    if cfg is None or cfg.attnres is None:
        return None
    bs = cfg.attnres.block_size
    depth = f.depth(m)
    rows = []                      # (label, completed-block weights, partial-sum weight or None)
    for r in depth.reads:
        # the first read of a block comes before anything was added to it: no partial sum yet
        fresh, w = r.part == "mixer" and r.layer % bs == 0, r.weights
        rows.append((f"L{r.layer} {r.part}", w if fresh else w[:-1], None if fresh else w[-1]))
    if depth.final is not None:
        rows.append(("output", depth.final[:-1], depth.final[-1]))
    n_blocks = max(len(b) for _, b, _ in rows)
    names = ["emb"] + [f"b{k}" for k in range(1, n_blocks)] + ["part"]
    title = (f"depth: {model_name(info, m)} attention residual weights over sources "
             f"(block size {bs}; emb = embedding, bN = completed block N, part = this block so far)")
    return DepthPanelView(model_name(info, m), bs, title, names, rows)


def depth_cells(blocks, partial, n_blocks: int) -> list[float | None]:
    """One row's cells under the column names: block weights, blanks (None), the partial sum."""
    return [float(x) for x in blocks] + [None] * (n_blocks - len(blocks)) + \
        [None if partial is None else float(partial)]


def lines(view: DepthPanelView | None, width: int) -> list[str]:
    if view is None:
        return ["depth: no attention residuals in this model"]
    names, rows = view.names, view.rows
    out = [view.title, "  " + " " * 10 + "".join(f"{nm:>6}" for nm in names)]
    for label, blocks, partial in rows:
        cells = depth_cells(blocks, partial, len(names) - 1)
        out.append(f"  {label:<10}" + "".join(" " * 6 if w is None else f"{w:6.2f}" for w in cells))
    return out


class DepthPanel(TextPanel):
    kind = "depth"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    MIN_INTERVAL = 0.2             # a table of 2L + 1 rows of numbers: 5 redraws a second is plenty
    THEMED = True

    def rich(self, view: DepthPanelView | None) -> Text:
        if view is None:
            return Text("\n".join(lines(None, self.size.width)))
        names, rows, dark = view.names, view.rows, self.dark
        # (headless exports report "standard" but are drawn in full colour)
        few_colours = not self.app.is_headless and self.app.console.color_system in ("standard", "windows")
        # the long title (what the columns mean) goes to the border: every row fits the panel
        self.set_subtitle("emb embedding · bN block N · part block so far")     # whole in a third of 160 columns
        short = f"{view.name} attention residuals, block size {view.block_size}"
        t = Text(short + "\n" + "  " + " " * 10 + "".join(f"{nm:>6}" for nm in names) + "\n")
        for label, blocks, partial in rows:
            # the text panel's cells, each coloured by its weight
            t.append(f"  {label:<10}")
            for w in depth_cells(blocks, partial, len(names) - 1):
                if w is None:
                    t.append(" " * 6)
                    continue
                idx = palette.sequential_index(np.array(round(w, 2)))    # the colour of the number shown
                if few_colours:        # 16 colours turn the cells' greens into one: colour the number
                    # (a step too near the page to read takes the page's text colour)
                    t.append(f"{w:6.2f}", Style(color=palette.ink(int(idx), "sequential", dark), bold=idx >= 5))
                    continue
                t.append(f"{w:6.2f}", Style(color=palette.ink_on(int(idx), dark),
                                            bgcolor=palette.colour(int(idx), "sequential", dark)))
            t.append("\n")
        t.rstrip()                     # no blank line after the last row: a scrolled table ends on it
        return t
