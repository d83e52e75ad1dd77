"""The decay panel draws the head it is asked for: two_timescales ships a decay panel of head 1
(KDA, alpha per key channel), and a Gated DeltaNet's (one alpha per head) has one row, that head's.
Its map, its title, its legend, the value under its cursor and its text form (what `lineage
snapshot -o OUT.txt` and a slide's .txt print) hold head 1's alpha, never head 0's."""
import asyncio
import re

import numpy as np

from lineage.app.app import LineageApp
from lineage.app.panels import PANELS, render
from lineage.app.panels.decay import DecayPanel
from lineage.app.widgets.heatmap import Heatmap
from lineage.playback.session import open_path

from tests.app.helpers import SC, settle

STEP = 2            # 0-based: the first separator '|', where head 1 clears most of its channels
ROW = re.compile(r"^\s+(\d+) .*  (\d\.\d{3})$")


def _rows(text_lines: list[str]) -> dict[int, float]:
    """row label -> newest value, from a decay text form's glyph rows."""
    return {int(m[1]): float(m[2]) for line in text_lines if (m := ROW.match(line))}


def test_the_text_form_of_a_kda_decay_panel_holds_head_1s_alpha():
    cur = open_path(str(SC / "two_timescales.yaml"), device="cpu")
    try:
        alpha = cur.frame(STEP).decay(0, 0).alpha.astype(np.float64)          # (heads, key channels)
        assert alpha.shape == (2, 32) and not np.allclose(alpha[0], alpha[1], atol=1e-3)
        view = PANELS["decay"].prepare(cur, STEP, {"kind": "decay", "layer": 0, "head": 1}, 100)
        assert view.head == 1 and np.array_equal(view.columns.column(STEP), alpha[1])
        for j in range(STEP + 1):
            assert np.array_equal(view.columns.column(j), cur.frame(j).decay(0, 0).head(1))
        out = PANELS["decay"].lines(view, 100)
        assert "layer 0 head 1:" in out[0] and "now: head 1:" in out[-1]
        assert _rows(out) == {c: round(float(a), 3) for c, a in enumerate(alpha[1])}
        # the snapshot's text: the scenario's second decay panel (head 1) after its first (head 0)
        text = render(cur, STEP, "decay").split("\n\ndecay: ")
        assert len(text) == 3 and text[2].startswith("tiny-kda layer 0 head 1:")
        assert _rows(text[2].splitlines()) == {c: round(float(a), 3) for c, a in enumerate(alpha[1])}
        assert _rows(text[1].splitlines()) == {c: round(float(a), 3) for c, a in enumerate(alpha[0])}
    finally:
        cur.close()


GDN = """version: 1
title: "Gated DeltaNet, head 1"
model: {preset: tiny-gated-deltanet}
input:
  text: "one fish two fish red fish"
panels:
  - {kind: decay, layer: 0, head: 1}
"""


def test_a_gated_deltanet_decay_panel_of_head_1_labels_its_row_head_1(tmp_path):
    """One alpha per head: the text form's one row is head 1's value and says so (it said 0,
    the heatmap's label of head 0, beside head 1's value)."""
    path = tmp_path / "gdn.yaml"
    path.write_text(GDN)
    cur = open_path(str(path), device="cpu")
    try:
        i = 5
        alpha = cur.frame(i).decay(0, 0).alpha.astype(np.float64)               # (heads,)
        assert alpha.shape == (2,) and round(alpha[0], 3) != round(alpha[1], 3)
        out = render(cur, i, "decay").splitlines()
        assert any("layer 0 head 1:" in line for line in out)
        assert _rows(out) == {1: round(float(alpha[1]), 3)}
    finally:
        cur.close()


def test_the_app_draws_head_1s_alpha_in_the_map_legend_and_cursor():
    async def go():
        app = LineageApp(str(SC / "two_timescales.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            app.request(STEP)
            await settle(pilot, app, STEP)
            await pilot.pause(0.2)
            first, second = app.query(DecayPanel)
            assert (first.options["head"], second.options["head"]) == (0, 1)
            alpha = app.cursor.frame(STEP).decay(0, 0).alpha.astype(np.float64)
            for panel, h in ((first, 0), (second, 1)):
                assert f"L0 head {h} " in str(panel.border_title)
                hm = panel.query_one(Heatmap)
                now = hm.data[:, panel._sweep.column_of(STEP)]
                assert np.allclose(now, alpha[h], atol=1e-6), h
                assert not np.allclose(now, alpha[1 - h], atol=1e-3), h
                for j in range(STEP + 1):          # every step the map holds is this head's
                    col = hm.data[:, panel._sweep.column_of(j)]
                    assert np.allclose(col, app.cursor.frame(j).decay(0, 0).head(h), atol=1e-6), (h, j)
                legend = str(panel.query_one("#legend").shown)
                assert f"head {h}: " in legend and f"mean {alpha[h].mean():.3f}" in legend, legend
            # the value under the cursor of head 1's map is head 1's
            hm = second.query_one(Heatmap)
            hm.focus()
            await pilot.press("j", "j", "j")                                # key channel 3
            await pilot.pause(0.3)
            r, c = hm.cursor
            step = second._sweep.step_at(c)
            legend = str(second.query_one("#legend").shown)
            want = app.cursor.frame(step).decay(0, 0).head(1)[r]
            assert f"cursor channel {r}, step {step + 1}: alpha = {want:.3f}" in legend, legend
    asyncio.run(go())



def test_the_decay_panel_names_its_model_and_says_why_its_map_is_one_colour():
    """The tour's decay map of head 0 was one flat block at every step, the title named no model:
    the title names it (two models' decay panels are told apart), and the legend says why the
    block is flat (every channel holds, alpha within one colour step of the 0..1 scale, the range
    read from the frames) and which head does forget; on head 3, which does, no such note."""
    from lineage.app.panels.common import model_name
    from tests.app.helpers import opened, panel

    i = 25

    async def go():
        async with opened("tour", (160, 50), i) as (pilot, app):
            p = panel(app, "decay")
            name = model_name(app.cursor.info, 0)
            assert str(p.border_title).startswith(f"decay · {name} · L0 head 0"), p.border_title
            hm = p.query_one(Heatmap)
            steps = [s for s in (p._sweep.step_at(c) for c in range(hm.data.shape[1])) if s is not None]
            A = np.stack([app.cursor.frame(j).decay(0, 0).alpha[0] for j in steps]).astype(np.float64)
            legend = " ".join(str(p.query_one("#legend").render()).split())
            want = (f"one colour: head 0 holds all 32 channels, alpha {A.min():.4f}-{A.max():.4f}, "
                    f"over {len(steps)} steps: forgets nothing")
            assert want in legend and "head 3 forgets" in legend, legend
            assert A.min() > 0.95
            text = "\n".join(DecayPanel.text_form(app.cursor, i, p.options, 100))
            assert "one colour: head 0 holds all 32 channels" in text
            p.query_one(Heatmap).focus()
            await pilot.press("full_stop", "full_stop", "full_stop")         # head 3
            await pilot.pause(0.2)
            legend = " ".join(str(p.query_one("#legend").render()).split())
            assert "head 3" in str(p.border_title) and "one colour" not in legend and "mean" in legend, legend
    asyncio.run(go())
