"""The frame around every panel: a bordered box with a title that puts a prepared view on screen.

A panel kind lives in one file of this folder: `prepare(cursor, i, options, width)`, a pure
function that reads the frames and returns the kind's view (a small frozen record holding
what the panel draws, history included), `lines(view, width)`, its text form, and the widget,
whose `draw(view)` only puts the view on screen. The main screen runs `prepare` in its step
worker, so the UI thread never reads frames; the registry in `__init__.py` names the kinds.
Data a panel cannot draw is a FrameProblem, raised where the data is checked: a notice on the
panel's border. Any other exception is a bug in the panel, and is not caught here.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from rich.text import Text
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message

from lineage.playback.frame import FrameProblem

from lineage.playback.player import Throttle
from ..widgets.heatmap import Heatmap
from ..widgets.legend import app_is_dark
from ..widgets.sweep import Sweep
from ..widgets.text_box import TextBox
from .common import check_options


# what preparing or drawing raises on data it cannot draw (a value that is not finite where a count
# or a length is due, a field or a recorded step missing, a shape or a panel option a trace got
# wrong): shown on the panel, never a crash. Nothing else is caught: a TypeError or an IndexError
# from a panel's own code is a bug, and surfaces as one (the app's error, a failing test).
DRAW_ERRORS = (FrameProblem,)


@dataclass(frozen=True)
class Room:
    """What a view is prepared for: the panel's options as they were when asked (a copy) and
    its width in cells. The step worker reads a panel's Room, never its widgets; a view whose
    Room is no longer the panel's (a picker or a resize came first) is prepared again."""
    options: dict
    width: int


@dataclass(frozen=True)
class Unshowable:
    """The view of a step whose data could not be prepared: the panel's border says why."""
    error: str


@dataclass(frozen=True)
class Absent:
    """A heatmap panel with nothing to draw here: `text` for its text form, `legend` on screen."""
    text: str
    legend: str


class Panel(Vertical, can_focus=True):
    """Subclasses build their children in compose() and put a view on them in draw().

    `options` is the panel's entry from the scenario (kind, model, layer, head, quantity, ...);
    pickers change a copy of it, never the scenario, and act on the view on screen.
    """

    DEFAULT_CSS = """
    Panel { border: round $primary 40%; height: auto; min-height: 6; padding: 0 1; }
    Panel:focus-within { border: round $accent; }
    """
    kind = "panel"
    prepare = None             # prepare(cursor, i, options, width) -> view   (any thread)
    lines = None               # lines(view, width) -> the text form of a view
    ALLOW_MAXIMIZE = True      # heatmap panels pass the focus to their map; they still maximise
    # During playback a panel that is costly to draw redraws at most this often (seconds);
    # stepping by hand always draws at once. 0: every frame.
    MIN_INTERVAL = 0.0
    # what it draws takes its colours from the theme (lineage/app/palette.py's dark or light scales, a
    # legend's colour bar): a theme picked live draws the shown step again, not at the next step
    THEMED = False

    def __init__(self, options: dict, **kw):
        super().__init__(**kw)
        self.options = dict(options)
        self.room = Room(dict(self.options), 0)
        self.border_title = Content(self.title())      # a scenario's title is text, never markup
        self._title = self.title()     # the title the panel set, without the lines-shown note
        self._lines_note = ""          # " · lines 1-14 of 22 · pgup pgdn" while it scrolls
        self._device = ""              # " · cuda:1": the device of the layer shown, in a model spread over several
        self.playing = False           # the screen says so: text is paced while playing
        self._shown = None             # (cursor, i) last drawn: resizes and pickers redraw it
        self.view = None               # the view on screen: pickers act on what it shows
        self._latest = None            # (cursor, i, view) newest handed over, drawn when the pace allows
        self._notice = False           # the border subtitle says the shown step cannot be drawn
        self._paces: dict[str, Throttle] = {}

    def title(self) -> str:
        return self.options.get("title") or self.kind

    def on_mount(self) -> None:
        if self.THEMED:
            self.watch(self.app, "theme", lambda _: self.redraw(), init=False)

    @property
    def dark(self) -> bool:
        """Whether the app's theme is dark: which of the palette's scales this panel draws with."""
        return app_is_dark(self.app)

    def set_subtitle(self, text: str) -> None:
        """As set_title, for the border's subtitle: a str never equals the Content stored."""
        if str(self.border_subtitle) != text:
            self.border_subtitle = Content(text)

    def key_hints(self, text: str) -> None:
        """The keys that act on this panel, in its bottom border; not on a slide (an exported
        picture has no keys), nor over a notice the border already shows."""
        if not self.border_subtitle and not self.screen.has_class("-slide"):
            self.border_subtitle = text

    def reading(self, hm):
        """What the legend reads under a map: the cursor's or the mouse's cell (Heatmap.reading);
        none on a slide or snapshot (an exported picture has no cursor: its readout would name a
        cell nobody chose)."""
        return None if self.screen.has_class("-slide") else hm.reading

    def set_title(self, text: str) -> None:
        """Changing a border title repaints the whole panel region; skip it when nothing changed."""
        self._title = text
        text += self._device + self._lines_note
        if str(self.border_title) != text:
            self.border_title = Content(text)          # may hold a model's name from the scenario

    # -- a panel taller than its room: a table maximised at 80x24 (the depth panel's 19 rows)
    # scrolls, its top border and its legend in the bottom one both showing, so it reads as
    # whole; the title says which lines show, and which keys bring the rest
    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._note_lines()

    class Grew(Message):
        """A panel's content changed height: rows sharing the screen are fitted again."""

    def watch_virtual_size(self, old, size) -> None:
        self.call_after_refresh(self._note_lines)     # the room it scrolls in is set by then
        if old.height != size.height:
            self.post_message(self.Grew())

    @property
    def need(self) -> int:
        """The rows this panel needs to show all it has without scrolling; 0 for one that fits
        any room it is given (a heatmap folds, visibly, into what it has)."""
        return 0

    def _note_lines(self) -> None:
        total, seen = self.virtual_size.height, self.scrollable_content_region.height
        note = ""
        # a slide is grown until nothing scrolls (lineage/app/headless.py), and has no keys
        if 0 < seen < total and self.is_attached and not self.screen.has_class("-slide"):
            first = round(self.scroll_y) + 1
            note = f" · lines {first}-{min(first + seen - 1, total)} of {total} · pgup pgdn"
        if note != self._lines_note:
            self._lines_note = note
            self.set_title(self._title)

    # -- views --------------------------------------------------------------------------
    def prepared(self, cursor, i: int, room: Room | None = None):
        """The view of step i for `room` (the panel's own by default). Any thread: it reads
        the frames and the Room, never a widget; bad data becomes an Unshowable view."""
        room = room or self.room
        try:
            return type(self).view_of(cursor, i, room.options, room.width)
        except DRAW_ERRORS as e:
            return Unshowable(str(e))

    def take(self, cursor, i: int, room: Room, view) -> None:
        """Hand over the view a worker prepared for `room`; drawn by paced_show."""
        if room != self.room:          # options or size changed since it was asked for
            view = self.prepared(cursor, i)
        self._latest = (cursor, i, view)

    def show(self, cursor, i: int) -> None:
        """Prepare step i here and draw it at once (pickers, resizes, exports: the frames are
        already made, and one panel's view costs what drawing it does)."""
        self._fit_room()
        self._latest = (cursor, i, self.prepared(cursor, i))
        self._draw(*self._latest)

    def _draw(self, cursor, i: int, view) -> None:
        """Put a view on screen. Data a panel cannot draw (a FrameProblem: NaN where a count is
        due, a trace's odd values) becomes a notice on the panel's border, and the app carries on."""
        self._shown = (cursor, i)
        if not isinstance(view, Unshowable):   # pickers act on the last view that could be drawn
            self.view = view
        if self._notice:                       # the last step could not be drawn; this one may
            self.border_subtitle, self._notice = "", False
        self._device = layer_device(cursor.info, self.options.get("model", 0), getattr(view, "layer", None))
        try:
            if isinstance(view, Unshowable):
                raise FrameProblem(view.error)
            self.draw(view)
        except DRAW_ERRORS as e:
            self.border_subtitle = Content(f"step {i + 1} cannot be drawn: {e}"[:120])
            self._notice = True

    def draw(self, view) -> None:
        raise NotImplementedError

    def paced_show(self, playing: bool) -> None:
        """Draw the view taken last, but during playback no more often than MIN_INTERVAL; the
        last frame is always drawn (a timer catches up with the newest one)."""
        self.playing = playing
        if self._latest is not None:
            self.paced("", self.MIN_INTERVAL, self._latest, lambda held: self._draw(*held))

    def put(self, box: TextBox, content, pace: float = 0.0) -> None:
        """Put content in a TextBox. With `pace`, during playback the text changes at most every
        `pace` seconds (the newest content is kept and shown when the interval is up): nobody
        reads a legend at 30 steps a second, and re-rendering text is most of what a step costs."""
        self.paced(box.id, pace, content, box.put)

    def paced(self, key: str, interval: float, value, apply) -> None:
        """The one repaint pace, for the whole panel (key "") and for each of its text boxes:
        apply(value) now, or while playing at most every `interval` seconds, the newest value
        held meanwhile and applied when the interval is up."""
        throttle = self._paces.setdefault(key, Throttle())
        throttle.interval = interval
        wait = throttle.offer(value, time.monotonic(), self.playing)
        if wait is None:
            apply(value)
        elif wait:
            self.set_timer(wait, lambda: self._release(throttle, apply))

    def _release(self, throttle: Throttle, apply) -> None:
        held = throttle.release(time.monotonic())
        if held is not None:
            apply(held[0])

    def _fit_room(self) -> None:
        self.room = Room(dict(self.options), self.size.width)

    def on_resize(self) -> None:
        # what a panel draws depends on its width (text wrap, sweep span, plot size): redraw
        # the shown frame at the new size, so the picture never depends on when a resize landed
        self._fit_room()
        self.redraw()

    def redraw(self) -> None:
        """Draw the shown step again: its room changed (a resize, maximised or restored)."""
        if self._shown is not None:
            self.show(*self._shown)
        self.call_after_refresh(self._note_lines)     # the same lines in a new room

    @classmethod
    def view_of(cls, cursor, i: int, options: dict, width: int):
        """The kind's view of step i (`prepare`), its panel entry checked first: FrameProblem
        where the data cannot be drawn."""
        check_options(cursor, options)
        return cls.prepare(cursor, i, options, width)

    @classmethod
    def text_form(cls, cursor, i: int, options: dict, width: int) -> list[str]:
        """The panel at step i as lines of plain text, made from the view the widget draws."""
        return cls.lines(cls.view_of(cursor, i, options, width), width)

    def text(self, cursor, i: int) -> str:
        """The plain-text version of this panel (for `s` snapshots and NO_COLOR readers)."""
        return "\n".join(self.text_form(cursor, i, self.options, 100))

    # -- pickers: panels that show one layer; they act on the view on screen --------------
    # whether the layer / head pickers act on the panel (which layers it has: panel_layers)
    pickable = False

    def pick_layer(self, delta: int) -> bool:
        layers = getattr(self.view, "layers", ()) if self.pickable else ()
        if len(layers) < 2:
            return False
        j = layers.index(self.view.layer) if self.view.layer in layers else 0
        self.options["layer"] = layers[(j + delta) % len(layers)]
        return True

    def pick_head(self, delta: int) -> bool:
        heads = getattr(self.view, "heads", 1)
        if heads < 2:
            return False
        self.options["head"] = (self.view.head + delta) % heads
        return True

    def cycle_quantity(self) -> bool:
        return False


class HeatmapPanel(Panel, can_focus=False):
    """A panel drawn as a Heatmap with a legend line under it: one layer (and head) at a time,
    which the layer / head pickers change. The map takes the focus, not the panel around it,
    so tab stops once per panel."""
    pickable = True
    THEMED = True              # the map follows the theme itself; its legend's colour bar is drawn here

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

    def absent(self, view) -> bool:
        """Say so in the legend when the view has nothing to draw (the map keeps what it had)."""
        if isinstance(view, Absent):
            self.put(self.query_one("#legend", TextBox), view.legend)
            return True
        return False


def layer_device(info: dict, m: int, layer) -> str:
    """' · cuda:1' where model m is spread over devices by a device map (its info's `places`)
    and `layer` is one of its layers; '' for a model on one device, or a view of no one layer."""
    models = info.get("models") or []
    places = models[m].get("places") if m < len(models) and isinstance(models[m], dict) else None
    if not isinstance(places, list) or not isinstance(layer, int) or not 0 <= layer < len(places):
        return ""
    return f" · {str(places[layer])[:16]}"


def steps(n: int) -> str:
    return f"{n:,} step" + ("" if n == 1 else "s")


class SweepPanel(HeatmapPanel):
    """A heatmap panel whose picture is a Sweep of recent steps."""

    def __init__(self, options: dict, **kw):
        super().__init__(options, **kw)
        self._sweep = Sweep()       # here, not on mount: the app may ask for a frame first

    def show_sweep(self, key, i: int, history, rows: str | None, row_name=str, fold: str = "mean") -> np.ndarray:
        """Sweep the view's `history` (the columns of the steps up to i, values in [0, 1]) onto
        the heatmap, "now" marked and the gap after it blank; returns the (rows, steps) picture.
        `rows` names what a row is (the axis line above the map), `row_name(r)` row r's label,
        `fold` how rows folded together are drawn (fitting.RULES; said on the map)."""
        hm = self.query_one(Heatmap)
        # as many steps as fit beside the row labels (the last row's, as a folded range: "30-31")
        last = row_name(max(history.column(i).shape[0] - 1, 0))
        gutter = 2 * len(last) + 2 if rows else 0
        still = self.screen.has_class("-slide")          # a slide: oldest to newest, "now" at the right
        self._sweep.update(key, i, lambda j: history.column(j), self.size.width - gutter, ordered=still)
        data, blank = self._sweep.picture(i)
        # the columns sweep: no ticks at their ends, the caret names the step now instead
        first = self._sweep.step_at(0) if still else None
        hm.set_axes(rows, f"steps {first + 1}-{i + 1}" if still else "step, sweeping", row_name, col_ticks=False,
                    fold=fold)
        hm.whole_zoom = True        # time columns of one width: a doubled one would read as a step
        hm.set_marker(self._sweep.column_of(i), f"now, step {i + 1}")
        hm.set_data(data, "sequential", vmax=1.0, blank=blank)
        return data


class TextPanel(Panel):
    """A panel whose content is text: its text form, or a coloured `rich` version where colour
    adds something (and the terminal has colour)."""

    DEFAULT_CSS = """
    TextPanel { max-height: 16; overflow-y: auto; }
    TextPanel.-figure { max-height: 30; }
    """
    RICH_PACE = 0.0                    # the pace of the rich text during playback
    # its text is laid out to the width it has (a token stream's block): narrower, it takes more
    # lines, where a table's rows would wrap. A slide may narrow a picture of it (lineage/app/headless.py)
    REFLOWS = False

    @property
    def need(self) -> int:
        # text cannot fold: its lines and the border around them
        return self.virtual_size.height + self.styles.gutter.height if self.virtual_size.height else 0

    def __init__(self, options: dict, **kw):
        super().__init__(options, **kw)
        self.add_class(f"-{self.kind}")

    STEADY = True                      # the body keeps its height for a line fewer (TextBox)

    def compose(self):
        yield TextBox(id="body", steady=self.STEADY)

    def rich(self, view) -> Text | None:
        return None

    def draw(self, view) -> None:
        body = self.query_one("#body", TextBox)
        content = None if self.app.no_color else self.rich(view)
        if content is not None:
            self.put(body, content, pace=self.RICH_PACE)
        else:
            width = max(40, self.size.width - 4)
            self.put(body, Text("\n".join(self.lines(view, width))))
