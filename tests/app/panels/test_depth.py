"""The depth panel, a table of 2L + 1 rows, in a room shorter than it: maximised at 80x24 the
tour's 19 rows do not fit, and the "output" row its caption quotes is below the border."""
from tests.app.helpers import SC, opened, panel, run, until
from lineage.app.headless import render_svg


def test_a_table_taller_than_its_room_says_which_lines_show_and_pages():
    async def go():
        async with opened("tour", (80, 24), 24) as (pilot, app):     # the depth caption's step
            depth = panel(app, "depth")
            await pilot.press("m")                                 # the caption's panel has the focus
            await pilot.pause(0.5)
            assert app.main.maximized is depth
            # its top border and its legend in the bottom one both show: only the title can say
            # that rows are missing, and which keys bring them
            assert str(depth.border_title) == "depth · lines 1-14 of 21 · pgup pgdn"
            await pilot.press("pagedown")
            await pilot.pause(0.3)
            assert str(depth.border_title) == "depth · lines 8-21 of 21 · pgup pgdn"
            assert depth.scroll_y == depth.max_scroll_y > 0
            await pilot.press("pageup")
            await pilot.pause(0.3)
            assert depth.scroll_y == 0
            await pilot.resize_terminal(160, 50)                   # maximised there, it fits
            await pilot.pause(0.5)
            assert str(depth.border_title) == "depth"
            await pilot.press("m")                                 # its caption's row grows to it
            await pilot.pause(0.5)
            assert str(depth.border_title) == "depth"
    run(go())


def test_the_table_its_caption_quotes_gets_the_rows_it_needs():
    """At 160x50 the tour's rows share the screen: at the depth caption the table's row grows
    to its 21 lines (the `output` row the caption quotes shows), the row above giving two; at
    another caption the rows share it equally, and the state map keeps its 32 rows whole.
    At 80x24 (the grid scrolls) it cannot fit, and says so."""
    async def go():
        async with opened("tour", (160, 50), 24) as (pilot, app):   # "Depth: ... the output reads"
            depth = panel(app, "depth")
            await until(pilot, lambda: depth.max_scroll_y == 0, "the depth table whole")
            assert str(depth.border_title) == "depth"
            assert depth.region.bottom <= app.main.query_one("#panels").region.bottom
            assert "  output  " in "\n".join(depth.text_form(app.cursor, 24, depth.options, 100))
            app.request(0)                                         # the state caption
            await until(pilot, lambda: str(depth.border_title).startswith("depth · lines 1-"), "the scroll note")
            state = panel(app, "state")
            assert "per row" not in state.query_one("Heatmap").render_line(0).text    # its axis line
        async with opened("tour", (80, 24), 24) as (pilot, app):
            depth = panel(app, "depth")
            await until(pilot, lambda: str(depth.border_title).startswith("depth · lines 1-"), "the scroll note")
    run(go())


def test_a_slide_of_the_table_shows_it_whole_without_the_note():
    svg = render_svg(str(SC / "tour.yaml"), 24, "depth")      # a slide grows until nothing scrolls
    assert "output" in svg and "pgup" not in svg and "lines" not in svg
