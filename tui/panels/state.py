"""The K x V state of one layer and head: S, the last write (delta S) or the read-back error."""
from __future__ import annotations

import numpy as np

from lineage.configs import STATE_MIXERS

from textual.binding import Binding

from ..widgets.heatmap import Heatmap, colour_bar
from ..widgets.text_box import TextBox
from .base import HeatmapPanel
from .common import LEGEND, heat_rows, model_name, pick_layer

QUANTITIES = ("S", "dS", "error")


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    f, info = cur.frame(i), cur.info
    m = p.get("model", 0)
    layer = pick_layer(cur, m, p.get("layer"), STATE_MIXERS)
    if layer is None:
        return [f"state: {model_name(info, m)} has no recurrent state"]
    h = p.get("head", 0)
    st = f.state(m, layer)
    if st is None:
        return [f"state: layer {layer} holds no state matrix"]
    kind = st.mixer
    q = p.get("quantity", "S")
    M = st.quantity(h, q)
    title = {"S": "S, the state", "dS": "delta S, the last write", "error": "v - read-back, what the write corrects"}[q]
    lines = [f"state: {model_name(info, m)} layer {layer} ({kind}) head {h}: {title}"]
    if q == "error":
        v = st.v[h].astype(np.float64)
        lines.append("  " + " ".join(f"{x:+.2f}" for x in M[:16]) + (" ..." if M.size > 16 else ""))
        lines.append(f"  |v - read| = {np.linalg.norm(M):.4f}   |v| = {np.linalg.norm(v):.4f}")
        return lines
    lines.append(f"  {M.shape[0]} x {M.shape[1]}, max |value| {np.abs(M).max():.4f}, norm {np.linalg.norm(M):.4f}")
    if M.size <= 64:
        lines += ["  " + " ".join(f"{x:+.3f}" for x in row) for row in M]
    else:
        lines += ["  " + r for r in heat_rows(M, max_cols=width - 4)]
        lines.append("  " + LEGEND)
    return lines


def _span(n: int) -> str:
    return "0" if n == 1 else f"0-{n - 1}"


def shown_quantity(cur, i: int, p: dict) -> np.ndarray | None:
    """What a state panel with options p draws at step i (None: nothing)."""
    m = p.get("model", 0)
    layer = pick_layer(cur, m, p.get("layer"), STATE_MIXERS)
    st = cur.frame(i).state(m, layer) if layer is not None else None
    if st is None:
        return None
    return st.quantity(min(p.get("head", 0), st.heads - 1), p.get("quantity", "S"))


def shared_vmax(cur, i: int, options: list[dict]) -> float:
    """One colour scale for several state panels: the largest |value| any of them shows."""
    tops = [float(np.abs(q).max()) for p in options if (q := shown_quantity(cur, i, p)) is not None and q.size]
    return max(tops, default=1.0)


class StatePanel(HeatmapPanel):
    kind = "state"
    text_form = staticmethod(text_form)
    LAYER_KINDS = STATE_MIXERS
    BINDINGS = [Binding("c", "shared_range", "shared colours", show=False)]

    def _sharing(self) -> list["StatePanel"]:
        return [p for p in self.screen.query(StatePanel) if p.options.get("colour_range") == "shared"]

    def action_shared_range(self) -> None:
        """c: all state panels on one colour scale, or each on its own again."""
        panels = list(self.screen.query(StatePanel))
        shared = self.options.get("colour_range") != "shared"
        for p in panels:
            p.options["colour_range"] = "shared" if shared else "own"
            if p._shown is not None:
                p.show(*p._shown)

    def draw(self, cursor, i: int) -> None:
        info, f = cursor.info, cursor.frame(i)
        m = self.options.get("model", 0)
        layer = self.current_layer(cursor)
        if layer is None:
            self.put(self.query_one("#legend", TextBox), "this model has no recurrent state")
            return
        st = f.state(m, layer)
        H = st.heads
        h = self.options["head"] = min(self.options.get("head", 0), H - 1)
        kind = st.mixer
        q = self.options.get("quantity", "S")
        data = st.quantity(h, q)
        if q == "error":
            data = data[None, :]                                    # one row: (1, V)
        hm = self.query_one(Heatmap)
        vmax = None
        if self.options.get("colour_range") == "shared":
            vmax = shared_vmax(cursor, i, [p.options for p in self._sharing()] or [self.options])
        hm.set_data(data, "diverging", vmax=vmax)
        name = info["models"][m]["name"]
        what = {"S": "S", "dS": "delta S (last write)", "error": "v - read-back"}[q]
        self.set_title(f"state · {name} · L{layer} {kind} · head {h}/{H} · {what}")
        if not self.border_subtitle:
            self.border_subtitle = "[ ] layer  , . head  t quantity  c shared scale"
        self._legend(hm)

    def _legend(self, hm: Heatmap) -> None:
        r, c = hm.cursor
        val = hm.value_under_cursor
        bar = colour_bar("diverging", hm.vmax, no_color=self.app.no_color)
        if self.options.get("colour_range") == "shared":
            bar.append(" shared")
        rows, cols = hm.data.shape
        if rows == 1:                                   # v - read-back: one value per channel
            bar.append(f"\n→ value channel {_span(cols)}")
            where = f"v{c}"
        else:
            bar.append(f"\n↓ key channel {_span(rows)} × → value channel {_span(cols)}")
            where = f"k{r} v{c}"
        if val is not None:
            bar.append(f"   {where} = {val:+.4f}   |norm| {np.linalg.norm(hm.data):.3f}")
        self.put(self.query_one("#legend", TextBox), bar, pace=0.1)

    def on_heatmap_cursor_moved(self, event: Heatmap.CursorMoved) -> None:
        self._legend(event.heatmap)

    def pick_head(self, delta: int) -> bool:
        if self._shown is None:
            return False
        cursor, i = self._shown
        st = cursor.frame(i).state(self.options.get("model", 0), self.current_layer(cursor))
        self.options["head"] = (self.options.get("head", 0) + delta) % st.heads
        return True

    def cycle_quantity(self) -> bool:
        q = self.options.get("quantity", "S")
        self.options["quantity"] = QUANTITIES[(QUANTITIES.index(q) + 1) % len(QUANTITIES)]
        return True
