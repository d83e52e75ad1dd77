"""Issue 16, ready for the classroom: captions always visible, both halves of a comparison,
pictures that scale, slide exports. Driven as a person would (Pilot) and through the CLI."""
import re
from html import unescape

import numpy as np
import pytest

from tests.tui.test_app import SC, run, settle
from tui.app import LineageApp
from tui.cli import main
from tui.panels.base import Panel
from tui.panels.captions import CaptionsPanel
from tui.panels.recall import recall_table
from tui.widgets.heatmap import Heatmap
from tui.widgets.keys_footer import KeysFooter


def svg_text(svg: str) -> str:
    """The characters an SVG export shows (text runs concatenated), borders as spaces."""
    body = svg[svg.index("<g"):]                                  # after the style sheet
    text = unescape(re.sub(r"<[^>]+>", "", body.replace("</text>", "</text>\n"))).replace("\xa0", " ")
    return re.sub("[▊▎│╭╮╰╯─▔▁]", " ", text)


def words(text: str) -> str:
    return " ".join(text.split())


def screen_text(app) -> str:
    return svg_text(app.export_screenshot())


def panel(app, kind, n=0):
    return [p for p in app.query(Panel) if p.kind == kind][n]


# -- captions ---------------------------------------------------------------------------

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


# -- comparisons ------------------------------------------------------------------------

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
            assert p.max_scroll_y == 0                            # nothing hidden inside the panel
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


def test_shared_colour_scale_across_compared_states():
    async def go():
        app = LineageApp(str(SC / "lineage_compare.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            app.request(59)
            await settle(pilot, app, 59)
            maps = [p.query_one(Heatmap) for p in app.query(Panel) if p.kind == "state"]
            tops = [float(np.abs(m.data).max()) for m in maps]
            assert len(maps) == 4 and {m.vmax for m in maps} == {max(tops)}
            assert tops[0] > 5 * max(tops[1:])                   # linear attention's blow-up shows as colour
            panel(app, "state").focus()
            await pilot.press("c")                               # each on its own scale again
            await pilot.pause(0.1)
            assert [m.vmax for m in maps] == pytest.approx(tops)
    run(go())


# -- keys -------------------------------------------------------------------------------

def test_footer_keeps_help_and_quit_at_80_columns():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, 0)
            await pilot.pause(0.2)
            footer = app.query_one(KeysFooter)
            keys = [k for k in footer.children]
            assert {"help", "quit", "maximise", "palette"} <= {k.description for k in keys}
            assert all(k.region.right <= 80 for k in keys)
    run(go())


def test_tab_stops_once_per_panel():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            owners = []
            for w in app.screen.focus_chain:
                while w is not None and not isinstance(w, Panel):
                    w = w.parent
                owners.append(w)
            panels = [o for o in owners if o is not None]
            assert len(panels) == len(set(map(id, panels))) == len(list(app.query(Panel)))
    run(go())


def test_help_fits_80_columns_without_wrapping():
    from tui.screens.help import KEYS
    plain = re.sub(r"\[/?b\]", "", KEYS)
    assert max(len(line) for line in plain.splitlines()) <= 70          # the box is 72 wide inside, less its scroll bar

    async def go():
        app = LineageApp(str(SC / "fig3_two_facts.yaml"))
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, 0)
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            box = app.screen.query_one("VerticalScroll")
            assert box.region.width <= 80 and box.region.width >= 76
    run(go())


# -- exports ----------------------------------------------------------------------------

def test_s_writes_svg_png_and_text_under_fresh_names(tmp_path):
    async def go():
        app = LineageApp(str(SC / "fig3_two_facts.yaml"))
        app.snapshot_dir = tmp_path
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, 0)
            await pilot.press("s")
            await pilot.pause(0.1)
            await pilot.press("s")
            await pilot.pause(0.1)
            await settle(pilot, app, 0)                       # the PNG workers
            said = [n.message for n in app._notifications]
        return said
    said = run(go())
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["lineage-fig3_two_facts-step1-2.png", "lineage-fig3_two_facts-step1-2.svg",
                     "lineage-fig3_two_facts-step1-2.txt", "lineage-fig3_two_facts-step1.png",
                     "lineage-fig3_two_facts-step1.svg", "lineage-fig3_two_facts-step1.txt"]
    assert (tmp_path / "lineage-fig3_two_facts-step1.png").read_bytes()[:4] == b"\x89PNG"
    assert any(str(tmp_path / "lineage-fig3_two_facts-step1-2") in m for m in said)


def test_slides_one_png_and_text_per_caption(tmp_path):
    out = tmp_path / "deck"
    assert main(["slides", "fig5_gating", "-o", str(out), "--scale", "0.5"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["01-step0008.png", "01-step0008.txt", "02-step0009.png", "02-step0009.txt",
                     "03-step0017.png", "03-step0017.txt", "04-step0025.png", "04-step0025.txt"]
    assert "note: Topic A" in (out / "01-step0008.txt").read_text()
    assert all((out / n).read_bytes()[:4] == b"\x89PNG" for n in names if n.endswith(".png"))
    assert main(["slides", "fig5_gating", "-o", str(out)]) == 2              # never over a deck
    assert main(["slides", "fig5_gating", "-o", str(tmp_path / "d2"), "--scale", "0"]) == 2
    assert main(["slides", "fig5_gating", "-o", str(tmp_path / "d3"), "--panel", "nope"]) == 2
    # a panel's slides: the panel's text and the caption, as on the picture
    assert main(["slides", "fig5_gating", "-o", str(tmp_path / "d4"), "--panel", "recall", "--scale", "0.5"]) == 0
    # ... of the captions about it: fig5's last two (the first two are about the state panels)
    assert sorted(p.name for p in (tmp_path / "d4").glob("*.txt")) == ["01-step0017.txt", "02-step0025.txt"]
    text = (tmp_path / "d4" / "01-step0017.txt").read_text()
    assert "recall: every fact" in text and "note: Topic B in." in text and "tokens" not in text


def test_panel_slide_scale_and_theme(tmp_path):
    a, b, c = tmp_path / "a.png", tmp_path / "b.png", tmp_path / "c.png"
    args = ["snapshot", "fig3_two_facts", "--step", "2", "--panel", "state"]
    assert main(args + ["-o", str(a)]) == 0
    assert main(args + ["-o", str(b), "--scale", "2"]) == 0
    assert main(args + ["-o", str(c), "--theme", "light"]) == 0

    def size(p):
        head = p.read_bytes()[16:24]
        return int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")
    (w, h), (w2, h2) = size(a), size(b)
    assert (w2, h2) == (2 * w, 2 * h) and w > h                  # landscape, doubled
    assert a.read_bytes() != c.read_bytes()


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


def test_open_dialog_takes_bundled_names():
    from tui.app import bundled
    assert bundled("recall") == str(SC / "recall.yaml")
    assert bundled("no-such-thing") == "no-such-thing"


def test_toy_memory_readouts_are_one_line_each():
    async def go():
        app = LineageApp(str(SC / "recall.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            app.request(23)
            await settle(pilot, app, 23)
            body = panel(app, "tokens").query_one("#body").render().plain.splitlines()
            cells = [ln for ln in body if "strongest" in ln]
            assert len(cells) == 2 and all(ln.count("█") == 16 for ln in cells)
            assert "strongest v6 1.00" in cells[0]            # the additive memory's blurred answer
    run(go())


def test_palette_entries_are_the_apps():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "Screenshot" not in titles and "Maximize" not in titles and "Maximise" in titles
            assert "Open A tour of K3's memory, in miniature" in titles         # titles, not file stems
            entry = next(c for c in app.get_system_commands(app.screen) if c.title == "Maximise")
            entry.callback()
            await pilot.pause(0.2)
            assert app.screen.maximized is panel(app, "state")                # the panel, not its map
    run(go())


def test_a_mistyped_scenario_name_gets_a_hint(capsys):
    assert main(["run", "recal"]) == 2
    assert capsys.readouterr().err.strip() == "recal: no such file (did you mean 'recall'?)"
    assert main(["run", "nothing_like_any"]) == 2
    assert capsys.readouterr().err.strip() == "nothing_like_any: no such file"


def test_memory_prints_bytes_in_a_readable_unit(capsys):
    assert main(["memory", "gpt2-small"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:]
    assert rows[2].split() == ["131,072", "4.5", "GiB", "0", "B", "29"]        # not 4608.0Mi, not 29.0


def test_a_truncated_trace_in_the_app_names_the_command_that_salvages_it(tmp_path, capsys):
    from tests.tui.test_app import settled
    out = tmp_path / "t.trace"
    assert main(["record", str(SC / "fig3_two_facts.yaml"), "-o", str(out)]) == 0
    out.write_bytes(out.read_bytes()[:-200])                 # the footer and part of a frame gone

    async def go():
        app = LineageApp(str(SC / "fig3_two_facts.yaml"))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, 0)
            app.open(str(out))
            await settled(pilot)
            lines = app.screen.lines
            assert any(f"(lineage run {out} --salvage reads them)" in ln for ln in lines), lines
            assert not any("open with --salvage" in ln for ln in lines)
    run(go())




def test_recall_slide_names_each_memory_whole(tmp_path):
    # fig5's gated memory is named "gated delta rule (alpha = e^-5 at the separator)", wider
    # than its column on a 100-column slide: it wraps, it is not cut
    out = tmp_path / "r.svg"
    assert main(["snapshot", "fig5_gating", "--step", "17", "--panel", "recall", "-o", str(out)]) == 0
    text = words(svg_text(out.read_text()))
    assert all(w in text for w in ("gated delta rule (alpha = e^-5 at the", "separator)"))
    assert "…" not in text
