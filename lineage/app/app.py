"""The lineage terminal app: a scenario or trace, stepped token by token, with live panels.

Thin by design: the app makes the Player (where playback stands) and the main screen (keys,
layout, workers, panels) and adds the command palette's entries. Everything else is theirs.
Besides, SIGTERM and SIGHUP end it the way `q` does (the terminal restored, the cache published).
"""
from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from lineage.scenarios import DIR as SCENARIO_DIR
from lineage.scenarios import resolve as bundled

from .command_palette import Palette
from .panels.base import Panel
from lineage.playback.player import Player
from .screens.ask import AskScreen
from .screens.main import MainScreen

DEFAULT_SCENARIO = SCENARIO_DIR / "tour.yaml"
# kill's default, and the terminal (or the SSH session) closing; SIGINT is a key (ctrl+c) in raw mode
EXIT_SIGNALS = ("SIGTERM", "SIGHUP")


def scenario_title(path: Path) -> str:
    """A bundled scenario's title (its file name if the file cannot say)."""
    import yaml
    try:
        return str(yaml.safe_load(path.read_text(encoding="utf-8")).get("title") or path.stem)
    except Exception:  # noqa: BLE001  a palette entry is no place for a scenario's problems
        return path.stem


class LineageApp(App):
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    TITLE = "lineage"
    # the teacher's keys: the next / previous caption, as vim's paragraph motions
    BINDINGS = [Binding("right_curly_bracket", "caption(1)", "next caption", show=False),
                Binding("left_curly_bracket", "caption(-1)", "previous caption", show=False)]

    def __init__(self, path: str | None = None, salvage: bool = False, cursor=None):
        """`cursor`: the Session or Replay of `path`, already open (headless snapshots)."""
        super().__init__()
        self.player = Player()
        self._opening = (str(path or DEFAULT_SCENARIO), salvage, cursor)
        self.main: MainScreen | None = None
        self.snapshot_dir = Path.cwd()
        self._signals: dict[int, object] = {}      # signal -> the handler it had before the app ran

    def get_default_screen(self) -> MainScreen:
        # the main screen is the default one, so app.query() finds its panels
        self.main = MainScreen(self.player, *self._opening)
        return self.main

    # -- signals: the default action kills the process with the terminal still in the app's
    # modes (alternate screen, mouse reporting, hidden cursor) and the session's frames unpublished
    def on_mount(self) -> None:
        if self.is_headless:           # an export: killed as any command is, no terminal to restore
            return
        loop = asyncio.get_running_loop()
        for name in EXIT_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None:            # not on Windows
                continue
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self._signalled, sig)
            except (NotImplementedError, RuntimeError, ValueError):   # no such handlers here, or not the main thread
                continue
            self._signals[sig] = previous

    def _signalled(self, sig: int) -> None:
        self._restore_signals()        # a second one ends the process at once, should quitting hang
        self.exit(return_code=128 + sig)     # the shell's convention for "ended by signal sig"

    def on_unmount(self) -> None:
        self._restore_signals()

    def _restore_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig, previous in self._signals.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._signals.clear()

    # the open file (the headless exports read it) and the step on screen
    @property
    def cursor(self):
        return self.player.cursor

    @property
    def index(self) -> int:
        return self.player.index

    def open(self, path: str):
        return self.main.open(path)

    def request(self, i: int):
        return self.main.request(i)

    def action_caption(self, delta: int) -> None:
        """Go to the step where the next (or previous) caption starts."""
        cursor = self.player.cursor
        if cursor is None or self.main is None:
            return
        from .snapshot import caption_steps
        starts = caption_steps(cursor.info, cursor.total)
        i = self.player.index
        after = [s for s in starts if s > i] if delta > 0 else [s for s in starts if s < i][::-1]
        if after:
            self.main.stop()
            self.main.request(after[0])

    # -- the command palette ------------------------------------------------------------
    def action_command_palette(self) -> None:
        # Textual's palette with three of its crashes guarded (lineage/app/command_palette.py)
        if self.use_command_palette and not Palette.is_open(self):
            self.push_screen(Palette(id="--command-palette"))

    def search_themes(self) -> None:
        # the palette's Theme entry: Textual pushes its own palette, with the crashes ours guards
        from textual.theme import ThemeProvider
        self.push_screen(Palette(providers=[ThemeProvider], placeholder="Search for themes…"))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Textual's own screenshot entry is left out: "Export snapshot" below does it (SVG, PNG, text);
        # its Maximize would enlarge the focused map alone: the panel's m (legend and all) instead
        for c in super().get_system_commands(screen):
            if c.title == "Maximize":
                yield SystemCommand("Maximise", "Maximise the focused panel (m)", self.main.action_maximise)
            elif c.title == "Minimize":
                yield SystemCommand("Restore", "Restore the maximised panel (m)", self.main.action_maximise)
            elif c.title != "Screenshot":
                yield c
        yield SystemCommand("Open a scenario or trace", "Type a path to a .yaml scenario or a trace file, or a bundled name",
                            self._ask_open)
        for path in sorted(SCENARIO_DIR.glob("*.yaml")):
            yield SystemCommand(f"Open {scenario_title(path)}", f"Bundled scenario {path.name}",
                                lambda p=path: self.open(str(p)), discover=False)
        yield SystemCommand("Export snapshot", "Save the screen as SVG, PNG and text (a fresh numbered name)",
                            self.main.action_snapshot)
        yield SystemCommand("Go to step", "Jump to a step number", self.main.action_goto)
        for panel in self.query(Panel):
            yield SystemCommand(f"Toggle panel: {panel.border_title or panel.kind}", "Show or hide this panel",
                                lambda p=panel: self._toggle(p), discover=False)

    def _toggle(self, panel: Panel) -> None:
        """Show or hide a panel; the others (and their pictures) take the room it leaves."""
        panel.display = not panel.display
        self.main._fit_layout()
        if panel.display and self.cursor is not None:     # hidden, it was not prepared for
            panel.show(self.cursor, self.index)

    def _ask_open(self) -> None:
        self.push_screen(AskScreen("Open a scenario (.yaml) or trace, or a bundled name", "recall"),
                         lambda v: v and self.open(bundled(v)))


def run(path: str | None = None, salvage: bool = False) -> int:
    """The app on `path`; its exit status (1 after a crash, 128 + N when signal N ended it)."""
    app = LineageApp(path, salvage=salvage)
    app.run()
    return app.return_code or 0
