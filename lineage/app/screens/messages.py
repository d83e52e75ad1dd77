"""What the main screen's workers tell it: a frame made at max speed (with the panels' views of
it), the progress of a long jump, the stage of a file being opened. Messages a newer one makes
stale replace it in the queue (`can_replace`), so a slow UI never falls behind.

And the rule for what arrives late: a worker keeps running while the app quits, and Textual
removes a screen's widgets before the screen itself, so a message or a call_from_thread may
reach a screen that no longer has the widgets it would update (`unless_taken_down`)."""
from __future__ import annotations

import functools
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


def taken_down(screen) -> bool:
    """The screen is being removed (the app quits) or is gone: its widgets may be too."""
    return not screen.is_attached or screen._pruning or screen._closing or screen._closed


def unless_taken_down(method):
    """For a screen's method a worker's message or call_from_thread runs: a no-op (None) once
    the screen is being taken down, instead of a query that finds nothing (NoMatches) and
    crashes the quitting app before the session is closed."""
    @functools.wraps(method)
    def guarded(screen, *args, **kwargs):
        if taken_down(screen):
            return None
        return method(screen, *args, **kwargs)
    return guarded
