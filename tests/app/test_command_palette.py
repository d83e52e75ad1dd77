"""The command palette's crashes under fast or cramped keys (Textual 8.2.8's, guarded in
lineage/app/command_palette.py): each first shown to happen in a bare Textual app, then not in ours."""
import asyncio

import pytest
from textual import events
from textual.app import App, ScreenStackError, SystemCommand

from lineage.app.command_palette import Palette


class Bare(App):
    def __init__(self, palette: bool):
        super().__init__()
        self.palette, self.ran = palette, 0

    def get_system_commands(self, screen):
        yield SystemCommand("Count", "count a run", self.count)
        yield from super().get_system_commands(screen)

    def count(self):
        self.ran += 1

    def action_command_palette(self):
        if not self.palette:
            return super().action_command_palette()
        if not Palette.is_open(self):           # as lineage/app/app.py does
            self.push_screen(Palette(id="--command-palette"))


async def _keys(app, size, before, fast):
    """`before` pressed one by one, then `fast` posted at once (typed faster than handled)."""
    async with app.run_test(size=size) as pilot:
        for k in before:
            await pilot.press(k)
        await pilot.pause(0.1)
        for k in fast:
            app.post_message(events.Key(k, None))
        await pilot.pause(0.3)


CASES = {
    "page up on a list with no height": ((40, 3), ["ctrl+p", "down"], ["pageup"], KeyError),
    "page down on a list with no height": ((40, 3), ["ctrl+p", "down"], ["pagedown"], KeyError),
    "a second enter after the palette closed": ((80, 24), ["ctrl+p", "down"], ["enter", "enter"], ScreenStackError),
}


@pytest.mark.parametrize("case", CASES)
def test_textual_alone_crashes(case):
    """The bug is Textual's: a bare app with its own palette fails (if a Textual release fixes
    it, this test says so and the guard can go)."""
    size, before, fast, error = CASES[case]
    with pytest.raises(error):
        asyncio.run(_keys(Bare(palette=False), size, before, fast))


@pytest.mark.parametrize("case", CASES)
def test_guarded_palette_survives(case):
    size, before, fast, _ = CASES[case]
    app = Bare(palette=True)
    asyncio.run(_keys(app, size, before, fast))
    assert app.ran <= 1


def test_guarded_palette_runs_a_command_once_and_still_pages():
    async def go():
        app = Bare(palette=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("ctrl+p", *"count", "down", "pagedown", "pageup")
            await pilot.pause(0.1)
            app.post_message(events.Key("enter", None))
            app.post_message(events.Key("enter", None))
            await pilot.pause(0.3)
            assert app.ran == 1 and not isinstance(app.screen, Palette)
            await pilot.press("ctrl+p")
            assert isinstance(app.screen, Palette)
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert not isinstance(app.screen, Palette)
    asyncio.run(go())
