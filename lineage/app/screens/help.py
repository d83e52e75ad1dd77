"""The keys, on one screen, and what each panel on the screen shows."""
from __future__ import annotations

import re
import sys
import textwrap

from rich.markup import escape
from textual.containers import VerticalScroll
from textual.widgets import Static

from .ask import Dialog

# two columns of at most 72 characters: the box fits an 80-column terminal without wrapping
KEYS = """\
[b]Stepping[/b]
  space     play / pause              n  right  next token
  p  left   previous token            home end  first / last step
  +  -      faster / slower           g         go to a step
  {  }      previous / next caption (its step)
  i         run it on your own text   b         back to the run before
  up down   scroll a caption longer than its bar (its border says)
  pgup pgdn page through a panel taller than its box, else the panels
  speeds: 1, 2, 5, 10, 20 steps/s, max; click the timeline to jump
[b]Panels[/b]
  tab       focus the next panel      m         maximise / restore
  [  ]      layer of that panel       ,  .      head of that panel
  (  )      eight layers at a time    <  >      eight heads at a time
  t         S / last write / error    c         shared colour scale
  esc       cancel a long jump, or restore a maximised panel
  h j k l   heatmap cursor (its value shows under the map); the mouse
            over a map reads the cell under it the same way
[b]Other[/b]
  s         snapshot: SVG, PNG and text (numbered, never overwritten)
  ctrl+p    palette: open a file, export, toggle panels
  ?  f1     this help                 q         quit

Going back reads recorded frames; nothing is recomputed.
Colours: blue negative, red/orange positive, dark is zero.
With NO_COLOR: @ # * + positive, & % = - negative, . near zero.
"""


CLOSE = "esc, q or ? closes this help; up/down scroll it"


def about(panel) -> str:
    """The first sentence of a panel's file docstring: what the panel shows (one place per panel)."""
    doc = (sys.modules[type(panel).__module__].__doc__ or "").strip()
    first = re.split(r"(?<=\.)\s+(?=[A-Z])", " ".join(doc.split("\n\n")[0].split()))[0]
    return first.rstrip(".:")


def panels_text(panels) -> str:
    """One entry per panel kind on the screen, wrapped to the box."""
    seen, lines = set(), ["[b]The panels on this screen[/b]"]
    for p in panels:
        if p.kind in seen:
            continue
        seen.add(p.kind)
        body = textwrap.wrap(about(p), 70 - 12)       # 70: the box less its scroll bar
        lines += [f"  {p.kind:<9} {escape(body[0])}"] + [" " * 12 + escape(b) for b in body[1:]]
    return "\n".join(lines) if len(lines) > 1 else ""


class HelpScreen(Dialog):
    BINDINGS = [("escape,q,question_mark,f1", "dismiss", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 78; max-width: 100%; height: auto; max-height: 100%; overflow-y: auto; border: round $accent; padding: 1 2;
                            background: $surface; }
    """

    def __init__(self, panels=()):
        super().__init__()
        self.panels = list(panels)

    def compose(self):
        with VerticalScroll() as box:         # focused: up/down/pgup/pgdn scroll it
            box.border_title = "help"
            box.border_subtitle = CLOSE
            yield Static(f"[dim]{CLOSE}[/dim]\n\n{KEYS}")
            if self.panels:
                yield Static(panels_text(self.panels))

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()
