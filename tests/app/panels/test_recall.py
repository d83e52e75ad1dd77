"""The recall panel: both memories of a comparison, every row, on screen, in exports and on
slides."""
import pytest

from tests.app.helpers import SC, panel, run, settle, svg_text, until, words
from lineage.app.app import LineageApp
from lineage.cli.main import main
from lineage.app.panels.recall import recall_table


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
def test_recall_shows_every_row_of_both_memories(size):
    async def go():
        app = LineageApp(str(SC / "recall.yaml"))
        async with app.run_test(size=size) as pilot:
            await settle(pilot, app, 0)
            last = app.cursor.total - 1
            app.request(last)
            await settle(pilot, app, last)
            p = panel(app, "recall")
            names, rows = recall_table(app.cursor, last)
            assert len(names) == 2 and len(rows) == 12
            await until(pilot, lambda: p.max_scroll_y == 0, "the recall panel to hold its rows")   # nothing hidden
            p.scroll_visible(animate=False)
            await pilot.pause(0.2)
            body = p.query_one("#body").render().plain
            for k, want, cells in rows:
                errs = [f"{c[1]:.2f}" for c in cells]
                line_hits = [ln for ln in body.splitlines() if ln.startswith(f"k{k} ")]
                assert sum(e in " ".join(line_hits) for e in errs) == 2, (k, errs, line_hits)
            assert p.region.height >= body.count("\n") + 3        # every line drawn, with its border
    run(go())


def test_recall_panel_export_has_both_halves(tmp_path):
    out = tmp_path / "r.svg"
    assert main(["snapshot", "recall", "--step", "24", "--panel", "recall", "-o", str(out)]) == 0
    text = words(svg_text(out.read_text()))
    assert "additive" in text and "delta rule" in text
    from lineage.playback.session import open_path
    cur = open_path(str(SC / "recall.yaml"))
    _, rows = recall_table(cur, 23)
    for k, want, cells in rows:
        assert all(f"{c[1]:.2f}" in text for c in cells)
    assert "Associative recall" in text and "step 24 / 24" in text          # title and step
    assert "every key is off by 1.66" in text                                # the caption
    assert "play/pause" not in text                                          # no footer


def test_recall_slide_names_each_memory_whole(tmp_path):
    # fig5's gated memory is named "gated delta rule (alpha = e^-5 at the separator)", wider
    # than its column on a 100-column slide: it wraps, it is not cut
    out = tmp_path / "r.svg"
    assert main(["snapshot", "fig5_gating", "--step", "17", "--panel", "recall", "-o", str(out)]) == 0
    text = words(svg_text(out.read_text()))
    assert all(w in text for w in ("gated delta rule (alpha = e^-5 at the", "separator)"))
    assert "…" not in text
