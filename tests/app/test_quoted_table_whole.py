"""At 120x40 the tour's rows of panels scroll (they do not all get FILL_ROW); a text panel is
capped at 16 rows there, but the depth table its caption quotes is shown whole, `output` row
included, where the grid's height holds it."""
from tests.app.helpers import opened, panel, run


def test_at_120x40_the_depth_table_its_caption_quotes_is_whole():
    async def go():
        async with opened("tour", (120, 40), 24) as (pilot, app):    # the depth caption
            await pilot.pause(1.0)
            depth = panel(app, "depth")
            grid = app.main.query_one("#panels")
            assert depth.max_scroll_y == 0 and str(depth.border_title) == "depth"
            assert grid.region.y <= depth.region.y and depth.region.bottom <= grid.region.bottom
    run(go())
