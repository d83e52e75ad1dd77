"""The captions panel. A caption that names its panel (`panel: decay`) brings that panel into
view when it comes (by `{ }`, by stepping or playing onto it), so at 80x24 a class sees what the
caption describes; a slide of another panel leaves it out. The caption bar: always on screen,
whole, of one height, kept by a maximised panel and by exports."""
from __future__ import annotations

import asyncio

import pytest

from lineage.scenario import ScenarioError, loads
from tests.app.helpers import SC, panel, run, screen_text, settle, svg_text, words
from lineage.app.app import LineageApp
from lineage.cli.main import main
from lineage.app.headless import settle as settled
from lineage.app.panels.base import Panel
from lineage.app.panels.captions import CaptionsPanel


async def _at(pilot, app, i: int, timeout: float = 60.0) -> None:
    async def until():
        while True:
            await settled(pilot)
            p = app.screen.player
            if p.cursor is not None and p.index == i:
                return
            await pilot.pause(0.05)
    await asyncio.wait_for(until(), timeout)
    await pilot.pause(0.1)                 # the scroll lands after a refresh


def _seen(app, kind: str) -> bool:
    """Whether the first panel of this kind has its top and at least 5 rows inside the grid's
    window (regions are where the widgets sit on the screen, after scrolling)."""
    grid = app.screen.query_one("#panels")
    panel = next(p for p in grid.query(Panel) if p.kind == kind)
    return grid.region.y <= panel.region.y <= grid.region.bottom - min(5, panel.outer_size.height)


def test_each_caption_brings_its_panel_into_view_at_80x24():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(80, 24)) as pilot:
            await _at(pilot, app, 0)
            # tour: step 5 decay, 13 routing, 25 depth, 41 cache (the counter's numbers)
            for step, kind in ((5, "decay"), (13, "routing"), (25, "depth"), (41, "cache")):
                await pilot.press("right_curly_bracket")
                await _at(pilot, app, step - 1)
                assert _seen(app, kind), f"step {step}: the {kind} panel its caption is about is off screen"
            await pilot.press("left_curly_bracket", "left_curly_bracket", "left_curly_bracket")
            await _at(pilot, app, 4)
            assert _seen(app, "decay")
    asyncio.run(go())


def test_a_maximised_panel_gives_way_to_the_one_the_caption_is_about():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(80, 24)) as pilot:
            await _at(pilot, app, 0)
            await pilot.press("m")                 # the focused panel (state) fills the screen
            await pilot.pause(0.1)
            assert app.screen.maximized is not None and app.screen.maximized.kind == "state"
            await pilot.press("right_curly_bracket")
            await _at(pilot, app, 4)
            assert app.screen.maximized.kind == "decay"
    asyncio.run(go())


def test_a_caption_names_a_panel_the_scenario_has():
    head = "version: 1\ntitle: t\nmodel: {preset: tiny-deltanet}\ninput: {text: abc}\n"
    with pytest.raises(ScenarioError) as e:
        loads(head + "panels: [{kind: state}, {kind: tokens}]\ncaptions:\n  - {step: 1, panel: decay, text: a}\n", "c.yaml")
    assert [str(p) for p in e.value.problems] == [
        "c.yaml:7:22: captions[0].panel: the scenario has no decay panel (its panels: state, tokens)"]
    with pytest.raises(ScenarioError):
        loads(head + "captions:\n  - {step: 1, panel: nope, text: a}\n", "c.yaml")


def test_a_panels_slides_are_the_captions_about_it(tmp_path, capsys):
    # the tour's routing caption (step 13) is about routing: a state deck has no slide of it,
    # and the state panel's snapshot at step 13 carries no routing caption
    assert main(["snapshot", "tour", "--step", "13", "--panel", "state", "-o", "-"]) == 0
    assert "Routing:" not in capsys.readouterr().out
    assert main(["snapshot", "tour", "--step", "13", "--panel", "routing", "-o", "-"]) == 0
    assert "note: Routing:" in capsys.readouterr().out


def test_a_slide_of_one_panel_stays_on_it_when_a_caption_names_another(tmp_path):
    # tour step 13's caption is about routing; a state slide there must still show the state
    out = tmp_path / "s.svg"
    assert main(["snapshot", "tour", "--step", "13", "--panel", "state", "-o", str(out)]) == 0
    svg = out.read_text()
    assert "state" in svg and "routing" not in svg


def test_stepping_onto_a_caption_brings_its_panel_into_view_at_80x24():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(80, 24)) as pilot:
            await _at(pilot, app, 0)
            app.request(3)                      # step 4: the first caption's, about the state
            await _at(pilot, app, 3)
            assert not _seen(app, "decay")      # below the fold at 80x24
            await pilot.press("n")              # step 5: the decay caption comes
            await _at(pilot, app, 4)
            assert _seen(app, "decay")
            app.request(11)                     # step 12: still the decay caption
            await _at(pilot, app, 11)
            await pilot.press("space")          # playing on reaches step 13, the routing caption
            async def until_routing():
                while app.screen.player.index < 12:
                    await pilot.pause(0.1)
            await asyncio.wait_for(until_routing(), 30)
            await pilot.press("space")
            await pilot.pause(0.3)
            assert _seen(app, "routing")
    asyncio.run(go())


# -- the caption bar ------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
def test_caption_is_whole_and_on_screen(size):
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=size) as pilot:
            await settle(pilot, app, 0)
            bar = app.query_one(CaptionsPanel)
            text = app.cursor.frame(0).caption()
            assert bar.parent.id == "captionbar"                 # not in the scrolling grid
            assert bar.region.bottom <= size[1] - 1 and bar.region.height >= 3
            assert words(text) in words(screen_text(app))          # all of it: never cut
            # scrolling the grid leaves it where it is
            app.query_one("#panels").scroll_end(animate=False)
            await pilot.pause(0.1)
            assert words(text) in words(screen_text(app))
    run(go())


@pytest.mark.parametrize("no_color", [False, True])
def test_the_caption_bar_keeps_one_height_as_captions_change(no_color, monkeypatch):
    """A longer caption must not grow the bar (that reflows and redraws every panel above it),
    with colour and without (where the text form adds 'note: ')."""
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        app = LineageApp(str(SC / "active_params.yaml"))
        async with app.run_test(size=(69, 30)) as pilot:
            await settle(pilot, app, 0)
            bar = app.query_one(CaptionsPanel)
            heights = []
            for i in range(min(6, app.cursor.total)):
                app.request(i)
                await settle(pilot, app, i)
                heights.append(bar.size.height)
            assert len(set(heights)) == 1, heights
    run(go())


def test_a_slides_caption_bar_fits_its_own_caption():
    """A slide is still: its bar is as tall as its own caption, not the scenario's longest
    (recall_overload's first slide, at 90 columns two lines under a bar of four, left two
    blank rows on the projected picture). Playing, the bar keeps the longest's height."""
    from tests.app.helpers import opened, slide

    async def go():
        async with opened("recall_overload", (90, 40), 6) as (pilot, app):
            bar = app.query_one(CaptionsPanel)
            await pilot.pause(0.2)
            steady = bar.outer_size.height
            await slide(pilot, app, 6)                   # "Writing 16 random keys into 8 dimensions: ..."
            await pilot.pause(0.2)
            lines = bar.virtual_size.height
            assert lines == 2 and bar.max_scroll_y == 0
            assert bar.outer_size.height == lines + 2 < steady      # + its tall border's two rows
            await slide(pilot, app, 31)                  # the longest caption: its bar grows to it
            await pilot.pause(0.2)
            assert bar.max_scroll_y == 0 and bar.outer_size.height == bar.virtual_size.height + 2 == steady
    run(go())


def test_exported_caption_keeps_its_second_line(tmp_path):
    out = tmp_path / "x.svg"
    assert main(["snapshot", "fig5_gating", "--step", "18", "-o", str(out), "--size", "80", "24"]) == 0
    text = words(svg_text(out.read_text()))
    assert "Here forgetting costs little, since A was being lost anyway, and buys room for B." in text


def test_a_maximised_panel_keeps_the_caption():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, 0)
            panel(app, "state").focus()
            await pilot.press("m")
            await pilot.pause(0.2)
            assert app.screen.maximized is panel(app, "state")
            assert app.query_one(CaptionsPanel).region.height >= 3
    run(go())


def test_caption_keys_jump_between_captions():
    async def go():
        app = LineageApp(str(SC / "fig5_gating.yaml"))
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, 0)
            await pilot.press("right_curly_bracket")
            await settle(pilot, app, 8)
            await pilot.press("right_curly_bracket")
            await settle(pilot, app, 16)
            await pilot.press("left_curly_bracket")
            await settle(pilot, app, 8)
    run(go())
