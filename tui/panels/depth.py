"""Attention residuals: how much each layer reads from the embedding, each completed block and
the block so far (Kimi K3's depth-wise softmax over earlier layers' outputs)."""
from __future__ import annotations

import numpy as np
from rich.style import Style
from rich.text import Text

from .. import palette
from .base import TextPanel
from .common import model_name


def depth_table(cur, i: int, p: dict):
    """The attention-residual weights at step i as (title line, column names, rows of (label,
    completed-block weights, partial-sum weight or None)); None for a model without them."""
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
    return title, names, rows


def depth_cells(blocks, partial, n_blocks: int) -> list[float | None]:
    """One row's cells under the column names: block weights, blanks (None), the partial sum."""
    return [float(x) for x in blocks] + [None] * (n_blocks - len(blocks)) + \
        [None if partial is None else float(partial)]


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    table = depth_table(cur, i, p)
    if table is None:
        return ["depth: no attention residuals in this model"]
    title, names, rows = table
    lines = [title, "  " + " " * 10 + "".join(f"{nm:>6}" for nm in names)]
    for label, blocks, partial in rows:
        cells = depth_cells(blocks, partial, len(names) - 1)
        lines.append(f"  {label:<10}" + "".join(" " * 6 if w is None else f"{w:6.2f}" for w in cells))
    return lines


class DepthPanel(TextPanel):
    kind = "depth"
    text_form = staticmethod(text_form)
    MIN_INTERVAL = 0.2             # a table of 2L + 1 rows of numbers: 5 redraws a second is plenty

    def rich(self, cursor, i: int) -> Text:
        table = depth_table(cursor, i, self.options)
        if table is None:
            return Text("\n".join(text_form(cursor, i, self.options, self.size.width)))
        title, names, rows = table
        # (headless exports report "standard" but are drawn in full colour)
        few_colours = not self.app.is_headless and self.app.console.color_system in ("standard", "windows")
        # the long title (what the columns mean) goes to the border: every row fits the panel
        self.set_subtitle("emb embedding · bN block N · part this block so far")
        m = self.options.get("model", 0)
        bs = cursor.model_config(m).attnres.block_size
        short = f"{model_name(cursor.info, m)} attention residuals, block size {bs}"
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
                    t.append(f"{w:6.2f}", Style(color=palette.SEQUENTIAL[int(idx)], bold=idx >= 5))
                    continue
                t.append(f"{w:6.2f}", Style(color="#000000" if idx >= 5 else "#ffffff",
                                            bgcolor=palette.SEQUENTIAL[int(idx)]))
            t.append("\n")
        return t
