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
    costs more than drawing the step. A `steady` box also keeps the height it grew to at this
    width when its content takes a line fewer (a token stream that wraps on one step and not
    the next relaid the whole grid out 51 times in 250 autoplay steps)."""

    def __init__(self, *args, steady: bool = False, **kw):
        super().__init__(*args, **kw)
        self.steady = steady
        self.shown = None          # the content on screen
        self.rows = None           # the rows it took (a steady box: the most it took at this width)
        self._width = None

    def put(self, content) -> None:
        width = self.size.width
        if self.steady and width != self._width:       # a new width (or none yet): fit afresh
            self._width, self.rows, self.shown = width, None, None
            self.styles.min_height = None
        if content == self.shown:
            return
        self.shown = content
        rows = rows_of(content, width)
        if self.steady and width:
            if self.rows is not None and rows <= self.rows:
                self.update(content, layout=False)      # fits the height it has: no layout pass
                return
            self.styles.min_height = rows              # never shrinks below the most it took
        relayout, self.rows = rows != self.rows, rows
        self.update(content, layout=relayout)
