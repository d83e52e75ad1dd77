"""Playing or stepping onto a caption brings its panel into view at 80x24, as `{ }` do."""
from __future__ import annotations

import asyncio

from tests.tui.test_caption_panel import SC, _at, _seen
from tui.app import LineageApp


def test_stepping_onto_a_caption_brings_its_panel_into_view_at_80x24():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(80, 24)) as pilot:
            await _at(pilot, app, 0)
            app.request(3)                      # step 4: the first caption's, about the state
            await _at(pilot, app, 3)
            assert not _seen(app, "decay")      # below the fold at 80x24
            await pilot.press("n")              # step 5: the decay caption comes
            await _at(pilot, app, 4)
            assert _seen(app, "decay")
            app.request(11)                     # step 12: still the decay caption
            await _at(pilot, app, 11)
            await pilot.press("space")          # playing on reaches step 13, the routing caption
            async def until_routing():
                while app.screen.player.index < 12:
                    await pilot.pause(0.1)
            await asyncio.wait_for(until_routing(), 30)
            await pilot.press("space")
            await pilot.pause(0.3)
            assert _seen(app, "routing")
    asyncio.run(go())
