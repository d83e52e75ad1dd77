"""What every config's numbers must be before a model is built from it: sizes at least 1 (0 where
it means none) and bounded, floats finite, epsilons positive. Located: a ConfigError names its
field, so a scenario problem points at the override that set it. Torch-free."""
from __future__ import annotations

import dataclasses
import math


class ConfigError(ValueError):
    """A config value that cannot build a model; `field` is its place, e.g. ('attention', 'n_heads'),
    so a scenario problem can point at the override that set it."""

    def __init__(self, message: str, field: tuple = ()):
        super().__init__(message)
        self.field = field


ZERO_OK = {"conv_size", "n_shared", "n_positions", "rope_dim"}     # sizes where 0 means "none" (no conv, no shared expert)
# a norm's epsilon must be > 0 (else a NaN) and an init's spread >= 0 (0 is a zero init, as
# AttnRes's pseudo-queries start; below, torch's error)
POSITIVE, NOT_NEGATIVE = ("eps",), ("_std",)
MAX_SIZE = 1 << 20      # any one size; the parameter limit is checked elsewhere, but a huge head count
                        # with tiny heads holds few parameters and still allocates per head


def check_numbers(cfg, section: tuple = ()) -> None:
    """Every size of a config (a dataclass) at least 1 (0 where it means none) and every float
    finite (an epsilon > 0, a spread >= 0): what the model would otherwise fail on deep inside
    torch, or silently compute NaN with."""
    for f in dataclasses.fields(cfg):
        v, where = getattr(cfg, f.name), section + (f.name,)
        label = ".".join(where)
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, int) and v < (0 if f.name in ZERO_OK else 1):
            raise ConfigError(f"{label} must be {'>= 0' if f.name in ZERO_OK else '>= 1'}, got {v}", where)
        if isinstance(v, int) and v > MAX_SIZE:
            raise ConfigError(f"{label} is {v:,}; sizes are limited to {MAX_SIZE:,}", where)
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(f"{label} must be a finite number, got {v}", where)
        if isinstance(v, float) and f.name.endswith(POSITIVE) and not v > 0:
            raise ConfigError(f"{label} must be > 0, got {v}", where)
        if isinstance(v, float) and f.name.endswith(NOT_NEGATIVE) and v < 0:
            raise ConfigError(f"{label} must be >= 0, got {v}", where)
        if dataclasses.is_dataclass(v):
            check_numbers(v, where)
