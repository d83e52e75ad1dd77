"""The scenario format (version 1): typed models, strict checks, located one-line problems.

A scenario names the model(s), their weights, the input, how to decode, how many steps, which
panels to show and the teaching captions. `load(path)` returns a `Scenario` or raises
`ScenarioError` whose lines read `FILE:LINE:COL: field.path: what is wrong (what was expected)`.
No torch here (validation must be instant); the session turns a Scenario into running models.
"""
from __future__ import annotations

import dataclasses
import difflib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from . import configs as C
from .params import count
from .presets import PRESETS, get_preset
from .scenario_yaml import Located, Problem, ScenarioError, load_file, load_text

MAX_STEPS = 100_000
MAX_TEXT = 100_000
MAX_PARAMS = 300_000_000           # runnable models only; shape-only presets are arithmetic
MAX_D = 4096
MAX_LAYERS = 64


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ------------------------------------------------------------------------------- models

class MemorySpec(Strict):
    """A bare memory with hand-set keys and values, fed directly by a task (the toy figures)."""
    rule: Literal["linear", "delta", "gated_delta", "kda"]
    key_dim: int = Field(2, ge=1, le=256)
    value_dim: int = Field(1, ge=1, le=256)
    channel_decay: list[float] | None = None    # kda: a log decay per key channel applied every step (<= 0)
    key_overlap: float = Field(0.0, ge=0.0, lt=1.0)   # generated keys share this cosine with each other


class ModelSpec(Strict):
    """Exactly one of: preset (optionally with overrides), config (inline), memory (toy)."""
    name: str | None = None
    preset: str | None = None
    overrides: dict[str, Any] = {}
    config: dict[str, Any] | None = None
    memory: MemorySpec | None = None

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("preset", "config", "memory") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of preset, config or memory (got {', '.join(given) or 'none'})")
        if self.overrides and self.preset is None:
            raise ValueError("overrides apply to a preset; write the whole config inline instead")
        return self

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.memory is not None:
            return f"{self.memory.rule} memory"
        return self.preset or str((self.config or {}).get("name", "custom"))


class WeightsSpec(Strict):
    seed: int = Field(0, ge=0, le=2**31 - 1)
    checkpoint: str | None = None                # a .safetensors file, relative to the scenario
    set: dict[str, Any] = {}                     # hand-set values: memory models take 'keys' and 'values'


# -------------------------------------------------------------------------------- input

class TwoFacts(Strict):
    """Write two facts whose unit keys overlap by `overlap` (cosine), then read both back."""
    kind: Literal["two_facts"]
    overlap: float = Field(0.7, ge=-1.0, le=1.0)
    beta: float = Field(1.0, ge=0.0, le=1.0)
    values: tuple[float, float] = (1.0, 1.0)


class MQAR(Strict):
    """Multi-query associative recall: `pairs` key-value pairs, then the keys asked again in shuffled order."""
    kind: Literal["mqar"]
    pairs: int = Field(8, ge=1, le=4096)
    vocab: int = Field(256, ge=4, le=65536)      # keys from the first half, values from the second
    seed: int = Field(0, ge=0)
    beta: float = Field(1.0, ge=0.0, le=1.0)


class TopicShift(Strict):
    """A run of associations, a separator that decays memory by `separator_gate`, then a new run."""
    kind: Literal["topic_shift"]
    pairs: int = Field(4, ge=1, le=1024)         # per topic
    separator_gate: float = Field(-5.0, le=0.0)  # log decay applied by the separator token
    vocab: int = Field(256, ge=4, le=65536)
    seed: int = Field(0, ge=0)
    beta: float = Field(1.0, ge=0.0, le=1.0)


Task = Annotated[Union[TwoFacts, MQAR, TopicShift], Field(discriminator="kind")]


class InputSpec(Strict):
    text: str | None = Field(None, max_length=MAX_TEXT)
    ids: list[Annotated[int, Field(ge=0)]] | None = Field(None, max_length=MAX_TEXT)
    task: Task | None = None

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("text", "ids", "task") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of text, ids or task (got {', '.join(given) or 'none'})")
        if self.text == "" or self.ids == []:
            raise ValueError("the input is empty")
        return self


class Decoding(Strict):
    mode: Literal["teacher", "greedy", "sample"] = "teacher"
    prefill: int = Field(0, ge=0, le=MAX_TEXT)   # tokens consumed at once (chunked) before the first frame
    temperature: float = Field(1.0, gt=0.0, le=100.0)
    top_k: int = Field(0, ge=0)                  # 0: the whole vocabulary
    seed: int = Field(0, ge=0)


# ------------------------------------------------------------------------------- panels

PANEL_KINDS = ("state", "decay", "routing", "depth", "cache", "tokens", "captions", "lineage", "figure", "recall")


class Panel(Strict):
    kind: Literal["state", "decay", "routing", "depth", "cache", "tokens", "captions", "lineage", "figure", "recall"]
    model: int = Field(0, ge=0)
    layer: int | None = Field(None, ge=0)
    head: int = Field(0, ge=0)
    quantity: Literal["S", "dS", "error"] = "S"  # state panel: the state, the last write, or v - read-back
    scale: Literal["auto", "diverging", "sequential"] = "auto"
    context: int | None = Field(None, ge=1, le=1 << 24)   # cache panel: the context to project to
    title: str | None = None


class Caption(Strict):
    at: int = Field(ge=0)
    text: str = Field(min_length=1, max_length=2000)
    until: int | None = Field(None, ge=0)


# ------------------------------------------------------------------------------ figures

class ParamRatioFigure(Strict):
    kind: Literal["param_ratio"]
    big: str = "k3"
    small: str = "gpt2-small"
    published_big: float = 2.8e12
    published_small: float = 124e6


class KVCacheFigure(Strict):
    kind: Literal["kv_cache"]
    layers: int = Field(93, ge=1, le=1000)
    kv_heads: int = Field(8, ge=1, le=1024)
    head_dim: int = Field(128, ge=1, le=4096)
    dtype_bytes: int = Field(2, ge=1, le=8)
    card_gb: float = Field(141.0, gt=0)
    cards: int = Field(8, ge=1, le=1024)
    weight_gb: float = Field(0.0, ge=0)
    contexts: list[Annotated[int, Field(ge=1, le=1 << 30)]] = [8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]


class ChunkDialFigure(Strict):
    kind: Literal["chunk_dial"]
    length: int = Field(8192, ge=1, le=1 << 24)
    dim: int = Field(128, ge=1, le=65536)
    chunks: list[Annotated[int, Field(ge=1)]] = [1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


class ShapesFigure(Strict):
    """Arithmetic over presets: layer map, MoE sparsity and memory table read the same shapes."""
    kind: Literal["layer_map", "moe_sparsity", "memory_table"]
    presets: list[str] = ["gpt2-small", "kimi-linear-48b", "k3"]
    contexts: list[Annotated[int, Field(ge=1, le=1 << 30)]] = [1024, 4096, 16384, 65536, 262144, 1048576]


Figure = Annotated[Union[ParamRatioFigure, KVCacheFigure, ChunkDialFigure, ShapesFigure], Field(discriminator="kind")]


# ----------------------------------------------------------------------------- scenario

class Scenario(Strict):
    version: Literal[1]
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    model: ModelSpec | None = None
    models: list[ModelSpec] | None = Field(None, min_length=1, max_length=8)
    weights: WeightsSpec = WeightsSpec()
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["float32", "float64", "bfloat16"] = "float32"
    input: InputSpec | None = None
    decoding: Decoding = Decoding()
    steps: int | None = Field(None, ge=1, le=MAX_STEPS)
    figure: Figure | None = None
    panels: list[Panel] = Field([], max_length=16)
    captions: list[Caption] = Field([], max_length=1000)

    @model_validator(mode="after")
    def _shape(self):
        if self.model is not None and self.models is not None:
            raise ValueError("give model or models, not both")
        if self.figure is None and self.model is None and self.models is None:
            raise ValueError("give a model (or models), or a figure")
        if (self.model or self.models) and self.input is None:
            raise ValueError("a model needs an input (text, ids or task)")
        return self

    @property
    def model_specs(self) -> list[ModelSpec]:
        return [self.model] if self.model is not None else list(self.models or [])

    # set by load(): the file's path (checkpoints are relative to it) and its exact text (traces keep it)
    _source: str | None = PrivateAttr(None)
    _text: str | None = PrivateAttr(None)

    @property
    def source(self) -> str | None:
        return self._source

    @property
    def text(self) -> str | None:
        return self._text

    @property
    def base_dir(self) -> Path | None:
        return Path(self._source).resolve().parent if self._source and Path(self._source).exists() else None


# ------------------------------------------------------------------------ config building

def _merge_dataclass(obj, patch: dict, path: tuple, problems: list, loc: Located):
    """Apply a dict of overrides to a (nested) config dataclass, naming unknown fields."""
    names = {f.name: f for f in dataclasses.fields(obj)}
    changes = {}
    for key, val in patch.items():
        if key not in names:
            problems.append(loc.problem(path + (key,), f"unknown field {key!r}{_did_you_mean(key, names)} "
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
            err = _type_problem(cur, val, names[key])
            if err:
                problems.append(loc.problem(path + (key,), err))
                continue
            changes[key] = tuple(val) if isinstance(val, list) else val
    return dataclasses.replace(obj, **changes)


def _sub_config_class(cls, key):
    hints = typing.get_type_hints(cls, globalns=vars(C))
    for arg in typing.get_args(hints.get(key)) or (hints.get(key),):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def _type_problem(cur, val, fld) -> str | None:
    hint = str(fld.type)
    if isinstance(val, bool) and "bool" not in hint:
        return f"expected {hint}, got a boolean"
    if isinstance(cur, bool) and not isinstance(val, bool):
        return f"expected true or false, got {val!r}"
    if isinstance(cur, int) and not isinstance(cur, bool):
        if not isinstance(val, int) and not (val is None and "None" in hint):
            return f"expected an integer, got {val!r}"
    if isinstance(cur, float) and not isinstance(val, (int, float)):
        return f"expected a number, got {val!r}"
    if isinstance(cur, tuple) and not isinstance(val, list):
        return f"expected a list, got {val!r}"
    if isinstance(cur, str) and not isinstance(val, str):
        return f"expected text, got {val!r}"
    return None


def build_config(spec: ModelSpec, path: tuple, loc: Located, problems: list) -> C.ModelConfig | None:
    """The ModelConfig a ModelSpec describes, or None after appending located problems."""
    if spec.memory is not None:
        return None
    if spec.preset is not None:
        if spec.preset not in PRESETS:
            problems.append(loc.problem(path + ("preset",), f"unknown preset {spec.preset!r}"
                                        f"{_did_you_mean(spec.preset, PRESETS)} (one of {', '.join(PRESETS)})"))
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
    except ValueError as e:
        problems.append(loc.problem(path, str(e)))
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


def _did_you_mean(word, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ------------------------------------------------------------------------------ checking

def _allowed_fields(path: tuple) -> list[str]:
    """Field names the schema allows at `path` (for 'did you mean')."""
    types: list = [Scenario]
    for part in path:
        nxt = []
        for t in types:
            if isinstance(part, int):
                nxt += [a for a in typing.get_args(t)] if typing.get_origin(t) is list else []
                continue
            if isinstance(t, type) and issubclass(t, BaseModel) and part in t.model_fields:
                nxt.append(t.model_fields[part].annotation)
        types = []
        for t in nxt:  # unwrap Optional / Union / Annotated / list
            stack = [t]
            while stack:
                x = stack.pop()
                origin = typing.get_origin(x)
                if origin in (Union, types_union()) or origin is Annotated:
                    stack += list(typing.get_args(x)) if origin is not Annotated else [typing.get_args(x)[0]]
                else:
                    types.append(x)
    names: list[str] = []
    for t in types:
        if isinstance(t, type) and issubclass(t, BaseModel):
            names += list(t.model_fields)
    return sorted(set(names))


def types_union():
    import types
    return types.UnionType


def _data_path(loc_tuple: tuple, data) -> tuple:
    """Pydantic error locations include union tags ('mqar', 'function-after[...]'); keep only
    the parts that exist in the data so the position lookup finds the node."""
    out, cur = [], data
    for part in loc_tuple:
        if isinstance(cur, dict) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
    return tuple(out)


_PLAIN = {"int_type": "expected an integer", "int_parsing": "expected an integer",
          "int_from_float": "expected a whole number", "float_type": "expected a number",
          "float_parsing": "expected a number", "string_type": "expected text", "bool_type": "expected true or false",
          "bool_parsing": "expected true or false", "list_type": "expected a list", "dict_type": "expected a mapping",
          "model_type": "expected a mapping", "model_attributes_type": "expected a mapping",
          "tuple_type": "expected a list"}


def _message(err: dict) -> str:
    ctx, kind = err.get("ctx") or {}, err["type"]
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind == "greater_than_equal":
        return f"must be >= {ctx['ge']}"
    if kind == "greater_than":
        return f"must be > {ctx['gt']}"
    if kind == "less_than_equal":
        return f"too large (limit {ctx['le']:,})" if isinstance(ctx["le"], int) else f"must be <= {ctx['le']}"
    if kind == "too_long":
        return f"too long (limit {ctx.get('max_length'):,} items)"
    if kind == "too_short":
        return f"too short (at least {ctx.get('min_length')})"
    if kind == "string_too_long":
        return f"text too long (limit {ctx.get('max_length'):,} characters)"
    if kind == "string_too_short":
        return "must not be empty"
    return str(err["msg"]).lower()


def _pydantic_problems(e: ValidationError, loc: Located) -> list[Problem]:
    problems = []
    for err in e.errors():
        path = _data_path(tuple(err["loc"]), loc.data)
        kind = err["type"]
        if kind == "extra_forbidden":
            key = path[-1] if path else err["loc"][-1]
            allowed = _allowed_fields(path[:-1])
            problems.append(loc.problem(path, f"unknown key {key!r}{_did_you_mean(key, allowed)}"
                                        f" (expected one of: {', '.join(allowed)})", key=True))
        elif kind == "missing":
            problems.append(Problem(loc.file, *loc.where(path), _dotted_missing(path, err["loc"]),
                                    "missing required field"))
        elif kind == "value_error":
            msg = str(err["msg"]).removeprefix("Value error, ")
            problems.append(loc.problem(path, msg))
        elif kind == "union_tag_invalid" or kind == "union_tag_not_found":
            ctx = err.get("ctx") or {}
            problems.append(loc.problem(path + ("kind",) if "kind" in _at(loc.data, path) else path,
                                        f"unknown kind {ctx.get('tag', '')!r}{_did_you_mean(ctx.get('tag', ''), str(ctx.get('expected_tags', '')).replace(chr(39), '').split(', '))} "
                                        f"(expected one of: {ctx.get('expected_tags', '')})"))
        elif kind == "literal_error":
            got = err.get("input")
            choices = [c.strip(" '") for c in str((err.get("ctx") or {}).get("expected", "")).replace(" or ", ", ").split(",")]
            problems.append(loc.problem(path, f"{_short(got)} is not allowed{_did_you_mean(got, choices)} "
                                        f"(expected one of: {', '.join(choices)})"))
        else:
            problems.append(loc.problem(path, f"{_message(err)}, got {_short(err.get('input'))}"))
    return problems


def _at(data, path):
    for p in path:
        data = data[p]
    return data if isinstance(data, dict) else {}


def _dotted_missing(path, full_loc) -> str:
    from .scenario_yaml import dotted
    return dotted(tuple(path) + (full_loc[-1],))


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def check(loc: Located, base_dir: Path | None = None) -> Scenario:
    """Validate parsed YAML into a Scenario; raise ScenarioError with every problem found."""
    if not isinstance(loc.data, dict):
        raise ScenarioError([loc.problem((), "a scenario is a mapping (expected keys such as version, title, model)")])
    if loc.data.get("version") != 1:
        found = loc.data.get("version", "nothing")
        raise ScenarioError([loc.problem(("version",), f"version must be 1 (this lineage reads version 1), got {found!r}")])
    try:
        sc = Scenario.model_validate(loc.data)
    except ValidationError as e:
        raise ScenarioError(_pydantic_problems(e, loc)) from None
    problems: list[Problem] = []
    _semantic(sc, loc, problems, base_dir)
    if problems:
        raise ScenarioError(problems)
    return sc


def _model_path(sc: Scenario, i: int) -> tuple:
    return ("model",) if sc.model is not None else ("models", i)


def _semantic(sc: Scenario, loc: Located, problems: list, base_dir: Path | None) -> None:
    """Checks across fields: presets, overrides, layer indices, panels against the model."""
    cfgs = [build_config(s, _model_path(sc, i), loc, problems) for i, s in enumerate(sc.model_specs)]
    specs = sc.model_specs
    memories = [s.memory is not None for s in specs]
    if sc.input is not None and any(memories) and sc.input.task is None:
        i = memories.index(True)
        problems.append(loc.problem(_model_path(sc, i) + ("memory",),
                                    "a memory model is fed by a task (two_facts, mqar or topic_shift), not text or ids"))
    for i, s in enumerate(specs):
        m = s.memory
        if m is not None and m.channel_decay is not None:
            p = _model_path(sc, i) + ("memory", "channel_decay")
            if m.rule != "kda":
                problems.append(loc.problem(p, "channel_decay needs rule: kda (one decay per key channel)"))
            elif len(m.channel_decay) != m.key_dim:
                problems.append(loc.problem(p, f"has {len(m.channel_decay)} entries; expected key_dim = {m.key_dim}"))
            elif any(g > 0 for g in m.channel_decay):
                problems.append(loc.problem(p, "log decays must be <= 0 (alpha = exp(g) <= 1)"))
        if m is not None and sc.input is not None and isinstance(sc.input.task, TwoFacts) and m.key_dim < 2:
            problems.append(loc.problem(_model_path(sc, i) + ("memory", "key_dim"), "two_facts needs key_dim >= 2"))
    task = sc.input.task if sc.input is not None else None
    if isinstance(task, (MQAR, TopicShift)):
        need = task.pairs * (2 if isinstance(task, TopicShift) else 1)
        if need > task.vocab // 2:
            problems.append(loc.problem(("input", "task", "pairs"), f"{task.pairs} pairs need {need} distinct keys; "
                                        f"vocab {task.vocab} has {task.vocab // 2} (keys are its first half)"))
            return
    if any(memories) and not all(memories):
        problems.append(loc.problem(("models",), "mix of memory models and language models: they read the input "
                                    "differently (events vs tokens); put them in separate scenarios"))
    if sc.input is not None and sc.input.ids is not None:
        for i, cfg in enumerate(cfgs):
            if cfg is not None and max(sc.input.ids) >= cfg.vocab_size:
                j = max(range(len(sc.input.ids)), key=lambda t: sc.input.ids[t])
                problems.append(loc.problem(("input", "ids", j), f"token id {sc.input.ids[j]} is past the "
                                            f"vocabulary of {cfg.name} ({cfg.vocab_size})"))
    if sc.input is not None and sc.input.text is not None:
        n = len(sc.input.text.encode("utf-8"))
        if sc.decoding.prefill >= n and sc.decoding.mode == "teacher":
            problems.append(loc.problem(("decoding", "prefill"), f"prefill {sc.decoding.prefill} leaves no input "
                                        f"to step through (the text is {n} tokens)"))
    if sc.weights.checkpoint is not None:
        ck = Path(sc.weights.checkpoint)
        if not ck.is_absolute() and base_dir is not None:
            ck = base_dir / ck
        if not ck.is_file():
            problems.append(loc.problem(("weights", "checkpoint"), f"no such file: {ck}"))
        elif ck.suffix != ".safetensors":
            problems.append(loc.problem(("weights", "checkpoint"), "expected a .safetensors file"))
        if any(memories):
            problems.append(loc.problem(("weights", "checkpoint"), "memory models take hand-set keys and values, not a checkpoint"))
    for key in sc.weights.set:
        if not any(memories):
            problems.append(loc.problem(("weights", "set", key), "hand-set values are for memory models"))
        elif key not in ("keys", "values"):
            problems.append(loc.problem(("weights", "set", key), f"unknown hand-set table {key!r} "
                                        f"(expected keys or values){_did_you_mean(key, ['keys', 'values'])}", key=True))
    for j, p in enumerate(sc.panels):
        path = ("panels", j)
        if p.kind in ("figure",):
            if sc.figure is None:
                problems.append(loc.problem(path + ("kind",), "a figure panel needs a figure section"))
            continue
        if p.kind in ("captions", "lineage"):
            continue
        if not specs:
            problems.append(loc.problem(path + ("kind",), f"a {p.kind} panel needs a model"))
            continue
        if p.model >= len(specs):
            problems.append(loc.problem(path + ("model",), f"model {p.model} does not exist "
                                        f"(the scenario has {len(specs)}: 0-{len(specs) - 1})"))
            continue
        cfg, spec = cfgs[p.model], specs[p.model]
        if spec.memory is not None:
            if p.kind not in ("state", "decay", "tokens", "recall"):
                problems.append(loc.problem(path + ("kind",), f"a memory model has no {p.kind} panel "
                                            "(state, decay, recall and tokens apply)"))
            continue
        if cfg is None:
            continue
        if p.kind == "recall":
            problems.append(loc.problem(path + ("kind",), "the recall panel reads a memory model's hand-set keys"))
            continue
        if p.layer is not None and p.layer >= cfg.n_layers:
            problems.append(loc.problem(path + ("layer",), f"layer {p.layer} is past the last layer "
                                        f"({cfg.name} has {cfg.n_layers}: 0-{cfg.n_layers - 1})"))
            continue
        need = {"state": C.STATE_MIXERS, "decay": C.DECAY_MIXERS}.get(p.kind)
        if need is not None:
            if p.layer is not None and cfg.mixers[p.layer] not in need:
                problems.append(loc.problem(path + ("layer",), f"layer {p.layer} is {cfg.mixers[p.layer]}, which has "
                                            f"no {p.kind} to show (layers with one: "
                                            f"{_layers_of(cfg, need) or 'none'})"))
                continue
            if not any(m in need for m in cfg.mixers):
                problems.append(loc.problem(path + ("kind",), f"{cfg.name} has no layer with a {p.kind} "
                                            f"({'/'.join(need)})"))
                continue
            sub = cfg.mixer_config(cfg.mixers[p.layer] if p.layer is not None else next(m for m in cfg.mixers if m in need))
            if p.head >= sub.n_heads:
                problems.append(loc.problem(path + ("head",), f"head {p.head} does not exist ({sub.n_heads} heads: "
                                            f"0-{sub.n_heads - 1})"))
        if p.kind == "routing" and "moe" not in cfg.ffns:
            problems.append(loc.problem(path + ("kind",), f"{cfg.name} has no MoE layer to route"))
        if p.kind == "depth" and cfg.attnres is None:
            problems.append(loc.problem(path + ("kind",), f"{cfg.name} has no attention residuals"))
    if sc.figure is not None:
        names = [getattr(sc.figure, a) for a in ("big", "small") if hasattr(sc.figure, a)]
        names += list(getattr(sc.figure, "presets", []))
        for name in names:
            if name not in PRESETS:
                problems.append(loc.problem(("figure",), f"unknown preset {name!r}{_did_you_mean(name, PRESETS)}"))
    total = total_steps(sc)
    for j, c in enumerate(sc.captions):
        if total is not None and c.at >= total:
            problems.append(loc.problem(("captions", j, "at"), f"step {c.at} is past the end (the scenario has "
                                        f"{total} steps: 0-{total - 1})"))


def _layers_of(cfg, kinds) -> str:
    return ", ".join(str(i) for i, m in enumerate(cfg.mixers) if m in kinds)


def input_length(sc: Scenario) -> int | None:
    if sc.input is None:
        return None
    if sc.input.text is not None:
        return len(sc.input.text.encode("utf-8"))
    if sc.input.ids is not None:
        return len(sc.input.ids)
    from .tasks import generate
    seq = generate(sc.input.task)
    return len(seq.events) if any(s.memory is not None for s in sc.model_specs) else len(seq.tokens)


def total_steps(sc: Scenario) -> int | None:
    """How many frames the scenario yields."""
    if sc.figure is not None and not sc.model_specs:
        from .figure_frames import figure_steps
        n = figure_steps(sc.figure)
        return min(sc.steps or n, n)
    n = input_length(sc)
    if n is None:
        return sc.steps
    avail = n - sc.decoding.prefill
    if sc.decoding.mode == "teacher" or any(s.memory is not None for s in sc.model_specs):
        return max(min(sc.steps or avail, avail), 0)
    return sc.steps or max(avail, 1) + 32


def load(path: str | Path) -> Scenario:
    """Read, parse and check a scenario file. Raises ScenarioError (located, one line per problem)."""
    loc = load_file(path)
    sc = check(loc, Path(path).resolve().parent)
    sc._source, sc._text = str(path), Path(path).read_text(encoding="utf-8")
    return sc


def loads(text: str, name: str = "<string>", base_dir: Path | None = None) -> Scenario:
    """Check scenario text that did not come from a file (a trace's embedded scenario, a test)."""
    sc = check(load_text(text, name), base_dir)
    sc._source, sc._text = name, text
    return sc
