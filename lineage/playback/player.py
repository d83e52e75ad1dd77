"""Playback state: the open file (a Session or a Replay: the cursor), the step on screen,
playing or paused, the speed, and the pace of repaints. No widgets and no Textual: the main
screen turns keys into calls here, and runs what the player decides in its workers and timers.
"""
from __future__ import annotations

import threading
import time

SPEEDS = ["1", "2", "5", "10", "20", "max"]


class StepFailed(Exception):
    """Step `step` (0-based) could not be made or read; `error` says why."""

    def __init__(self, step: int, error: Exception):
        super().__init__(str(error))
        self.step, self.error = step, error


class Player:
    """The cursor over a Session or Replay and where playback stands on it.

    `index` is the step on screen; `target` the step last asked for, which may still be being
    made. Keys step from the target, so presses made while a frame is computed all count.

    At max speed a worker thread makes frames one after another and hands the screen the newest
    as it is ready for one; `wait` lets it block until the screen has drawn the last (each shown
    frame notifies), instead of sleeping in a loop."""

    # at max speed the screen shows at most this many frames a second: drawing one at 160x50
    # takes the UI thread 40-60 ms of the GIL on a small machine, time the model's worker then
    # cannot step in (a frame made is a frame recorded, shown or not)
    MAX_DRAWS = 10

    def __init__(self):
        self.cursor = None
        self.index = 0
        self.target = 0
        self.playing = False
        self.speed_i = 0
        self._moved = threading.Condition()

    @property
    def speed(self) -> str:
        return SPEEDS[self.speed_i]

    @property
    def made(self) -> int:
        """Frames made so far (a Replay has every frame)."""
        made = getattr(self.cursor, "made", None)
        return made if made is not None else self.cursor.total

    def clamp(self, i: int) -> int:
        return max(0, min(i, self.cursor.total - 1))

    def aim(self, i: int) -> int:
        """Step i (clamped) is asked for: it becomes the target, which is returned."""
        self.target = self.clamp(i)
        return self.target

    @property
    def pending(self) -> bool:
        """A step was asked for by hand and is not on screen yet."""
        return self.cursor is not None and not self.playing and self.target != self.index

    def give_up(self) -> None:
        """The step asked for will not come (cancelled, or it failed): aim at the one shown."""
        self.target = max(self.index, 0)

    def open(self, cursor) -> None:
        """Show `cursor` from its first step; the one it replaces is closed."""
        old = self.cursor
        self.stop()
        self.cursor, self.index, self.target = cursor, 0, 0
        if old is not None:
            old.close()

    def close(self) -> None:
        """Stop and close the open file (a session publishes what it kept for next time)."""
        self.stop()
        if self.cursor is not None:
            self.cursor.close()

    def shown(self, cursor, i: int) -> bool:
        """Frame i of `cursor` is about to be drawn; False for a frame of a file replaced meanwhile."""
        if cursor is not self.cursor:
            return False
        with self._moved:
            self.index = i
            self._moved.notify_all()
        return True

    def wait(self, ready, timeout: float | None = None) -> bool:
        """Block (a worker thread, never the UI) until `ready()` holds; re-checked at every shown
        frame and every stop. Returns ready() at the end."""
        with self._moved:
            return self._moved.wait_for(ready, timeout)

    # -- play / pause -------------------------------------------------------------------
    def play(self) -> bool:
        if self.cursor is None:
            return False
        if self.index >= self.cursor.total - 1:
            self.index = -1            # at the end: play again from the start
        self.target = self.index
        self.playing = True
        return True

    def stop(self) -> bool:
        """Pause; True when it was playing. Wakes a max-speed worker waiting for the screen."""
        with self._moved:
            was, self.playing = self.playing, False
            if was:                    # stepping on from here counts from what was shown
                self.target = max(self.index, 0)
            self._moved.notify_all()
        return was

    def change_speed(self, delta: int) -> None:
        self.speed_i = max(0, min(len(SPEEDS) - 1, self.speed_i + delta))

    def tick(self) -> int | None:
        """The next step to show at a timed speed, or None at the end (time to stop). While the
        last one asked for is still being made, that one again: a slow model sets the pace."""
        if self.cursor is None or self.index >= self.cursor.total - 1:
            return None
        return self.target if self.target > self.index else self.index + 1

    def run_max(self, cursor, post, cancelled) -> None:
        """In a worker thread: make each next frame as fast as the model allows, and `post(i)`
        the newest whenever the screen has begun to draw the one posted before. Every frame is
        made and recorded (going back reads it); the screen skips to the newest at each repaint,
        so steps a second are the model's pace, not the repaints' (a frame's panel views are
        prepared only for frames posted). The last frame is posted and waited for."""
        i, posted, at = self.index, None, 0.0

        def going() -> bool:
            return self.playing and cursor is self.cursor and not cancelled()

        def drawn() -> bool:
            return posted is None or self.index >= posted

        while going() and i < cursor.total - 1:
            i += 1
            try:
                cursor.frame(i)
            except Exception as e:  # noqa: BLE001  the screen says which step failed
                if not going():    # stopped, or the file replaced (and closed) meanwhile: no failure
                    return
                raise StepFailed(i, e) from e
            if drawn() and time.monotonic() - at >= 1 / self.MAX_DRAWS:
                post(i)
                posted, at = i, time.monotonic()
        # the end: the newest frame reaches the screen before playing stops. The timeout only
        # bounds how late a cancelled worker notices (cancel notifies nobody)
        def until_drawn() -> bool:
            while not self.wait(lambda: not going() or drawn(), timeout=0.5):
                pass
            return going()

        if until_drawn() and posted != i:
            post(i)
            posted = i
            until_drawn()


class Throttle:
    """The one repaint pace: while playing, at most one draw per `interval` seconds. The newest
    value offered meanwhile is held and handed out by `release` when the interval is up;
    stepping by hand always draws at once (and drops what was held)."""

    def __init__(self, interval: float = 0.0):
        self.interval = interval
        self.at = 0.0                  # when the last draw was let through (time.monotonic)
        self.held = None               # (value,) waiting for the interval to end

    def offer(self, value, now: float, playing: bool) -> float | None:
        """None: draw `value` now. A number: it is held; a positive number asks the caller to
        call `release` after that many seconds (0: a release is already due)."""
        if self.interval and playing and now - self.at < self.interval:
            first = self.held is None
            self.held = (value,)
            return self.interval if first else 0.0
        self.at, self.held = now, None
        return None

    def release(self, now: float):
        """The held value, as a 1-tuple, or None when nothing is held."""
        held, self.held = self.held, None
        if held is not None:
            self.at = now
        return held
