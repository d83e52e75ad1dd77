"""MoE routing: experts down, recent steps across (brightness = routing weight), the load
per expert so far, and the share of the output that came from the shared experts."""
from __future__ import annotations

import numpy as np
from rich.text import Text

from ..widgets.heatmap import Heatmap
from ..widgets.text_box import TextBox
from .base import SweepPanel
from .common import model_name

SPARK = " ▁▂▃▄▅▆▇█"


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    f, info = cur.frame(i), cur.info
    m = p.get("model", 0)
    cfg = info["models"][m]["config"]
    layer = p.get("layer")
    if layer is None:
        layer = next((j for j, k in enumerate(cfg["ffns"]) if k == "moe"), None)
    if layer is None or cfg["ffns"][layer] != "moe":
        return [f"routing: layer {layer} has no MoE"]
    moe = cfg["moe"]
    E = moe["n_experts"]
    span = max(1, min(width - 12, 40))
    picks = np.zeros((E, 0), dtype=np.int8)
    for j in range(max(0, i - span + 1), i + 1):
        col = np.zeros((E, 1), dtype=np.int8)
        col[cur.frame(j).routing(m, layer).experts, 0] = 1
        picks = np.concatenate([picks, col], axis=1)
    r = f.routing(m, layer)
    load, experts, weights = r.load, r.experts, r.weights
    lines = [f"routing: {model_name(info, m)} layer {layer}: {moe['top_k']} of {E} experts per token "
             f"+ {moe['n_shared']} shared (# picked now, + earlier)"]
    for e in range(E):
        now = "#" if e in experts else " "
        row = "".join("+" if x else "." for x in picks[e, :-1]) + now
        lines.append(f"  e{e:<3}{row}  load {int(load[e]) if load is not None else 0}")
    lines.append("  now: " + ", ".join(f"e{int(e)} {float(w):.2f}" for e, w in zip(experts, weights))
                 + (f"; shared share {r.shared_share or 0:.2f}" if moe["n_shared"] else ""))
    return lines


class RoutingPanel(SweepPanel):
    kind = "routing"
    text_form = staticmethod(text_form)

    def drawable_layers(self, info: dict) -> list[int]:
        cfg = info["models"][self.options.get("model", 0)]["config"]
        return [i for i, k in enumerate(cfg["ffns"]) if k == "moe"]

    def draw(self, cursor, i: int) -> None:
        info, f = cursor.info, cursor.frame(i)
        m = self.options.get("model", 0)
        layer = self.current_layer(info)
        if layer is None:
            self.put(self.query_one("#legend", TextBox), "no MoE layer in this model")
            return
        moe = info["models"][m]["config"]["moe"]
        E = moe["n_experts"]
        def column(j):
            return cursor.frame(j).routing(m, layer).per_expert(E)

        W = self._sweep.update((m, layer), i, column, self.size.width)     # (experts, steps)
        hm = self.query_one(Heatmap)
        hm.set_marker(self._sweep.column_of(i))
        hm.set_data(W, "sequential", vmax=1.0, blank=self._sweep.blank(i))
        r = f.routing(m, layer)
        load, share = r.load, r.shared_share
        self.set_title(f"routing · L{layer} · {moe['top_k']} of {E} experts + {moe['n_shared']} shared")
        t = Text("load  ")
        if load is not None:
            top = max(int(load.max()), 1)
            t.append("".join(SPARK[int(x * 8 // top)] for x in load))
            t.append(f"  max {top}, idle {int((load == 0).sum())}")
        now = ", ".join(f"e{int(e)} {float(w):.2f}" for e, w in zip(r.experts, r.weights))
        t.append(f"\nnow: {now}")
        if share is not None:
            t.append(f"   shared share {share:.2f}")
        self.set_subtitle("↓ expert × → step, sweeping")
        self.put(self.query_one("#legend", TextBox), t, pace=0.1)
