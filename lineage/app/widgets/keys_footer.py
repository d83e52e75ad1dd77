"""A footer that never loses `? help` and `q quit`: when the keys do not fit the width, the
least needed ones leave first (they still work, and the help lists them): those in DROP_FIRST,
in its order, then others from the right."""
from __future__ import annotations

from textual.widgets import Footer
from textual.widgets._footer import FooterKey

KEEP = ("help", "app.quit")          # actions the footer always shows
# the ones a newcomer needs least on the footer: speed and "previous" are easy to guess from
# "next", and the help lists them; "m maximise" and the palette stay, at 80 columns too
DROP_FIRST = ("speed(-1)", "speed(1)", "step(-1)", "snapshot")


class KeysFooter(Footer):
    def _width_of(self, binding) -> int:
        gap = 2 if self.compact else 4
        return len(self.app.get_key_display(binding)) + len(binding.description) + gap

    def shown(self, width: int) -> list[tuple]:
        """(binding, enabled, tooltip) to show at `width` columns: one per action, in order,
        dropping from the right among those not kept until they fit."""
        one_each: dict[str, tuple] = {}
        for _, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show:
                one_each.setdefault(binding.action, (binding, enabled, tooltip))
        items = list(one_each.values())
        room = width - (self._palette_cost() if self.show_command_palette else 0)
        while sum(self._width_of(b) for b, _, _ in items) > room:
            droppable = [x for x in items if x[0].action not in KEEP]
            if not droppable:
                break
            first = [x for a in DROP_FIRST for x in droppable if x[0].action == a]
            items.remove(first[0] if first else droppable[-1])
        return items

    def _palette_cost(self) -> int:
        found = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        return self._width_of(found[1]) if found is not None and self.app.ENABLE_COMMAND_PALETTE else 0

    def compose(self):
        if not self._bindings_ready:
            return
        items = self.shown(self.size.width or self.app.size.width)
        self.styles.grid_size_columns = len(items)
        for binding, enabled, tooltip in items:
            yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                            disabled=not enabled, tooltip=tooltip).data_bind(compact=Footer.compact)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            found = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _, binding, enabled, tooltip = found
                yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description,
                                binding.action, classes="-command-palette", disabled=not enabled,
                                tooltip=binding.tooltip or binding.description)

    def on_resize(self, event) -> None:
        if self._bindings_ready and event.size.width != getattr(self, "_composed_width", None):
            self._composed_width = event.size.width
            self.call_after_refresh(self.recompose)
