"""The app, driven as a person would: keys, resizes, errors, replay, snapshots."""
import asyncio
import re

from tests.app.helpers import SC, counter, panel, run, settle, shown_step
from lineage.app.app import LineageApp
from lineage.cli.main import main
from lineage.app.panels.base import Panel
from lineage.app.headless import settle as settled
from lineage.app.widgets.heatmap import Heatmap
from lineage.app.widgets.keys_footer import KeysFooter

def test_keys_step_and_counter():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            assert "step 1 / 1000" in counter(app)
            await pilot.press("n", "n", "right")
            await settle(pilot, app, 3)
            assert "step 4 / 1000" in counter(app)
            await pilot.press("p", "left")
            await settle(pilot, app, 1)
            await pilot.press("home")
            await settle(pilot, app, 0)
            made = len(app.cursor.frames)
            await pilot.press("n")
            await settle(pilot, app, 1)
            assert len(app.cursor.frames) == made        # going back and forth reads recorded frames
            await pilot.press("plus", "plus")
            assert "5/s" in counter(app)
            await pilot.press("minus")
            assert "2/s" in counter(app)
    run(go())


def test_play_pause_and_max_speed():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, 0)
            for _ in range(5):
                await pilot.press("plus")
            assert "max speed" in counter(app) and "max/s" not in counter(app)
            await pilot.press("space")
            # the player wakes waiters at every frame shown: no polling
            await asyncio.to_thread(app.player.wait, lambda: app.index >= 5, 5.0)
            assert "▶ playing" in counter(app)
            await pilot.press("space")
            assert "❚❚ paused" in counter(app) and shown_step(app) >= 5
            stopped_at = app.index
            await pilot.pause(0.3)
            assert app.index <= stopped_at + 1
    run(go())


def test_resize_small_and_back():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            await pilot.resize_terminal(60, 20)
            await pilot.pause(0.2)
            assert app.query_one("#panels").display and not app.query_one("#toosmall").display
            assert app.query_one("#panels").styles.grid_size_columns == 1
            await pilot.resize_terminal(50, 15)
            await pilot.pause(0.2)
            notice = app.query_one("#toosmall")
            assert notice.display and "at least 60 x 20" in str(notice.render())
            await pilot.resize_terminal(160, 50)
            await pilot.pause(0.2)
            assert not notice.display and app.query_one("#panels").styles.grid_size_columns == 3
            await pilot.press("n")
            await settle(pilot, app, 1)
    run(go())


def test_bad_scenario_shows_dialog_and_keeps_state(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntitle: t\nmodel: {preset: k3-mni}\ninput: {text: hi}\n")

    async def go():
        app = LineageApp(str(SC / "fig3_two_facts.yaml"))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, 0)
            before = app.cursor
            app.open(str(bad))
            await settled(pilot)
            screen = app.screen
            assert type(screen).__name__ == "ErrorScreen"
            assert any("bad.yaml:3:17" in line and "did you mean 'k3-mini'" in line for line in screen.lines)
            await pilot.press("escape")
            assert app.cursor is before and app.title.startswith("Figure 3")
            await pilot.press("n")
            await settle(pilot, app, 1)
    run(go())


def test_replay_trace_in_app(tmp_path):
    trace = tmp_path / "t.trace"
    assert main(["record", str(SC / "tour.yaml"), "-o", str(trace), "--steps", "15"]) == 0

    async def go():
        app = LineageApp(str(trace))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            assert "step 1 / 15" in counter(app)
            await pilot.press("end")
            await settle(pilot, app, 14)
            assert "replaying a trace" in str(app.query_one("#status").render())
            hm = app.query_one(Heatmap)
            assert hm.data.shape == (32, 32)
    run(go())


def test_pickers_and_snapshot_key(tmp_path):
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        app.snapshot_dir = tmp_path
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            state = next(p for p in app.query(Panel) if p.kind == "state")
            state.focus()
            await pilot.press("right_square_bracket")
            assert state.options["layer"] == 1
            layers = list(state.view.layers)                      # what the picker steps through
            await pilot.press("right_parenthesis")               # eight layers on, and back
            assert state.options["layer"] == layers[(1 + 8) % len(layers)]
            await pilot.press("left_parenthesis")
            assert state.options["layer"] == 1
            await pilot.press("full_stop", "full_stop")
            assert state.options["head"] == 2 and "head 2/4" in state.border_title
            await pilot.press("greater_than_sign")                 # eight heads on, modulo 4
            assert state.options["head"] == 2
            await pilot.press("t")
            assert state.options["quantity"] == "dS" and "delta S" in state.border_title
            routing = next(p for p in app.query(Panel) if p.kind == "routing")
            moe = list(routing.view.layers)                    # the MoE layers, not the mixers
            routing.focus()
            await pilot.press("right_square_bracket")
            assert len(moe) > 1 and routing.options["layer"] == moe[1] and f"L{moe[1]}" in routing.border_title
            state.focus()
            await pilot.press("m")
            assert app.screen.maximized is state
            await pilot.press("s")
            await pilot.pause(0.1)
            await pilot.press("m")
            assert app.screen.maximized is None
        svg = list(tmp_path.glob("*.svg"))
        txt = list(tmp_path.glob("*.txt"))
        assert svg and txt and "<svg" in svg[0].read_text()
        assert "state: k3-mini layer 1 (kda) head 2: delta S" in txt[0].read_text()
    run(go())


def test_no_color_heatmaps_use_glyphs(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")

    async def go():
        app = LineageApp(str(SC / "fig6_channel_decay.yaml"))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, 0)
            await pilot.press("n", "n")
            await settle(pilot, app, 2)
            state = next(p for p in app.query(Panel) if p.kind == "state")
            hm = state.query_one(Heatmap)
            rows = [hm.render_line(y).text for y in range(hm.size.height)]
            # a small state (8 x 4) prints its values; a larger map draws glyphs
            assert hm.fit.text and sum("".join(rows).count(s) for s in ("+0.", "-0.")) == hm.data.size
            decay = next(p for p in app.query(Panel) if p.kind == "decay").query_one(Heatmap)
            rows = [decay.render_line(y).text for y in range(4)]
            assert not decay.fit.text and any(c in "".join(rows) for c in ".:-=+*#%@")
            assert "none (NO_COLOR)" in str(app.query_one("#status").render())
    run(go())


def test_headless_snapshot_outputs(tmp_path):
    svg, png, txt = tmp_path / "a.svg", tmp_path / "a.png", tmp_path / "a.txt"
    assert main(["snapshot", "fig3_two_facts", "--step", "2", "-o", str(svg), "--size", "100", "30"]) == 0
    assert "<svg" in svg.read_text() and "1.21" in svg.read_text().replace("&#160;", " ")
    assert main(["snapshot", "fig3_two_facts", "--step", "2", "--panel", "recall", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["snapshot", "fig3_two_facts", "--step", "2", "-o", str(txt)]) == 0
    assert "1.21" in txt.read_text()
    assert main(["snapshot", "fig3_two_facts", "--step", "2", "-o", str(tmp_path / "a.gif")]) == 2


def test_help_screen_shows_the_keys():
    async def go():
        app = LineageApp(str(SC / "fig3_two_facts.yaml"))
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, app, 0)
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            assert type(app.screen).__name__ == "HelpScreen"
            box = app.screen.query_one("VerticalScroll")
            assert box.region.width > 60 and box.region.height > 15      # not collapsed to an empty box
            await pilot.press("escape")
            assert type(app.screen).__name__ != "HelpScreen"
    run(go())


def test_sweep_fills_every_column():
    """The sweep buffer after a jump holds the last `span` steps, each in column step % span,
    and a step forward rewrites exactly one column."""
    import numpy as np
    from lineage.app.widgets.sweep import Sweep
    sw = Sweep()
    col = lambda j: np.full(3, float(j))              # noqa: E731
    buf = sw.update("k", 60, col, width=52).copy()   # span 48
    span = buf.shape[1]
    assert span == 48 and sorted(buf[0].tolist()) == list(range(60 - span + 1, 61))
    assert buf[0, 60 % span] == 60
    nxt = sw.update("k", 61, col, width=52)
    changed = np.flatnonzero((nxt != buf).any(axis=0))
    assert changed.tolist() == [61 % span] and nxt[0, 61 % span] == 61


def test_help_says_how_to_close_it_and_what_each_panel_shows():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            text = "\n".join(str(s.render()) for s in app.screen.query("Static"))
            assert "esc, q or ? closes this help" in text
            kinds = {p.kind for p in app.query("Panel")} - {"captions"}
            assert kinds and all(f"  {k} " in text for k in kinds)
            assert "K x V state of one layer and head" in text
    run(go())


def test_hjkl_on_the_decay_map_names_the_value_under_the_cursor():
    """h j k l moved the decay map's cursor but the legend showed no value: it now names the
    channel, the step its column holds, and that step's alpha from the frame."""
    from lineage.app.panels.decay import DecayPanel

    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            for _ in range(9):
                await pilot.press("n")
            await settle(pilot, app, 9)
            panel = app.query_one(DecayPanel)
            panel.query_one(Heatmap).focus()
            await pilot.press("j", "j", "l", "l", "l")       # channel 2, the column of step 4
            await pilot.pause(0.3)
            legend = str(panel.query_one("#legend").shown)
            layer = panel.prepared(app.cursor, 9).layer
            alpha = app.cursor.frame(3).decay(0, layer).head(0)[2]
            assert f"cursor channel 2, step 4: alpha = {alpha:.3f}" in legend, legend      # names the ▲ it shows
    run(go())


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
    from lineage.app.screens.help import KEYS
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


def test_open_dialog_takes_bundled_names():
    from lineage.app.app import bundled
    assert bundled("recall") == str(SC / "recall.yaml")
    assert bundled("no-such-thing") == "no-such-thing"


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


def test_a_truncated_trace_in_the_app_names_the_command_that_salvages_it(tmp_path, capsys):
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
