"""The one error a checkpoint can raise: a single line naming the file or field and the problem."""
from __future__ import annotations

from ..escapes import visible


class PretrainedError(ValueError):
    """A checkpoint directory we cannot load: the message is one line, meant for the user as is.
    Field and tensor names come from the folder's files, so a newline or a terminal escape in one
    is written as an escape here, once for every message: a hostile name cannot break the line
    or repaint the screen."""

    def __init__(self, message: str):
        super().__init__(visible(str(message), keep_newlines=False))


class ShapeError(PretrainedError):
    """A family file found a tensor of another shape than config.json implies, before splitting it;
    the loader names the file and the tensor."""

    def __init__(self, want: tuple):
        super().__init__(f"config.json implies {want}")
        self.want = want
