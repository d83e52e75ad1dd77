"""What the main screen's workers tell it: a frame made at max speed (with the panels' views of
it), the progress of a long jump, the stage of a file being opened. Messages a newer one makes
stale replace it in the queue (`can_replace`), so a slow UI never falls behind."""
from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class FrameReady(Message):
    """A frame the max-speed worker made, with the panels' views of it. A newer one replaces
    an older one still queued."""
    cursor: object
    step: int
    views: list

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FrameReady)


@dataclass
class Computing(Message):
    """Jump number `jump` has `made` of the `needed` frames. A newer report replaces one still queued."""
    jump: int
    made: int
    needed: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, Computing)


@dataclass
class Stage(Message):
    """The file being opened is at this stage (the loading spinner shows it)."""
    text: str
