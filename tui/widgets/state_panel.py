"""The K x V state of one layer and head: S, the last write (delta S) or the read-back error."""
from __future__ import annotations

import numpy as np
from textual.widgets import Static

from lineage.configs import STATE_MIXERS

from ..text_panels import state_quantity
from .heatmap import Heatmap, colour_bar
from .panel import HeatmapPanel

QUANTITIES = ("S", "dS", "error")


class StatePanel(HeatmapPanel):
    kind = "state"
    LAYER_KINDS = STATE_MIXERS
    _last = None                    # (cursor, i) last shown: pick_head reads its head count

    def show(self, cursor, i: int) -> None:
        self._last = (cursor, i)
        info, f = cursor.info, cursor.frame(i)
        m = self.options.get("model", 0)
        layer = self.current_layer(info)
        if layer is None:
            self.put(self.query_one("#legend", Static), "this model has no recurrent state")
            return
        H = f.get(m, "S", layer).shape[0]
        h = self.options["head"] = min(self.options.get("head", 0), H - 1)
        kind = f.layer_meta(m, layer)["mixer"]
        q = self.options.get("quantity", "S")
        data = state_quantity(f, m, layer, h, q)
        if q == "error":
            data = data[None, :]                                    # one row: (1, V)
        hm = self.query_one(Heatmap)
        hm.set_data(data, "diverging")
        name = info["models"][m]["name"]
        what = {"S": "S", "dS": "delta S (last write)", "error": "v - read-back"}[q]
        self.set_title(f"state · {name} · L{layer} {kind} · head {h}/{H} · {what}")
        if not self.border_subtitle:
            self.border_subtitle = "[ ] layer  , . head  t quantity  hjkl cursor"
        self._legend(hm)

    def _legend(self, hm: Heatmap) -> None:
        r, c = hm.cursor
        val = hm.value_under_cursor
        bar = colour_bar("diverging", hm.vmax, no_color=self.app.no_color)
        if val is not None:
            bar.append(f"   [{r},{c}] = {val:+.4f}   |norm| {np.linalg.norm(hm.data):.3f}")
        self.put(self.query_one("#legend", Static), bar, pace=0.1)

    def on_heatmap_cursor_moved(self, event: Heatmap.CursorMoved) -> None:
        self._legend(event.heatmap)

    def pick_head(self, delta: int) -> bool:
        if self._last is None:
            return False
        cursor, i = self._last
        S = cursor.frame(i).get(self.options.get("model", 0), "S", self.current_layer(cursor.info))
        self.options["head"] = (self.options.get("head", 0) + delta) % S.shape[0]
        return True

    def cycle_quantity(self) -> bool:
        q = self.options.get("quantity", "S")
        self.options["quantity"] = QUANTITIES[(QUANTITIES.index(q) + 1) % len(QUANTITIES)]
        return True
