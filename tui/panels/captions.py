"""The scenario's note for this step (its teaching caption), shown in a bar under the panels
that never scrolls away and is never cut: the whole note, however many lines it takes."""
from __future__ import annotations

import textwrap

from rich.style import Style
from rich.text import Text
from textual.message import Message

from .base import TextPanel


def prepare(cur, i: int, p: dict, width: int) -> str | None:
    """The view is the note itself (None: none at this step)."""
    return cur.frame(i).caption()


def lines(text: str | None, width: int) -> list[str]:
    return [f"note: {text}"] if text else ["note: (none at this step)"]


class CaptionsPanel(TextPanel):
    kind = "captions"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    # the colour is the theme's (CSS), not a fixed yellow: legible on light themes too
    DEFAULT_CSS = """
    CaptionsPanel { height: auto; max-height: 12; min-height: 3; border: tall $accent 50%;
                    color: $text-warning; background: $boost; text-style: bold; }
    CaptionsPanel.-quiet { color: $text-muted; text-style: italic; }
    """

    class HeightSet(Message):
        """The bar took its steady height: the screen refits its rows to the room left."""

    def draw(self, text: str | None) -> None:
        self._steady_height()
        super().draw(text)

    def _steady_height(self) -> None:
        """As tall as the scenario's longest caption at this width: a new caption then never
        changes the bar's height, so playback never reflows (and redraws) the panels above."""
        width = self.content_size.width
        if self._shown is None or width <= 0 or width == getattr(self, "_steady_width", None):
            return
        self._steady_width = width
        shown = "note: " if self.app.no_color else ""        # the text form's prefix, without colour
        notes = [shown + (c.get("text") or "") for c in self._shown[0].info.get("captions") or []]
        tallest = max((sum(max(1, len(textwrap.wrap(par, width, break_on_hyphens=False)))
                           for par in t.splitlines() or [""]) for t in notes), default=1)
        self.styles.min_height = min(max(tallest, 1), 10) + 2           # + the tall border's two rows
        self.post_message(self.HeightSet())

    def rich(self, text: str | None) -> Text:
        if self.has_class("-quiet") != (not text):     # a class change restyles: only when it changes
            self.set_class(not text, "-quiet")
        return Text(text or "(no note at this step)", Style())
