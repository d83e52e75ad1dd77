"""The frame around every panel: a bordered box with a title, told to show step i."""
from __future__ import annotations

from textual.containers import Vertical


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

    def __init__(self, options: dict, **kw):
        super().__init__(**kw)
        self.options = dict(options)
        self.border_title = self.title()

    def title(self) -> str:
        return self.options.get("title") or self.kind

    def show(self, cursor, i: int) -> None:
        raise NotImplementedError

    # pickers; panels that have layers or heads override these
    def pick_layer(self, delta: int) -> bool:
        return False

    def pick_head(self, delta: int) -> bool:
        return False

    def cycle_quantity(self) -> bool:
        return False

    def text(self, cursor, i: int) -> str:
        """The plain-text version of this panel (for `s` snapshots and NO_COLOR readers)."""
        from ..text_panels import PANELS
        return "\n".join(PANELS[self.kind](cursor, i, self.options, 100))
