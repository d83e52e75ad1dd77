"""Ask for a step number (or a path to open)."""
from __future__ import annotations

from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class AskScreen(ModalScreen[str | None]):
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
