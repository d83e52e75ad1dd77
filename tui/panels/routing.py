"""MoE routing: experts down, recent steps across (brightness = routing weight), the load
per expert so far, and the share of the output that came from the shared experts.

A real checkpoint's 256 or 512 experts would make a map taller than any terminal: past
COMPACT experts the panel shows one strip instead, every expert a cell left to right, folded to
the panel's width, bright where this token went and dim by the load so far."""
from __future__ import annotations

import numpy as np
from rich.text import Text

from ..widgets.heatmap import Heatmap
from ..widgets.text_box import TextBox
from .base import SweepPanel
from .common import model_name

SPARK = " ▁▂▃▄▅▆▇█"
COMPACT = 64            # more experts than this: the compact strip


def strip(r, E: int, cols: int) -> np.ndarray:
    """(rows, cols) one cell per expert, row by row: 1.0 where this token went, the load so far
    scaled into 0.1..0.6 elsewhere, 0 where never used (and in the padding)."""
    load = np.zeros(E) if r.load is None else r.load.astype(np.float64)
    cells = np.where(load > 0, 0.1 + 0.5 * load / max(load.max(), 1.0), 0.0)
    cells[r.experts] = 1.0
    rows = -(-E // cols)
    return np.concatenate([cells, np.zeros(rows * cols - E)]).reshape(rows, cols)


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    f, info = cur.frame(i), cur.info
    m = p.get("model", 0)
    cfg = cur.model_config(m)
    layer = p.get("layer")
    if layer is None:
        layer = next((j for j, k in enumerate(cfg.ffns) if k == "moe"), None)
    if layer is None or cfg.ffns[layer] != "moe":
        return [f"routing: layer {layer} has no MoE"]
    moe = cfg.moe
    E = moe.n_experts
    if E > COMPACT:
        return _compact_text(f.routing(m, layer), E, moe, model_name(info, m), layer, width)
    span = max(1, min(width - 12, 40))
    picks = np.zeros((E, 0), dtype=np.int8)
    for j in range(max(0, i - span + 1), i + 1):
        col = np.zeros((E, 1), dtype=np.int8)
        col[cur.frame(j).routing(m, layer).experts, 0] = 1
        picks = np.concatenate([picks, col], axis=1)
    r = f.routing(m, layer)
    load, experts, weights = r.load, r.experts, r.weights
    lines = [f"routing: {model_name(info, m)} layer {layer}: {moe.top_k} of {E} experts per token "
             f"+ {moe.n_shared} shared (# picked now, + earlier)"]
    for e in range(E):
        now = "#" if e in experts else " "
        row = "".join("+" if x else "." for x in picks[e, :-1]) + now
        lines.append(f"  e{e:<3}{row}  load {int(load[e]) if load is not None else 0}")
    lines.append("  now: " + ", ".join(f"e{int(e)} {float(w):.2f}" for e, w in zip(experts, weights))
                 + (f"; shared share {r.shared_share or 0:.2f}" if moe.n_shared else ""))
    return lines


def _compact_text(r, E: int, moe, name: str, layer: int, width: int) -> list[str]:
    cols = max(16, min(width - 10, 64))
    cells = strip(r, E, cols)
    lines = [f"routing: {name} layer {layer}: {moe.top_k} of {E} experts per token + {moe.n_shared} shared "
             "(# this token, + used before, . not yet)"]
    for row, start in zip(cells, range(0, E, cols)):
        n = min(cols, E - start)
        lines.append(f"  e{start:<4}" + "".join("#" if x == 1.0 else "+" if x > 0 else "." for x in row[:n]))
    used = 0 if r.load is None else int((r.load > 0).sum())
    lines.append(f"  used so far {used} of {E}; now: " + ", ".join(f"e{int(e)} {float(w):.2f}" for e, w in
                                                                   zip(r.experts, r.weights))
                 + (f"; shared share {r.shared_share or 0:.2f}" if moe.n_shared else ""))
    return lines


class RoutingPanel(SweepPanel):
    kind = "routing"
    text_form = staticmethod(text_form)

    def drawable_layers(self, cursor) -> list[int]:
        cfg = cursor.model_config(self.options.get("model", 0))
        return [i for i, k in enumerate(cfg.ffns) if k == "moe"]

    def draw(self, cursor, i: int) -> None:
        f = cursor.frame(i)
        m = self.options.get("model", 0)
        layer = self.current_layer(cursor)
        if layer is None:
            self.put(self.query_one("#legend", TextBox), "no MoE layer in this model")
            return
        moe = cursor.model_config(m).moe
        E = moe.n_experts
        if E > COMPACT:             # one strip of experts, not a map hundreds of rows tall
            hm = self.query_one(Heatmap)
            hm.set_marker(None)
            hm.set_data(strip(f.routing(m, layer), E, max(16, self.size.width - 4)), "sequential", vmax=1.0)
            self.set_title(f"routing · L{layer} · {moe.top_k} of {E} experts + {moe.n_shared} shared · "
                           "bright: this token, dim: load")
        else:
            self.show_sweep((m, layer), i, lambda j: cursor.frame(j).routing(m, layer).per_expert(E))   # (experts, steps)
            self.set_title(f"routing · L{layer} · {moe.top_k} of {E} experts + {moe.n_shared} shared")
        self._legend(f.routing(m, layer))

    def _legend(self, r) -> None:
        load, share = r.load, r.shared_share
        t = Text("load  ")
        if load is not None:
            top = max(int(load.max()), 1)
            if len(load) <= COMPACT:
                t.append("".join(SPARK[int(x * 8 // top)] for x in load))
            t.append(f"  max {top}, idle {int((load == 0).sum())}")
        now = ", ".join(f"e{int(e)} {float(w):.2f}" for e, w in zip(r.experts, r.weights))
        t.append(f"\nnow: {now}")
        if share is not None:
            t.append(f"   shared share {share:.2f}")
        self.set_subtitle("↓ expert × → step, sweeping")
        self.put(self.query_one("#legend", TextBox), t, pace=0.1)
