"""The state panel: compared states share one colour scale, and `c` gives each its own."""
import numpy as np
import pytest

from tests.tui.helpers import SC, panel, run, settle
from tui.app import LineageApp
from tui.panels.base import Panel
from tui.widgets.heatmap import Heatmap


def test_shared_colour_scale_across_compared_states():
    async def go():
        app = LineageApp(str(SC / "lineage_compare.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            app.request(59)
            await settle(pilot, app, 59)
            maps = [p.query_one(Heatmap) for p in app.query(Panel) if p.kind == "state"]
            tops = [float(np.abs(m.data).max()) for m in maps]
            assert len(maps) == 4 and {m.vmax for m in maps} == {max(tops)}
            assert tops[0] > 5 * max(tops[1:])                   # linear attention's blow-up shows as colour
            panel(app, "state").focus()
            await pilot.press("c")                               # each on its own scale again
            await pilot.pause(0.1)
            assert [m.vmax for m in maps] == pytest.approx(tops)
    run(go())
