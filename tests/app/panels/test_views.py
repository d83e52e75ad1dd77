"""Panels get views prepared in the step worker: the UI thread puts them on widgets and reads
no frame while stepping or playing; a view prepared for options changed since is made again."""
import asyncio
import threading

import numpy as np

from lineage.playback.session import open_path
from lineage.app.app import LineageApp
from lineage.app.panels import PANELS
from lineage.app.panels.base import Panel, Room, TextPanel, Unshowable
from lineage.app.panels.state import StatePanel, StatePanelView
from lineage.app.widgets.heatmap import Heatmap
from lineage.app.widgets.text_box import TextBox

from tests.app.helpers import SC, settle



def test_the_ui_thread_reads_no_frame_while_stepping_and_playing():
    ui_reads = []

    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            cursor = app.cursor
            frame = cursor.frame

            def watched(i, *a, **kw):
                if threading.current_thread() is threading.main_thread():
                    ui_reads.append(i)
                return frame(i, *a, **kw)
            cursor.frame = watched
            for _ in range(3):
                await pilot.press("n")
            await settle(pilot, app, 3)
            app.request(40)                                     # a jump: the sweeps' history is read
            await settle(pilot, app, 40)
            await pilot.press(*"+++++", "space")                # play at max speed: its own worker

            async def played():
                while app.index < 45:
                    await pilot.pause(0.05)
            await asyncio.wait_for(played(), 60)
            await pilot.press("space")
            await settle(pilot, app)
            kinds = {type(p.view).__name__ for p in app.query("Panel")}
            assert {"StatePanelView", "HeadSweep", "RoutingPanelView", "TokensPanelView"} <= kinds
    asyncio.run(go())
    assert ui_reads == []


def test_text_form_is_made_from_the_view_the_panel_draws(monkeypatch):
    """What `s` and `snapshot` write is what the screen shows: for every panel of the tour, the
    view its widget drew at a step, through `lines`, is the text form of that step and Room; and
    a text panel's body (NO_COLOR: its lines, uncoloured) and the state map are that view."""
    monkeypatch.setenv("NO_COLOR", "1")
    checked = set()

    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            app.request(5)
            await settle(pilot, app, 5)
            for p in app.query(Panel):
                drawn, room = p.view, p.room
                assert p._shown == (app.cursor, 5) and drawn is not None and room.width > 0, p.kind
                text = p.text_form(app.cursor, 5, room.options, room.width)
                assert type(p).lines(drawn, room.width) == text, p.kind
                if type(p).draw is TextPanel.draw:                  # the body is the view's lines
                    body = p.query_one("#body", TextBox).shown.plain.split("\n")
                    assert body == type(p).lines(drawn, max(40, p.size.width - 4)), p.kind
                if isinstance(p, StatePanel):
                    assert np.array_equal(p.query_one(Heatmap).data, drawn.data)
                checked.add(p.kind)
    asyncio.run(go())
    assert {"state", "decay", "routing", "depth", "cache", "tokens", "captions"} <= checked


def test_a_view_for_options_changed_since_is_prepared_again():
    cur = open_path(str(SC / "tour.yaml"), device="cpu")
    try:
        panel = StatePanel({"kind": "state"})
        asked = panel.room                                  # the worker read this Room
        old = panel.prepared(cur, 2, asked)
        panel.options["layer"] = old.layers[1]              # then a picker moved on
        panel.room = Room(dict(panel.options), 0)
        panel.take(cur, 2, asked, old)
        taken = panel._latest[2]
        assert isinstance(taken, StatePanelView) and taken.layer == old.layers[1] != old.layer
        panel.take(cur, 3, panel.room, old)                 # prepared for the current Room: kept as is
        assert panel._latest[2] is old
    finally:
        cur.close()


def test_bad_data_becomes_an_unshowable_view():
    cur = open_path(str(SC / "tour.yaml"), device="cpu")
    try:
        panel = StatePanel({"kind": "state", "head": "two"})     # what a stranger's trace may hold
        view = panel.prepared(cur, 0)
        assert isinstance(view, Unshowable) and "head 'two' is not a whole number" in view.error
    finally:
        cur.close()


def test_views_hold_copies_of_the_frame_history():
    """A decay view's history is what the frames hold, step by step, oldest first."""
    cur = open_path(str(SC / "tour.yaml"), device="cpu")
    try:
        view = PANELS["decay"].prepare(cur, 10, {"kind": "decay"}, 100)
        assert view.columns.first == 0 and len(view.columns.columns) == 11
        for j in (0, 7, 10):
            assert np.array_equal(view.columns.column(j), cur.frame(j).decay(0, view.layer).head(0))
    finally:
        cur.close()
