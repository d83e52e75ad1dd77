"""The frame around every panel: a bordered box with a title, told to show step i."""
from __future__ import annotations

from textual.containers import Vertical
from textual.widgets import Static

from .heatmap import Heatmap


def rows_of(content, width: int) -> int:
    """Screen rows a Text (or str) takes at `width` columns, wrapped lines included."""
    plain = content.plain if hasattr(content, "plain") else str(content)
    return sum(1 + len(line) // max(1, width) for line in plain.split("\n"))


class Panel(Vertical, can_focus=True):
    """Subclasses build their children in compose() and redraw them in show().

    `options` is the panel's entry from the scenario (kind, model, layer, head, quantity, ...);
    pickers change a copy of it, never the scenario.
    """

    DEFAULT_CSS = """
    Panel { border: round $primary 40%; height: auto; min-height: 6; padding: 0 1; }
    Panel:focus-within { border: round $accent; }
    """
    kind = "panel"
    # During playback a panel that is costly to draw redraws at most this often (seconds);
    # stepping by hand always draws at once. 0: every frame.
    MIN_INTERVAL = 0.0

    def __init__(self, options: dict, **kw):
        super().__init__(**kw)
        self.options = dict(options)
        self.border_title = self.title()

    def put(self, static, content, pace: float = 0.0) -> None:
        """Update a Static, asking for a layout pass only when its line count may change
        (a relayout of the whole grid on every step cost more than drawing the step).
        With `pace`, during playback the text changes at most every `pace` seconds (the
        newest content is kept and shown when the interval is up): nobody reads a legend at
        30 steps a second, and re-rendering text is most of what a step costs the UI."""
        import time
        if pace and getattr(self.app, "playing", False):
            now = time.monotonic()
            pending = getattr(static, "_lineage_pending", None)
            static._lineage_pending = content
            if now - getattr(static, "_lineage_put_at", 0.0) < pace:
                if pending is None:
                    self.set_timer(pace, lambda: self._flush_put(static))
                return
            static._lineage_put_at = now
        static._lineage_pending = None
        self._put_now(static, content)

    def _flush_put(self, static) -> None:
        import time
        content = getattr(static, "_lineage_pending", None)
        if content is not None:
            static._lineage_pending = None
            static._lineage_put_at = time.monotonic()
            self._put_now(static, content)

    def _put_now(self, static, content) -> None:
        if getattr(static, "_lineage_last", None) == content:
            return                      # same text as on screen (a caption, most steps): no repaint
        static._lineage_last = content
        shape = rows_of(content, static.size.width)
        last = getattr(static, "_lineage_shape", None)
        static._lineage_shape = shape
        static.update(content, layout=shape != last)

    def set_title(self, text: str) -> None:
        """Changing a border title repaints the whole panel region; skip it when nothing changed."""
        if self.border_title != text:
            self.border_title = text

    # panels that show one layer: which mixer kinds have what they draw (state, decay), and
    # whether the layer / head pickers act on the panel
    LAYER_KINDS: tuple = ()
    pickable = False

    def drawable_layers(self, info: dict) -> list[int]:
        m = info["models"][self.options.get("model", 0)]
        if m["kind"] == "memory":
            return [0]
        return [i for i, k in enumerate(m["config"]["mixers"]) if k in self.LAYER_KINDS]

    def current_layer(self, info: dict) -> int | None:
        """The layer to draw: the one asked for if it has something to show, else the first that does."""
        layers = self.drawable_layers(info)
        if not layers:
            return None
        if self.options.get("layer") not in layers:
            self.options["layer"] = layers[0]
        return self.options["layer"]

    def title(self) -> str:
        return self.options.get("title") or self.kind

    def show(self, cursor, i: int) -> None:
        raise NotImplementedError

    def on_resize(self) -> None:
        # what a panel draws depends on its width (text wrap, sweep span, plot size): redraw
        # the shown frame at the new size, so the picture never depends on when a resize landed
        app = self.app
        if getattr(app, "cursor", None) is not None and getattr(app, "frames_shown", 0):
            self.show(app.cursor, app.index)

    def paced_show(self, cursor, i: int) -> None:
        """show(), but during playback no more often than MIN_INTERVAL; the last frame is
        always drawn (a timer catches up with the newest one)."""
        import time
        now = time.monotonic()
        if self.MIN_INTERVAL and getattr(self.app, "playing", False) \
                and now - getattr(self, "_paced_at", 0.0) < self.MIN_INTERVAL:
            if getattr(self, "_paced_timer", None) is None:
                self._paced_timer = self.set_timer(self.MIN_INTERVAL, self._paced_catch_up)
            return
        self._paced_at = now
        self.show(cursor, i)

    def _paced_catch_up(self) -> None:
        import time
        self._paced_timer = None
        self._paced_at = time.monotonic()
        if self.app.cursor is not None:
            self.show(self.app.cursor, self.app.index)

    # pickers; panels with heads or quantities override these
    def pick_layer(self, delta: int) -> bool:
        layers = self.drawable_layers(self.app.cursor.info) if self.pickable else []
        if len(layers) < 2:
            return False
        j = layers.index(self.options["layer"]) if self.options.get("layer") in layers else 0
        self.options["layer"] = layers[(j + delta) % len(layers)]
        return True

    def pick_head(self, delta: int) -> bool:
        return False

    def cycle_quantity(self) -> bool:
        return False

    def text(self, cursor, i: int) -> str:
        """The plain-text version of this panel (for `s` snapshots and NO_COLOR readers)."""
        from ..text_panels import PANELS
        return "\n".join(PANELS[self.kind](cursor, i, self.options, 100))


class HeatmapPanel(Panel):
    """A panel drawn as a Heatmap with a legend line under it: one layer (and head) at a time,
    which the layer / head pickers change."""
    pickable = True

    def compose(self):
        yield Heatmap()
        yield Static(id="legend")
