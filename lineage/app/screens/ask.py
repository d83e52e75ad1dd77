"""Ask for a step number (or a path to open); and Dialog, the modal screens' base: one that
closes once, and only itself."""
from __future__ import annotations

from typing import TypeVar

from textual.await_complete import AwaitComplete
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

ResultType = TypeVar("ResultType")


class Dialog(ModalScreen[ResultType]):
    """A modal screen dismissed at most once, and only while it is on top.

    Keys typed faster than a screen is removed reach it after it dismissed itself (a second
    enter on the go-to prompt, an enter flood): Textual's dismiss would run the result
    callback again and pop whatever screen is on top, or raise ScreenStackError on the last
    one and end the app. The command palette has the same guard (lineage/app/command_palette.py)."""

    _dismissed = False

    def dismiss(self, result: ResultType | None = None) -> AwaitComplete:
        if self._dismissed or not self.is_active:
            return AwaitComplete.nothing()     # awaitable all the same, as Textual's callers expect
        self._dismissed = True
        return super().dismiss(result)


class AskScreen(Dialog[str | None]):
    BINDINGS = [("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    AskScreen { align: center middle; }
    AskScreen > Vertical { width: 60; height: auto; border: round $accent; padding: 1 2; background: $surface; }
    """

    def __init__(self, prompt: str, placeholder: str = ""):
        super().__init__()
        self.prompt, self.placeholder = prompt, placeholder

    def compose(self):
        with Vertical():
            yield Static(self.prompt)
            yield Input(placeholder=self.placeholder)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
