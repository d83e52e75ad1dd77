"""The scenario's note for this step (its teaching caption)."""
from __future__ import annotations

from rich.style import Style
from rich.text import Text

from .base import TextPanel


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    text = cur.frame(i).caption()
    return [f"note: {text}"] if text else ["note: (none at this step)"]


class CaptionsPanel(TextPanel):
    kind = "captions"
    text_form = staticmethod(text_form)

    def rich(self, cursor, i: int) -> Text:
        text = cursor.frame(i).caption()
        return Text(text or "(no note at this step)", Style(italic=not text, color="#ffd75f" if text else None))
