"""A ModelSpec into a ModelConfig: a preset with its overrides merged in, an inline config
(checked against the limits of an interactive session), or a checkpoint's config.json (read
without its weights, torch-free). Problems are collected, located, never raised."""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

from .. import configs as C
from ..arithmetic import count
from ..config_dict import field_value, hints
from ..did_you_mean import did_you_mean
from ..presets import PRESETS, get_preset
from .reader import Located
from .schema import ModelSpec

MAX_PARAMS = 300_000_000           # runnable models only; shape-only presets are arithmetic
MAX_D = 4096
MAX_LAYERS = 64


def _merge_dataclass(obj, patch: dict, path: tuple, problems: list, loc: Located):
    """Apply a dict of overrides to a (nested) config dataclass, naming unknown fields."""
    names = {f.name: f for f in dataclasses.fields(obj)}
    changes = {}
    for key, val in patch.items():
        if key not in names:
            problems.append(loc.problem(path + (key,), f"unknown field {key!r}{did_you_mean(key, names)} "
                                        f"(fields of {type(obj).__name__}: {', '.join(names)})", key=True))
            continue
        cur = getattr(obj, key)
        if dataclasses.is_dataclass(cur) and isinstance(val, dict):
            changes[key] = _merge_dataclass(cur, val, path + (key,), problems, loc)
        elif cur is None and isinstance(val, dict):
            sub_cls = _sub_config_class(type(obj), key)
            if sub_cls is None:
                problems.append(loc.problem(path + (key,), "expected a single value, not a mapping"))
                continue
            changes[key] = _merge_dataclass(sub_cls(d_model=getattr(obj, "d_model", 64)) if "d_model" in
                                            {f.name for f in dataclasses.fields(sub_cls)} else sub_cls(),
                                            val, path + (key,), problems, loc)
        else:
            try:                          # by the field's declared type: a None default is no excuse
                changes[key] = field_value(val, hints(type(obj))[key])
            except C.ConfigError as e:
                problems.append(loc.problem(path + (key,), str(e)))
                continue
    return dataclasses.replace(obj, **changes)


def _sub_config_class(cls, key):
    hint = hints(cls).get(key)
    for arg in typing.get_args(hint) or (hint,):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def pretrained_dir(spec: ModelSpec, base_dir: Path | None) -> Path:
    """A spec's checkpoint directory: absolute, or relative to the scenario's folder."""
    p = Path(spec.pretrained).expanduser()
    return p if p.is_absolute() or base_dir is None else base_dir / p


def build_config(spec: ModelSpec, path: tuple, loc: Located, problems: list,
                 base_dir: Path | None = None) -> C.ModelConfig | None:
    """The ModelConfig a ModelSpec describes, or None after appending located problems."""
    if spec.memory is not None:
        return None
    if spec.pretrained is not None:     # a real model: its own size, none of a session's toy limits
        from ..families import PretrainedError, read_model_config
        try:
            return read_model_config(pretrained_dir(spec, base_dir))[0]
        except PretrainedError as e:
            problems.append(loc.problem(path + ("pretrained",), str(e)))
            return None
    if spec.preset is not None:
        if spec.preset not in PRESETS:
            problems.append(loc.problem(path + ("preset",), f"unknown preset {spec.preset!r}"
                                        f"{did_you_mean(spec.preset, PRESETS)} (one of {', '.join(PRESETS)})"))
            return None
        cfg = get_preset(spec.preset)
        n = len(problems)
        cfg = _merge_dataclass(cfg, spec.overrides, path + ("overrides",), problems, loc)
        if len(problems) > n:
            return None
        if "d_model" in spec.overrides:  # a new width applies to every part that was not given its own
            cfg = dataclasses.replace(cfg, **{
                f.name: dataclasses.replace(getattr(cfg, f.name), d_model=cfg.d_model)
                for f in dataclasses.fields(cfg)
                if dataclasses.is_dataclass(getattr(cfg, f.name)) and hasattr(getattr(cfg, f.name), "d_model")
                and "d_model" not in (spec.overrides.get(f.name) or {})})
    else:
        n = len(problems)
        cfg = _merge_dataclass(C.ModelConfig(name="inline"), spec.config or {}, path + ("config",), problems, loc)
        if len(problems) > n:
            return None
    try:
        cfg.check()
    except ValueError as e:       # a ConfigError points at the override (or inline field) that set the value
        field = getattr(e, "field", ())
        where = path + (("overrides",) if spec.preset is not None else ("config",)) + field if field else path
        problems.append(loc.problem(where, str(e)))
        return None
    if cfg.shape_only:
        problems.append(loc.problem(path + ("preset",), f"{cfg.name} is shape-only (arithmetic, never run); "
                                    "use it in a figure, or pick a runnable preset such as 'k3-mini'"))
        return None
    if cfg.d_model > MAX_D or cfg.n_layers > MAX_LAYERS:
        problems.append(loc.problem(path, f"model too large to step interactively: d_model {cfg.d_model} "
                                    f"(limit {MAX_D}), {cfg.n_layers} layers (limit {MAX_LAYERS})"))
        return None
    total = count(cfg)["total"]
    if total > MAX_PARAMS:
        problems.append(loc.problem(path, f"model has {total:,} parameters (limit {MAX_PARAMS:,} for a "
                                    "stepping session)"))
        return None
    return cfg
