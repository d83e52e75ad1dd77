"""The main screen's stepping: asking for a step, the workers that make it, and playback.

Steps are asked for against the Player's target, not the step on screen, so key presses made
while a frame is computed all count. A step worker makes the frame and then every shown
panel's view of it (`Panel.prepared`), so the UI thread only puts views on widgets; a long jump
reports its progress to the timeline and `esc` cancels it (the frames made so far stay). Play
is a timer asking for the next step, or at max speed one worker making frames as fast as it can.

A mixin of MainScreen (screens/main.py), which has the Player (`player`), the panels the
workers prepare for (`_panels`: the cursor and its panels) and shows what they made
(`_show_frame`); the keys that call these actions are bound there.
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path

from textual import work
from textual.worker import get_current_worker

from lineage.cli.opening import BUGS
from lineage.playback.player import StepFailed
from ..panels.base import Panel
from ..widgets.timeline import Timeline
from .ask import AskScreen
from .error import ErrorScreen
from .messages import Computing, FrameReady, unless_taken_down

PROGRESS_EVERY = 0.1       # seconds between progress reports of a long jump (the first after as long)


class Stepping:
    _jump = 0                  # numbers the step requests, so a late progress report is dropped
    _early: int | None = None  # a step asked for before the file was open: shown first
    _play_timer = None         # the timer of play below max speed

    # -- asking for a step ------------------------------------------------------------
    @unless_taken_down                 # asked for after a refresh, or by a late play tick
    def request(self, i: int):
        """Show step i (clamped) once a worker has made it; returns that worker. It becomes the
        player's target at once; a newer request replaces this one (its worker stops between
        two steps, and what it made stays)."""
        if self.player.cursor is None:
            self._early = i            # keys pressed while the first file opens still count
            return None
        self._jump += 1
        return self._compute_frame(self.player.cursor, self.player.aim(i), self._jump)

    @work(thread=True, exclusive=True, group="step")
    def _compute_frame(self, cursor, i: int, jump: int) -> None:
        from lineage.playback.session import Stopped
        worker = get_current_worker()
        last = [time.monotonic()]

        def progress(made: int, needed: int) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY:    # a few reports a second: the UI thread needs the GIL too
                last[0] = now
                self.post_message(Computing(jump, made, needed))

        try:
            # the session serialises stepping itself; stop: a newer request or esc cancelled this one
            cursor.frame(i, progress=progress, stop=lambda: worker.is_cancelled)
            views = self._views(cursor, i)
        except Stopped:
            return
        except Exception as e:  # noqa: BLE001  a corrupt trace frame, a model that fails at this step
            if cursor is self.player.cursor:   # not a file replaced (and closed) meanwhile
                self.app.call_from_thread(self._frame_failed, i, e)
            return
        if not worker.is_cancelled:            # a frame asked for before the newest request is not shown
            self.app.call_from_thread(self._show_frame, cursor, i, views)

    def _views(self, cursor, i: int) -> list:
        """In a step worker: each shown panel's view of step i, prepared for the Room the panel
        has now (a later picker or resize prepares it again on arrival). None for panels of a
        file opened meanwhile."""
        owner, panels = self._panels
        if owner is not cursor:
            return []
        views = []
        for p in panels:
            if p.display:                      # a hidden panel is prepared when it is shown again
                room = p.room                  # read once: the UI thread may replace it meanwhile
                views.append((p, room, p.prepared(cursor, i, room)))
        return views

    @unless_taken_down
    def on_computing(self, message: Computing) -> None:
        if message.jump == self._jump and self.player.pending:
            self.query_one(Timeline).progress(message.made, message.needed)

    def action_escape(self) -> None:
        """Cancel a long jump (the frames made so far stay); otherwise restore a maximised panel."""
        if self.player.pending:
            self.workers.cancel_group(self, "step")
            self._jump += 1                    # its last progress report, if still queued, is dropped
            self.player.give_up()
            self.query_one(Timeline).progress(None)
            self._update_timeline()
            self.notify(f"stopped: steps 1 - {self.player.made} are made; showing step {self.player.index + 1}",
                        timeout=3)
        elif self.maximized is not None:
            self.minimize()

    @unless_taken_down
    def _frame_failed(self, i: int, error: Exception) -> None:
        """A step that cannot be shown: say which, stop playing, keep the frames already shown."""
        self.stop()
        self.player.give_up()
        self.query_one(Timeline).progress(None)
        line = str(error).splitlines()[0] if str(error) else type(error).__name__
        keeping = self.player.cursor.info["title"] if self.player.cursor else None
        self.app.push_screen(ErrorScreen(f"Step {i + 1} could not be shown", [line, *_where(error)], keeping))

    @unless_taken_down                 # stop() calls it, on_unmount's included
    def _update_timeline(self) -> None:
        p = self.player
        self.query_one(Timeline).set(max(p.index, 0), p.cursor.total, p.made, p.playing, p.speed)

    def action_step(self, delta: int) -> None:
        self.stop()
        base = self.player.target if self.player.cursor is not None else (self._early or 0)
        self.request(base + delta)     # from the step asked for: no press is lost

    def action_first(self) -> None:
        self.stop()
        self.request(0)

    def action_last(self) -> None:
        self.stop()
        self.request(self.player.cursor.total - 1 if self.player.cursor else 0)

    def on_timeline_jump(self, event: Timeline.Jump) -> None:
        self.stop()
        self.request(event.step)

    def action_goto(self) -> None:
        def done(value):
            if not value:
                return
            if not value.isdigit():
                self.notify(f"{value[:20]!r} is not a step number", severity="warning", markup=False)
                return
            self.stop()
            total = self.player.cursor.total if self.player.cursor else 0
            if not 1 <= int(value) <= total:
                self.notify(f"there are steps 1 - {total}: going to the nearest", severity="warning")
            self.request(int(value) - 1)
        total = self.player.cursor.total if self.player.cursor else "?"
        self.app.push_screen(AskScreen(f"Go to step (1 - {total})"), done)

    # -- playback ---------------------------------------------------------------------
    def action_toggle_play(self) -> None:
        if self.player.playing:
            self.stop()
        elif self.player.play():
            self._restart_play()

    def _restart_play(self) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if not self.player.playing:
            return
        if self.player.speed == "max":
            self._play_max(self.player.cursor)
        else:
            self._play_timer = self.set_interval(1 / float(self.player.speed), self._play_tick)

    def _play_tick(self) -> None:
        i = self.player.tick()
        if i is None:
            self.stop()
        elif i != self.player.target:      # a new request would cancel the one still being made
            self.request(i)

    @work(thread=True, exclusive=True, group="step")
    def _play_max(self, cursor) -> None:
        worker = get_current_worker()
        # post_message is thread-safe; the frame is handled in the screen's context
        try:
            self.player.run_max(cursor, lambda i: self.post_message(FrameReady(cursor, i, self._views(cursor, i))),
                                lambda: worker.is_cancelled)
        except StepFailed as e:
            self.app.call_from_thread(self._frame_failed, e.step, e.error)
            return
        if not worker.is_cancelled:
            self.app.call_from_thread(self.stop)

    @unless_taken_down
    def on_frame_ready(self, message: FrameReady) -> None:
        if self.player.playing and message.step > self.player.index:
            self._show_frame(message.cursor, message.step, message.views)

    def stop(self) -> None:
        was = self.player.stop()
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        for panel in self.query(Panel):
            panel.playing = False
        if was and self.player.cursor is not None:
            self._update_timeline()

    def action_speed(self, delta: int) -> None:
        self.player.change_speed(delta)
        self._restart_play()
        if self.player.cursor is not None:
            self._update_timeline()


def _where(error: Exception) -> list[str]:
    """For a programming error: the line of lineage's own code that raised it, so a bug reads as
    a bug and can be reported."""
    if not isinstance(error, BUGS):
        return []
    root = Path(__file__).resolve().parents[3]          # the checkout or site-packages holding lineage/
    # lineage's own frames only: the checkout (its .venv too) or site-packages holds other packages
    ours = [f for f in traceback.extract_tb(error.__traceback__)
            if Path(f.filename).resolve().is_relative_to(root / "lineage")]
    if not ours:
        return [f"({type(error).__name__})"]
    f = ours[-1]
    return [f"{type(error).__name__} at {Path(f.filename).resolve().relative_to(root)}:{f.lineno}, in {f.name}:"
            " a bug in lineage, not in your file; please report it with this line"]
