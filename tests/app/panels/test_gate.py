"""The gate panel in the app: gated MLA's sigmoid(g_proj(x)) per value channel of one head, its
title, legend and map against the frames, and its pickers over every gated layer and head."""
import asyncio
import re

import numpy as np

from tests.app.helpers import SC, settle
from lineage.app.app import LineageApp
from lineage.app.panels.gate import GatePanel
from lineage.app.widgets.heatmap import Heatmap
from lineage.app.widgets.text_box import TextBox

GATE_LEGEND = re.compile(r"mean (\d\.\d{3}) \((\d\.\d{3})-(\d\.\d{3})\)")
GATE_TITLE = re.compile(r"gate · L(\d+) head (\d+) ")


def _gate_shown(panel):
    """(layer, head) from the panel's title, and (mean, min, max) from its legend, as drawn."""
    layer, head = map(int, GATE_TITLE.search(str(panel.border_title)).groups())
    legend = panel.query_one("#legend", TextBox).shown
    numbers = tuple(map(float, GATE_LEGEND.search(getattr(legend, "plain", str(legend))).groups()))
    return layer, head, numbers


def _gate_against_frame(app, panel, i: int) -> tuple[int, int]:
    """The panel's title, legend and map hold the frame's gate of the layer and head it names."""
    layer, head, (mean, lo, hi) = _gate_shown(panel)
    g = app.cursor.frame(i).gate(0, layer)[head].astype(np.float64)            # (value channels,)
    assert (mean, lo, hi) == tuple(round(float(x), 3) for x in (g.mean(), g.min(), g.max())), (layer, head)
    data = panel.query_one(Heatmap).data                                        # (channels, columns)
    assert data.shape[0] == g.shape[0] == 16                                    # one row per channel
    assert any(np.allclose(data[:, c], g, atol=1e-3) for c in range(data.shape[1]))   # now is a column
    return layer, head


def test_the_gate_panel_draws_the_frames_gate_and_its_pickers_walk_layers_and_heads():
    """Gated MLA's sigmoid(g_proj(x)) per value channel of one head: the title, legend and map
    against the frames, and the layer and head pickers over every gated MLA layer and head."""

    async def go():
        app = LineageApp(str(SC / "gated_mla.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            app.request(19)
            await settle(pilot, app, 19)
            first, second = app.query(GatePanel)
            assert _gate_against_frame(app, first, 19) == (3, 0) and _gate_against_frame(app, second, 19) == (7, 0)
            # the caption at step 20 quotes layer 3's gate: the panel shows the same numbers
            assert _gate_shown(first)[2] == (0.414, 0.270, 0.638)
            first.focus()
            await pilot.pause(0.1)
            seen = []
            for key in ("right_square_bracket", "full_stop", "right_square_bracket", "right_square_bracket"):
                await pilot.press(key)
                await settle(pilot, app, 19)
                await pilot.pause(0.1)
                seen.append(_gate_against_frame(app, first, 19))
            assert seen == [(7, 0), (7, 1), (8, 1), (3, 1)]       # every gated MLA layer, then round again
            await pilot.press("p")                                 # a step back: the map's now is step 19
            await settle(pilot, app, 18)
            await pilot.pause(0.1)
            assert _gate_against_frame(app, first, 18) == (3, 1)
            assert _gate_against_frame(app, second, 18) == (7, 0)       # the other panel kept its own layer
    asyncio.run(go())
