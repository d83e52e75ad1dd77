"""Scenario files: read (safe YAML with positions), validated (schema, then checks across
fields), every problem reported as one located line `FILE:LINE:COL: field.path: message`.

    reader.py    YAML text -> data with a position for every key and value
    schema.py    the typed format (pydantic)
    panels.py    the panel kinds, and which layers of a model each can show
    problems.py  located problems, one line each
    wording.py   pydantic's errors reworded as located problems
    build.py     a model spec -> a ModelConfig (presets, overrides, limits)
    checks.py    checks across fields; how many steps a scenario yields
    tasks.py     generated inputs (two facts, associative recall, topic shift)
    input_file.py  `input: {file: doc.txt}`: a long input read from a text file beside the scenario
    served_paths.py  served to a browser: every file a scenario names is under the served root

No torch here for presets and toys, so `lineage validate` answers in milliseconds; a scenario
naming a checkpoint imports it to check the tensors' headers on the meta device (checks.py).
"""
from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from .checks import semantic
from .input_file import relocated, with_file_text
from .problems import Problem, ScenarioError
from .reader import Located, load_file, load_text
from .schema import Scenario
from .served_paths import served_refusals
from .wording import pydantic_problems


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
        raise ScenarioError(pydantic_problems(e, loc)) from None
    refused = served_refusals(sc, loc, base_dir)    # before any file it names is read
    if refused:
        raise ScenarioError(refused)
    sc = with_file_text(sc, loc, base_dir)          # input.file: its text, read once, checked as text is
    problems: list[Problem] = []
    semantic(sc, loc, problems, base_dir)
    if problems:
        raise ScenarioError(relocated(problems, sc, loc))
    return sc


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
