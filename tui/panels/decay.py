"""Decay over time: alpha = exp(g) per key channel (KDA) or per head (Gated DeltaNet),
channels down, recent steps across. Bright rows hold memory; dark rows clear it."""
from __future__ import annotations

import numpy as np

from lineage.configs import DECAY_MIXERS

from ..widgets.heatmap import colour_bar
from ..widgets.text_box import TextBox
from .base import SweepPanel
from .common import model_name, pick_layer, ramp_rows


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    info = cur.info
    m = p.get("model", 0)
    layer = pick_layer(cur, m, p.get("layer"), DECAY_MIXERS)
    if layer is None:
        return [f"decay: {model_name(info, m)} has no gated layer"]
    h = p.get("head", 0)
    span = max(1, min(width - 12, 48))
    cols = []
    for j in range(max(0, i - span + 1), i + 1):
        d = cur.frame(j).decay(m, layer)
        cols.append(d.head(h) if d is not None else None)
    cols = [c for c in cols if c is not None]
    if not cols:
        return ["decay: no decay recorded"]
    A = np.stack(cols, axis=1)                                           # (channels, recent steps)
    lines = [f"decay: {model_name(info, m)} layer {layer} head {h}: alpha = exp(g) per "
             f"{'channel' if A.shape[0] > 1 else 'head'}, last {A.shape[1]} steps (@ holds, blank clears)"]
    lines += ramp_rows(A)
    keep = A[:, -1]
    lines.append(f"  now: {int((keep > 0.9).sum())} of {keep.size} rows hold (alpha > 0.9), "
                 f"{int((keep < 0.1).sum())} clear (alpha < 0.1)")
    return lines


class DecayPanel(SweepPanel):
    kind = "decay"
    text_form = staticmethod(text_form)
    LAYER_KINDS = DECAY_MIXERS

    def draw(self, cursor, i: int) -> None:
        m = self.options.get("model", 0)
        layer = self.current_layer(cursor)
        if layer is None:
            self.put(self.query_one("#legend", TextBox), "no gated layer in this model")
            return
        h = self.options.get("head", 0)

        def column(j):
            d = cursor.frame(j).decay(m, layer)
            return d.head(min(h, d.alpha.shape[0] - 1))

        A = self.show_sweep((m, layer, h), i, column)
        now = column(i)
        per = "channel" if A.shape[0] > 1 else "head"
        self.set_title(f"decay · L{layer} head {h} · alpha per {per} · last {min(A.shape[1], i + 1)} steps")
        legend = colour_bar("sequential", 1.0, no_color=self.app.no_color)
        legend.append(f"   holding (>0.9): {int((now > 0.9).sum())}/{now.size}   clearing (<0.1): "
                      f"{int((now < 0.1).sum())}   mean {now.mean():.3f}")
        self.set_subtitle(f"↓ {per if per == 'head' else 'key channel'} × → step, sweeping")
        self.put(self.query_one("#legend", TextBox), legend, pace=0.1)

    def pick_head(self, delta: int) -> bool:
        if self._shown is None:
            return False
        cfg = self._shown[0].model_config(self.options.get("model", 0))
        H = cfg.mixer_config(cfg.mixers[self.options["layer"]]).n_heads if cfg is not None else 1
        self.options["head"] = (self.options.get("head", 0) + delta) % H
        return True
