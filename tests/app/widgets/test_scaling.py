"""Pictures that scale: heatmaps and figure plots fill their panel and grow when
maximised or given a larger terminal, small matrices print their values, sweeps leave a gap
after now. Driven as a person would (Pilot)."""
import re

import numpy as np
import pytest

from tests.app.helpers import opened, panel, run, slide, until
from lineage.app.panels.base import Panel
from lineage.app.widgets.heatmap import Heatmap, fit
from lineage.app.widgets.sweep import GAP, Sweep


def test_fit_zooms_prints_and_folds():
    assert fit(32, 32, 46, 17).zoom == 1                         # 1.06: a few doubled columns would read as data
    big = fit(32, 32, 150, 40)                                   # 80 pixel rows bind: 2.5 pixels a value
    assert big.zoom == 2.5 and big.width == 80 and len(big.ys) == 80
    # 62 columns (a third of 200) and room below: most values two wide, none wider, none lost
    third = fit(32, 32, 62, 40)
    widths = np.bincount(third.xs, minlength=32)
    assert third.width == 62 and set(widths) == {1, 2} and (widths == 2).sum() == 30
    assert np.array_equal(np.bincount(third.ys, minlength=32), widths)     # square: rows as columns
    assert fit(32, 32, 62, 40, whole=True).zoom == 1             # a sweep keeps even columns
    assert fit(16, 16, 46, 17).zoom == pytest.approx(2.125)
    small = fit(2, 1, 40, 10)
    assert small.text and small.cw >= 8 and small.cw == 2 * small.ch          # a square-looking cell
    assert fit(2, 1, 150, 40).ch == 20                           # maximised: as tall as the panel allows
    assert not fit(8, 8, 40, 10).text                            # 8 columns of 5: no room for values
    assert fit(8, 4, 50, 20, per=1).ch == 1                      # no colour: one line a row
    assert fit(32, 200, 76, 40).fold == 3                        # folded: each drawn column the mean of 3
    assert fit(32, 40, 76, 10).rfold == 2


def test_heatmap_grows_when_maximised():
    async def go():
        async with opened("tour", (160, 50)) as (pilot, app):
            state = panel(app, "state")
            hm = state.query_one(Heatmap)
            before = (hm.fit.zoom, app.screen.get_widget_at(0, 0))
            state.focus()
            await pilot.press("m")
            await pilot.pause(0.3)
            assert hm.fit.zoom > before[0] and hm.size.height >= 32
            await pilot.press("m")
            await pilot.pause(0.3)
            assert hm.fit.zoom == before[0]
    run(go())


def test_figure_plot_grows_when_maximised():
    """fig4's curve takes the rows a maximised panel has, and gives them back when restored."""
    def plot_rows(fig) -> int:
        return sum(1 for ln in str(fig.query_one("#body").shown).splitlines() if "\u2502" in ln[:7])

    async def go():
        async with opened("fig4_chunk_dial", (160, 50)) as (pilot, app):
            fig = panel(app, "figure")
            before = plot_rows(fig)
            fig.focus()
            await pilot.press("m")
            await pilot.pause(0.3)
            assert app.screen.maximized is fig and plot_rows(fig) >= 1.5 * before
            await pilot.press("m")
            await pilot.pause(0.3)
            assert plot_rows(fig) == before
            await pilot.press("m")
            await pilot.pause(0.3)
            await pilot.press("escape")                 # restored another way: the plot follows too
            await pilot.pause(0.3)
            assert app.screen.maximized is None and plot_rows(fig) == before
    run(go())


def _drawn(hm: Heatmap) -> tuple[int, int, int]:
    """The picture's columns and lines as rendered (its cells, not the axis labels around it),
    and the blank columns left of the picture and its row labels."""
    ox, oy = hm._offset()
    lines = [hm.render_line(oy + y).text[ox:] for y in range(hm._map_lines())]
    drawn = [ln for ln in lines if ln.strip()]
    left = min(len(ln) - len(ln.lstrip()) for ln in drawn) + ox - hm._gutter
    return max(len(ln.rstrip()) for ln in drawn), len(drawn), left


def test_heatmap_uses_a_larger_terminal_and_is_centred():
    async def size_at(cols: int, rows: int, maximise: bool = False):
        async with opened("tour", (cols, rows)) as (pilot, app):
            state = panel(app, "state")
            hm = state.query_one(Heatmap)
            if maximise:
                state.focus()
                await pilot.press("m")
                await pilot.pause(0.3)
            w, h, left = _drawn(hm)
            assert abs(left - (hm.size.width - hm._gutter - w) // 2) <= 1   # centred, not left-aligned
            return w, h

    async def go():
        at160 = await size_at(160, 50)
        at200 = await size_at(200, 60)
        big = await size_at(160, 50, maximise=True)
        assert at200[0] > at160[0] and at200[1] > at160[1]        # a third of 200 columns is used
        assert big[0] > at200[0] and big[1] > at200[1]
        for w, h in (at160, at200, big):                          # square-looking values: 2 columns a line
            assert abs(w - 2 * h) <= 2
    run(go())


def test_small_matrices_print_their_values():
    async def go():
        async with opened("fig3_two_facts", (160, 50), 1) as (pilot, app):
            hm = panel(app, "state").query_one(Heatmap)
            assert hm.fit.text
            drawn = "".join(hm.render_line(y).text for y in range(hm.size.height))
            assert "+1.70" in drawn
            assert "key channel" in drawn and "value channel" in drawn        # the map names its axes
    run(go())


def test_sweep_leaves_a_gap_after_now():
    sw = Sweep()
    sw.update("k", 5, lambda j: np.full(2, 1.0), width=52)
    assert sw.blank(5) == list(range(6, 48))                     # not reached yet: blank
    sw.update("k", 100, lambda j: np.full(2, 1.0), width=52)
    assert sw.blank(100) == [(100 + d) % 48 for d in range(1, GAP + 1)]


def test_a_still_sweep_of_few_steps_is_only_those_steps():
    """A slide's sweep of its first 6 steps held 6 columns and 14 (at 160 columns, 85) blank
    ones after them: the map drew them 1 column each, a sliver of its frame. A still picture
    is only its steps; a live sweep and a full still one are as they were."""
    def col(j):
        return np.full(3, float(j))
    sw = Sweep()
    sw.update("k", 5, col, 24, ordered=True)
    data, blank = sw.picture(5)
    assert data.shape == (3, 6) and list(data[0]) == list(range(6)) and blank == []
    assert sw.column_of(5) == 5 and sw.step_at(0) == 0 and sw.shown(5) == 6
    sw.update("k", 5, col, 24)                                   # the app's sweep: its span, blank ahead
    data, blank = sw.picture(5)
    assert data.shape == (3, 20) and blank == list(range(6, 20))
    sw.update("k", 100, col, 24, ordered=True)                   # a full still sweep: every column a step
    data, blank = sw.picture(100)
    assert data.shape == (3, 20) and blank == [] and data[0, -1] == 100


def test_a_slide_of_a_few_steps_scales_its_sweep_to_the_frame():
    """fig6's decay slide at step 6, 160 x 50: 8 channels by 6 steps drew 6 columns wide in a
    panel of 158 (the rest blank). Now each step is drawn the same whole number of columns,
    as many as fit the width or (square values: a pixel row a column) the height."""
    async def go():
        async with opened("fig6_channel_decay", (160, 50)) as (pilot, app):
            await slide(pilot, app, 5, "decay")
            hm = panel(app, "decay").query_one(Heatmap)
            f, (rows, cols) = hm.fit, hm.data.shape
            assert (rows, cols) == (8, 6) and not hm.blank
            widths = np.bincount(f.xs, minlength=cols)
            zoom = int(widths[0])
            assert zoom >= 4 and set(widths.tolist()) == {zoom} and f.zoom == zoom
            pixels = 2 * (hm.size.height - hm._head - hm._foot())
            assert (zoom + 1) * cols > hm.size.width - hm._gutter or (zoom + 1) * rows > pixels
            assert len(f.ys) >= zoom * rows                      # rows at least as tall as a column is wide
    run(go())


def test_decay_map_draws_the_gap_blank():
    async def go():
        async with opened("tour", (160, 50), 120) as (pilot, app):
            hm = panel(app, "decay").query_one(Heatmap)
            now = 120 % hm.data.shape[1]
            ox, oy = hm._offset()                               # the picture is centred
            line = hm.render_line(oy).text[ox:]
            gap = [(now + d) % hm.data.shape[1] for d in range(1, GAP + 1)]
            assert all(line[c] == " " for c in gap) and line[now] != " "
    run(go())


def test_small_matrices_without_colour_take_one_line_a_row(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        async with opened("fig3_two_facts", (80, 24), 1) as (pilot, app):
            hm = panel(app, "state").query_one(Heatmap)
            oy = hm._offset()[1]                                 # the map's lines, not its axis line
            lines = [hm.render_line(oy + y).text for y in range(hm._map_lines())]
            at = [y for y, ln in enumerate(lines) if ln.strip()]
            drawn = [lines[y] for y in at]
            # without colour a taller cell is only a blank line parting the rows
            assert hm.fit.text and len(drawn) == hm.data.shape[0] and at[-1] - at[0] + 1 == len(drawn)
            assert all(len(re.findall(r"[+-]\d\.\d\d", ln)) == hm.data.shape[1] for ln in drawn)
    run(go())


def test_hiding_panels_gives_the_heatmap_their_room():
    async def go():
        async with opened("tour", (160, 50)) as (pilot, app):
            hm = panel(app, "state").query_one(Heatmap)
            before = hm.size
            for kind in ("tokens", "decay", "routing", "depth", "cache"):
                app._toggle(panel(app, kind))
            await until(pilot, lambda: hm.size.width > before.width and hm.size.height > before.height
                        and hm.fit.zoom >= 2, "the heatmap to grow into the room")
    run(go())


def test_t_does_not_reflow_the_panels_below(monkeypatch):
    async def go():
        async with opened("tour", (80, 24), 2) as (pilot, app):              # natural heights: the grid scrolls
            state = panel(app, "state")
            below = [p for p in app.query(Panel) if p.region.y > state.region.y]
            before = (state.outer_size, [p.region for p in below])
            state.focus()
            await pilot.press("t", "t")                               # the one-row read-back error
            await pilot.pause(0.3)
            assert state.query_one(Heatmap).data.shape[0] == 1
            assert (state.outer_size, [p.region for p in below]) == before
    run(go())


def test_rows_that_fit_share_the_screen_from_the_first_frame():
    """lineage_compare's seven panels make three rows; at 160 x 50 they fit once the caption bar
    has its height, which it has only after the first layout: the grid must not open scrolling."""
    async def go():
        async with opened("lineage_compare", (160, 50)) as (pilot, app):
            grid = app.screen.query_one("#panels")
            # the refit follows the caption bar's message; under load it may land a few frames
            # after the first one (without the refit the grid stays scrolling until a resize)
            for _ in range(50):
                if grid.virtual_size.height <= grid.size.height:
                    break
                await pilot.pause(0.1)
            assert grid.has_class("-fill")
            assert grid.virtual_size.height <= grid.size.height        # nothing below the fold
    run(go())
