"""The figure panel: full width, tables that never wrap, fig4 as a curve with the current chunk
marked, fig7 as a coloured strip with its AttnRes blocks; and what the figures state beside a
caption is true (figure 8's verdict matches the share it prints, active_params' columns are
rounded down as its footnote says)."""
import asyncio
import re
from pathlib import Path

import pytest

from lineage.figures import SPARSE_BELOW
from lineage.playback.session import Session
from lineage.scenario import load
from tests.app.helpers import shown_step
from lineage.app.app import LineageApp
from lineage.app.panels import render
from lineage.app.panels.figure import FigurePanel, chunk_plot
from lineage.app.headless import settle as settled

SC = Path(__file__).resolve().parents[3] / "lineage" / "scenarios"
FIGURES = ["fig1_param_ratio", "fig2_kv_cache", "fig3_dials", "fig4_chunk_dial", "fig7_k3_layer_map",
           "fig8_moe_sparsity", "fig9_memory_table", "active_params", "decode_bytes"]


@pytest.mark.parametrize("name", FIGURES)
@pytest.mark.parametrize("width", [60, 76, 100, 156])
def test_text_form_lines_fit_their_width(name, width):
    s = Session(load(SC / f"{name}.yaml"))
    for i in range(s.total):
        lines = FigurePanel.text_form(s, i, {"kind": "figure"}, width)
        assert all(len(line) <= width for line in lines), (i, [l for l in lines if len(l) > width])


def test_layer_strip_rows_stay_aligned_and_draw_every_block():
    s = Session(load(SC / "fig7_k3_layer_map.yaml"))
    row = s.frame(0).figure()
    for width in (60, 80, 160):
        lines = FigurePanel.text_form(s, 0, {"kind": "figure"}, width)
        layers = "".join(l.split()[-1] for l in lines if l[:12].strip()[:1].isdigit())
        assert layers == "".join("K" if k == "kda" else "M" for k in row["mixers"])
        blocks = "".join(l.split(None, 1)[1] for l in lines if l.lstrip().startswith("attnres"))
        assert blocks.count("[") == len(row["attnres_blocks"]) == 8 and len(blocks) == 93


def test_chunk_plot_marks_the_current_chunk():
    s = Session(load(SC / "fig4_chunk_dial.yaml"))
    a, b = (chunk_plot(s.frame(i).figure(), 100, 14, True) for i in (0, 5))
    assert a != b and "chunk size (log); | = chunk 1" in a and "| = chunk 256" in b
    assert "time vs chunk 64 (NVIDIA H200, 2026-12-01)" in a


def test_figure_panel_spans_the_grid():
    async def go():
        app = LineageApp(str(SC / "fig4_chunk_dial.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(400):
                await settled(pilot)
                if shown_step(app) is not None:
                    break
                await pilot.pause(0.05)
            panel = app.screen.query_one(FigurePanel)
            await pilot.pause(0.2)
            assert panel.size.width >= 150                     # all three columns, not one
            body = panel.query_one("#body").shown
            assert "FLOPs vs chunk 64" in body.plain and "chunk size (log)" in body.plain
    asyncio.run(go())


# -- what the figures state beside a caption ------------------------------------------------

def test_fig8_verdict_matches_the_share_it_prints():
    s = Session(load(SC / "fig8_moe_sparsity.yaml"))
    for i in range(s.total):
        text = render(s, i, panel="figure")
        share = float(re.search(r", (\d+\.\d)%\): ", text).group(1)) / 100
        assert "most weights" not in text or share > 0.5, text
        assert (f"sparse: under {SPARSE_BELOW:.0%}" in text) == (share < SPARSE_BELOW), text


def test_active_params_columns_are_rounded_down():
    """Each "total/active" ratio printed is the true ratio rounded down: whole models from 10,
    hundredths below (0.037 printed 0.04 beside "rounded down" before)."""
    s = Session(load(SC / "active_params.yaml"))
    i = s.total - 1
    row, text = s.frame(i).figure(), render(s, i, panel="figure")
    assert "rounded down" in text
    for r in row["rows"]:
        line = next(ln for ln in text.splitlines() if ln[2:].startswith(r["preset"] + " "))
        pairs = re.findall(r"([\d,]+(?:\.\d+)?)/([\d,]+(?:\.\d+)?)", line)
        for (tot, act), small in zip(pairs, ("gpt2-small", "gpt2-xl")):
            for shown, key in ((tot, "total"), (act, "active")):
                x, y = r["vs"][small][key], float(shown.replace(",", ""))
                unit = 1 if x >= 10 else 0.01
                assert y <= x < y + unit, (r["preset"], small, key, x, shown)


def test_layer_strip_draws_each_ffn_kind_by_its_descriptor():
    """A block with no FFN (Mamba-2's) is a blank cell, not an expert's 'e'."""
    from lineage.app.panels.figure import _strip_rows
    row = {"mixers": ["mamba2", "kda", "kda"], "ffns": ["none", "dense", "moe"], "attnres_block": 0,
           "attnres_blocks": []}
    assert _strip_rows(row, 80) == [("  1-3  ", "SKK"), ("ffn    ", " de")]
