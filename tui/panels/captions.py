"""The scenario's note for this step (its teaching caption), shown in a bar under the panels
that never scrolls away and is never cut: the whole note, however many lines it takes."""
from __future__ import annotations

from rich.style import Style
from rich.text import Text

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

    def rich(self, text: str | None) -> Text:
        if self.has_class("-quiet") != (not text):     # a class change restyles: only when it changes
            self.set_class(not text, "-quiet")
        return Text(text or "(no note at this step)", Style())
