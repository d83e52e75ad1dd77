"""Keys as a terminal delivers them: presses count from the step asked for (in a burst, during
a jump, while the file opens), and a long jump reports its progress and cancels."""
import asyncio

from textual import events

from tests.app.helpers import SC, counter, run, settle
from lineage.app.app import LineageApp
from lineage.app.widgets.timeline import Timeline


async def _type(app, key: str, times: int, every: float) -> None:
    """`times` presses of `key` as a terminal delivers them: every `every` seconds (0: a burst
    posted at once, faster than any frame is made)."""
    for _ in range(times):
        app.post_message(events.Key(key, key))
        if every:
            await asyncio.sleep(every)


def test_fast_presses_all_count():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app, 0)
            await _type(app, "n", 20, 1 / 30)          # keyboard repeat, about 30 a second
            await settle(pilot, app, 20)
            assert app.index == 20 and "step 21 / 1000" in counter(app)
            await _type(app, "n", 10, 0)               # a burst
            await settle(pilot, app, 30)
            await _type(app, "p", 5, 0)
            await settle(pilot, app, 25)
            assert app.index == app.player.target == 25
    run(go())


def test_long_jump_shows_progress_and_cancels(tmp_path):
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        app.snapshot_dir = tmp_path
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app, 0)
            await pilot.press("g", *"900", "enter")
            timeline = app.query_one(Timeline)
            for _ in range(200):                           # until the first progress report
                if timeline.computing:
                    break
                await pilot.pause(0.05)
            label = counter(app)
            assert "step 1 / 1000" in label and "esc cancels" in label, label
            made, needed = timeline.computing
            assert f"computing {made} / 900" in label and needed == 900 and 1 < made < 900
            await pilot.press("s")                        # the screen is behind the step asked for
            assert not list(tmp_path.iterdir())
            await pilot.press("escape")
            await settle(pilot, app, 0)
            kept = app.cursor.made
            assert made <= kept < 900                     # stopped between two steps; what was made stays
            assert app.player.target == 0 and timeline.computing is None and "computing" not in counter(app)
            await pilot.pause(0.3)
            assert app.cursor.made == kept          # and nothing goes on computing
            await pilot.press("n")
            await settle(pilot, app, 1)
            await pilot.press("g", *str(kept), "enter")    # frames already made: no progress, no computing
            await settle(pilot, app, kept - 1)
            assert app.cursor.made == kept
            await pilot.press("s", "s")                   # never over an earlier snapshot
            await pilot.pause(0.2)
            assert len(list(tmp_path.glob("*.svg"))) == 2 and len(list(tmp_path.glob("*.txt"))) == 2
    run(go())


def test_a_press_during_a_jump_counts_from_its_target():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app, 0)
            await pilot.press("g", *"120", "enter")
            await _type(app, "n", 3, 0)
            await settle(pilot, app, 122)                 # 120 asked for, then three more
            assert "step 123 / 1000" in counter(app)
    run(go())


def test_presses_while_the_file_opens_still_count(monkeypatch):
    import threading

    import lineage.playback.session as session
    gate, real = threading.Event(), session.open_path
    monkeypatch.setattr(session, "open_path", lambda *a, **kw: gate.wait(30) and real(*a, **kw))

    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("n", "n", "n")
            assert app.cursor is None and counter(app).strip() == "opening …"
            gate.set()
            await settle(pilot, app, 3)
            assert "step 4 / 1000" in counter(app)
    run(go())
