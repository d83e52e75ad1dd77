"""The keys, on one screen."""
from __future__ import annotations

from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = """\
[b]Stepping[/b]
  space        play / pause                n  right    next token
  p  left      previous token              home  end   first / last step
  +  -        faster / slower (1, 2, 5, 10, 20 steps/s, max)
  g            go to a step                click the timeline to jump
[b]Panels[/b]
  tab          focus the next panel        m           maximise / restore it
  [  ]         layer of the focused panel  ,  .        head of the focused panel
  {  }         eight layers at a time      <  >        eight heads at a time
  t            state: S, last write, read-back error
  h j k l      move the heatmap cursor (its value shows under the map)
[b]Other[/b]
  s            snapshot: SVG + text of the screen (or the maximised panel)
  ctrl+p       command palette: open a scenario or trace, export, toggle panels
  ? f1         this help                   q           quit

Previous steps and jumps read recorded frames; nothing is recomputed going back.
Colours: blue negative, red/orange positive, dark is zero. With NO_COLOR the
heatmaps become glyphs: @ # * + positive, & % = - negative, . near zero.
"""


class HelpScreen(ModalScreen):
    BINDINGS = [("escape,q,question_mark,f1", "dismiss", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 88; max-width: 100%; height: auto; max-height: 100%; border: round $accent; padding: 1 2;
                            background: $surface; }
    """

    def compose(self):
        with Vertical():
            yield Static(KEYS)
