"""A Static that repaints only when its content changes."""
from __future__ import annotations

from textual.widgets import Static


def rows_of(content, width: int) -> int:
    """Screen rows a Text (or str) takes at `width` columns, wrapped lines included."""
    plain = content.plain if hasattr(content, "plain") else str(content)
    return sum(1 + len(line) // max(1, width) for line in plain.split("\n"))


class TextBox(Static):
    """`put` skips content equal to what is on screen (a caption, most steps), and asks for a
    layout pass only when the line count may change: a relayout of a whole grid on every step
    costs more than drawing the step."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.shown = None          # the content on screen
        self.rows = None           # the rows it took

    def put(self, content) -> None:
        if content == self.shown:
            return
        self.shown = content
        rows = rows_of(content, self.size.width)
        relayout, self.rows = rows != self.rows, rows
        self.update(content, layout=relayout)
