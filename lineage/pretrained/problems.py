"""The one error a checkpoint can raise: a single line naming the file or field and the problem."""
from __future__ import annotations


class PretrainedError(ValueError):
    """A checkpoint directory we cannot load: the message is one line, meant for the user as is."""


class ShapeError(PretrainedError):
    """A family file found a tensor of another shape than config.json implies, before splitting it;
    the loader names the file and the tensor."""

    def __init__(self, want: tuple):
        super().__init__(f"config.json implies {want}")
        self.want = want
