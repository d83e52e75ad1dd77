"""Decay over time: alpha = exp(g) per key channel (KDA) or per head (Gated DeltaNet),
channels down, recent steps across. Bright rows hold memory; dark rows clear it."""
from __future__ import annotations

import numpy as np
from textual.widgets import Static

from lineage.configs import DECAY_MIXERS

from .heatmap import Heatmap, colour_bar
from .sweep import SweepPanel


class DecayPanel(SweepPanel):
    kind = "decay"
    LAYER_KINDS = DECAY_MIXERS

    def show(self, cursor, i: int) -> None:
        info = cursor.info
        m = self.options.get("model", 0)
        layer = self.current_layer(info)
        if layer is None:
            self.put(self.query_one("#legend", Static), "no gated layer in this model")
            return
        h = self.options.get("head", 0)

        def column(j):
            d = cursor.frame(j).get(m, "decay", layer)
            return np.atleast_1d(d[min(h, d.shape[0] - 1)]).astype(np.float64)

        A = self._sweep.update((m, layer, h), i, column, self.size.width)
        hm = self.query_one(Heatmap)
        hm.set_marker(self._sweep.column_of(i))
        hm.set_data(A, "sequential", vmax=1.0)
        now = column(i)
        per = "channel" if A.shape[0] > 1 else "head"
        self.set_title(f"decay · L{layer} head {h} · alpha per {per} · last {A.shape[1]} steps, sweeping")
        legend = colour_bar("sequential", 1.0, no_color=self.app.no_color)
        legend.append(f"   holding (>0.9): {int((now > 0.9).sum())}/{now.size}   clearing (<0.1): "
                      f"{int((now < 0.1).sum())}   mean {now.mean():.3f}")
        self.put(self.query_one("#legend", Static), legend, pace=0.1)

    def pick_head(self, delta: int) -> bool:
        info = self.app.cursor.info
        model = info["models"][self.options.get("model", 0)]
        H = model["config"][model["config"]["mixers"][self.options["layer"]]]["n_heads"] if model["kind"] == "lm" else 1
        self.options["head"] = (self.options.get("head", 0) + delta) % H
        return True
