"""Panels whose content is text: tokens, depth, recall, figure, captions, lineage."""
from __future__ import annotations

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from .. import palette
from ..text_panels import PANELS, _token, depth_cells, depth_table
from .panel import Panel


class TextPanel(Panel):
    DEFAULT_CSS = """
    TextPanel { max-height: 16; overflow-y: auto; }
    TextPanel.-figure { max-height: 30; }
    """

    def __init__(self, options: dict, **kw):
        self.kind = options["kind"]
        super().__init__(options, **kw)
        if self.kind == "depth":       # a table of 2L + 1 rows of numbers: 5 redraws a second is plenty
            self.MIN_INTERVAL = 0.2
        self.add_class(f"-{self.kind}")

    def compose(self):
        yield Static(id="body")

    def show(self, cursor, i: int) -> None:
        body = self.query_one("#body", Static)
        render = getattr(self, f"_rich_{self.kind}", None)
        if render is not None and not self.app.no_color:
            self.put(body, render(cursor, i), pace=0.1 if self.kind == "tokens" else 0.0)
        else:
            width = max(40, self.size.width - 4)
            self.put(body, Text("\n".join(PANELS[self.kind](cursor, i, self.options, width))))

    # -- richer versions where colour adds something ----------------------------------
    def _rich_tokens(self, cursor, i: int) -> Text:
        f = cursor.frame(i)
        if "event" in f.meta:
            return Text("\n".join(PANELS["tokens"](cursor, i, self.options, self.size.width)))
        t = Text()
        width = max(20, self.size.width - 4)
        lo = max(0, i - width + 8)
        for j in range(lo, i + 1):
            m = cursor.frame(j).meta
            if j == i:
                t.append(m["text"], Style(reverse=True, bold=True))
            else:
                t.append(m["text"], Style(dim=m["source"] != "input"))
        t.append(f"\npos {f.meta['pos']} ({f.meta['source']})")
        if f.meta.get("answer") is not None:
            t.append(f"  want next: {_token(f.meta['answer'])!r}", Style(color="#ffaf00"))
        for m, model in enumerate(cursor.info["models"]):
            ids, probs = f.get(m, "top_ids"), f.get(m, "top_probs")
            t.append(f"\n{model['name']}: ")
            for tok, q in list(zip(ids, probs))[:5]:
                bar = "█" * max(1, int(float(q) * 40))
                t.append(f"{_token(int(tok))!r} ", Style(bold=True))
                t.append(bar, Style(color=palette.SEQUENTIAL[min(7, 2 + int(float(q) * 12))]))
                t.append(f" {float(q):.3f}  ")
        return t

    def _rich_depth(self, cursor, i: int) -> Text:
        table = depth_table(cursor, i, self.options)
        if table is None:
            return Text("\n".join(PANELS["depth"](cursor, i, self.options, self.size.width)))
        title, names, rows = table
        t = Text(title + "\n" + "  " + " " * 10 + "".join(f"{nm:>6}" for nm in names) + "\n")
        for label, blocks, partial in rows:
            # the text panel's cells, each coloured by its weight
            t.append(f"  {label:<10}")
            for w in depth_cells(blocks, partial, len(names) - 1):
                if w is None:
                    t.append(" " * 6)
                    continue
                idx = palette.sequential_index(np.array(round(w, 2)))    # the colour of the number shown
                t.append(f"{w:6.2f}", Style(color="#000000" if idx >= 5 else "#ffffff",
                                            bgcolor=palette.SEQUENTIAL[int(idx)]))
            t.append("\n")
        return t

    def _rich_captions(self, cursor, i: int) -> Text:
        text = cursor.frame(i).meta.get("caption")
        return Text(text or "(no note at this step)", Style(italic=not text, color="#ffd75f" if text else None))
