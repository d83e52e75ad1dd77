"""The lineage terminal app: a scenario or trace, stepped token by token, with live panels.

Thin by design: the app makes the Player (where playback stands) and the main screen (keys,
layout, workers, panels) and adds the command palette's entries. Everything else is theirs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from textual.app import App, SystemCommand
from textual.screen import Screen

from scenarios import DIR as SCENARIO_DIR

from .command_palette import Palette
from .panels.base import Panel
from .player import Player
from .screens.ask import AskScreen
from .screens.main import MainScreen

DEFAULT_SCENARIO = SCENARIO_DIR / "tour.yaml"


class LineageApp(App):
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    TITLE = "lineage"

    def __init__(self, path: str | None = None, salvage: bool = False, cursor=None):
        """`cursor`: the Session or Replay of `path`, already open (headless snapshots)."""
        super().__init__()
        self.player = Player()
        self._opening = (str(path or DEFAULT_SCENARIO), salvage, cursor)
        self.main: MainScreen | None = None
        self.snapshot_dir = Path.cwd()

    def get_default_screen(self) -> MainScreen:
        # the main screen is the default one, so app.query() finds its panels
        self.main = MainScreen(self.player, *self._opening)
        return self.main

    # where playback stands, read by snapshots and tests
    @property
    def cursor(self):
        return self.player.cursor

    @property
    def index(self) -> int:
        return self.player.index

    @property
    def playing(self) -> bool:
        return self.player.playing

    @property
    def frames_shown(self) -> int:
        return self.player.frames_shown

    def open(self, path: str):
        return self.main.open(path)

    def request(self, i: int):
        return self.main.request(i)

    # -- the command palette ------------------------------------------------------------
    def action_command_palette(self) -> None:
        # Textual's palette with two of its crashes guarded (tui/command_palette.py)
        if self.use_command_palette and not Palette.is_open(self):
            self.push_screen(Palette(id="--command-palette"))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Open a scenario or trace", "Type a path to a .yaml scenario or a trace file",
                            self._ask_open)
        for path in sorted(SCENARIO_DIR.glob("*.yaml")):
            yield SystemCommand(f"Open {path.stem}", f"Bundled scenario {path.name}",
                                lambda p=path: self.open(str(p)), discover=False)
        yield SystemCommand("Export snapshot", "Save the screen as SVG and the panels as text",
                            self.main.action_snapshot)
        yield SystemCommand("Go to step", "Jump to a step number", self.main.action_goto)
        for panel in self.query(Panel):
            yield SystemCommand(f"Toggle panel: {panel.border_title or panel.kind}", "Show or hide this panel",
                                lambda p=panel: setattr(p, "display", not p.display), discover=False)

    def _ask_open(self) -> None:
        self.push_screen(AskScreen("Open a scenario (.yaml) or trace", "scenarios/recall.yaml"),
                         lambda v: v and self.open(v))


def run(path: str | None = None, salvage: bool = False) -> int:
    LineageApp(path, salvage=salvage).run()
    return 0
