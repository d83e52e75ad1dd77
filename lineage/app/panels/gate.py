"""Gated MLA's output gate over time: sigmoid(g_proj(x)) per value channel of one head, channels
down, recent steps across. Near 1 a channel passes what attention retrieved; near 0 it drops it."""
from __future__ import annotations

import numpy as np

from ..widgets.legend import colour_bar
from ..widgets.text_box import TextBox
from .base import Absent, SweepPanel, steps
from .common import HeadSweep, history, layers_of, model_name, ramp_rows


def prepare(cur, i: int, p: dict, width: int):
    m = p.get("model", 0)
    layers, layer = layers_of(cur, p, "gate")
    if layer is None:
        return Absent(f"gate: {model_name(cur.info, m)} has no MLA layer",
                      "no gated MLA layer here (plain MLA has no output gate)")
    cfg = cur.model_config(m)
    H = cfg.mla.n_heads if cfg is not None and cfg.mla is not None else 1
    h = p.get("head", 0)

    def column(j):
        g = cur.frame(j).gate(m, layer)
        return None if g is None else g[min(h, g.shape[0] - 1)]

    return HeadSweep(model_name(cur.info, m), m, layer, tuple(layers), h, H, i, history(i, column))


def lines(view, width: int) -> list[str]:
    if isinstance(view, Absent):
        return [view.text]
    cols = view.columns.last(max(1, min(width - 14, 48)))
    if not cols:
        return [f"gate: layer {view.layer} of {view.name} has no output gate (plain MLA)"]
    G = np.stack(cols, axis=1)                                           # (channels, recent steps)
    out = [f"gate: {view.name} layer {view.layer} head {view.head}: sigmoid(g_proj(x)) per value channel, "
           f"last {G.shape[1]} steps (@ passes, blank drops)"]
    out += ramp_rows(G)
    now = G[:, -1]
    out.append(f"  now: mean {now.mean():.3f}, min {now.min():.3f}, max {now.max():.3f}; "
               f"{int((now > 0.9).sum())} of {now.size} channels pass (> 0.9), {int((now < 0.1).sum())} drop (< 0.1)")
    return out


class GatePanel(SweepPanel):
    kind = "gate"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)

    def draw(self, view) -> None:
        if self.absent(view):
            return
        i = view.step
        now = view.columns.columns[-1]
        if now is None:
            self.put(self.query_one("#legend", TextBox), "no gated MLA layer here (plain MLA has no output gate)")
            return
        # folded, a row is the min of its channels: one that drops what was read stays dark
        G = self.show_sweep((view.model, view.layer, view.head), i, view.columns, "value channel", fold="min")
        self.set_title(f"gate · L{view.layer} head {view.head} · sigmoid(g_proj(x)) per channel · "
                       f"{steps(self._sweep.shown(i))}")
        legend = colour_bar("sequential", 1.0, no_color=self.app.no_color)
        legend.append(f"  mean {now.mean():.3f} ({now.min():.3f}-{now.max():.3f})")
        self.put(self.query_one("#legend", TextBox), legend, pace=0.1)
