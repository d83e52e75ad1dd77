"""MoE routing: experts down, recent steps across (brightness = routing weight), the load
per expert so far, and the share of the output that came from the shared experts.

A real checkpoint's 256 or 512 experts would make a map taller than any terminal: past
COMPACT experts the panel shows one strip instead, every expert a cell left to right, folded to
the panel's width, bright where this token went and dim by the load so far."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.text import Text

from ..widgets.heatmap import Heatmap
from ..widgets.text_box import TextBox
from .base import Absent, SweepPanel
from .common import History, history, layers_of, model_name

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


@dataclass(frozen=True, eq=False)
class RoutingPanelView:
    name: str
    model: int
    layer: int
    layers: tuple              # the MoE layers
    moe: object                # the layer's MoE config (experts, top_k, shared)
    step: int
    now: object                # this token's routing record
    routes: History | None     # the records of recent steps (None: compact, past COMPACT experts)
    weights: History | None    # per step: (E,) the token's weight on every expert, for the sweep


def prepare(cur, i: int, p: dict, width: int):
    m = p.get("model", 0)
    layers, layer = layers_of(cur, p, "routing")
    if layer is None:
        return Absent(f"routing: layer {p.get('layer')} has no MoE", "no MoE layer in this model")
    moe = cur.model_config(m).moe
    now = cur.frame(i).routing(m, layer)
    if moe.n_experts > COMPACT:
        return RoutingPanelView(model_name(cur.info, m), m, layer, tuple(layers), moe, i, now, None, None)
    routes = history(i, lambda j: cur.frame(j).routing(m, layer))
    weights = History(routes.first, tuple(None if r is None else r.per_expert(moe.n_experts) for r in routes.columns))
    return RoutingPanelView(model_name(cur.info, m), m, layer, tuple(layers), moe, i, now, routes, weights)


def lines(view, width: int) -> list[str]:
    if isinstance(view, Absent):
        return [view.text]
    moe, layer = view.moe, view.layer
    E = moe.n_experts
    if view.routes is None:
        return _compact_text(view.now, E, moe, view.name, layer, width)
    span = max(1, min(width - 12, 40))
    picks = np.zeros((E, 0), dtype=np.int8)
    for r in view.routes.last(span):
        col = np.zeros((E, 1), dtype=np.int8)
        col[r.experts, 0] = 1
        picks = np.concatenate([picks, col], axis=1)
    r = view.now
    load, experts, weights = r.load, r.experts, r.weights
    out = [f"routing: {view.name} layer {layer}: {moe.top_k} of {E} experts per token "
           f"+ {moe.n_shared} shared (# picked now, + earlier)"]
    for e in range(E):
        now = "#" if e in experts else " "
        row = "".join("+" if x else "." for x in picks[e, :-1]) + now
        out.append(f"  e{e:<3}{row}  load {int(load[e]) if load is not None else 0}")
    out.append("  now: " + ", ".join(f"e{int(e)} {float(w):.2f}" for e, w in zip(experts, weights))
               + (f"; shared share {r.shared_share or 0:.2f}" if moe.n_shared else ""))
    return out


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
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)

    def draw(self, view) -> None:
        if self.absent(view):
            return
        moe, layer = view.moe, view.layer
        E = moe.n_experts
        if view.routes is None:     # one strip of experts, not a map hundreds of rows tall
            hm = self.query_one(Heatmap)
            hm.set_marker(None)
            # a row of the strip is `cols` experts, labelled by its first; the gutter takes
            # len(str(E)) + 1 of the map's width (the panel's less its border and padding)
            cols = max(16, self.size.width - 4 - len(str(E)) - 1)
            hm.set_axes(f"experts, {cols} a row, each labelled by its first", "expert in the row",
                        lambda r: str(r * cols), fold="max")
            hm.set_data(strip(view.now, E, cols), "sequential", vmax=1.0)
            self.set_title(f"routing · L{layer} · {moe.top_k} of {E} experts + {moe.n_shared} shared · "
                           "bright: this token, dim: load")
        else:
            # folded, a row is the max of its experts: a chosen expert is never dimmed by an idle one
            self.show_sweep((view.model, layer), view.step, view.weights, "expert", fold="max")     # (experts, steps)
            self.set_title(f"routing · L{layer} · {moe.top_k} of {E} experts + {moe.n_shared} shared")
        self._legend(view.now)

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
        self.put(self.query_one("#legend", TextBox), t, pace=0.1)
