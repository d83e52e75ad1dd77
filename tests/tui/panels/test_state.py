"""The state panel: compared states share one colour scale, and `c` gives each its own."""
import numpy as np
import pytest

from tests.tui.helpers import opened, panel, run
from tui.panels.base import Panel
from tui.widgets.heatmap import Heatmap


def test_shared_colour_scale_across_compared_states():
    async def go():
        async with opened("lineage_compare", (160, 50), 59) as (pilot, app):
            maps = [p.query_one(Heatmap) for p in app.query(Panel) if p.kind == "state"]
            tops = [float(np.abs(m.data).max()) for m in maps]
            assert len(maps) == 4 and {m.vmax for m in maps} == {max(tops)}
            assert tops[0] > 5 * max(tops[1:])                   # linear attention's blow-up shows as colour
            panel(app, "state").focus()
            await pilot.press("c")                               # each on its own scale again
            await pilot.pause(0.1)
            assert [m.vmax for m in maps] == pytest.approx(tops)
    run(go())
