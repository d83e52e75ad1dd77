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
def hints(cls) -> dict:
    """A config dataclass's field annotations as types (they are strings: from __future__ import
    annotations)."""
    return typing.get_type_hints(cls)


def spelled(tp) -> str:
    """An annotation as the source spells it: int, int | None, tuple[str, ...]."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return " | ".join(map(spelled, typing.get_args(tp)))
    if typing.get_origin(tp) is tuple:
        return "tuple[" + ", ".join("..." if a is Ellipsis else spelled(a) for a in typing.get_args(tp)) + "]"
    return "None" if tp is type(None) else tp.__name__


def field_value(v, tp, where: tuple = ()):
    """v as a config field of annotation tp holds it (a list becomes a tuple, an int in a float
    field a float, a mapping a nested config), or ConfigError saying why not. The one type check
    for config values, whoever wrote them: a scenario's overrides (YAML) and a trace's dict (JSON).
    The message is the reason ("expected an integer, got 'two'"), after "field.name: " when
    `where` names the field."""
    def bad(reason: str):
        return ConfigError(f"{'.'.join(where)}: {reason}" if where else reason, where)

    args = typing.get_args(tp)
    optional = type(None) in args
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"config annotation {spelled(tp)}: one type or None, not a choice of types")
        kind = inner[0]
    else:
        kind = tp
    if v is None:
        if optional:
            return None
        raise bad(f"expected {spelled(tp)}, got null")
    if isinstance(v, bool):
        if kind is bool:
            return v
        raise bad(f"expected {spelled(tp)}, got a boolean")
    if kind is bool:
        raise bad(f"expected true or false, got {v!r:.60}")
    if kind is int:
        if not isinstance(v, int):
            raise bad(f"expected an integer, got {v!r:.60}")
        return v
    if kind is float:
        if not isinstance(v, int | float):
            raise bad(f"expected a number, got {v!r:.60}")
        return float(v)
    if kind is str:
        if not isinstance(v, str):
            raise bad(f"expected text, got {v!r:.60}")
        return v
    if typing.get_origin(kind) is tuple:          # tuple[str, ...]: names (mixers, ffns)
        if not isinstance(v, list | tuple):
            raise bad(f"expected a list, got {v!r:.60}")
        if not all(isinstance(x, str) for x in v):
            raise bad(f"expected a list of names, got {v!r:.60}")
        return tuple(v)
    if dataclasses.is_dataclass(kind):
        if not isinstance(v, dict):
            raise bad(f"expected a mapping, got {v!r:.60}")
        return _build(kind, v, where)
    raise TypeError(f"config annotation {spelled(tp)} has no check here")


def _build(cls, d, where: tuple):
    if not isinstance(d, dict):
        raise ConfigError(f"{'.'.join(where) or 'the config'}: expected a mapping, got {d!r:.60}", where)
    names = {f.name for f in dataclasses.fields(cls)}
    for key, v in d.items():
        if key not in names and v is not None and v is not False:
            raise ConfigError(f"{'.'.join(where + (str(key),))} = {v!r:.60} is not known to this lineage "
                              "(recorded by a newer one?)", where + (str(key),))
    return cls(**{f.name: field_value(d[f.name], hints(cls)[f.name], where + (f.name,))
                  for f in dataclasses.fields(cls) if f.name in d})


def config_from_dict(d) -> ModelConfig:
    """The ModelConfig that `dataclasses.asdict` turned into d, checked; ConfigError names the field."""
    cfg = _build(ModelConfig, d, ())
    try:
        return cfg.check()
    except ValueError as e:             # check()'s own words (ConfigError is one, with its field)
        raise ConfigError(str(e), getattr(e, "field", ())) from None
