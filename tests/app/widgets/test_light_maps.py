"""Under a light theme the maps are light too: zero near the page, strong values dark and
saturated, sign still told apart by hue, and the recall panel's error numbers readable."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lineage.app import palette
from lineage.app.app import LineageApp
from lineage.app.headless import settle
from lineage.app.panels.recall import error_style
from lineage.app.widgets.heatmap import Heatmap
from lineage.app.widgets.legend import colour_bar

SC = Path(__file__).resolve().parents[3] / "lineage" / "scenarios"
ZERO = {"diverging": len(palette.DIVERGING) // 2, "sequential": 0}


def luma(c) -> float:
    r, g, b = c.get_truecolor()
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.mark.parametrize("scale", ["diverging", "sequential"])
def test_a_light_scale_starts_near_the_page_and_ends_dark(scale):
    n = len(palette.colours(scale, dark=False))
    assert n == len(palette.colours(scale))                      # one index for both themes
    assert luma(palette.colour(ZERO[scale], scale, dark=False)) > 190
    strongest = [n - 1] + ([0] if scale == "diverging" else [])
    for i in strongest:
        assert luma(palette.colour(i, scale, dark=False)) < 60
    # the dark theme's scales are the ones they were
    assert palette.colour(ZERO[scale], scale).get_truecolor() == (0x26, 0x26, 0x26)


def test_a_light_diverging_scale_tells_sign_by_hue():
    for step in range(1, 7):
        neg = palette.colour(6 - step, "diverging", dark=False).get_truecolor()
        pos = palette.colour(6 + step, "diverging", dark=False).get_truecolor()
        assert neg.blue > neg.red and pos.red > pos.blue, step


def test_a_light_legend_shows_the_light_scale():
    bar = colour_bar("sequential", 1.0, dark=False)
    swatches = [sp.style.color.get_truecolor() for sp in bar.spans if bar.plain[sp.start:sp.end] == "██"]
    assert swatches == [palette.colour(i, "sequential", dark=False).get_truecolor()
                        for i in range(len(palette.SEQUENTIAL))]


def test_recall_errors_are_dark_ink_on_a_light_page():
    for err in (0.1, 0.5, 1.0):
        assert luma(error_style(err, dark=False).color) < 110, err
        assert luma(error_style(err).color) > 110, err            # bright on the dark theme


def _zero_cell(hm: Heatmap):
    """The style of a drawn cell whose two values are both zero."""
    zero = ZERO[hm.scale]
    ox, oy = hm._offset()
    for y in range(hm._map_lines()):
        ra, rb = hm._rows_of_line(y)
        for x, c in enumerate(hm.fit.xs.tolist()):
            if hm.idx[ra, c] == zero and rb is not None and hm.idx[rb, c] == zero:
                seg = list(hm.render_line(oy + y).crop(ox + x, ox + x + 1))[0]
                if seg.text == "▀":                    # not the cursor's ▲
                    return seg.style
    raise AssertionError("no zero cell on the map")


def test_the_app_draws_light_maps_under_the_light_theme_and_follows_a_switch():
    async def go():
        app = LineageApp(str(SC / "fig5_gating.yaml"))
        app.theme = "textual-light"
        async with app.run_test(size=(160, 50)) as pilot:
            await asyncio.wait_for(settle(pilot), 60)
            maps = [hm for hm in app.screen.query(Heatmap) if hm.data.size and (hm.idx == ZERO[hm.scale]).any()]
            assert maps
            for hm in maps:
                style = _zero_cell(hm)
                assert luma(style.color) > 190 and luma(style.bgcolor) > 190, hm
            app.theme = "textual-dark"
            await pilot.pause()
            for hm in maps:
                style = _zero_cell(hm)
                assert style.bgcolor.get_truecolor() == (0x26, 0x26, 0x26), hm
    asyncio.run(go())



def test_the_recall_panel_follows_a_theme_switch():
    from lineage.app.panels.recall import ERROR_COLOURS, RecallPanel

    async def go():
        app = LineageApp(str(SC / "fig5_gating.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await asyncio.wait_for(settle(pilot), 60)
            panel = app.screen.query_one(RecallPanel)
            drawn = []
            rich = panel.rich
            panel.rich = lambda view: drawn.append(rich(view)) or drawn[-1]
            app.theme = "textual-light"
            await pilot.pause()
            assert drawn, "the table was not drawn again"
            colours = {sp.style.color.name for sp in drawn[-1].spans if getattr(sp.style, "color", None)}
            assert colours & set(ERROR_COLOURS[False]) and not colours & set(ERROR_COLOURS[True])
    asyncio.run(go())
