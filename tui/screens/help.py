"""The keys, on one screen."""
from __future__ import annotations

from textual.containers import Vertical
from textual.widgets import Static

from .ask import Dialog

# two columns of at most 72 characters: the box fits an 80-column terminal without wrapping
KEYS = """\
[b]Stepping[/b]
  space     play / pause              n  right  next token
  p  left   previous token            home end  first / last step
  +  -      faster / slower           g         go to a step
  {  }      previous / next caption (its step)
  up down   scroll a caption longer than its bar (its border says)
  speeds: 1, 2, 5, 10, 20 steps/s, max; click the timeline to jump
[b]Panels[/b]
  tab       focus the next panel      m         maximise / restore
  [  ]      layer of that panel       ,  .      head of that panel
  (  )      eight layers at a time    <  >      eight heads at a time
  t         S / last write / error    c         shared colour scale
  esc       cancel a long jump, or restore a maximised panel
  h j k l   heatmap cursor (its value shows under the map)
[b]Other[/b]
  s         snapshot: SVG, PNG and text (numbered, never overwritten)
  ctrl+p    palette: open a file, export, toggle panels
  ?  f1     this help                 q         quit

Going back reads recorded frames; nothing is recomputed.
Colours: blue negative, red/orange positive, dark is zero.
With NO_COLOR: @ # * + positive, & % = - negative, . near zero.
"""


class HelpScreen(Dialog):
    BINDINGS = [("escape,q,question_mark,f1", "dismiss", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 78; max-width: 100%; height: auto; max-height: 100%; overflow-y: auto; border: round $accent; padding: 1 2;
                            background: $surface; }
    """

    def compose(self):
        with Vertical():
            yield Static(KEYS)
