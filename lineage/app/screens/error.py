"""A scenario or trace that could not be opened: the located problems, and the app carries on."""
from __future__ import annotations

from rich.markup import escape
from textual.containers import Vertical
from textual.widgets import Button, Static

from lineage.cli.opening import as_given
from .ask import Dialog


class ErrorScreen(Dialog):
    BINDINGS = [("escape,enter,q", "dismiss", "close")]
    DEFAULT_CSS = """
    ErrorScreen { align: center middle; }
    ErrorScreen > Vertical { width: 90%; max-width: 120; height: auto; border: thick $error; padding: 1 2;
                             background: $surface; }
    ErrorScreen Button { margin-top: 1; }
    """

    def __init__(self, title: str, lines: list[str], keeping: str | None):
        super().__init__()
        # a scenario made for a checkpoint directory: said about the directory the user gave
        self.title_text, self.lines, self.keeping = as_given(title), [as_given(x) for x in lines], keeping

    def compose(self):
        with Vertical():
            yield Static(f"[b]{escape(self.title_text)}[/b]")     # a file name may look like markup
            yield Static("\n".join(self.lines), markup=False)
            yield Static(f"Still showing: {self.keeping}" if self.keeping else "Nothing else is open.")
            yield Button("OK", variant="primary")

    def on_button_pressed(self) -> None:
        self.dismiss()
