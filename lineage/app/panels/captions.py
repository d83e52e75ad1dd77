"""The scenario's note for this step (its teaching caption), shown in a bar under the panels
that never scrolls away and is never cut: the whole note, however many lines it takes.

The bar is as tall as the scenario's longest note, up to half the screen (at 160 x 50 that
holds the schema's longest, 2,000 characters, at once); a note taller than that scrolls
inside the bar, its border says which lines are shown and that up / down scroll it, and
each new note starts at its first line."""
from __future__ import annotations

import textwrap

from rich.style import Style
from rich.text import Text
from textual.message import Message

from .base import TextPanel

MIN_LINES = 10         # a bar may always take this many lines of note, however small the screen


def prepare(cur, i: int, p: dict, width: int) -> str | None:
    """The view is the note itself (None: none at this step)."""
    return cur.frame(i).caption()


def lines(text: str | None, width: int) -> list[str]:
    return [f"note: {text}"] if text else ["note: (none at this step)"]


def most_lines(screen_height: int) -> int:
    """The lines of note the bar may take: half of what the header, timeline, status line and
    keys leave, less its border, and never fewer than MIN_LINES."""
    return max(MIN_LINES, (screen_height - 4) // 2 - 2)


class CaptionsPanel(TextPanel):
    kind = "captions"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
    # the colour is the theme's (CSS), not a fixed yellow; on a light theme the text colour, which
    # reads on a projector (the theme's own warning text is too pale there)
    DEFAULT_CSS = """
    CaptionsPanel { height: auto; max-height: 12; min-height: 3; border: tall $accent 50%;
                    color: $text-warning; background: $boost; text-style: bold; }
    CaptionsPanel:light { color: $foreground; }
    CaptionsPanel.-quiet { color: $text-muted; text-style: italic; }
    """
    STEADY = False         # a short note after a long one gives the panels their room back
    _note = None           # the note on screen: a new one starts at its first line
    _fitted = None         # (width, screen height) the bar's height was set for

    class HeightSet(Message):
        """The bar took its steady height: the screen refits its rows to the room left."""

    def draw(self, text: str | None) -> None:
        self._steady_height(text)
        if text != self._note:                         # a new note is read from its first line
            self._note = text
            self.scroll_home(animate=False)
        super().draw(text)
        self.call_after_refresh(self._show_more)      # the lines it takes are known after layout

    def _steady_height(self, text: str | None) -> None:
        """As tall as the scenario's longest caption at this width (up to most_lines): a new
        caption then never changes the bar's height, so playback never reflows (and redraws)
        the panels above. A slide is a still picture, not playback: its bar fits its own
        caption, so a short one on a narrow slide leaves no blank rows under it (a deck keeps
        its slides' width, lineage/app/headless.py; each is as tall as what it shows)."""
        width, screen_height = self.content_size.width, self.app.size.height
        still = self.screen.has_class("-slide")
        fitted = (width, screen_height, text if still else None)
        if self._shown is None or width <= 0 or fitted == self._fitted:
            return
        self._fitted = fitted
        shown = "note: " if self.app.no_color else ""        # the text form's prefix, without colour
        captions = [{"text": text or "(no note at this step)"}] if still else \
            self._shown[0].info.get("captions") or []
        notes = [shown + (c.get("text") or "") for c in captions]
        tallest = max((sum(max(1, len(textwrap.wrap(par, width, break_on_hyphens=False)))
                           for par in t.splitlines() or [""]) for t in notes), default=1)
        rows = min(max(tallest, 1), most_lines(screen_height)) + 2       # + the tall border's two rows
        self.styles.min_height = self.styles.max_height = rows
        self.post_message(self.HeightSet())

    def scroll_note(self, pages: int) -> None:
        """Scroll a note taller than the bar by `pages` bars, one line kept for context."""
        page = max(1, self.scrollable_content_region.height - 1)
        self.scroll_to(y=self.scroll_y + pages * page, animate=False)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._show_more()

    def _show_more(self) -> None:
        """The border says when the note goes on beyond the bar: which lines are shown, of how many."""
        if self._notice:                               # the step cannot be drawn: that notice stays
            return
        total, seen = self.virtual_size.height, self.scrollable_content_region.height
        if total <= seen or seen <= 0:
            self.set_subtitle("")
            return
        first = round(self.scroll_y) + 1
        self.set_subtitle(f"lines {first}-{min(first + seen - 1, total)} of {total} · ↑ ↓ scroll")

    def rich(self, text: str | None) -> Text:
        if self.has_class("-quiet") != (not text):     # a class change restyles: only when it changes
            self.set_class(not text, "-quiet")
        return Text(text or "(no note at this step)", Style())
