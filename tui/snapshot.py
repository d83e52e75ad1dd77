"""Headless snapshots: run the app off-screen, go to a step, export the screen.

`lineage snapshot SCENARIO|TRACE --step N -o OUT.svg|.png|.txt` uses this for SVG and PNG
(text comes from the panels' text forms, tui/panels/, directly). PNG goes through resvg (a Rust
SVG renderer shipped as a wheel), so no system Cairo is needed.
"""
from __future__ import annotations

import asyncio

from textual.worker import WorkerCancelled


async def settle(pilot) -> None:
    """Until no worker of the app runs: the file it opens is open (or its error shown) and the
    frame asked for is on screen. Each pause lets callbacks queued for after a refresh start
    the workers they start (the first frame is asked for once the panels are mounted)."""
    app = pilot.app
    await pilot.pause()
    while workers := list(app.workers):
        for worker in workers:
            try:
                await worker.wait()
            except WorkerCancelled:        # replaced by a newer request: that one is waited for
                pass
        await pilot.pause()


async def _render(path: str, step: int, panel: str | None, size: tuple[int, int], salvage: bool,
                  cursor) -> str:
    from .app import LineageApp
    from .panels.base import Panel
    app = LineageApp(path, salvage=salvage, cursor=cursor)
    async with app.run_test(size=size) as pilot:
        try:
            await asyncio.wait_for(settle(pilot), 60)      # up to 60 s for torch and the model to load
        except asyncio.TimeoutError:
            raise RuntimeError(f"{path}: timed out opening") from None
        if len(app.screen_stack) > 1 or app.cursor is None:    # an error dialog: the file did not open
            raise RuntimeError(f"{path}: could not be opened")
        target = max(0, min(step, app.cursor.total - 1))
        app.request(target)
        await settle(pilot)
        if len(app.screen_stack) > 1:                            # the step failed: its dialog says why
            lines = getattr(app.screen, "lines", None) or ["could not be shown"]
            raise RuntimeError(f"{path}: step {target + 1}: {lines[0]}")
        if panel is not None:
            chosen = [p for p in app.query(Panel) if p.kind == panel]
            if chosen:
                app.screen.maximize(chosen[0])
                chosen[0].show(app.cursor, target)
        await pilot.pause(0.2)
        return app.export_screenshot(title=f"lineage - step {target + 1}")


def render_svg(path: str, step: int, panel: str | None = None, size: tuple[int, int] = (160, 50),
               salvage: bool = False, cursor=None) -> str:
    """SVG of the app at 0-based `step` (the maximised `panel` if given). `cursor`: the file
    already opened (lineage.playback.session.open_path), so it is not opened a second time."""
    return asyncio.run(_render(path, step, panel, size, salvage, cursor))


def svg_to_png(svg: str) -> bytes:
    import resvg_py
    return resvg_py.svg_to_bytes(svg_string=svg, monospace_family="DejaVu Sans Mono", background="#0c0c0c")
