"""What the screen shows while a file opens: a spinner, the stage it is at, and for how long.

The opening worker names each stage (reading the file, starting PyTorch, building the model);
the spinner turns on a timer of its own, so a long stage still shows the app is alive."""
from __future__ import annotations

import time

from textual.widgets import Static

SPIN = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class Loading(Static):
    def __init__(self, **kw):
        super().__init__("", markup=False, **kw)      # a stage may name a file: never markup
        self.stage = ""
        self._t0 = time.monotonic()
        self._timer = None

    def on_mount(self) -> None:
        self._timer = self.set_interval(0.1, self._turn, pause=not self.display)

    def start(self, stage: str) -> None:
        """Show the spinner from now on, at `stage`."""
        self._t0 = time.monotonic()
        self.display = True
        self.at(stage)
        if self._timer is not None:
            self._timer.resume()

    def at(self, stage: str) -> None:
        self.stage = stage
        self._turn()

    def done(self) -> None:
        self.display = False
        if self._timer is not None:
            self._timer.pause()         # no repaints while hidden: they would cost bytes over SSH

    def _turn(self) -> None:
        t = time.monotonic() - self._t0
        self.update(f"{SPIN[int(t * 10) % len(SPIN)]} {self.stage}  {t:.1f} s")
