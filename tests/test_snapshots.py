"""One SVG snapshot per panel kind (pytest-textual-snapshot). Each panel is maximised at a
fixed step of a bundled scenario; update with `pytest --snapshot-update` and look at the SVGs
in tests/__snapshots__/ before accepting them."""
from pathlib import Path

import pytest

from tui.app import LineageApp
from tui.widgets.panel import Panel

SC = Path(__file__).resolve().parent.parent / "scenarios"

CASES = [
    ("tour", 12, "state"), ("tour", 12, "decay"), ("tour", 12, "routing"), ("tour", 12, "depth"),
    ("tour", 12, "cache"), ("tour", 12, "tokens"), ("tour", 12, "captions"),
    ("fig3_two_facts", 1, "recall"), ("fig2_kv_cache", 2, "figure"), ("fig7_k3_layer_map", 0, "lineage"),
]


def make_before(step: int, kind: str):
    async def before(pilot):
        app = pilot.app
        for _ in range(1200):
            await pilot.pause(0.05)
            if app.cursor is not None and app.frames_shown:
                break
        shown = app.frames_shown
        app.request(step)
        for _ in range(1200):
            await pilot.pause(0.05)
            if app.index == step and app.frames_shown > shown:
                break
        assert app.index == step, f"step {step} never shown (at {app.index})"
        await pilot.pause(0.2)
        panel = next(p for p in app.query(Panel) if p.kind == kind)
        app.screen.maximize(panel)
        await pilot.pause(0.1)
        panel.show(app.cursor, step)
        await pilot.pause(0.3)
    return before


@pytest.mark.parametrize("scenario, step, kind", CASES, ids=[c[2] for c in CASES])
def test_panel_snapshot(snap_compare, scenario, step, kind):
    app = LineageApp(str(SC / f"{scenario}.yaml"))
    assert snap_compare(app, terminal_size=(100, 32), run_before=make_before(step, kind))


def test_whole_screen_80x24(snap_compare):
    async def before(pilot):
        app = pilot.app
        for _ in range(1200):
            await pilot.pause(0.05)
            if app.cursor is not None and app.frames_shown:
                break
        await pilot.press("n", "n", "n")
        for _ in range(1200):
            await pilot.pause(0.05)
            if app.index == 3:
                break
        await pilot.pause(0.3)
    assert snap_compare(LineageApp(str(SC / "tour.yaml")), terminal_size=(80, 24), run_before=before)
