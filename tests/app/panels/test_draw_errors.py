"""A panel bug is a failure, bad data a notice: only a FrameProblem (data a panel cannot draw)
becomes "step N cannot be drawn"; a TypeError or an IndexError from a panel's own code
surfaces, in the worker's view, in a text snapshot and in the app (issue 27)."""
import asyncio
from pathlib import Path

import numpy as np
import pytest

from lineage.playback.frame import Frame, FrameProblem
from lineage.playback.observe import DECAY
from lineage.playback.session import Session
from lineage.playback.trace import TraceWriter
from lineage.scenario import load
from textual.worker import WorkerFailed

from lineage.app.app import LineageApp
from lineage.app.panels import PANELS, render
from lineage.app.panels.base import Unshowable
from lineage.app.panels.decay import DecayPanel

SC = Path(__file__).resolve().parents[3] / "lineage" / "scenarios"


def _bug(*a, **kw):
    raise TypeError("a bug in the panel's own code")


@pytest.fixture(scope="module")
def tour():
    return Session(load(SC / "tour.yaml"), device="cpu")


def test_a_buggy_prepare_is_not_a_notice(tour, monkeypatch):
    monkeypatch.setattr(DecayPanel, "prepare", staticmethod(_bug))
    with pytest.raises(TypeError, match="a bug"):
        DecayPanel({"kind": "decay"}).prepared(tour, 2)
    with pytest.raises(TypeError, match="a bug"):
        render(tour, 2)                                  # `snapshot -o OUT.txt` fails too


def test_an_index_error_in_a_text_form_is_not_a_notice(tour, monkeypatch):
    def lines(view, width):
        return [view.columns.columns[999]]               # reads past what it has: a bug
    monkeypatch.setattr(PANELS["decay"], "lines", staticmethod(lines))
    with pytest.raises(IndexError):
        render(tour, 2, panel="decay")


def test_a_buggy_draw_stops_the_app(monkeypatch):
    monkeypatch.setattr(DecayPanel, "draw", _bug)
    seen = []

    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(200):
                await pilot.pause(0.05)
                panels = list(app.query(DecayPanel))
                seen.extend(str(p.border_subtitle) for p in panels)
                if not app.is_running:
                    break
    # the draw runs on the UI thread or, for a panel's first view, in a worker: either way the
    # app ends with the bug (WorkerFailed carries it), never a notice
    with pytest.raises((TypeError, WorkerFailed)) as got:
        asyncio.run(go())
    bug = got.value.error if isinstance(got.value, WorkerFailed) else got.value
    assert isinstance(bug, TypeError) and "a bug" in str(bug)
    assert not any("cannot be drawn" in s for s in seen)


def test_bad_data_is_still_a_notice(tour):
    """A frame problem (here: nothing recorded at a step a sweep needs) is the notice."""
    class Gap:
        info, total = tour.info, tour.total

        def model_config(self, m):
            return tour.model_config(m)

        def frame(self, i):
            f = tour.frame(i)
            return Frame(f.step, f.meta, {k: v for k, v in f.arrays.items() if not k.endswith("/" + DECAY["alpha"].key)}) if i == 1 else f
    view = DecayPanel({"kind": "decay"}).prepared(Gap(), 2)
    assert view.columns.columns[1] is None
    with pytest.raises(FrameProblem, match="step 2 has nothing recorded"):
        view.columns.column(1)
    assert isinstance(DecayPanel({"kind": "decay", "head": -1}).prepared(tour, 2), Unshowable)


def test_alpha_of_the_wrong_shape_is_a_notice(tour, tmp_path, capsys):
    """A trace whose alpha has fewer heads than its layer: said on the panel, not drawn as if right."""
    from lineage.cli.main import main
    path = tmp_path / "shape.trace"
    with TraceWriter(path, tour.sc.text, tour.info) as w:
        for i in range(3):
            f = tour.frame(i)
            w.write(Frame(i, f.meta, {k: (v[:-1] if k.endswith("l0/" + DECAY["alpha"].key) else v) for k, v in f.arrays.items()}))
    assert main(["snapshot", str(path), "--step", "3", "--panel", "decay", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "decay: step 3 cannot be drawn" in out and "heads" in out


def test_a_buggy_prepare_in_the_app_names_our_line(monkeypatch):
    """The worker's view of a step fails with a bug: the error box says where in lineage's code,
    and that it is lineage's bug, not the user's file (bad data would say only what is wrong)."""
    from lineage.app.screens.error import ErrorScreen

    def prepare(cursor, i, options, width):
        return [][i]                                     # an IndexError in our own code
    monkeypatch.setattr(DecayPanel, "prepare", staticmethod(prepare))

    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(200):
                await pilot.pause(0.05)
                if isinstance(app.screen, ErrorScreen):
                    return app.screen.lines
    lines = asyncio.run(go())
    # the prepare patched in is this file's, not lineage's: the line named is lineage's that called it
    assert any(x.startswith("IndexError at lineage/app/panels/") for x in lines), lines
    assert any("a bug in lineage, not in your file" in x for x in lines)
