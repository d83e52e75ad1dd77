"""The frame around every panel: a bordered box with a title, told to show step i of a cursor.

A panel kind lives in one file of this folder (its widget and its text form side by side) and
one line of the registry in `__init__.py`.
"""
from __future__ import annotations

import time

import numpy as np
from rich.text import Text
from textual.containers import Vertical
from textual.content import Content

from ..player import Throttle
from ..widgets.heatmap import Heatmap
from ..widgets.sweep import Sweep
from ..widgets.text_box import TextBox


# what a panel's drawing raises on values it cannot draw (NaN or inf from a diverging model or
# a stranger's trace, shapes a trace got wrong): shown on the panel, never a crash
DRAW_ERRORS = (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError, OverflowError)


class Panel(Vertical, can_focus=True):
    """Subclasses build their children in compose() and redraw them in draw().

    `options` is the panel's entry from the scenario (kind, model, layer, head, quantity, ...);
    pickers change a copy of it, never the scenario. `text_form(cursor, i, options, width)` gives
    the panel as lines of plain text.
    """

    DEFAULT_CSS = """
    Panel { border: round $primary 40%; height: auto; min-height: 6; padding: 0 1; }
    Panel:focus-within { border: round $accent; }
    """
    kind = "panel"
    text_form = None
    ALLOW_MAXIMIZE = True      # heatmap panels pass the focus to their map; they still maximise
    # During playback a panel that is costly to draw redraws at most this often (seconds);
    # stepping by hand always draws at once. 0: every frame.
    MIN_INTERVAL = 0.0

    def __init__(self, options: dict, **kw):
        super().__init__(**kw)
        self.options = dict(options)
        self.border_title = Content(self.title())      # a scenario's title is text, never markup
        self.playing = False           # the screen says so: text is paced while playing
        self._shown = None             # (cursor, i) last drawn: resizes and pickers redraw it
        self._notice = False           # the border subtitle says the shown step cannot be drawn
        self._pace = Throttle(self.MIN_INTERVAL)
        self._text_pace: dict[str, Throttle] = {}

    def title(self) -> str:
        return self.options.get("title") or self.kind

    def set_subtitle(self, text: str) -> None:
        """As set_title, for the border's subtitle: a str never equals the Content stored."""
        if str(self.border_subtitle) != text:
            self.border_subtitle = Content(text)

    def set_title(self, text: str) -> None:
        """Changing a border title repaints the whole panel region; skip it when nothing changed."""
        if str(self.border_title) != text:
            self.border_title = Content(text)          # may hold a model's name from the scenario

    # -- drawing ------------------------------------------------------------------------
    def show(self, cursor, i: int) -> None:
        """Draw step i. Data a panel cannot draw (NaN where a count is due, a trace's odd
        values) becomes a notice on the panel's border, and the app carries on."""
        self._shown = (cursor, i)
        if self._notice:                       # the last step could not be drawn; this one may
            self.border_subtitle, self._notice = "", False
        try:
            self.draw(cursor, i)
        except DRAW_ERRORS as e:
            self.border_subtitle = Content(f"step {i + 1} cannot be drawn: {e}"[:120])
            self._notice = True

    def draw(self, cursor, i: int) -> None:
        raise NotImplementedError

    def paced_show(self, cursor, i: int, playing: bool) -> None:
        """show(), but during playback no more often than MIN_INTERVAL; the last frame is
        always drawn (a timer catches up with the newest one)."""
        self.playing = playing
        wait = self._pace.offer((cursor, i), time.monotonic(), playing)
        if wait is None:
            self.show(cursor, i)
        elif wait:
            self.set_timer(wait, self._catch_up)

    def _catch_up(self) -> None:
        held = self._pace.release(time.monotonic())
        if held is not None:
            self.show(*held[0])

    def put(self, box: TextBox, content, pace: float = 0.0) -> None:
        """Put content in a TextBox. With `pace`, during playback the text changes at most every
        `pace` seconds (the newest content is kept and shown when the interval is up): nobody
        reads a legend at 30 steps a second, and re-rendering text is most of what a step costs."""
        throttle = self._text_pace.setdefault(box.id, Throttle())
        throttle.interval = pace
        wait = throttle.offer(content, time.monotonic(), self.playing)
        if wait is None:
            box.put(content)
        elif wait:
            self.set_timer(wait, lambda: self._release_text(box, throttle))

    def _release_text(self, box: TextBox, throttle: Throttle) -> None:
        held = throttle.release(time.monotonic())
        if held is not None:
            box.put(held[0])

    def on_resize(self) -> None:
        # what a panel draws depends on its width (text wrap, sweep span, plot size): redraw
        # the shown frame at the new size, so the picture never depends on when a resize landed
        if self._shown is not None:
            self.show(*self._shown)

    def text(self, cursor, i: int) -> str:
        """The plain-text version of this panel (for `s` snapshots and NO_COLOR readers)."""
        return "\n".join(self.text_form(cursor, i, self.options, 100))

    # -- pickers: panels that show one layer --------------------------------------------
    # which mixer kinds have what they draw (state, decay), and whether the layer / head
    # pickers act on the panel
    LAYER_KINDS: tuple = ()
    pickable = False

    def drawable_layers(self, cursor) -> list[int]:
        m = self.options.get("model", 0)
        cfg = cursor.model_config(m)
        if cfg is None:             # a toy memory: one layer
            return [0]
        watch = cursor.info["models"][m].get("watch")   # a real checkpoint's frames hold the watched layers only
        return [i for i, k in enumerate(cfg.mixers) if k in self.LAYER_KINDS and (watch is None or i in watch)]

    def current_layer(self, cursor) -> int | None:
        """The layer to draw: the one asked for if it has something to show, else the first that does."""
        layers = self.drawable_layers(cursor)
        if not layers:
            return None
        if self.options.get("layer") not in layers:
            self.options["layer"] = layers[0]
        return self.options["layer"]

    def pick_layer(self, delta: int) -> bool:
        layers = self.drawable_layers(self._shown[0]) if self.pickable and self._shown else []
        if len(layers) < 2:
            return False
        j = layers.index(self.options["layer"]) if self.options.get("layer") in layers else 0
        self.options["layer"] = layers[(j + delta) % len(layers)]
        return True

    # panels with heads or quantities override these
    def pick_head(self, delta: int) -> bool:
        return False

    def cycle_quantity(self) -> bool:
        return False


class HeatmapPanel(Panel, can_focus=False):
    """A panel drawn as a Heatmap with a legend line under it: one layer (and head) at a time,
    which the layer / head pickers change. The map takes the focus, not the panel around it,
    so tab stops once per panel."""
    pickable = True

    def focus(self, scroll_visible: bool = True, _tries: int = 20):
        maps = self.query(Heatmap)
        if maps:
            maps.first().focus(scroll_visible)
        elif _tries and self.is_attached:      # asked before its children are mounted: once they are
            self.call_after_refresh(self.focus, scroll_visible, _tries - 1)
        return self

    def compose(self):
        yield Heatmap()
        yield TextBox(id="legend")


class SweepPanel(HeatmapPanel):
    """A heatmap panel whose picture is a Sweep of recent steps."""

    def __init__(self, options: dict, **kw):
        super().__init__(options, **kw)
        self._sweep = Sweep()       # here, not on mount: the app may ask for a frame first

    def show_sweep(self, key, i: int, column) -> np.ndarray:
        """Sweep `column(j)` (values in [0, 1]) up to step i onto the heatmap, "now" marked and
        the gap after it blank; returns the (rows, steps) picture."""
        data = self._sweep.update(key, i, column, self.size.width)
        hm = self.query_one(Heatmap)
        hm.whole_zoom = True        # time columns of one width: a doubled one would read as a step
        hm.set_marker(self._sweep.column_of(i))
        hm.set_data(data, "sequential", vmax=1.0, blank=self._sweep.blank(i))
        return data


class TextPanel(Panel):
    """A panel whose content is text: its text form, or a coloured `rich` version where colour
    adds something (and the terminal has colour)."""

    DEFAULT_CSS = """
    TextPanel { max-height: 16; overflow-y: auto; }
    TextPanel.-figure { max-height: 30; }
    """
    RICH_PACE = 0.0                    # the pace of the rich text during playback

    def __init__(self, options: dict, **kw):
        super().__init__(options, **kw)
        self.add_class(f"-{self.kind}")

    def compose(self):
        yield TextBox(id="body")

    def rich(self, cursor, i: int) -> Text | None:
        return None

    def draw(self, cursor, i: int) -> None:
        body = self.query_one("#body", TextBox)
        content = None if self.app.no_color else self.rich(cursor, i)
        if content is not None:
            self.put(body, content, pace=self.RICH_PACE)
        else:
            width = max(40, self.size.width - 4)
            self.put(body, Text("\n".join(self.text_form(cursor, i, self.options, width))))
