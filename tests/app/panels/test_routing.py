"""The routing panel with a real checkpoint's 256-512 experts: one compact strip, not a map."""
import numpy as np

from lineage.configs import MoEConfig
from lineage.playback.observe import RoutingView
from lineage.app.panels.routing import COMPACT, _compact_text, strip


def view(E=512, picks=(3, 100, 511), used=(7, 8, 100)):
    load = np.zeros(E, dtype=np.int32)
    load[list(used)] = [5, 1, 2]
    load[list(picks)] += 1
    return RoutingView(np.full(E, 0.1, dtype=np.float32), np.array(picks), np.array([0.5, 0.3, 0.2]), load, 0.4)


def test_strip_marks_this_tokens_experts_and_the_load():
    cells = strip(view(), 512, 64)
    assert cells.shape == (8, 64)
    flat = cells.ravel()
    assert flat[[3, 100, 511]].tolist() == [1.0, 1.0, 1.0]
    assert 0.1 < flat[8] < flat[7] < 1.0 and flat[0] == 0.0           # more load, brighter; unused dark


def test_compact_text_is_a_few_rows():
    moe = MoEConfig(n_experts=512, top_k=3, n_shared=1)
    lines = _compact_text(view(), 512, moe, "kimi", 1, 80)
    assert len(lines) == 2 + 512 // 64 and 512 > COMPACT
    assert lines[1].startswith("  e0   ") and lines[1][7 + 3] == "#" and lines[1][7 + 7] == "+"
    assert "used so far 5 of 512" in lines[-1] and "e511 0.20" in lines[-1]


def test_the_routing_legend_names_its_scale_and_reads_the_cursors_weight():
    """The tour's routing map had no scale and no readout: its legend now says what colour is
    (the router's weight, 0 to 1) and what the load row is, and h j k l read expert, step, token
    and weight, as the frame recorded them."""
    from tests.app.helpers import opened, panel, run
    from lineage.app.panels.common import token_label
    from lineage.app.widgets.heatmap import Heatmap
    i = 12

    async def go():
        async with opened("tour", (160, 50), i) as (pilot, app):
            p = panel(app, "routing")
            hm = p.query_one(Heatmap)
            legend = lambda: str(p.query_one("#legend").render())            # noqa: E731
            assert "0 " in legend() and " 1  the router's weight" in legend() and "load so far" in legend()
            r = app.cursor.frame(i).routing(0, p.view.layer)
            e, w = int(r.experts[0]), float(r.weights[0])
            p.focus()
            await pilot.pause(0.1)
            for _ in range(e):
                await pilot.press("j")
            while hm.cursor[1] < hm.marker:                                 # the column of "now"
                await pilot.press("l")
            await pilot.pause(0.1)
            tok = app.cursor.frame(i).token()
            want = f"cursor expert {e}, step {i + 1}: weight {w:.2f} ('{token_label(tok.text)}'@{tok.pos})"
            assert want in legend(), legend()
    run(go())
