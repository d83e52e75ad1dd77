"""A caption that names its panel (`panel: decay`) brings that panel into view when it comes, so
at 80x24 a class sees what the caption describes; a slide of another panel leaves it out."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lineage.scenario import ScenarioError, loads
from tui.app import LineageApp
from tui.cli import main
from tui.headless import settle
from tui.panels.base import Panel

SC = Path(__file__).resolve().parents[2] / "scenarios"


async def _at(pilot, app, i: int, timeout: float = 60.0) -> None:
    async def until():
        while True:
            await settle(pilot)
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
