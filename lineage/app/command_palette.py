"""Textual's command palette with three of its crashes guarded (Textual 8.2.8; the first two
reproduced in a bare Textual app, so Textual's, not ours: tests/app/test_command_palette.py).

- `KeyError` on page up / page down when the palette's list has no height (a terminal a few
  rows tall): `OptionList._move_page` indexes `_index_to_line`, which `_update_lines()` leaves
  empty while the list's content region is empty.
- `ScreenStackError` ("Can't pop screen") when a second enter or escape reaches the palette
  after it dismissed itself (keys typed faster than the screen is removed): `dismiss` pops
  whatever screen is on top, or fails on the last one. The second enter would also run the
  chosen command twice.
- `NoMatches: CommandList` when characters already on their way to the palette's input change
  it after escape or enter closed the palette: Textual starts a search for them in the closed
  palette, and the search's results land after its widgets are gone (floods of mixed keys
  ended so 3 runs in 4: tests/app/test_app_robust.py; it needs a search slower than a bare
  app's). The closed palette ignores the change.
"""
from __future__ import annotations

from textual import on
from textual.command import CommandList, CommandPalette
from textual.widgets import Button, Input


class Palette(CommandPalette):
    def _action_command_list(self, action: str) -> None:
        commands = self.query_one(CommandList)
        if action in ("page_up", "page_down") and not commands.scrollable_content_region.height:
            return                     # no page to move by; Textual would raise KeyError
        super()._action_command_list(action)

    def _select_or_command(self, event=None) -> None:
        if self.is_active:             # the OptionSelected path calls this by name
            super()._select_or_command(event)

    @on(Input.Changed)
    @on(Input.Submitted)
    @on(Button.Pressed)
    def _already_closed(self, event) -> None:
        # Textual calls CommandPalette's own decorated handler for these (not by name), after
        # this one; preventing the default stops it once the palette is no longer on top
        if not self.is_active:
            event.prevent_default()
            event.stop()

    def dismiss(self, result=None):
        if not self.is_active:         # dismissed already: popping again would pop another screen
            return None
        return super().dismiss(result)
