"""MoE routing: experts down, recent steps across (brightness = routing weight), the load
per expert so far, and the share of the output that came from the shared experts."""
from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.widgets import Static

from .heatmap import Heatmap
from .sweep import SweepPanel

SPARK = " ▁▂▃▄▅▆▇█"


class RoutingPanel(SweepPanel):
    kind = "routing"

    def drawable_layers(self, info: dict) -> list[int]:
        cfg = info["models"][self.options.get("model", 0)]["config"]
        return [i for i, k in enumerate(cfg["ffns"]) if k == "moe"]

    def show(self, cursor, i: int) -> None:
        info, f = cursor.info, cursor.frame(i)
        m = self.options.get("model", 0)
        layer = self.current_layer(info)
        if layer is None:
            self.put(self.query_one("#legend", Static), "no MoE layer in this model")
            return
        moe = info["models"][m]["config"]["moe"]
        E = moe["n_experts"]
        def column(j):
            fj = cursor.frame(j)
            col = np.zeros(E)
            col[fj.get(m, "experts", layer)] = fj.get(m, "weights", layer)
            return col

        W = self._sweep.update((m, layer), i, column, self.size.width)     # (experts, steps)
        hm = self.query_one(Heatmap)
        hm.set_marker(self._sweep.column_of(i))
        hm.set_data(W, "sequential", vmax=1.0)
        load = f.get(m, "load", layer)
        share = f.layer_meta(m, layer).get("shared_share")
        self.set_title(f"routing · L{layer} · {moe['top_k']} of {E} experts + {moe['n_shared']} shared")
        t = Text("load  ")
        if load is not None:
            top = max(int(load.max()), 1)
            t.append("".join(SPARK[int(x * 8 // top)] for x in load))
            t.append(f"  max {top}, idle {int((load == 0).sum())}")
        now = ", ".join(f"e{int(e)} {float(w):.2f}" for e, w in zip(f.get(m, "experts", layer), f.get(m, "weights", layer)))
        t.append(f"\nnow: {now}")
        if share is not None:
            t.append(f"   shared share {share:.2f}")
        self.put(self.query_one("#legend", Static), t, pace=0.1)
