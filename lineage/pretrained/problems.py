"""The one error a checkpoint can raise: a single line naming the file or field and the problem."""
from __future__ import annotations


class PretrainedError(ValueError):
    """A checkpoint directory we cannot load: the message is one line, meant for the user as is."""
