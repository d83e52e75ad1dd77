"""The state panel: compared states share one colour scale, and `c` gives each its own."""
import numpy as np
import pytest

from tests.app.helpers import opened, panel, run
from lineage.app.panels.base import Panel
from lineage.app.widgets.heatmap import Heatmap


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


def test_a_spread_models_panels_name_the_layers_device():
    """A model a device map spread over devices (its info's `places`): the state and routing
    panels' titles name the device of the layer they show; on one device they name none."""
    async def go():
        async with opened("tour", (160, 50), 3) as (pilot, app):
            state, routing = panel(app, "state"), panel(app, "routing")
            assert "cuda" not in str(state.border_title)
            n = len(app.cursor.info["models"][0]["config"]["mixers"])
            app.cursor.info["models"][0]["places"] = ["cuda:0"] * (n // 2) + ["cuda:1"] * (n - n // 2)
            for p in (state, routing):
                p.show(app.cursor, app.index)
            await pilot.pause(0.1)
            assert str(state.border_title).startswith("state") and "· cuda:0" in str(state.border_title)
            want = "cuda:0" if routing.view.layer < n // 2 else "cuda:1"
            assert f"· {want}" in str(routing.border_title), str(routing.border_title)
    run(go())
