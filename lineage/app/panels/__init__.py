"""The panel kinds, one file each (its widget and its text form side by side), and the one
registry from kind to panel: adding a panel is its file, its class in PANELS (and its import)
here, and its kind in lineage/scenario/panels.py (tests/app/panels/test_registry.py checks the
two agree)."""
from __future__ import annotations

from .attention import AttentionPanel
from .base import DRAW_ERRORS, Panel
from .cache import CachePanel
from .captions import CaptionsPanel
from .decay import DecayPanel
from .depth import DepthPanel
from .figure import FigurePanel
from .gate import GatePanel
from .lineage_table import LineagePanel
from .recall import RecallPanel
from .routing import RoutingPanel
from .state import StatePanel
from .tokens import TokensPanel

PANELS: dict[str, type[Panel]] = {p.kind: p for p in (
    TokensPanel, StatePanel, DecayPanel, RoutingPanel, DepthPanel, CachePanel, CaptionsPanel,
    LineagePanel, RecallPanel, FigurePanel, GatePanel, AttentionPanel,
)}


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
