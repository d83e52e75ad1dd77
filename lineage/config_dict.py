"""A ModelConfig back from its plain-dict form (`dataclasses.asdict`, as a trace's info keeps it).

Torch-free, like configs.py: a replay rebuilds its models' configs on a machine without torch.
The dict may come from a stranger's trace or an older lineage, so every value is checked
against its field's type and the whole config against `ModelConfig.check()`; a problem is one
ConfigError naming the field. A field an older dict lacks takes its default. A field this code
does not know is ignored when it is None or False (the house's defaults are "off", so such a
field cannot have changed what was recorded); set to anything else it may have, and is refused.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing

from .configs import ConfigError, ModelConfig


@functools.cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)       # the annotations are strings (from __future__ import annotations)


def _value(v, tp, where: tuple):
    """v checked against the annotation tp (int, float, bool, str, X | None, tuple[str, ...],
    a nested config dataclass); JSON gives lists for tuples and may give ints for floats."""
    label = ".".join(where)
    args = typing.get_args(tp)
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        if v is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _value(v, inner, where)
    if dataclasses.is_dataclass(tp):
        return _build(tp, v, where)
    if typing.get_origin(tp) is tuple:
        if not (isinstance(v, list | tuple) and all(isinstance(x, str) for x in v)):
            raise ConfigError(f"{label} must be a list of names, got {v!r:.60}", where)
        return tuple(v)
    if tp is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if tp is int and isinstance(v, bool) or not isinstance(v, tp):
        raise ConfigError(f"{label} must be {tp.__name__}, got {v!r:.60}", where)
    return v


def _build(cls, d, where: tuple):
    label = ".".join(where) or "the config"
    if not isinstance(d, dict):
        raise ConfigError(f"{label} must be a mapping, got {d!r:.60}", where)
    hints, names = _hints(cls), {f.name for f in dataclasses.fields(cls)}
    for key, v in d.items():
        if key not in names and v is not None and v is not False:
            raise ConfigError(f"{'.'.join(where + (str(key),))} = {v!r:.60} is not known to this lineage "
                              "(recorded by a newer one?)", where + (str(key),))
    return cls(**{f.name: _value(d[f.name], hints[f.name], where + (f.name,))
                  for f in dataclasses.fields(cls) if f.name in d})


def config_from_dict(d) -> ModelConfig:
    """The ModelConfig that `dataclasses.asdict` turned into d, checked; ConfigError names the field."""
    cfg = _build(ModelConfig, d, ())
    try:
        return cfg.check()
    except ValueError as e:             # check()'s own words (ConfigError is one, with its field)
        raise ConfigError(str(e), getattr(e, "field", ())) from None
