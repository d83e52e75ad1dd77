"""Pydantic's validation errors reworded as located problems: plain words, the position of the
offending key or value, and a did-you-mean for near-miss names."""
from __future__ import annotations

import reprlib
import typing
from typing import Annotated, Union

from pydantic import BaseModel, ValidationError

from ..did_you_mean import did_you_mean
from .problems import Problem, dotted
from .reader import Located
from .schema import Scenario


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


def pydantic_problems(e: ValidationError, loc: Located) -> list[Problem]:
    problems = []
    for err in e.errors():
        path = _data_path(tuple(err["loc"]), loc.data)
        kind = err["type"]
        if kind == "extra_forbidden":
            key = path[-1] if path else err["loc"][-1]
            allowed = _allowed_fields(path[:-1])
            problems.append(loc.problem(path, f"unknown key {key!r}{did_you_mean(key, allowed)}"
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
                                        f"unknown kind {ctx.get('tag', '')!r}{did_you_mean(ctx.get('tag', ''), str(ctx.get('expected_tags', '')).replace(chr(39), '').split(', '))} "
                                        f"(expected one of: {ctx.get('expected_tags', '')})"))
        elif kind == "literal_error":
            got = err.get("input")
            choices = [c.strip(" '") for c in str((err.get("ctx") or {}).get("expected", "")).replace(" or ", ", ").split(",")]
            problems.append(loc.problem(path, f"{_short(got)} is not allowed{did_you_mean(got, choices)} "
                                        f"(expected one of: {', '.join(choices)})"))
        else:
            problems.append(loc.problem(path, f"{_message(err)}, got {_short(err.get('input'))}"))
    return problems


def _at(data, path):
    for p in path:
        data = data[p]
    return data if isinstance(data, dict) else {}


def _dotted_missing(path, full_loc) -> str:
    return dotted(tuple(path) + (full_loc[-1],))


def _bounded_repr() -> reprlib.Repr:
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 4, 4, 4, 4
    r.maxstring = r.maxother = r.maxlong = 40
    return r


_BOUNDED = _bounded_repr()


def _short(v) -> str:
    """The first 40 characters of repr(v), at the cost of those alone: the input pydantic hands
    back may be a list of 1,500 aliases of one 900 KB string (repr'd whole: 1.35 GB, 6 s)."""
    r = repr(v[:41]) if isinstance(v, str) else _BOUNDED.repr(v)
    return r if len(r) <= 40 else r[:37] + "..."
