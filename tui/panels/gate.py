"""Gated MLA's output gate over time: sigmoid(g_proj(x)) per value channel of one head, channels
down, recent steps across. Near 1 a channel passes what attention retrieved; near 0 it drops it."""
from __future__ import annotations

import numpy as np

from ..widgets.heatmap import colour_bar
from ..widgets.text_box import TextBox
from .base import SweepPanel
from .common import model_name, pick_layer, ramp_rows

KINDS = ("mla",)


def _column(cur, j: int, m: int, layer: int, h: int):
    g = cur.frame(j).gate(m, layer)
    return None if g is None else g[min(h, g.shape[0] - 1)]


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    info = cur.info
    m = p.get("model", 0)
    layer = pick_layer(cur, m, p.get("layer"), KINDS)
    if layer is None:
        return [f"gate: {model_name(info, m)} has no MLA layer"]
    h = p.get("head", 0)
    span = max(1, min(width - 14, 48))
    cols = [c for j in range(max(0, i - span + 1), i + 1) if (c := _column(cur, j, m, layer, h)) is not None]
    if not cols:
        return [f"gate: layer {layer} of {model_name(info, m)} has no output gate (plain MLA)"]
    G = np.stack(cols, axis=1)                                           # (channels, recent steps)
    lines = [f"gate: {model_name(info, m)} layer {layer} head {h}: sigmoid(g_proj(x)) per value channel, "
             f"last {G.shape[1]} steps (@ passes, blank drops)"]
    lines += ramp_rows(G)
    now = G[:, -1]
    lines.append(f"  now: mean {now.mean():.3f}, min {now.min():.3f}, max {now.max():.3f}; "
                 f"{int((now > 0.9).sum())} of {now.size} channels pass (> 0.9), {int((now < 0.1).sum())} drop (< 0.1)")
    return lines


class GatePanel(SweepPanel):
    kind = "gate"
    text_form = staticmethod(text_form)
    LAYER_KINDS = KINDS

    def draw(self, cursor, i: int) -> None:
        m = self.options.get("model", 0)
        layer = self.current_layer(cursor)
        h = self.options.get("head", 0)
        now = None if layer is None else _column(cursor, i, m, layer, h)
        if now is None:
            self.put(self.query_one("#legend", TextBox), "no gated MLA layer here (plain MLA has no output gate)")
            return
        G = self.show_sweep((m, layer, h), i, lambda j: _column(cursor, j, m, layer, h))
        self.set_title(f"gate · L{layer} head {h} · sigmoid(g_proj(x)) per channel · last {min(G.shape[1], i + 1)} steps")
        legend = colour_bar("sequential", 1.0, no_color=self.app.no_color)
        legend.append(f"  mean {now.mean():.3f} ({now.min():.3f}-{now.max():.3f})")
        self.put(self.query_one("#legend", TextBox), legend, pace=0.1)

    def pick_head(self, delta: int) -> bool:
        if self._shown is None:
            return False
        cfg = self._shown[0].model_config(self.options.get("model", 0))
        H = cfg.mla.n_heads if cfg is not None and cfg.mla is not None else 1
        self.options["head"] = (self.options.get("head", 0) + delta) % H
        return True
