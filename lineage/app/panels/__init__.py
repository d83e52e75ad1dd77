"""The panel kinds, one file each (its widget and its text form side by side). The one list of
kinds is lineage/scenario/panels.py's PANEL_KINDS (torch-free: validation reads it); each kind's
Panel class is found here in this folder's files, by its `kind`. Adding a panel is its file and its
kind in that list (tests/app/panels/test_registry.py checks the two agree)."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

from lineage.scenario.panels import PANEL_KINDS

from .base import DRAW_ERRORS, Panel
from .captions import CaptionsPanel


def _found() -> dict[str, type[Panel]]:
    """Every Panel subclass defined in this folder's modules, by its kind."""
    out = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Panel) and cls is not Panel and cls.__module__ == module.__name__ and "kind" in vars(cls):
                if cls.kind in out:
                    raise TypeError(f"panel kind {cls.kind!r}: {out[cls.kind].__name__} and {cls.__name__}")
                out[cls.kind] = cls
    return out


_FOUND = _found()
# in the order the scenario list gives (help and listings follow it); a kind with no panel fails here
PANELS: dict[str, type[Panel]] = {kind: _FOUND[kind] for kind in PANEL_KINDS}


def make_panel(options: dict) -> Panel:
    return PANELS[options["kind"]](options)


def default_panels(info: dict) -> list[dict]:
    """The scenario's panels, or the one a scenario without a panel list gets."""
    return info.get("panels") or [{"kind": "figure" if info.get("figure") else "tokens"}]


def docked(made: list[Panel], info: dict) -> tuple[list[Panel], list[Panel]]:
    """(the grid's panels, the caption bar's): captions sit in a bar under the grid, never
    scrolled away; a scenario with captions and no captions panel gets one."""
    bar = [p for p in made if p.kind == "captions"][:1]
    if not bar and info.get("captions"):
        bar = [CaptionsPanel({"kind": "captions"})]
    return [p for p in made if p.kind != "captions"], bar


def render(cur, i: int, panel: str | None = None, width: int = 100) -> str:
    """All the scenario's panels at step i (or only those of kind `panel`) as text."""
    panels = default_panels(cur.info)
    if panel is not None:
        chosen = [p for p in panels if p["kind"] == panel] or [{"kind": panel}]
    else:
        chosen = panels
    out = [f"{cur.info['title']} - step {i + 1} / {cur.total}"]
    for p in chosen:
        out.append("")
        try:
            out += PANELS[p["kind"]].text_form(cur, i, p, width)
        except DRAW_ERRORS as e:        # values it cannot draw: said in its place, as the app does
            out.append(f"{p['kind']}: step {i + 1} cannot be drawn: {e}")
    return "\n".join(out) + "\n"
