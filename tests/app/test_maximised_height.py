"""A maximised panel takes the whole height between the timeline and the caption bar: a
figure panel sizes itself to its content in the grid, and that height must not follow it."""
from tests.app.helpers import opened, panel, run


def test_a_maximised_figure_fills_the_height_the_bars_leave():
    async def go():
        async with opened("fig2_kv_cache", (120, 40)) as (pilot, app):
            figure = panel(app, "figure")
            figure.focus()
            await pilot.press("m")
            await pilot.pause(1.0)
            assert app.main.maximized is figure
            bar = app.main.query_one("#captionbar")
            assert figure.region.y == 1                       # right under the timeline
            assert figure.region.bottom == bar.region.y       # no blank rows above the bar
    run(go())
