"""Heatmaps that cannot mislead: a heatmap too large for its room folds rows and columns
into their mean and says so (it drew every other row), and its axes are named with tick labels
at the ends."""
import numpy as np
import pytest
from textual.app import App

from tests.app.helpers import opened, panel, run
from lineage.app import palette
from lineage.app.widgets.fitting import fold
from lineage.app.widgets.heatmap import Heatmap

RNG = np.random.default_rng(28)


def _block_means(data, rfold, cfold, blank=()):
    """float64 plain loops: the mean of each block's non-blank values (None: none)."""
    rows, cols = data.shape
    out = []
    for a in range(0, rows, rfold):
        line = []
        for b in range(0, cols, cfold):
            vals = [float(data[r, c]) for r in range(a, min(a + rfold, rows))
                    for c in range(b, min(b + cfold, cols)) if c not in blank]
            line.append(sum(vals) / len(vals) if vals else None)
        out.append(line)
    return out


@pytest.mark.parametrize("shape, rfold, cfold", [((37, 23), 3, 2), ((32, 5), 2, 1), ((7, 64), 1, 5), ((1, 9), 1, 4)])
def test_fold_is_the_mean_of_every_block(shape, rfold, cfold):
    data = RNG.standard_normal(shape)
    blank = [c for c in (1, 2, shape[1] - 1) if c < shape[1]]
    means, empty = fold(data, rfold, cfold, blank)
    want = _block_means(data, rfold, cfold, blank)
    assert means.shape == (len(want), len(want[0]))
    for r, line in enumerate(want):
        for c, w in enumerate(line):
            assert empty[r, c] == (w is None)
            if w is not None:
                assert means[r, c] == pytest.approx(w, abs=1e-12)


def test_fold_keeps_a_nan_visible():
    data = np.ones((4, 4))
    data[2, 3] = np.nan
    means, _ = fold(data, 2, 2)
    assert np.isnan(means[1, 1]) and np.isfinite(means[0]).all() and np.isfinite(means[1, 0])


class Host(App):
    def __init__(self, data, rows: str, cols: str, scale: str = "sequential"):
        super().__init__()
        self.data, self.rows, self.cols, self.scale = data, rows, cols, scale

    def compose(self):
        hm = Heatmap()
        hm.styles.height = 12                 # a panel of fixed height: the map must fold
        yield hm

    def on_mount(self):
        hm = self.query_one(Heatmap)
        hm.set_axes(self.rows, self.cols)
        hm.set_data(self.data, self.scale, vmax=1.0)


def _map_text(hm: Heatmap) -> tuple[list[str], list[str]]:
    lines = [hm.render_line(y).text for y in range(hm.size.height)]
    oy = hm._offset()[1]
    return lines, lines[oy:oy + hm._map_lines()]


def test_a_map_too_tall_folds_every_row_into_the_picture():
    """32 experts in 12 lines (22 pixel rows after the tick line): every expert is in a drawn
    row, each drawn row the mean of 2 (the colour of the mean), the labels say the ranges."""
    data = RNG.uniform(0, 1, (32, 40))
    data[31, :] = 1.0                          # the last expert: bright; sampling every other row drops it
    data[30, :] = 0.0

    async def go():
        app = Host(data, "expert", "step")
        async with app.run_test(size=(60, 14)) as pilot:
            await pilot.pause(0.2)
            hm = app.query_one(Heatmap)
            f = hm.fit
            # 16 drawn rows, stretched over the 20 pixel rows the widget has
            assert f.rfold == 2 and sorted(set(f.ys.tolist())) == list(range(16)) and len(f.ys) == 20 and f.fold == 1
            lines, rows = _map_text(hm)
            text = "\n".join(lines)
            assert "↓ expert" in text and "2 per row, mean shown" in text and "→ step" in text
            assert rows[0].split()[-2] == "0-1" and rows[-1].split()[0] == "30-31"
            means = _block_means(data, 2, 1)
            for d in range(16):            # each drawn cell has the colour of its block's mean
                for c in range(0, 40, 7):
                    assert hm.idx[d, c] == palette.sequential_index(np.array(means[d][c]), 0.0, 1.0)
            assert hm.idx[15, 0] == palette.sequential_index(np.array(0.5), 0.0, 1.0)   # rows 30 and 31
            await pilot.press("tab")
            for _ in range(31):
                await pilot.press("j")
            assert hm.cursor == (31, 0) and hm.value_under_cursor == 1.0   # every row reachable, exact
    run(go())


def test_a_map_that_fits_names_its_axes_with_end_ticks():
    async def go():
        app = Host(RNG.standard_normal((10, 20)), "key channel", "value channel", "diverging")
        async with app.run_test(size=(60, 14)) as pilot:
            await pilot.pause(0.2)
            hm = app.query_one(Heatmap)
            assert hm.fit.rfold == hm.fit.fold == 1
            lines, rows = _map_text(hm)
            foot = lines[hm._offset()[1] + hm._map_lines()]
            assert rows[0].lstrip().startswith("↓ key channel 0 ") and rows[-1].split()[0] == "9"
            assert foot.split()[0] == "0" and foot.split()[-1] == "19" and "→ value channel" in foot
    run(go())


def test_routing_of_32_experts_in_the_grid_shows_every_expert():
    """The tour's k3-mini has 32 experts; at 160 x 50 its routing panel has room for 16 pixel
    rows. It drew 16 of the experts; now each drawn row holds two, and says so."""
    async def go():
        async with opened("tour", (160, 50), 12) as (pilot, app):
            hm = panel(app, "routing").query_one(Heatmap)
            f = hm.fit
            assert hm.data.shape[0] == 32 and sorted(set(f.ys.tolist())) == list(range(-(-32 // f.rfold)))
            text = "\n".join(hm.render_line(y).text for y in range(hm.size.height))
            assert "expert" in text and (f.rfold == 1 or f"{f.rfold} per row, max shown" in text)
            assert "30-31" in text if f.rfold == 2 else "31" in text
            assert "now, step 13" in text
            state = panel(app, "state").query_one(Heatmap)
            text = "\n".join(state.render_line(y).text for y in range(state.size.height))
            assert "↓ key channel 0" in text and "→ value channel" in text and " 31 " in text
    run(go())


def test_an_axis_name_with_no_room_after_the_ticks_goes_before_them():
    """A few columns zoomed to fill the width (fig6's 4 value channels on a slide) leave no room
    after the last tick: the name was cut at the widget's edge ("→ val"); it goes before the
    ticks, under the row labels, whole."""
    class Filled(Host):
        def compose(self):
            hm = Heatmap()
            hm.styles.height = "1fr"
            yield hm

    async def go():
        app = Filled(RNG.standard_normal((8, 4)), "key channel", "value channel", "diverging")
        async with app.run_test(size=(53, 36)) as pilot:
            await pilot.pause(0.2)
            hm = app.query_one(Heatmap)
            assert hm.fit.text                         # the values printed, a column of 8 cells each
            lines, _ = _map_text(hm)
            foot = lines[hm._offset()[1] + hm._map_lines()].split()
            assert foot == ["→", "value", "channel", "0", "1", "2", "3"]
    run(go())


def _legend(p) -> str:
    from lineage.app.widgets.text_box import TextBox
    return str(p.query_one("#legend", TextBox).render())


def _line_rows(hm: Heatmap, y: int) -> range:
    """The matrix rows map line y draws (both half-block pixels; each drawn row rfold of them),
    worked out from the fit here, not asked of the widget."""
    f = hm.fit
    drawn = sorted({int(f.ys[p]) for p in (2 * y, 2 * y + 1) if p < len(f.ys)})
    return range(drawn[0] * f.rfold, min(hm.data.shape[0], (drawn[-1] + 1) * f.rfold))


def test_the_mouse_reads_the_state_cell_under_it_and_leaving_restores_the_cursor():
    """The tour's state (32 x 32, unfolded at 160 x 50: a line draws two keys): the legend reads
    the mouse's cell, its stronger key (the cell is drawn with the largest |value|), from S;
    off the map it reads the h j k l cursor again."""
    async def go():
        async with opened("tour", (160, 50), 12) as (pilot, app):
            p = panel(app, "state")
            hm = p.query_one(Heatmap)
            assert hm.fit.rfold == 1 and hm.fit.fold == 1
            st = app.cursor.frame(12).state(0, p.view.layer)
            S = st.quantity(p.view.head, "S").astype(np.float64)                # (K, V)
            ox, oy = hm._offset()
            for x, y in ((5, 3), (30, 11)):
                rows = _line_rows(hm, y)
                c = int(hm.fit.xs[x])
                r = rows[int(np.argmax(np.abs(S[rows.start:rows.stop, c])))]
                await pilot.hover(hm, offset=(ox + x, oy + y))
                await pilot.pause(0.1)
                want = f"mouse key {r} of {rows[0]}-{rows[-1]}, value {c}: {S[r, c]:+.4f}"
                assert want in _legend(p), _legend(p)
            await pilot.hover(None, offset=(0, 0))      # the title line, off every map
            await pilot.pause(0.1)
            assert f"cursor key 0, value 0: {S[0, 0]:+.4f}" in _legend(p) and "mouse" not in _legend(p)
    run(go())


@pytest.mark.parametrize("size, rfold", [((160, 50), 2), ((120, 40), 1)])
def test_the_mouse_reads_the_decay_map_exactly_where_it_folds_and_where_not(size, rfold):
    """The decay map at "now": the mouse's cell covers two drawn rows (four channels where the
    map folds two a row); the legend names the channel its cell is drawn with (the least alpha,
    as the map folds) and that alpha, the step and its token, read from the frame."""
    i = 12

    async def go():
        async with opened("tour", size, i) as (pilot, app):
            p = panel(app, "decay")
            hm = p.query_one(Heatmap)
            f = hm.fit
            # the readout takes a line of the legend: the map it leaves is the one read
            await pilot.hover(hm, offset=hm._offset())
            await pilot.pause(0.1)
            f = hm.fit
            assert f.rfold == rfold, (f.rfold, hm.size)
            alpha = app.cursor.frame(i).decay(0, p.view.layer).alpha[p.view.head].astype(np.float64)   # (K,)
            tok = app.cursor.frame(i).token()
            ox, oy = hm._offset()
            x = int(np.searchsorted(f.xs, hm.marker // f.fold))          # the picture column of "now"
            y = 2
            rows = _line_rows(hm, y)
            r = rows[int(np.argmin(alpha[rows.start:rows.stop]))]
            await pilot.hover(hm, offset=(ox + x, oy + y))
            await pilot.pause(0.1)
            from lineage.app.panels.common import token_label
            want = (f"mouse channel {r} of {rows[0]}-{rows[-1]}, step {i + 1}: alpha = {alpha[r]:.3f} "
                    f"('{token_label(tok.text)}'@{tok.pos})")
            assert want in _legend(p), _legend(p)
            await pilot.hover(None, offset=(0, 0))      # the title line, off every map
            await pilot.pause(0.1)
            assert "mouse" not in _legend(p)        # the h j k l cursor never moved: no readout line
    run(go())
