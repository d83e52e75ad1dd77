"""Issue 28, every picture true under a light theme: the tokens, depth and attention panels
draw from the palette's light scales (near zero near the page, text that reads on it), and a
theme picked live draws every panel whose colours follow the theme again at once, a heatmap
panel's legend included, not at the next step. Read back from the Text each panel put on screen."""
from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from rich.color import Color
from rich.text import Text

from lineage.app import palette
from lineage.app.app import LineageApp
from lineage.app.headless import settle
from lineage.app.panels.base import Panel
from lineage.app.widgets.text_box import TextBox

SC = Path(__file__).resolve().parents[3] / "lineage" / "scenarios"
THEMES = {True: "textual-dark", False: "textual-light"}


def _hex(c) -> str | None:
    if c is None:
        return None
    c = Color.parse(c) if isinstance(c, str) else c
    return c.get_truecolor().hex.lower()


def _spans(text: Text):
    """(text, foreground, background) of each styled span of a panel's Text."""
    for sp in text.spans:
        style = sp.style
        if isinstance(style, str) or style is None:
            continue
        yield text.plain[sp.start:sp.end], _hex(style.color), _hex(style.bgcolor)


def _shown(panel: Panel) -> Text:
    """What the panel put on screen last: a heatmap panel's legend, else its body."""
    box = panel.query_one("#legend" if panel.query("#legend") else "#body", TextBox)
    assert isinstance(box.shown, Text), (panel.kind, box.shown)
    return box.shown


def _colours(panel: Panel) -> set[str]:
    return {c for _, fg, bg in _spans(_shown(panel)) for c in (fg, bg) if c}


def first_read(cur) -> int:
    """A toy memory's first read (fig5_gating): what each memory read back, as a row of cells."""
    return next(j for j in range(cur.total) if cur.frame(j).readout(0) is not None)


async def _app_at(pilot, app, step) -> None:
    """The app at a step: a number, or a function of the open file's cursor that finds one."""
    await asyncio.wait_for(settle(pilot), 60)
    app.request(step if isinstance(step, int) else step(app.cursor))
    await asyncio.wait_for(settle(pilot), 60)


def _run(scenario: str, step: int, dark: bool, check, size=(160, 50)):
    async def go():
        app = LineageApp(str(SC / scenario))          # an absolute path stays itself
        app.theme = THEMES[dark]
        async with app.run_test(size=size) as pilot:
            await _app_at(pilot, app, step)
            await check(app, pilot)
    asyncio.run(go())


def _panel(app, kind: str) -> Panel:
    return next(p for p in app.screen.query(Panel) if p.kind == kind)


# -- the palette: text drawn in a scale's colours reads on the page -----------------------------
@pytest.mark.parametrize("dark", [True, False])
def test_inked_steps_and_the_mark_read_on_the_page(dark):
    page = palette.PAGE[dark]
    inked = palette.inked("sequential", dark)
    assert len(inked) >= 3 and inked == sorted(inked) and inked[-1] == len(palette.SEQUENTIAL) - 1
    for i in inked:
        assert palette.contrast(palette.colour(i, "sequential", dark), page) >= 3, i
    assert palette.contrast(Color.parse(palette.MARK[dark]), page) >= 3
    # the steps too near the page are not inked: a number in them takes the page's text colour
    assert palette.ink(0, "sequential", dark) is None


@pytest.mark.parametrize("dark", [True, False])
def test_a_number_on_its_step_reads(dark):
    """The depth table's cells: every step of the theme's scale, its number in black or white,
    whichever reads better there; on every step of both scales that reaches 4.5:1 (the closest
    is the mid teal #008787, 4.8:1 in black)."""
    for i in range(len(palette.colours("sequential", dark))):
        bg = palette.colour(i, "sequential", dark)
        got = palette.contrast(Color.parse(palette.ink_on(i, dark)), bg)
        best = max(palette.contrast(Color.parse(c), bg) for c in ("#000000", "#ffffff"))
        assert got == best, (i, got, best)
        assert got >= 4.5, (i, got)


# -- the panels under a light theme ---------------------------------------------------------------
def test_the_depth_table_is_light_and_its_numbers_read():
    async def check(app, pilot):
        cells = [(s, fg, bg) for s, fg, bg in _spans(_shown(_panel(app, "depth"))) if bg]
        assert len(cells) > 20
        light = {c.lower() for c in palette.SEQUENTIAL_LIGHT}
        for s, fg, bg in cells:
            assert bg in light, (s, bg)
            assert palette.contrast(Color.parse(fg), Color.parse(bg)) >= 4, (s, fg, bg)
    _run("tour.yaml", 7, False, check)


QUERIES = """version: 1
title: "queries"
model: {preset: tiny-softmax}
weights: {seed: 0}
input:
  task: {kind: mqar, pairs: 4, vocab: 32, seed: 0, distinct_values: true}
panels:
  - {kind: tokens}
"""


def test_the_tokens_bars_and_the_wanted_answer_read_on_a_light_page(tmp_path):
    """A query's step: the answer it wants in the theme's mark colour, each guess's bar in a
    step of the light scale that shows on the page."""
    (tmp_path / "queries.yaml").write_text(QUERIES)

    async def check(app, pilot):
        spans = list(_spans(_shown(_panel(app, "tokens"))))
        bars = [fg for s, fg, _ in spans if s and set(s) == {"█"}]
        wanted = [fg for s, fg, _ in spans if "want next" in s]
        assert len(bars) == 5 and wanted == [palette.MARK[False]]
        for fg in bars + wanted:
            assert palette.contrast(Color.parse(fg), palette.PAGE[False]) >= 3, fg
        assert set(bars) <= {c.lower() for c in palette.SEQUENTIAL_LIGHT}
    _run(tmp_path / "queries.yaml", 9, False, check)      # step 10: the first query


@pytest.mark.parametrize("dark", [True, False])
def test_a_guess_bar_is_further_along_the_readable_steps_the_likelier_it_is(dark):
    """Probabilities spread over every step that reads on the page, in order: a light theme's
    bars took its last step from q = 1/6 on, so a guess at 0.2 looked like one at 0.9."""
    from lineage.app.panels.tokens import BAR_OCTAVES, bar_step
    inked = palette.inked("sequential", dark)
    got = [bar_step(q, dark) for q in np.geomspace(1e-3, 1, 200)]
    assert set(got) == set(inked) and got == sorted(got)          # each readable step, in order
    assert bar_step(0.0, dark) == inked[0] and bar_step(1.0, dark) == inked[-1]
    n = len(inked)                                                # one q from each step's share
    assert [bar_step(2 ** (-BAR_OCTAVES * (n - 1 - k + 0.5) / n), dark) for k in range(n)] == inked
    assert len({bar_step(q, dark) for q in (0.03, 0.2, 0.9)}) == 3


def test_a_toy_memorys_readout_cells_are_on_the_light_scale():
    async def check(app, pilot):
        body = _shown(_panel(app, "tokens"))
        assert "reads" in body.plain
        cells = [fg for s, fg, _ in _spans(body) if s == "█"]
        assert len(cells) >= 16
        assert set(cells) <= {c.lower() for c in palette.DIVERGING_LIGHT}, set(cells)
    _run("fig5_gating.yaml", first_read, False, check)


def test_the_attention_map_and_its_scale_are_light():
    async def check(app, pilot):
        spans = list(_spans(_shown(_panel(app, "attention"))))
        cells = [bg for s, _, bg in spans if bg and not s.strip()]
        light = [c.lower() for c in palette.SEQUENTIAL_LIGHT]
        assert cells and set(cells) <= set(light)
        assert light[0] in cells                      # a weight near zero: the page's quiet grey
        assert [fg for s, fg, _ in spans if s == "██"] == light
    _run("attention_recall.yaml", 19, False, check)


# -- a theme picked live --------------------------------------------------------------------------
@pytest.mark.parametrize("scenario, step, kinds", [
    ("tour.yaml", 7, ("tokens", "state", "decay", "depth")),
    ("fig5_gating.yaml", first_read, ("tokens", "state")),
    ("gated_mla.yaml", 5, ("gate",)),
    ("attention_recall.yaml", 19, ("attention", "tokens")),
    ("fig5_gating.yaml", 17, ("recall",)),
])
def test_a_theme_switch_redraws_the_panels_at_once(scenario, step, kinds):
    """No step is asked for between the switches: what the panels show is drawn again in the
    new theme's colours (a legend's colour bar, a table's cells) before anyone presses a key,
    the same picture as drawing the step afresh under that theme."""
    async def check(app, pilot):
        step_shown = app.player.index
        panels = [p for p in app.screen.query(Panel) if p.kind in kinds]
        assert {p.kind for p in panels} == set(kinds)
        for dark in (False, True):
            before = [_shown(p) for p in panels]
            app.theme = THEMES[dark]
            await pilot.pause()
            assert app.player.index == step_shown
            for p, old in zip(panels, before):
                now = _shown(p)
                assert _colours(p) != {c for _, fg, bg in _spans(old) for c in (fg, bg) if c}, (p.kind, dark)
                p.redraw()                                  # the step drawn afresh under this theme
                assert _shown(p) == now, (p.kind, dark)
    _run(scenario, step, True, check)


def test_a_theme_switch_redraws_the_cache_chart_at_once():
    """The cache panel's colours are its chart's lines and key (#plot), not its legend."""
    async def check(app, pilot):
        p = _panel(app, "cache")
        for dark in (False, True):
            before = p.query_one("#plot", TextBox).shown
            app.theme = THEMES[dark]
            await pilot.pause()
            now = p.query_one("#plot", TextBox).shown
            assert {fg for _, fg, _ in _spans(now) if fg} != {fg for _, fg, _ in _spans(before) if fg}, dark
            p.redraw()
            assert p.query_one("#plot", TextBox).shown == now, dark
    _run("tour.yaml", 12, True, check)
