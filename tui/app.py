"""The lineage terminal app: a scenario or trace, stepped token by token, with live panels.

Thin by design: the app owns the cursor (a Session or a Replay), asks a thread worker for
frames, and hands each finished frame to the panels. Torch is imported inside the loading
worker, so the screen appears before the model exists; the UI thread never touches a tensor.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.containers import Grid
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from scenarios import DIR as SCENARIO_DIR

from . import served
from .screens.error import ErrorScreen
from .screens.goto import AskScreen
from .screens.help import HelpScreen
from .text_panels import default_panels
from .widgets.cache_panel import CachePanel
from .widgets.decay_panel import DecayPanel
from .widgets.panel import Panel
from .widgets.routing_panel import RoutingPanel
from .widgets.state_panel import StatePanel
from .widgets.text_panel import TextPanel
from .widgets.timeline import Timeline

DEFAULT_SCENARIO = SCENARIO_DIR / "tour.yaml"
SPEEDS = ["1", "2", "5", "10", "20", "max"]
MIN_W, MIN_H = 60, 20
PANEL_CLASSES = {"state": StatePanel, "decay": DecayPanel, "routing": RoutingPanel, "cache": CachePanel}


@dataclass
class FrameReady(Message):
    """A frame the playback worker made. A newer one replaces an older one still queued."""
    cursor: object
    step: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FrameReady)


def make_panel(options: dict) -> Panel:
    return PANEL_CLASSES.get(options["kind"], TextPanel)(options)


class LineageApp(App):
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    TITLE = "lineage"
    BINDINGS = [
        Binding("space", "toggle_play", "play/pause"),
        Binding("n,right", "step(1)", "next"),
        Binding("p,left", "step(-1)", "prev"),
        Binding("home", "first", "first", show=False),
        Binding("end", "last", "last", show=False),
        Binding("plus,equals_sign", "speed(1)", "faster", key_display="+"),
        Binding("minus", "speed(-1)", "slower", key_display="-"),
        Binding("s", "snapshot", "snapshot"),
        Binding("m", "maximise", "maximise"),
        Binding("g", "goto", "go to", show=False),
        Binding("left_square_bracket", "pick('layer', -1)", "layer-", show=False),
        Binding("right_square_bracket", "pick('layer', 1)", "layer+", show=False),
        Binding("comma", "pick('head', -1)", "head-", show=False),
        Binding("full_stop", "pick('head', 1)", "head+", show=False),
        Binding("t", "pick('quantity', 1)", "S/dS/err", show=False),
        Binding("question_mark,f1", "help", "help"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, path: str | None = None, salvage: bool = False, cursor=None):
        """`cursor`: the Session or Replay of `path`, already open (headless snapshots)."""
        super().__init__()
        self.path = str(path or DEFAULT_SCENARIO)
        self.salvage = salvage
        self._given = cursor
        self.cursor = None
        self.index = 0
        self.playing = False
        self.speed_i = 0
        self._play_timer = None
        self.frames_shown = 0           # counted for the autoplay benchmark
        self.snapshot_dir = Path.cwd()

    # -- layout -----------------------------------------------------------------------
    def compose(self):
        yield Header(show_clock=False, icon="≋")
        yield Timeline(id="timeline")
        yield Grid(id="panels")
        yield Static("", id="loading")
        yield Static("", id="toosmall")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#loading", Static).update(f"opening {self.path} ...")
        self._fit_layout()
        if self._given is not None:
            self._opened(self._given, self.path)
            self._given = None
        else:
            self.open(self.path)

    def on_resize(self, event) -> None:
        self._fit_layout(event.size)

    def _fit_layout(self, size=None) -> None:
        """Columns by width; below the minimum a notice says what size is needed."""
        w, h = size or self.size
        small = w < MIN_W or h < MIN_H
        notice = self.query_one("#toosmall", Static)
        notice.display = small
        notice.update(f"lineage needs at least {MIN_W} x {MIN_H}; this terminal is {w} x {h}. Enlarge it or press q.")
        grid = self.query_one("#panels", Grid)
        grid.display = not small
        cols = 3 if w >= 150 else 2 if w >= 100 else 1
        grid.styles.grid_size_columns = cols

    def _show_status(self) -> None:
        info = self.cursor.info if self.cursor else {}
        depth = "none (NO_COLOR)" if self.no_color else (self.console.color_system or "none")
        bits = [f"device {info.get('device', '?')}", f"backend {info.get('backend', 'reference')}",
                f"colour {depth}"]
        if self.cursor is not None and type(self.cursor).__name__ == "Replay":
            bits.append("replaying a trace (no torch)")
        bits += info.get("notes", [])
        self.query_one("#status", Static).update(" · ".join(bits))

    # -- opening ----------------------------------------------------------------------
    def open(self, path: str) -> None:
        refused = served.refusal(str(path))     # served to a browser: not a reader of any file
        if refused is not None:
            self._open_failed(str(path), [refused], quotes_file=False)
            return
        self._load_path(str(path))

    @work(thread=True, exclusive=True, group="load")
    def _load_path(self, path: str) -> None:
        from lineage.scenario.problems import ScenarioError
        from lineage.playback.trace import TraceError
        try:
            from lineage.playback.session import open_path
            cursor = open_path(path, salvage=self.salvage)
            if cursor.total < 1:
                raise TraceError(f"{path}: nothing to show (0 steps)")
        except ScenarioError as e:
            self.call_from_thread(self._open_failed, path, [str(p) for p in e.problems])
            return
        except (TraceError, OSError) as e:
            self.call_from_thread(self._open_failed, path, [str(e)])
            return
        except Exception as e:  # whatever else a file can provoke, the app keeps what it had
            self.call_from_thread(self._open_failed, path, [f"{path}: {type(e).__name__}: {e}"])
            return
        self.call_from_thread(self._opened, cursor, path)

    def _open_failed(self, path: str, lines: list[str], quotes_file: bool = True) -> None:
        keeping = self.cursor.info["title"] if self.cursor else None
        self.query_one("#loading", Static).display = False
        shown = served.shown_problems(lines, path) if quotes_file else lines
        self.push_screen(ErrorScreen(f"Could not open {path}", shown, keeping))

    def _opened(self, cursor, path: str) -> None:
        old = self.cursor
        self.stop()
        self.cursor, self.path, self.index = cursor, path, 0
        if old is not None:
            old.close()
        self.title = cursor.info["title"]
        self.sub_title = Path(path).name
        self.query_one("#loading", Static).display = False
        grid = self.query_one("#panels", Grid)
        grid.remove_children()
        made = [make_panel(p) for p in default_panels(cursor.info)]
        grid.mount_all(made)
        # focus decided here, not by whichever widget mounted first: the pickers act on the
        # focused panel, so start on the first one that has layers to pick. Without scrolling
        # to it: a small terminal opens at the top of the layout, whenever the focus lands
        first = next((p for p in made if p.pickable), made[0])
        self.call_after_refresh(first.focus, False)
        self._show_status()
        self.call_after_refresh(self.request, 0)

    # -- stepping ---------------------------------------------------------------------
    def request(self, i: int) -> None:
        if self.cursor is None:
            return
        i = max(0, min(i, self.cursor.total - 1))
        self._compute_frame(self.cursor, i)

    @work(thread=True, exclusive=True, group="step")
    def _compute_frame(self, cursor, i: int) -> None:
        cursor.frame(i)                        # the session serialises stepping itself
        self.call_from_thread(self._show_frame, cursor, i)

    def _show_frame(self, cursor, i: int) -> None:
        if cursor is not self.cursor:
            return                             # a frame of a scenario that was replaced meanwhile
        self.index = i
        for panel in self.query(Panel):
            panel.paced_show(cursor, i)
        self._update_timeline()
        self.frames_shown += 1

    def _update_timeline(self) -> None:
        cursor = self.cursor
        made = len(getattr(cursor, "frames", ())) or cursor.total   # a Replay has every frame
        self.query_one(Timeline).set(max(self.index, 0), cursor.total, made, self.playing, SPEEDS[self.speed_i])

    def action_step(self, delta: int) -> None:
        self.stop()
        self.request(self.index + delta)

    def action_first(self) -> None:
        self.stop()
        self.request(0)

    def action_last(self) -> None:
        self.stop()
        self.request(self.cursor.total - 1 if self.cursor else 0)

    def on_timeline_jump(self, event: Timeline.Jump) -> None:
        self.stop()
        self.request(event.step)

    def action_goto(self) -> None:
        def done(value):
            if value and value.isdigit():
                self.stop()
                self.request(int(value) - 1)
        self.push_screen(AskScreen(f"Go to step (1 - {self.cursor.total if self.cursor else '?'})"), done)

    # -- playback ---------------------------------------------------------------------
    def action_toggle_play(self) -> None:
        if self.playing:
            self.stop()
        else:
            self.play()

    def play(self) -> None:
        if self.cursor is None:
            return
        if self.index >= self.cursor.total - 1:
            self.index = -1
        self.playing = True
        self._restart_play()

    def _restart_play(self) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if not self.playing:
            return
        speed = SPEEDS[self.speed_i]
        if speed == "max":
            self._play_max(self.cursor)
        else:
            self._play_timer = self.set_interval(1 / float(speed), self._play_tick)

    def _play_tick(self) -> None:
        if self.cursor is None or self.index >= self.cursor.total - 1:
            self.stop()
            return
        self.request(self.index + 1)

    @work(thread=True, exclusive=True, group="step")
    def _play_max(self, cursor) -> None:
        """As fast as the model allows, the screen showing the newest frame at each repaint:
        frames made while the screen was busy replace each other in the queue (FrameReady
        can_replace), so the UI never falls behind and every frame is still recorded. The
        worker stays at most AHEAD frames ahead so the UI thread is not starved of the GIL."""
        from textual.worker import get_current_worker
        worker = get_current_worker()
        i = self.index
        while self.playing and cursor is self.cursor and i < cursor.total - 1 and not worker.is_cancelled:
            i += 1
            cursor.frame(i)
            self.post_message(FrameReady(cursor, i))      # thread-safe; handled in the app's context
            while self.playing and i - self.index > self.AHEAD and not worker.is_cancelled:
                time.sleep(0.002)
        if not worker.is_cancelled:
            self.call_from_thread(self.stop)

    AHEAD = 4

    def on_frame_ready(self, message: "FrameReady") -> None:
        if self.playing and message.step > self.index:
            self._show_frame(message.cursor, message.step)

    def stop(self) -> None:
        was = self.playing
        self.playing = False
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if was and self.cursor is not None:
            self._update_timeline()

    def action_speed(self, delta: int) -> None:
        self.speed_i = max(0, min(len(SPEEDS) - 1, self.speed_i + delta))
        self._restart_play()
        if self.cursor is not None:
            self._update_timeline()

    # -- panels -----------------------------------------------------------------------
    def _focused_panel(self) -> Panel | None:
        w = self.focused
        while w is not None and not isinstance(w, Panel):
            w = w.parent
        if w is None:
            panels = list(self.query(Panel))
            return next((p for p in panels if p.pickable), None)
        return w

    def action_pick(self, what: str, delta: int) -> None:
        panel = self._focused_panel()
        if panel is None or self.cursor is None:
            return
        changed = {"layer": panel.pick_layer, "head": panel.pick_head,
                   "quantity": lambda d: panel.cycle_quantity()}[what](delta)
        if changed:
            panel.show(self.cursor, self.index)

    def action_maximise(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
            return
        panel = self._focused_panel()
        if panel is not None:
            self.screen.maximize(panel)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_snapshot(self) -> None:
        if self.cursor is None:
            return
        stem = self.snapshot_dir / f"lineage-{Path(self.path).stem}-step{self.index + 1}"
        svg = self.save_screenshot(str(stem) + ".svg")
        panels = [self.screen.maximized] if isinstance(self.screen.maximized, Panel) else list(self.query(Panel))
        text = f"{self.cursor.info['title']} - step {self.index + 1} / {self.cursor.total}\n\n"
        text += "\n\n".join(p.text(self.cursor, self.index) for p in panels) + "\n"
        Path(str(stem) + ".txt").write_text(text, encoding="utf-8")
        self.notify(f"saved {svg} and {stem.name}.txt")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Open a scenario or trace", "Type a path to a .yaml scenario or a trace file",
                            self._ask_open)
        for path in sorted(SCENARIO_DIR.glob("*.yaml")):
            yield SystemCommand(f"Open {path.stem}", f"Bundled scenario {path.name}",
                                lambda p=path: self.open(str(p)), discover=False)
        yield SystemCommand("Export snapshot", "Save the screen as SVG and the panels as text", self.action_snapshot)
        yield SystemCommand("Go to step", "Jump to a step number", self.action_goto)
        for panel in self.query(Panel):
            yield SystemCommand(f"Toggle panel: {panel.border_title or panel.kind}", "Show or hide this panel",
                                lambda p=panel: setattr(p, "display", not p.display), discover=False)

    def _ask_open(self) -> None:
        self.push_screen(AskScreen("Open a scenario (.yaml) or trace", "scenarios/recall.yaml"),
                         lambda v: v and self.open(v))


def run(path: str | None = None, salvage: bool = False) -> int:
    LineageApp(path, salvage=salvage).run()
    return 0
