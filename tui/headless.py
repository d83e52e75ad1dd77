"""Headless exports: `lineage snapshot SCENARIO|TRACE --step N -o OUT.svg|.png` and `lineage
slides` run the app off-screen, go to a step and export the screen (text comes from the panels'
text forms, tui/panels/, directly). With a panel named, the export is a slide: that panel
alone, filling the picture, under a line with the title, the step and the current token, over
the caption; no footer, no status line, no hatching.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from textual.worker import WorkerCancelled

from .snapshot import THEMES, about, screen_svg, slide_steps, step_line, svg_to_png

PANEL_SIZE = (100, 30)           # a slide of one panel: about 16:9 once rendered (cells are ~1:2)
SCREEN_SIZE = (160, 50)


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


def _slide_mode(app, panel: str | None) -> None:
    """Hide the keys and the status line; with a panel, maximise it under a head line."""
    from textual.widgets import Static

    from .panels.base import Panel
    screen = app.screen
    screen.add_class("-slide")
    screen.set_focus(None)             # no heatmap cursor or focus shading on a slide
    for p in app.query(Panel):         # keys act on a screen, not on a picture
        p.border_subtitle = ""
    for bar in screen.query("#captionbar Panel"):
        bar.border_title = ""          # the caption under a slide needs no label
    if panel is None:
        return
    chosen = [p for p in app.query(Panel) if p.kind == panel]
    if chosen:
        if not screen.query("#slidehead"):
            screen.mount(Static("", id="slidehead"), before=0)
        screen.maximize(chosen[0])


async def _show(app, pilot, step: int, panel: str | None, path: str) -> int:
    """Go to 0-based `step` (clamped) and wait until it is drawn; returns the step shown."""
    target = max(0, min(step, app.cursor.total - 1))
    app.request(target)
    await settle(pilot)
    if len(app.screen_stack) > 1:                            # the step failed: its dialog says why
        lines = getattr(app.screen, "lines", None) or ["could not be shown"]
        raise RuntimeError(f"{path}: step {target + 1}: {lines[0]}")
    if panel is not None and app.screen.query("#slidehead"):
        from lineage.playback.session import caption_at
        app.screen.query_one("#slidehead").update(step_line(app.cursor, target))
        # a caption about another panel is not this slide's
        app.screen.query_one("#captionbar").display = about(caption_at(app.cursor.info["captions"], target), panel)
    await pilot.pause(0.2)
    if app.screen.maximized is not None:
        app.screen.maximized.show(app.cursor, target)        # drawn at its maximised size
        await pilot.pause(0.1)
    return target


async def _export(path: str, steps: list[int], panel: str | None, size, salvage: bool, cursor,
                  theme: str, each) -> None:
    """Open `path` headless once and call each(step, svg) for every 0-based step."""
    from .app import LineageApp
    app = LineageApp(path, salvage=salvage, cursor=cursor)
    app.theme = THEMES[theme][0]
    async with app.run_test(size=size) as pilot:
        try:
            await asyncio.wait_for(settle(pilot), 60)      # up to 60 s for torch and the model to load
        except asyncio.TimeoutError:
            raise RuntimeError(f"{path}: timed out opening") from None
        if len(app.screen_stack) > 1 or app.cursor is None:    # an error dialog: the file did not open
            raise RuntimeError(f"{path}: could not be opened")
        _slide_mode(app, panel)
        for step in steps:
            shown = await _show(app, pilot, step, panel, path)
            each(shown, screen_svg(app, f"lineage - step {shown + 1}"))


def render_svg(path: str, step: int, panel: str | None = None, size: tuple[int, int] | None = None,
               salvage: bool = False, cursor=None, theme: str = "dark") -> str:
    """SVG of the app at 0-based `step` (a slide of `panel` if given). `cursor`: the file
    already opened (lineage.playback.session.open_path), so it is not opened a second time."""
    out = []
    size = size or (PANEL_SIZE if panel else SCREEN_SIZE)
    asyncio.run(_export(path, [step], panel, size, salvage, cursor, theme, lambda i, svg: out.append(svg)))
    return out[0]


def slide_names(steps: list[int]) -> list[str]:
    """The stem of each slide, numbered in order, for the 0-based steps: 01-step0001, ..."""
    width = max(2, len(str(len(steps))))
    return [f"{n:0{width}d}-step{i + 1:04d}" for n, i in enumerate(steps, 1)]


def slide_text(cursor, i: int, panel: str | None) -> str:
    """The text form of what a snapshot or slide shows at 0-based step i: a panel's picture
    carries the caption, so its text does too."""
    from .panels import render
    from lineage.playback.session import caption_at
    text = render(cursor, i, panel)
    if panel not in (None, "captions") and about(caption_at(cursor.info.get("captions") or [], i), panel):
        text += "\n" + render(cursor, i, "captions").split("\n", 2)[2]
    return text


def write_slides(path: str, out_dir: Path, cursor, panel: str | None = None, size=None, scale: float = 1.0,
                 theme: str = "dark", salvage: bool = False, force: bool = False) -> list[Path]:
    """One PNG and one .txt per caption, at its slide step, numbered in order: 01-step0008.png, ... Each is
    written whole and never through a link; one already there is replaced only with `force`."""
    from lineage.files import write_new

    steps = slide_steps(cursor.info, cursor.total, panel)
    stems = dict(zip(steps, slide_names(steps)))
    written: list[Path] = []

    def each(i: int, svg: str) -> None:
        png, txt = out_dir / (stems[i] + ".png"), out_dir / (stems[i] + ".txt")
        write_new(png, svg_to_png(svg, scale, theme), force)
        write_new(txt, slide_text(cursor, i, panel), force)
        written.extend([png, txt])

    size = size or (PANEL_SIZE if panel else SCREEN_SIZE)
    asyncio.run(_export(path, steps, panel, size, salvage, cursor, theme, each))
    return written
