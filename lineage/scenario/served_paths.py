"""Served to a browser (`lineage serve`), a scenario is confined to the served root: every file
or folder it names (input.file, model.pretrained, weights.checkpoint, a model's checkpoint, a
device_map FILE.json) must resolve under the root or the bundled scenarios' folder (which holds
the bundled weights). Whoever drives the served app may open any scenario under the root, so
without this a scenario there could load, and show as tokens or panels, any checkpoint or text
on the machine.

The refusals are checked before anything the scenario names is read (no config.json, no
header, no text), and say no more than the field and the rule: the served app shows them as
they are (lineage/cli/served.py), since quoting a value would quote the file.
"""
from __future__ import annotations

import os
from pathlib import Path

from lineage.scenarios import DIR as SCENARIO_DIR

from .problems import Problem
from .reader import Located
from .schema import Scenario

SERVE_ROOT_ENV = "LINEAGE_SERVE_ROOT"       # lineage/cli/served.py's: set when the app is served
REFUSED = "outside the served root; the served app reads only files under it and the bundled scenarios"
DEVICE_MAP_WORDS = ("auto", "balanced", "sequential")


def served_root() -> Path | None:
    root = os.environ.get(SERVE_ROOT_ENV)
    return Path(root).resolve() if root else None


def outside(path: Path, root: Path) -> bool:
    """Whether `path` (relative: to the current folder) is outside both the root and the bundled
    scenarios, links followed: a link under the root to /etc is outside."""
    try:
        p = path.expanduser().resolve()
    except (OSError, RuntimeError):       # a loop of links, a name too long: nothing to load
        return True
    return not (p.is_relative_to(root) or p.is_relative_to(SCENARIO_DIR.resolve()))


def _named(sc: Scenario, base_dir: Path | None) -> list[tuple[tuple, Path]]:
    """Every (field, path) the scenario names a file or folder at, relative names taken from the
    scenario's folder as the loaders take them."""
    def at(name: str) -> Path:
        p = Path(name).expanduser()
        return p if p.is_absolute() or base_dir is None else base_dir / p

    named = []
    if sc.input is not None and sc.input.file is not None:
        named.append((("input", "file"), at(sc.input.file)))
    if sc.weights.checkpoint is not None:
        named.append((("weights", "checkpoint"), at(sc.weights.checkpoint)))
    for i, spec in enumerate(sc.model_specs):
        where = sc.model_path(i)
        if spec.pretrained is not None:
            named.append((where + ("pretrained",), at(spec.pretrained)))
        if spec.checkpoint is not None:
            named.append((where + ("checkpoint",), at(spec.checkpoint)))
        m = (spec.device_map or "").strip()
        # a map file as lineage.families.placement reads one: FILE.json from the scenario's folder,
        # or anything else that names an existing file (a device list like cuda:0,cpu names none)
        if m and m not in DEVICE_MAP_WORDS and (m.endswith(".json") or "/" in m or os.path.lexists(Path(m).expanduser())):
            named.append((where + ("device_map",), at(m) if m.endswith(".json") else Path(m).expanduser()))
    return named


def served_refusals(sc: Scenario, loc: Located, base_dir: Path | None) -> list[Problem]:
    """One located problem for each path outside the served root (none when not served)."""
    root = served_root()
    if root is None:
        return []
    return [loc.problem(where, REFUSED) for where, path in _named(sc, base_dir) if outside(path, root)]
