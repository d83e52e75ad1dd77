"""Safe YAML reading with a position for every key and value, and one-line problems.

Scenario files come from teachers and strangers alike, so reading one must never run code,
never hang and never explode memory: only the plain YAML tags are accepted, aliases are
expanded under a node budget (an "alias bomb" stops at the budget), nesting is bounded, the
file size is bounded, and bytes that are not UTF-8 text are refused with their position.
No torch here: `lineage validate` must answer in milliseconds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..escapes import first_control, visible
from ..files import read_regular
from .problems import Path_, Problem, ScenarioError, dotted

MAX_FILE_BYTES = 1 << 20          # 1 MiB: a scenario is a page of YAML, not a data set
MAX_NODES = 100_000               # after alias expansion
MAX_DEPTH = 40

_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq",
                                                         "timestamp")}

@dataclass
class Located:
    """Parsed data plus where each piece came from."""
    file: str
    data: object
    values: dict = field(default_factory=dict)   # path -> (line, col) of the value
    keys: dict = field(default_factory=dict)     # path -> (line, col) of the mapping key

    def where(self, path: Path_, key: bool = False) -> tuple[int, int]:
        """The closest known position for `path` (falls back to its parents, then 1:1)."""
        path = tuple(path)
        while path:
            table = self.keys if key and path in self.keys else self.values
            if path in table:
                return table[path]
            path = path[:-1]
            key = False
        return self.values.get((), (1, 1))

    def problem(self, path: Path_, message: str, key: bool = False) -> Problem:
        line, col = self.where(path, key)
        return Problem(self.file, line, col, dotted(path), message)


def _mark(node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _fail(file: str, line: int, col: int, message: str, path: Path_ = ()) -> ScenarioError:
    return ScenarioError([Problem(file, line, col, dotted(path), message)])


def _utf8_position(raw: bytes, err: UnicodeDecodeError) -> tuple[int, int]:
    before = raw[: err.start]
    return before.count(b"\n") + 1, err.start - (before.rfind(b"\n") + 1) + 1


def load_text(text: str | bytes, file: str = "<string>") -> Located:
    """Parse YAML text into plain Python data with positions. Raises ScenarioError."""
    if isinstance(text, bytes):
        if len(text) > MAX_FILE_BYTES:
            raise _fail(file, 1, 1, f"file is {len(text):,} bytes (limit {MAX_FILE_BYTES:,})")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            line, col = _utf8_position(text, e)
            raise _fail(file, line, col, f"not UTF-8 text (byte 0x{text[e.start]:02x}); is this a binary file?")
    if len(text) > MAX_FILE_BYTES:
        raise _fail(file, 1, 1, f"file is {len(text):,} characters (limit {MAX_FILE_BYTES:,})")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise _fail(file, line, col, f"YAML syntax: {e.problem or e.context}")
    except yaml.reader.ReaderError as e:
        before = text[: e.position]
        line, col = before.count("\n") + 1, e.position - (before.rfind("\n") + 1) + 1
        raise _fail(file, line, col, f"character #x{ord(e.character) if isinstance(e.character, str) else e.character:04x} "
                    "is not allowed in YAML (control characters and binary data are not text)")
    except yaml.YAMLError as e:
        raise _fail(file, 1, 1, f"YAML: {e}")
    except RecursionError:
        raise _fail(file, 1, 1, f"nesting too deep (limit {MAX_DEPTH} levels)")
    loc = Located(file, None)
    if node is None:
        raise _fail(file, 1, 1, "the file is empty (expected a mapping with 'version: 1')")
    loc.data = _Builder(loc).build(node, (), 0)
    return loc


def load_file(path: str | Path) -> Located:
    path = Path(path)
    try:
        raw = read_regular(path, MAX_FILE_BYTES)     # no FIFO, device or directory; bounded
    except OSError as e:
        raise _fail(str(path), 1, 1, f"cannot read: {e.strerror or e}")
    return load_text(raw, str(path))


class _Builder:
    """Turns a composed node tree into dicts, lists and scalars, recording positions."""

    def __init__(self, loc: Located):
        self.loc = loc
        self.budget = MAX_NODES
        self.scalars = yaml.constructor.SafeConstructor()
        # id(string) -> (string, its first control character or None). An alias is the same
        # node, which the constructor turns into the same string object: 10,000 aliases of one
        # 900 KB string were scanned 10,000 times (36 s); now each string once, however aliased.
        # The string is kept beside its id so the id cannot be reused by another.
        self._controls: dict[int, tuple[str, str | None]] = {}

    def control(self, s: str) -> str | None:
        seen = self._controls.get(id(s))
        if seen is None:
            seen = self._controls[id(s)] = (s, first_control(s))
        return seen[1]

    def fail(self, node, message: str, path: Path_) -> ScenarioError:
        line, col = _mark(node)
        return _fail(self.loc.file, line, col, message, path)

    def build(self, node, path: Path_, depth: int):
        self.budget -= 1
        if self.budget < 0:
            raise self.fail(node, f"more than {MAX_NODES:,} values once aliases are expanded (an alias bomb?)", path)
        if depth > MAX_DEPTH:
            raise self.fail(node, f"nesting too deep (limit {MAX_DEPTH} levels)", path)
        self.loc.values[path] = _mark(node)
        if node.tag not in _PLAIN_TAGS:
            raise self.fail(node, f"tag {node.tag!r} is not allowed (plain YAML values only)", path)
        if isinstance(node, yaml.MappingNode):
            out = {}
            for k_node, v_node in node.value:
                if not isinstance(k_node, yaml.ScalarNode) or k_node.tag not in _PLAIN_TAGS:
                    raise self.fail(k_node, "mapping keys must be plain names", path)
                key = self.scalar(k_node, path)
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise self.fail(k_node, f"mapping key {key!r} must be a name", path)
                if isinstance(key, str) and self.control(key):
                    raise self.fail(k_node, f"key {visible(key)!r} contains a control character", path)
                if key in out:
                    raise self.fail(k_node, f"duplicate key {key!r}", path + (key,))
                self.loc.keys[path + (key,)] = _mark(k_node)
                out[key] = self.build(v_node, path + (key,), depth + 1)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(v, path + (i,), depth + 1) for i, v in enumerate(node.value)]
        return self.scalar(node, path)

    def scalar(self, node, path: Path_):
        # PyYAML's constructors for the plain tags fail in many ways on values that do not parse
        # (`!!bool maybe` is a KeyError, `!!int x` a ValueError, a bad `!!timestamp` an
        # AttributeError): any failure here is a bad value at this node, never a traceback
        try:
            value = self.scalars.construct_object(node)
        except Exception:  # noqa: BLE001  (their messages say nothing useful: 'NoneType' has no 'groupdict')
            raise self.fail(node, f"{str(node.value)[:40]!r} is not a valid {node.tag.rsplit(':', 1)[-1]}", path)
        if isinstance(value, str) and (c := self.control(value)):
            raise self.fail(node, f"contains the control character {visible(c)}: terminal escape sequences and "
                                  "control characters are not allowed in scenario text", path)
        return value
