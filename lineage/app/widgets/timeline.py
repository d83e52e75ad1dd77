"""The step counter and timeline: 'step N / M', a bar to click on, play state and speed, and
while a step far ahead is being made, how far that has got ('computing 412 / 900')."""
from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.widget import Widget


class Timeline(Widget):
    DEFAULT_CSS = "Timeline { height: 1; width: 1fr; }"

    @dataclass
    class Jump(Message):
        step: int

    def __init__(self, **kw):
        super().__init__(**kw)
        self.step, self.total, self.made, self.playing, self.speed = 0, 0, 0, False, "1"
        self.computing: tuple[int, int] | None = None     # (frames made, frames needed) of a long jump

    def set(self, step: int, total: int, made: int, playing: bool, speed: str) -> None:
        self.step, self.total, self.made, self.playing, self.speed = step, total, made, playing, speed
        self.refresh()

    def progress(self, made: int | None, needed: int = 0) -> None:
        """A long jump has `made` of the `needed` frames; None: no jump is being computed."""
        self.computing = None if made is None else (made, needed)
        if made is not None:
            self.made = max(self.made, made)
        self.refresh()

    def _bar_width(self) -> int:
        return max(10, self.size.width - len(self._label()) - 2)

    def _label(self) -> str:
        if not self.total:             # nothing open yet: no 'step 1 / 0'
            return " opening … "
        if self.computing is not None:
            made, needed = self.computing
            return f" step {self.step + 1} / {self.total}  computing {made} / {needed}, esc cancels "
        state = "▶ playing" if self.playing else "❚❚ paused"
        pace = "max speed" if self.speed == "max" else f"{self.speed}/s"
        return f" step {self.step + 1} / {self.total}  {state} {pace} "

    def render(self) -> Text:
        label = self._label()
        w = self._bar_width()
        t = Text(label, Style(bold=True))
        if self.total:   # three runs, not one styled cell per column: fewer bytes per repaint
            pos = min(w - 1, self.step * w // max(self.total, 1))
            made = max(pos, min(w, self.made * w // max(self.total, 1)))
            t.append("━" * pos, Style(color="#5f87af"))
            t.append("●", Style(color="#ffd75f", bold=True))
            t.append("━" * max(0, made - pos - 1), Style(color="#5f87af"))
            t.append("─" * max(0, w - max(made, pos + 1)), Style(color="#444444"))
        return t

    def on_click(self, event) -> None:
        x = event.x - len(self._label())
        if 0 <= x < self._bar_width() and self.total:
            self.post_message(self.Jump(int(x * self.total / self._bar_width())))
