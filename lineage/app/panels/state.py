"""The K x V state of one layer and head (S, the last write delta S, or the read-back error); a
query q reads q S, the read-out that the attention panel splits over the positions that wrote S.

Both views hold the same memory: S is what is stored, summed over every write; the attention
panel's rows (lineage.playback.effective) are how much each of those writes, carried forward
through the later decays and corrections, gives this token's read-out.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from textual.binding import Binding

from ..widgets.heatmap import Heatmap
from ..widgets.legend import colour_bar
from ..widgets.text_box import TextBox
from .base import Absent, HeatmapPanel
from .common import LEGEND, heat_rows, layers_of, model_name

QUANTITIES = ("S", "dS", "error")
TITLES = {"S": "S, the state", "dS": "delta S, the last write", "error": "v - read-back, what the write corrects"}


@dataclass(frozen=True, eq=False)
class StatePanelView:
    name: str                  # the model's
    layer: int
    layers: tuple              # the layers the picker steps through
    mixer: str
    head: int
    heads: int
    quantity: str              # S, dS or error
    data: np.ndarray           # (K, V) S or dS, or (V,) the error v - read-back, float64
    v: np.ndarray              # (V,) the head's value, float64 (the error's yardstick)

    @property
    def top(self) -> float:
        """The largest |value| shown (a shared colour scale is the largest of these)."""
        return float(np.abs(self.data).max()) if self.data.size else 0.0


def prepare(cur, i: int, p: dict, width: int):
    m = p.get("model", 0)
    layers, layer = layers_of(cur, p, "state")
    if layer is None:
        return Absent(f"state: {model_name(cur.info, m)} has no recurrent state", "this model has no recurrent state")
    st = cur.frame(i).state(m, layer)
    if st is None:
        return Absent(f"state: layer {layer} holds no state matrix", f"layer {layer} holds no state matrix")
    h = min(p.get("head", 0), st.heads - 1)
    q = p.get("quantity", "S")
    return StatePanelView(model_name(cur.info, m), layer, tuple(layers), st.mixer, h, st.heads, q,
                          st.quantity(h, q), st.v[h].astype(np.float64))


def lines(view, width: int) -> list[str]:
    if isinstance(view, Absent):
        return [view.text]
    M = view.data
    out = [f"state: {view.name} layer {view.layer} ({view.mixer}) head {view.head}: {TITLES[view.quantity]}"]
    if view.quantity == "error":
        out.append("  " + " ".join(f"{x:+.2f}" for x in M[:16]) + (" ..." if M.size > 16 else ""))
        out.append(f"  |v - read| = {np.linalg.norm(M):.4f}   |v| = {np.linalg.norm(view.v):.4f}")
        return out
    out.append(f"  {M.shape[0]} x {M.shape[1]}, max |value| {np.abs(M).max():.4f}, norm {np.linalg.norm(M):.4f}")
    if view.quantity == "S":
        out.append("  a query q reads q S: the attention panel splits that read-out over the positions that wrote S")
    if M.size <= 64:
        out += ["  " + " ".join(f"{x:+.3f}" for x in row) for row in M]
    else:
        rows, per = heat_rows(M, max_cols=width - 4)
        out += ["  " + r for r in rows]
        out.append("  " + LEGEND)
        if per > 1:                      # said, as the map says it: no value channel is dropped
            out.append(f"  each character: {per} value channels, the largest |value| shown")
    return out


class StatePanel(HeatmapPanel):
    kind = "state"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    BINDINGS = [Binding("c", "shared_range", "shared colours", show=False)]

    def _shared_vmax(self) -> float:
        """One colour scale for the state panels that share one: the largest |value| any of
        them is about to show (the screen hands every panel its view before drawing any)."""
        sharing = [p for p in self.screen.query(StatePanel) if p.options.get("colour_range") == "shared"]
        views = [p._latest[2] for p in sharing or [self] if p._latest is not None]
        return max((v.top for v in views if isinstance(v, StatePanelView)), default=1.0)

    def action_shared_range(self) -> None:
        """c: all state panels on one colour scale, or each on its own again."""
        panels = list(self.screen.query(StatePanel))
        shared = self.options.get("colour_range") != "shared"
        for p in panels:
            p.options["colour_range"] = "shared" if shared else "own"
            if p._shown is not None:
                p.show(*p._shown)

    def draw(self, view) -> None:
        if self.absent(view):
            return
        data = view.data[None, :] if view.quantity == "error" else view.data      # the error: one row (1, V)
        hm = self.query_one(Heatmap)
        # S reads k S: a row per key channel, a column per value channel; the error is one row
        # folded, a cell is its block's largest |value| (with its sign): a strong entry is not
        # averaged away by neighbours of the other sign
        hm.set_axes(None if view.quantity == "error" else "key channel", "value channel", fold="absmax")
        vmax = self._shared_vmax() if self.options.get("colour_range") == "shared" else None
        hm.set_data(data, "diverging", vmax=vmax)
        what = {"S": "S", "dS": "delta S (last write)", "error": "v - read-back"}[view.quantity]
        self.set_title(f"state · {view.name} · L{view.layer} {view.mixer} · head {view.head}/{view.heads} · {what}")
        self.key_hints("[ ] layer  , . head  t quantity  c shared scale")
        self._legend(hm)

    def _legend(self, hm: Heatmap) -> None:
        got = self.reading(hm)
        bar = colour_bar("diverging", hm.vmax, no_color=self.app.no_color)
        if self.options.get("colour_range") == "shared":
            bar.append(" shared")
        # the axes are named on the map; here the value under the cursor (the ▲ / ▼ or X of
        # h j k l on a focused map) or the mouse, exact even where the map folds rows or columns
        if got is not None:
            # the mouse's cell holds two keys (a half-block line's pixels) or more (folded): it
            # reads the one the cell is drawn with, and says of which ("key 7 of 6-7")
            col = f"value {got.col}{got.of_cols()}"
            where = col if hm.data.shape[0] == 1 else f"key {got.row}{got.of_rows()}, {col}"
            line, norm = f"\n{got.by} {where}: {got.value:+.4f}", f"   norm {np.linalg.norm(hm.data):.3f}"
            room = self.query_one("#legend", TextBox).size.width
            bar.append(line + norm if not room or len(line) - 1 + len(norm) <= room else line)
        elif hm.data.size:          # a slide: no cursor to read, the map's norm all the same
            bar.append(f"\nnorm {np.linalg.norm(hm.data):.3f}")
        self.put(self.query_one("#legend", TextBox), bar, pace=0.1)

    def on_heatmap_cursor_moved(self, event: Heatmap.CursorMoved) -> None:
        self._legend(event.heatmap)

    def on_heatmap_hovered(self, event: Heatmap.Hovered) -> None:
        self._legend(event.heatmap)

    def cycle_quantity(self) -> bool:
        q = self.options.get("quantity", "S")
        self.options["quantity"] = QUANTITIES[(QUANTITIES.index(q) + 1) % len(QUANTITIES)]
        return True
