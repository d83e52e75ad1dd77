"""Maps that fold and say how (lineage/app/widgets/fitting.py): a map too large for its panel folds rows
by the rule that keeps what it is read for (routing: the max, so a chosen expert stays lit;
decay: the min, so a clearing channel stays dark; a state: its largest |value|, sign kept),
says so on the map ("2 per row, max shown"), stretches the folded rows over the height it has,
and puts row ticks between the ends. Read back from what is drawn, cell by cell."""
import numpy as np
import pytest

from tests.app.helpers import opened, panel, run, settle, slide
from lineage.app import palette
from lineage.app.widgets.fitting import fit, fold, row_ticks
from lineage.app.widgets.heatmap import Heatmap

RNG = np.random.default_rng(2028)


def _blocks(data, rfold, cfold, blank=()):
    """Each block's non-blank values, plain loops (None: none)."""
    rows, cols = data.shape
    return [[[float(data[r, c]) for r in range(a, min(a + rfold, rows))
              for c in range(b, min(b + cfold, cols)) if c not in blank] or None
             for b in range(0, cols, cfold)] for a in range(0, rows, rfold)]


RULE = {"max": max, "min": min, "absmax": lambda vs: max(vs, key=abs),
        "mean": lambda vs: sum(vs) / len(vs)}


@pytest.mark.parametrize("how", ["max", "min", "absmax", "mean"])
@pytest.mark.parametrize("shape, rfold, cfold", [((37, 23), 3, 2), ((32, 5), 2, 1), ((7, 64), 1, 5)])
def test_fold_rules_match_a_plain_loop(how, shape, rfold, cfold):
    data = RNG.standard_normal(shape)
    blank = [c for c in (1, 2, shape[1] - 1) if c < shape[1]]
    got, empty = fold(data, rfold, cfold, blank, how)
    want = _blocks(data, rfold, cfold, blank)
    for r, line in enumerate(want):
        for c, vals in enumerate(line):
            assert empty[r, c] == (vals is None)
            if vals is not None:
                assert got[r, c] == pytest.approx(RULE[how](vals), abs=1e-12)


def test_fold_max_keeps_one_lit_cell_and_absmax_its_sign():
    data = np.zeros((4, 4))
    data[1, 2] = 0.13                             # a token's smallest routing weight
    data[2, 0] = -3.0
    data[3, 0] = 2.0
    assert fold(data, 2, 1, how="max")[0][0, 2] == 0.13          # the mean would halve it
    assert fold(data, 2, 1, how="absmax")[0][1, 0] == -3.0       # the mean would say -0.5
    data[0, 0] = np.nan
    assert all(np.isnan(fold(data, 2, 2, how=h)[0][0, 0]) for h in RULE)
    with pytest.raises(ValueError):
        fold(data, 2, 2, how="median")


def test_folded_rows_stretch_over_the_height_a_panel_has():
    """32 experts in 13 lines (26 pixel rows) fold two to a row: 16 drawn rows, stretched over
    all 26 pixels when the height is the panel's, each drawn row at least one pixel."""
    f = fit(32, 40, 44, 13, whole=True, fill=True)
    assert f.rfold == 2 and len(f.ys) == 26 and sorted(set(f.ys.tolist())) == list(range(16))
    assert fit(32, 40, 44, 13, whole=True).ys.tolist() == list(range(16))     # measuring: what it needs
    g = fit(32, 40, 44, 80, whole=True, fill=True)                          # a sweep's rows fill too
    assert g.rfold == 1 and len(g.ys) == 160 and set(np.bincount(g.ys).tolist()) == {5}


def _begins(ys, y: int, d: int, per: int = 2) -> bool:
    """Whether line y is where drawn row d begins: the first line whose upper pixel is d (or,
    where no line's is, the line whose lower pixel is d's first)."""
    uppers = [k for k in range(-(-len(ys) // per)) if ys[k * per] == d]
    return y == (uppers[0] if uppers else int(np.searchsorted(ys, d)) // per)


@pytest.mark.parametrize("rows, pixels", [(8, 48), (8, 36), (8, 34), (16, 26), (32, 52), (32, 32), (10, 26),
                                          (32, 80), (16, 20)])
@pytest.mark.parametrize("every", [3, 4])
def test_row_ticks_fall_where_their_rows_begin_one_stride_apart(rows, pixels, every):
    """A tick every 4 lines, whatever row the line began, labelled a stretched 8-row map
    '0 1 2 4 5 6 7' and a 32-row one '0 4 9 14 19 24 31'. Now: the ends and one round stride
    between, each tick on the line its row begins; rows two lines or taller each get one."""
    ys = np.arange(pixels) * rows // pixels            # as fit spreads drawn rows over pixel rows
    ticks = row_ticks(ys, 2, every)
    named = [d for _, d in ticks]
    assert named[0] == 0 and named[-1] == rows - 1 and ticks[0][0] == 0
    stride = named[1] - named[0]
    assert stride in (1, 2, 4, 5, 8)
    # the last row ends the stride (one too close to it is left out)
    assert all(b - a == stride for a, b in zip(named[:-2], named[1:-1])) and named[-1] - named[-2] < 2 * stride
    assert all(_begins(ys, y, d) for y, d in ticks)
    assert all(b[0] - a[0] >= 2 for a, b in zip(ticks, ticks[1:]))      # never two labels a line apart
    if pixels / rows >= 4:                              # two lines a row or more: every row named
        assert named == list(range(rows))


def test_the_channel_decay_map_at_200x60_names_every_channel():
    """fig6 at 200 x 60, step 6 (as `lineage snapshot` draws it): the decay map's 8 key
    channels stretch over the panel's height, and its row labels read 0 1 2 4 5 6 7: no 3.
    Every channel is named now, on the line where its row begins."""
    async def go():
        async with opened("fig6_channel_decay", (200, 60)) as (pilot, app):
            await slide(pilot, app, 5)
            hm = panel(app, "decay").query_one(Heatmap)
            ticks = [(y, t.split()[-1]) for y, t in enumerate(hm._ticks) if t.strip()]
            assert [t for _, t in ticks] == [str(c) for c in range(8)]
            assert all(_begins(hm.fit.ys, y, int(t)) for y, t in ticks)
    run(go())


def _pixel_indices(hm: Heatmap, x: int) -> list[int]:
    """The sequential colour step of every pixel row drawn at widget column x, top to bottom,
    read from the rendered strips (a blank pixel: -2)."""
    colours = {palette.colour(i, "sequential").triplet: i for i in range(len(palette.SEQUENTIAL))}
    oy, out = hm._offset()[1], []
    for y in range(oy, oy + hm._map_lines()):
        at = 0
        for seg in hm.render_line(y):
            if at <= x < at + seg.cell_length:
                ch, st = seg.text[x - at], seg.style
                break
            at += seg.cell_length
        top = colours[st.color.triplet] if ch in "▀▲" and st.color else -2
        bottom = colours[st.bgcolor.triplet] if ch == "▀" and st.bgcolor else -2
        if ch == "▄":
            top, bottom = -2, colours[st.color.triplet]
        out += [top, bottom]
    return out[:len(hm.fit.ys)]


async def drawn_at(pilot, app, step: int) -> None:
    """The app at 0-based `step`, drawn: asked for, settled, and its panels refreshed."""
    app.request(step)
    await settle(pilot, app, step)
    await pilot.pause(0.3)


def test_routing_at_160x50_lights_every_expert_the_text_names():
    """The tour at 160 x 50, step 25: 'now: e14 0.37, e27 0.28, e6 0.22, e2 0.13'. The map has
    16 pixel rows' room for 32 experts; it lit 3 cells in the now column (e2's 0.13 averaged
    with an idle neighbour fell to the dark step). Each chosen expert's row is lit at its
    weight's colour step, no other row is, and the map says how it folds."""
    async def go():
        async with opened("tour", (160, 50)) as (pilot, app):
            await drawn_at(pilot, app, 24)
            p = panel(app, "routing")
            hm, now = p.query_one(Heatmap), p.view.now
            f = hm.fit
            assert f.rfold == 2 and f.fold == 1
            weights = {int(e): float(w) for e, w in zip(now.experts, now.weights)}
            legend = str(p.query_one("#legend").shown)
            assert all(f"e{e} {w:.2f}" in legend for e, w in weights.items()) and len(weights) == 4
            x = hm._offset()[0] + int(np.searchsorted(f.xs, hm.marker))
            pixels = _pixel_indices(hm, x)
            lit = {int(f.ys[k]) for k, i in enumerate(pixels) if i > 0}
            assert lit == {e // 2 for e in weights}
            for k, i in enumerate(pixels):          # every pixel of a chosen pair at the larger weight
                pair = [w for e, w in weights.items() if e // 2 == f.ys[k]]
                assert i == (int(palette.sequential_index(np.array([max(pair)]), 0.0, 1.0)[0]) if pair else 0)
            text = "\n".join(hm.render_line(y).text for y in range(hm.size.height))
            assert "↓ expert, 2 per row, max shown" in text and "30-31" in text
            # it uses the height it has: every line between the axis name and the caret's line
            assert hm._map_lines() == hm.size.height - hm._head - 1
            ticks = [t for t in hm._ticks if t.strip()]
            assert len(ticks) >= 4                  # ticks between the ends, not only 0-1 and 30-31
    run(go())


def test_a_32x32_state_without_colour_shows_each_blocks_largest_value(monkeypatch):
    """NO_COLOR at 160 x 50: one glyph a line, so 32 key channels fold into the panel's lines.
    Every glyph is its block's largest |value| with its sign (the mean of 3 signed values drew
    a field of dots), and the map says so."""
    monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        async with opened("tour", (160, 50)) as (pilot, app):
            await drawn_at(pilot, app, 24)
            hm = panel(app, "state").query_one(Heatmap)
            f, data = hm.fit, hm.data
            assert data.shape == (32, 32) and f.rfold > 1 and f.fold == 1
            ox, oy = hm._offset()
            blocks = _blocks(data, f.rfold, 1)
            seen = set()
            for p, d in enumerate(f.ys.tolist()):
                line = hm.render_line(oy + p).text
                for x, c in enumerate(f.xs.tolist()):
                    if hm.has_focus and (d, c) == (hm.cursor[0] // f.rfold, hm.cursor[1]):
                        continue                    # the cursor's X
                    want = palette.glyph(int(palette.diverging_index(np.array([max(blocks[d][c], key=abs)]),
                                                                     hm.vmax)[0]), "diverging")
                    assert line[ox + x] == want, (p, x)
                seen.add(d)
            assert seen == set(range(-(-32 // f.rfold)))        # every drawn row is on screen
            text = "\n".join(hm.render_line(y).text for y in range(hm.size.height))
            assert f"{f.rfold} per row, largest |value| shown" in text
            strong = np.abs(data).max()
            assert sum(ch in "@&" for y in range(hm.size.height) for ch in hm.render_line(y).text) >= \
                sum(1 for row in blocks for b in row if max(map(abs, b)) > 0.83 * strong)
    run(go())


def test_a_maximised_decay_at_80x24_folds_by_the_min_and_fills_its_height():
    """The decay panel maximised at 80 x 24: 32 key channels, fewer pixel rows. A channel that
    clears stays dark in its folded row; the rows fill the panel's height."""
    async def go():
        async with opened("tour", (80, 24), 24) as (pilot, app):
            p = panel(app, "decay")
            app.screen.maximize(p)
            await pilot.pause(0.3)
            p.show(app.cursor, 24)
            await pilot.pause(0.3)
            hm = p.query_one(Heatmap)
            f = hm.fit
            assert hm.data.shape[0] == 32 and f.rfold > 1
            # a channel made to clear in the last column drawn: its folded row goes dark
            data = hm.data.copy()
            col = hm.marker
            data[5, col] = 0.0
            hm.set_data(data, "sequential", vmax=1.0, blank=hm.blank)
            assert hm.idx[5 // f.rfold, col] == 0
            want = [[min(b) if b else None for b in row] for row in _blocks(data, f.rfold, 1, hm.blank)]
            for d, row in enumerate(want):
                for c, v in enumerate(row):
                    if v is not None:
                        assert hm.idx[d, c] == palette.sequential_index(np.array([v]), 0.0, 1.0)[0]
            text = "\n".join(hm.render_line(y).text for y in range(hm.size.height))
            assert f"{f.rfold} per row, min shown" in text
            assert hm._map_lines() >= hm.size.height - hm._head - 2
            assert sorted(set(f.ys.tolist())) == list(range(-(-32 // f.rfold)))
    run(go())


def test_a_sweeps_title_counts_the_steps_its_map_shows():
    """At step 300 the decay map's columns hold its last steps but the gap after "now": the
    title said 'last 46 steps' over 43 drawn ones (and was cut to 'last 2…' at 160 x 50)."""
    from lineage.app.widgets.heatmap import BLANK

    async def go():
        async with opened("tour", (160, 50)) as (pilot, app):
            await drawn_at(pilot, app, 299)
            p = panel(app, "decay")
            hm = p.query_one(Heatmap)
            drawn = [c for c in range(hm.data.shape[1]) if (hm.idx[:, c // hm.fit.fold] != BLANK).any()]
            steps = {p._sweep.step_at(c) for c in drawn}
            assert None not in steps and len(steps) == len(drawn) and max(steps) == 299
            title = str(p.border_title)
            assert f" {len(drawn)} steps" in title and len(title) <= p.outer_size.width - 7     # not cut with "…"
    run(go())


def test_the_state_text_form_folds_wide_states_and_says_so():
    """A checkpoint's 128 x 128 state in a 100-column text export: the glyph rows took every
    other value channel and said nothing, so a strong entry in an odd column vanished."""
    from lineage.app.panels.state import StatePanelView, lines
    data = np.zeros((128, 128))
    data[3, 77] = -2.0                              # an odd column: sampling [::2] dropped it
    data[5, 1] = 2.0
    view = StatePanelView("m", 0, (0,), "kda", 0, 1, "S", data, np.ones(128))
    out = lines(view, 100)
    rows = [r for r in out if r.startswith("  ") and set(r.strip()) <= set("@#*+.&%=-")]
    assert len(rows) == 128 and all(len(r.strip()) == 64 for r in rows)
    assert rows[3].strip()[77 // 2] == "&" and rows[5].strip()[0] == "@"
    assert any("each character: 2 value channels, the largest |value| shown" in r for r in out)


def test_the_now_caret_and_its_step_stay_whole_at_the_right_edge():
    """At step 300 the routing map's now column is near its right end: the caret's text ran
    past the panel ('▲ now,'). It goes before the caret where there is no room after it."""
    async def go():
        async with opened("tour", (160, 50)) as (pilot, app):
            for step in (299, 24):
                await drawn_at(pilot, app, step)
                for kind in ("routing", "decay"):
                    hm = panel(app, kind).query_one(Heatmap)
                    foot = hm.render_line(hm._top() + hm._head + hm._map_lines()).text
                    x = hm._offset()[0] + int(np.searchsorted(hm.fit.xs, hm.marker // hm.fit.fold))
                    assert f"now, step {step + 1}" in foot and foot[x] == "▲", (kind, step, foot)
    run(go())


def test_pick_is_the_cell_a_block_is_drawn_with():
    from lineage.app.widgets.fitting import pick
    data = np.array([[0.5, -0.9, 0.2], [0.7, 0.1, np.nan]])
    assert pick(data, range(0, 2), range(0, 2), "max") == (1, 0)
    assert pick(data, range(0, 2), range(0, 2), "min") == (0, 1)
    assert pick(data, range(0, 2), range(0, 2), "absmax") == (0, 1)
    assert pick(data, range(0, 2), range(1, 3), "max") == (1, 2)           # a NaN is never hidden
    assert pick(data, range(0, 2), range(0, 2), "mean") == (0, 0)          # no one cell: the first
    assert pick(data, range(0, 2), range(0, 3), "max", blank=[0]) == (1, 2)  # blank columns left out
