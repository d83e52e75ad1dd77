"""MoE routing: experts down, recent steps across (brightness = routing weight), the load
per expert so far, and the share of the output that came from the shared experts.

A real checkpoint's 256 or 512 experts would make a map taller than any terminal: past
COMPACT experts the panel shows one strip instead, every expert a cell left to right, folded to
the panel's width, bright where this token went and dim by the load so far."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..widgets.heatmap import Heatmap
from ..widgets.legend import colour_bar
from ..widgets.text_box import TextBox
from .base import Absent, SweepPanel
from .common import History, history, layers_of, model_name, step_token, step_tokens

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
    tokens: History | None = None   # per step: its token as the readout names it (step_tokens)


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
    return RoutingPanelView(model_name(cur.info, m), m, layer, tuple(layers), moe, i, now, routes, weights,
                            step_tokens(cur, i, m))


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
        self._legend()

    def _legend(self) -> None:
        """What colour means, the load so far, this token's picks, and the value under the h j k l
        cursor (or the mouse): expert, step and its token, weight."""
        view, hm = self.view, self.query_one(Heatmap)
        if not isinstance(view, RoutingPanelView):
            return                              # nothing drawn yet, or this model has no MoE layer
        r, compact = view.now, view.routes is None
        load, share = r.load, r.shared_share
        t = colour_bar("sequential", 1.0, no_color=self.app.no_color)
        t.append("  bright: this token, dim: load so far" if compact else "  the router's weight")
        if load is not None:
            top = max(int(load.max()), 1)
            spark = "".join(SPARK[int(x * 8 // top)] for x in load) + " " if len(load) <= COMPACT else ""
            # on one line where it fits, else the numbers over the sparkline (a wrap cut it anywhere)
            room = self.query_one("#legend", TextBox).size.width or 999
            one = f"load so far {spark}max {top}, idle {int((load == 0).sum())}"
            two = f"load so far: max {top}, idle {int((load == 0).sum())}" + (f"\n{spark.rstrip()}" if spark else "")
            t.append("\n" + (one if len(one) <= room else two))
        now = ", ".join(f"e{int(e)} {float(w):.2f}" for e, w in zip(r.experts, r.weights))
        t.append(f"\nnow: {now}")
        if share is not None:
            t.append(f"   shared share {share:.2f}")
        got = self.reading(hm)
        if got is not None and hm.data.size:
            t.append("\n" + (self._compact_reading(got, hm) if compact else self._reading(got)))
        self.put(self.query_one("#legend", TextBox), t, pace=0.1)

    def _reading(self, got) -> str:
        """The sweep's cell under the cursor or the mouse: the expert (of a folded row's, the one
        it is drawn with: the largest weight), the step of its column and the weight."""
        where = f"{got.by} expert {got.row}{got.of_rows()}"
        step = self._sweep.step_at(got.col)
        if step is None:
            return f"{where}: no step in this column (the gap after now)"
        return f"{where}, step {step + 1}: weight {got.value:.2f}{step_token(self.view.tokens, step)}"

    def _compact_reading(self, got, hm) -> str:
        cols = hm.data.shape[1]
        e = got.row * cols + got.col
        r = self.view.now
        if e >= self.view.moe.n_experts:
            return f"{got.by}: no expert here (the strip's padding)"
        picked = [float(w) for x, w in zip(r.experts, r.weights) if int(x) == e]
        load = 0 if r.load is None else int(r.load[e])
        return f"{got.by} expert {e}: " + (f"weight {picked[0]:.2f} now, " if picked else "not routed now, ") + \
            f"load {load}"

    def on_heatmap_cursor_moved(self, event: Heatmap.CursorMoved) -> None:
        self._legend()

    def on_heatmap_hovered(self, event: Heatmap.Hovered) -> None:
        self._legend()
