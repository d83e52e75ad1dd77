"""What "holding" and "clearing" mean, once, for the decay panel, the captions and `lineage eval`.

A gated layer computes a log-decay g <= 0 (a mechanism's `_decay(x)`); the state keeps
alpha = exp(g) in (0, 1] of itself each step: one alpha per head (Gated DeltaNet) or per key
channel (KDA). Frames store alpha (under the key "decay", which old traces keep). A channel
*holds* when alpha > HOLDING: 13 steps on, more than half of what it held is still there. It
*clears* when alpha < CLEARING: one step on, less than a tenth is. Between the two it fades.

The comparisons work on numpy arrays and torch tensors alike. No torch at import.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOLDING = 0.95
CLEARING = 0.1
HOLDS = f"alpha > {HOLDING}"            # as panels, captions and `eval` write the definitions
CLEARS = f"alpha < {CLEARING}"


def holds(alpha):
    """Where alpha keeps its memory: a boolean array (or tensor) of alpha's shape."""
    return alpha > HOLDING


def clears(alpha):
    """Where alpha wipes its memory: a boolean array (or tensor) of alpha's shape."""
    return alpha < CLEARING


@dataclass(frozen=True)
class Tally:
    """One step of one gated layer: how many of each head's channels hold and clear. A
    per-head alpha (H,) counts one channel per head; a per-channel alpha (H, K) counts K."""
    holding: tuple              # (H,) ints
    clearing: tuple             # (H,) ints
    per_head: int               # channels each head has

    @property
    def heads(self) -> int:
        return len(self.holding)

    @property
    def channels(self) -> int:
        return self.heads * self.per_head


def tally(alpha: np.ndarray) -> Tally:
    """The holding and clearing counts of alpha (H,) or (H, K), head by head. NaN neither holds
    nor clears."""
    a = np.asarray(alpha, dtype=np.float64)
    a = a.reshape(a.shape[0], -1) if a.ndim else a.reshape(1, 1)               # (H, K), K = 1 per head
    return Tally(tuple(int(n) for n in holds(a).sum(1)), tuple(int(n) for n in clears(a).sum(1)), a.shape[1])
