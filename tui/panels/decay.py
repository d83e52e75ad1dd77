"""Decay over time: alpha = exp(g) per key channel (KDA) or per head (Gated DeltaNet),
channels down, recent steps across. Bright rows hold memory; dark rows clear it."""
from __future__ import annotations

import numpy as np

from ..widgets.heatmap import colour_bar
from ..widgets.text_box import TextBox
from .base import Absent, SweepPanel
from .common import HeadSweep, history, layers_of, model_name, ramp_rows


def prepare(cur, i: int, p: dict, width: int):
    m = p.get("model", 0)
    layers, layer = layers_of(cur, p, "decay")
    if layer is None:
        return Absent(f"decay: {model_name(cur.info, m)} has no gated layer", "no gated layer in this model")
    cfg = cur.model_config(m)
    H = cfg.mixer_config(cfg.mixers[layer]).n_heads if cfg is not None else 1
    h = p.get("head", 0)

    def column(j):
        d = cur.frame(j).decay(m, layer)
        return None if d is None else d.head(min(h, d.alpha.shape[0] - 1))

    return HeadSweep(model_name(cur.info, m), m, layer, tuple(layers), h, H, i, history(i, column))


def lines(view, width: int) -> list[str]:
    if isinstance(view, Absent):
        return [view.text]
    cols = view.columns.last(max(1, min(width - 12, 48)))
    if not cols:
        return ["decay: no decay recorded"]
    A = np.stack(cols, axis=1)                                           # (channels, recent steps)
    out = [f"decay: {view.name} layer {view.layer} head {view.head}: alpha = exp(g) per "
           f"{'channel' if A.shape[0] > 1 else 'head'}, last {A.shape[1]} steps (@ holds, blank clears)"]
    out += ramp_rows(A)
    keep = A[:, -1]
    out.append(f"  now: {int((keep > 0.9).sum())} of {keep.size} rows hold (alpha > 0.9), "
               f"{int((keep < 0.1).sum())} clear (alpha < 0.1)")
    return out


class DecayPanel(SweepPanel):
    kind = "decay"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)

    def draw(self, view) -> None:
        if self.absent(view):
            return
        i, layer = view.step, view.layer
        A = self.show_sweep((view.model, layer, view.head), i, view.columns)
        now = view.columns.column(i)
        per = "channel" if A.shape[0] > 1 else "head"
        self.set_title(f"decay · L{layer} head {view.head} · alpha per {per} · last {min(A.shape[1], i + 1)} steps")
        legend = colour_bar("sequential", 1.0, no_color=self.app.no_color)
        legend.append(f"   holding (>0.9): {int((now > 0.9).sum())}/{now.size}   clearing (<0.1): "
                      f"{int((now < 0.1).sum())}   mean {now.mean():.3f}")
        self.set_subtitle(f"↓ {per if per == 'head' else 'key channel'} × → step, sweeping")
        self.put(self.query_one("#legend", TextBox), legend, pace=0.1)
