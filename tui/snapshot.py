"""Headless snapshots: run the app off-screen, go to a step, export the screen.

`lineage snapshot SCENARIO|TRACE --step N -o OUT.svg|.png|.txt` uses this for SVG and PNG
(text comes from tui/text_panels.py directly). PNG goes through resvg (a Rust SVG renderer
shipped as a wheel), so no system Cairo is needed.
"""
from __future__ import annotations

import asyncio


async def _render(path: str, step: int, panel: str | None, size: tuple[int, int], salvage: bool,
                  cursor) -> str:
    from .app import LineageApp
    from .widgets.panel import Panel
    app = LineageApp(path, salvage=salvage, cursor=cursor)
    async with app.run_test(size=size) as pilot:
        for _ in range(600):                           # up to 60 s for torch and the model to load
            await pilot.pause(0.1)
            if app.cursor is not None and app.frames_shown:
                break
            if len(app.screen_stack) > 1:              # an error dialog: the file did not open
                raise RuntimeError(f"{path}: could not be opened")
        if app.cursor is None:
            raise RuntimeError(f"{path}: timed out opening")
        target = max(0, min(step, app.cursor.total - 1))
        shown = app.frames_shown
        app.request(target)
        for _ in range(6000):
            await pilot.pause(0.05)
            if app.index == target and app.frames_shown > shown:
                break
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
