"""One SVG snapshot per panel kind (pytest-textual-snapshot). Each panel is maximised at a
fixed step of a bundled scenario; update with `pytest --snapshot-update` and look at the SVGs
in tests/app/__snapshots__/ before accepting them."""
import asyncio
from pathlib import Path

import pytest

from tests.app.helpers import shown_step
from lineage.app.app import LineageApp
from lineage.app.panels.base import Panel
from lineage.app.headless import settle

SC = Path(__file__).resolve().parents[2] / "lineage" / "scenarios"

CASES = [
    ("tour", 12, "state"), ("tour", 12, "decay"), ("tour", 12, "routing"), ("tour", 12, "depth"),
    ("tour", 12, "cache"), ("tour", 12, "tokens"), ("tour", 12, "captions"),
    ("fig3_two_facts", 1, "recall"), ("fig2_kv_cache", 2, "figure"), ("fig7_k3_layer_map", 0, "lineage"),
    ("attention_recall", 32, "attention"),
]


async def wait_for(pilot, ready, what: str, seconds: float = 60.0) -> None:
    """Until `ready()` holds, settling the app's workers in between. Workers done is not enough
    alone: the first frame is asked for after a refresh, so on a loaded machine every worker can
    be done before the frame's worker has started (seen: fig7's first frame under a parallel suite)."""
    async def until_ready():
        await settle(pilot)
        while not ready():
            await pilot.pause(0.05)
            await settle(pilot)
    try:
        await asyncio.wait_for(until_ready(), seconds)
    except asyncio.TimeoutError:
        raise AssertionError(f"not reached: {what}") from None


def make_before(step: int, kind: str):
    async def before(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: shown_step(app) is not None, "the first frame")
        app.request(step)
        await wait_for(pilot, lambda: shown_step(app) == step, f"step {step}")
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


def test_whole_screen_80x24(snap_compare, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)     # the status bar shows the device
    async def before(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: shown_step(app) is not None, "the first frame")
        await pilot.press("n", "n", "n")
        await wait_for(pilot, lambda: shown_step(app) == 3, "step 3")
        await pilot.pause(0.3)
    # random weights: the trained tour's guesses at step 3 fill the tokens panel's line to within a
    # cell, where Textual's wrap and scrollbar settle either way from run to run
    assert snap_compare(LineageApp(str(SC / "tour_random.yaml")), terminal_size=(80, 24), run_before=before)


SLIDES = [("fig5_gating", 12, "recall"), ("lineage_compare", 59, "state"), ("fig3_two_facts", 1, "state")]


@pytest.mark.parametrize("scenario, step, kind", SLIDES, ids=[f"{c[0]}-{c[2]}" for c in SLIDES])
def test_slide_snapshot(snap_compare, scenario, step, kind):
    """A panel's slide as `lineage snapshot --panel` and `lineage slides --panel` export it."""
    from lineage.app.headless import _show, _slide_mode

    async def before(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: shown_step(app) is not None, "the first frame")
        _slide_mode(app, kind)
        await _show(app, pilot, step, kind, scenario)
        await pilot.pause(0.3)
    app = LineageApp(str(SC / f"{scenario}.yaml"))
    assert snap_compare(app, terminal_size=(100, 30), run_before=before)
