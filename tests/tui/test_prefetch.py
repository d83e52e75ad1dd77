"""`lineage run` has a helper process make the first frame while the app starts
(lineage/playback/prefetch.py): the app opens it from the trace cache, and that frame is the
one the app would have made itself."""
import asyncio
from pathlib import Path

import pytest

from lineage.playback import prefetch
from lineage.playback.session import Session
from lineage.scenario import load
from tui.app import LineageApp

from test_app import settle  # the app tests' helper: until the frame asked for is shown

SC = Path(__file__).resolve().parents[2] / "scenarios"
TOUR = str(SC / "tour.yaml")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    where = tmp_path / "cache"
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(where))
    return where


def test_the_app_opens_on_the_helpers_first_frame(cache_dir, monkeypatch):
    prefetch.start(TOUR)                               # as `lineage run` does, before the app exists
    made = []
    real = Session._make
    monkeypatch.setattr(Session, "_make", lambda self, i: made.append(i) or real(self, i))

    async def go():
        app = LineageApp(TOUR)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, 0)
            assert type(app.cursor).__name__ == "Warm" and app.cursor.held.made == 1
            assert made == []                          # step 1 came from the helper, not this process
            shown = app.cursor.frame(0)
            await pilot.press("n")                     # past the entry: the app's own session
            await settle(pilot, app, 1)
            assert app.cursor.session is not None and app.cursor.session.frame(0) == shown
            assert len(app.screen_stack) == 1
    asyncio.run(go())


def test_the_helper_skips_a_cached_scenario_and_a_switched_off_cache(cache_dir, monkeypatch, capfd):
    assert prefetch.main([TOUR]) == 0 and capfd.readouterr().out.split() == ["go", "done"]
    assert len(list(cache_dir.glob("*.trace"))) == 1
    assert prefetch.main([TOUR]) == 0 and capfd.readouterr().out.split() == ["skip"]
    assert prefetch.main([str(SC / "no-such.yaml")]) == 0 and capfd.readouterr().out.split() == ["skip"]
    monkeypatch.setenv("LINEAGE_CACHE_DIR", "off")
    prefetch.start(TOUR)                               # nothing started: nothing to wait for
    assert not prefetch.take(TOUR)
    assert not prefetch.take(str(SC / "recall.yaml"))  # never started


def test_a_gpu_is_left_to_the_app(cache_dir):
    sc = load(TOUR)
    assert prefetch._worth_it(sc)
    # two CUDA contexts would cost more than they save
    assert not prefetch._worth_it(sc.model_copy(update={"device": "cuda"}))
