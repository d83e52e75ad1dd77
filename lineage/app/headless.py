"""Headless exports: `lineage snapshot SCENARIO|TRACE --step N -o OUT.svg|.png` and `lineage
slides` run the app off-screen, go to a step and export the screen (text comes from the panels'
text forms, lineage/app/panels/, directly). What they draw is a picture, not the app: a line with the
title, the step and the current token, the panels with their titles whole, the caption; no
window title, transport, keys, status line or hatching. With a panel named, that panel alone
fills the picture; a slide of the whole screen shows the panels its caption is about.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from rich.cells import cell_len
from textual.content import Content
from textual.worker import WorkerCancelled

from .screens.main import FILL_ROW
from .snapshot import THEMES, about, head_lines, on_canvas, screen_svg, slide_steps, svg_size, svg_to_png

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
    """A picture, not the app: no header, timeline, keys or status line, a head line with the
    title, step and token instead; with a panel, that panel maximised under it (panels of
    that kind side by side where there are several)."""
    from textual.widgets import Header, Static

    from .panels.base import Panel
    from .widgets.timeline import Timeline
    screen = app.screen
    screen.add_class("-slide")
    screen.set_focus(None)             # no heatmap cursor or focus shading on a slide
    for w in [*screen.query(Header), *screen.query(Timeline)]:
        w.display = False              # the window's title and the transport are the app's, not the picture's
    for p in app.query(Panel):         # keys act on a screen, not on a picture
        p.border_subtitle = ""
        if p.kind == "tokens":         # a still picture has room to read: the stream as a block
            p.options["stream_lines"] = STREAM_LINES
    for bar in screen.query("#captionbar Panel"):
        bar.border_title = ""          # the caption under a slide needs no label
    if not screen.query("#slidehead"):
        screen.mount(Static("", id="slidehead"), before=0)
    chosen = [p for p in screen.query("#panels > Panel") if p.kind == panel] or \
        [p for p in screen.query("#captionbar Panel") if p.kind == panel]      # the captions live under the grid
    if len(chosen) == 1:               # several of its kind (a state per model) share the picture
        screen.maximize(chosen[0])


def _several(app, panel: str | None) -> bool:
    """Whether a slide of `panel` shows more than one panel (one of each model compared)."""
    return panel is not None and sum(p.kind == panel for p in app.screen.query("#panels > Panel")) > 1


def slide_kinds(info: dict, i: int, panel: str | None = None) -> tuple[str, ...] | None:
    """The kinds of panel a slide of 0-based step i shows: the one asked for; else the kinds
    its caption names, those the scenario shows, in the caption's order; else None, every panel."""
    from lineage.playback.session import caption_at

    from .panels import default_panels
    from .snapshot import caption_panels
    if panel is not None:
        return (panel,)
    shown = {p["kind"] for p in default_panels(info)} - {"captions"}
    kinds = tuple(k for k in caption_panels(caption_at(info.get("captions") or [], i)) if k in shown)
    return kinds or None


def _columns(width: int, titles: list[int], most: int, rows_that_fit: int) -> int:
    """Columns for a picture of panels with titles this long: the most, up to `most`, whose
    cells hold every title whole and leave at most one cell of the last row empty, as long as
    its rows still fit the picture; else, of those whose rows fit, the one leaving the fewest
    cells empty (a title too long for it then takes a legend)."""
    n = len(titles)
    fit = [c for c in range(max(1, min(most, n)), 0, -1) if -(-n // c) <= rows_that_fit] or [max(1, min(most, n))]
    for c in fit:
        if all(t + 4 <= width // c - 1 for t in titles) and (c == 1 or (-n) % c <= 1):
            return c
    return min(fit, key=lambda c: ((-n) % c, -c))


def _short_titles(panels, models: list[dict]) -> list[str]:
    """A title its border would cut names its model by number instead ("model 2"); returns the
    legend lines for the numbers used, so every name is still on the picture, whole."""
    names = sorted(((m.get("name") or "", k) for k, m in enumerate(models)), key=lambda nk: -len(nk[0]))
    used = set()
    for p in panels:
        title = str(p.border_title)
        if cell_len(title) + 4 <= p.outer_size.width:
            continue
        for name, k in names:
            short = f"model {k + 1}"
            if len(name) > len(short) and name in title:
                title = title.replace(name, short)
                used.add(k)
        p.border_title = Content(title)
    return [f"model {k + 1}: {models[k]['name']}" for k in sorted(used)]


MOST_GROWTH = 1.5        # a crowded picture of the whole screen grows to at most this times its size


def _crowded(shown) -> bool:
    """Whether a panel's title or the legend in its bottom border is cut, or its content scrolls."""
    return any(max(cell_len(str(p.border_title)), cell_len(str(p.border_subtitle))) + 4 > p.outer_size.width
               or p.max_scroll_y > 0 for p in shown)


async def _fit_columns(app, pilot, screen, grid, shown, titles, cursor, target, force: bool = False) -> None:
    """As many columns as keep every title (their lengths) whole while the rows still fit;
    redrawn if changed (which puts each title back whole)."""
    room = app.size.height - 4 - screen.query_one("#captionbar").outer_size.height     # as _fit_layout counts it
    most = 3 if app.size.width >= 150 else 2 if app.size.width >= 100 else 1
    cols = _columns(app.size.width, titles, most, room // FILL_ROW)
    if cols != grid.styles.grid_size_columns or force:
        screen.slide_columns = cols
        screen._fit_layout()
        await pilot.pause(0.2)
        for p in shown:
            p.show(cursor, target)                           # drawn in its new room
        await pilot.pause(0.1)


async def _name_models(app, pilot, screen, shown, cursor, target) -> None:
    """Titles too long for their border name their model by number, in a legend under the head."""
    head = screen.query_one("#slidehead")
    models = cursor.info.get("models") or []
    legend = _short_titles(shown, models)
    if legend and cell_len(" · ".join(legend)) <= app.size.width - 2:
        legend = [" · ".join(legend)]
    lines = head_lines(cursor, target, app.size.width - 2) + legend
    head.update("\n".join(lines))
    head.styles.height = len(lines)
    await pilot.pause(0.1)
    _short_titles(shown, models)       # a panel redrawn in the room the legend left


def _text_width(panel) -> int | None:
    """Cells of the longest line a text panel shows; None where it shows something else."""
    from .widgets.text_box import TextBox
    boxes = list(panel.children)
    if not boxes or not all(isinstance(b, TextBox) and b.shown is not None for b in boxes):
        return None
    plains = [b.shown.plain if hasattr(b.shown, "plain") else str(b.shown) for b in boxes]
    return max(cell_len(line.rstrip()) for plain in plains for line in plain.split("\n"))


STREAM_LINES = 6         # lines of the token stream on a slide (one in the app)
ASPECT = 2.5             # the widest picture of text panels, width over height once rendered
CELL = 2.0               # a cell's height over its width in the rendered picture (rich's SVG)
SPARE = 3                # cells a text panel keeps beside its longest line (a figure's scrollbar room)
LEAST = (40, 10)         # a picture fitted to its text is at least this many cells (the app needs 60 x 20)


async def _resize_slide(app, pilot, screen, shown, cursor, target, size) -> None:
    await pilot.resize_terminal(*size)
    await settle(pilot)
    for p in shown:
        p.show(cursor, target)                           # drawn in its new room
    await pilot.pause(0.1)
    await _name_models(app, pilot, screen, shown, cursor, target)     # the head line wraps anew


def _cut(screen, shown) -> bool:
    """Whether anything on the picture is cut: a panel's title or content (_crowded), or the
    caption under them, which scrolls where its bar is too short."""
    bar = screen.query_one("#captionbar")
    return _crowded(shown) or (bar.display and any(c.max_scroll_y > 0 for c in bar.query("Panel")))


async def _fit_text(app, pilot, screen, grid, shown, cursor, target) -> None:
    """A picture of text panels only (tokens, recall, a figure's table) as wide and as tall as
    their text: the room beside and below it would be an empty box on the slide, the table a
    strip in a corner of the projected picture (fig6's recall table took 40 of 160 columns and
    6 of 20 rows). Text that fills its width (a token stream, a plot) keeps the width; so does
    a picture whose caption or titles would be cut at the narrower one. Below the app's least
    size too: a picture has no keys to lay out. A deck's slides never get narrower than one
    before them, so the same table keeps its size from slide to slide."""
    from .panels.base import TextPanel
    if not shown or not all(isinstance(p, TextPanel) for p in shown) or _crowded(shown):
        return
    cols = 1 if screen.maximized is not None else int(grid.styles.grid_size_columns or 1)
    full, fill = tuple(app.size), screen.slide_fill
    least = max(LEAST[0], getattr(screen, "deck_width", 0))      # the slides before this one
    widths = [_text_width(p) for p in shown]
    if None not in widths:
        chrome = max(p.outer_size.width - p.content_size.width for p in shown)     # border, padding
        width = max(LEAST[0], getattr(screen, "deck_width", 0),
                    cols * (max(widths) + chrome + SPARE) + cols - 1)              # + the grid's gutters
        tried = width < full[0]
        while width < full[0]:                       # wider where the caption or a title is cut
            screen.slide_fill = True                 # rows share the screen; no "too small" notice
            await _resize_slide(app, pilot, screen, shown, cursor, target, (width, full[1]))
            if not _cut(screen, shown):
                await _fit_height(app, pilot, screen, cols, shown, cursor, target)
                if not _cut(screen, shown):
                    screen.deck_width = width
                    await _fit_aspect(app, pilot, screen, cols, shown, cursor, target, full, least)
                    return
            width = int(width * 1.25)
        if tried:                                    # the width it had, as tall as its text there
            screen.slide_fill = fill
            await _resize_slide(app, pilot, screen, shown, cursor, target, full)
    await _fit_height(app, pilot, screen, cols, shown, cursor, target)
    await _fit_aspect(app, pilot, screen, cols, shown, cursor, target, full, least)


def _aspect(size) -> float:
    return size[0] / (size[1] * CELL)


async def _fit_aspect(app, pilot, screen, cols: int, shown, cursor, target, full, least: int) -> None:
    """Text that fills its width (a token stream) keeps it, and at 160 columns is a strip
    (the tour's step 300 was 1853 x 243 pixels, 7.6:1): narrower, the stream a block of more
    lines and the caption wrapped taller, until the picture is at most ASPECT wide; only where
    a panel reflows (TextPanel.REFLOWS: a table's rows would wrap) and never narrower than
    `least` (the slides before it). A width where a title or the caption would be cut is
    passed over; none fitting, it stays as it was."""
    if _aspect(app.size) <= ASPECT or not any(p.REFLOWS for p in shown):     # a table's rows would wrap
        return
    was, fill, width = tuple(app.size), screen.slide_fill, app.size.width
    while (width := int(width * 0.9)) >= least:
        screen.slide_fill = True
        await _resize_slide(app, pilot, screen, shown, cursor, target, (width, full[1]))
        if _cut(screen, shown):
            continue
        await _fit_height(app, pilot, screen, cols, shown, cursor, target)
        if not _cut(screen, shown) and _aspect(app.size) <= ASPECT:
            screen.deck_width = width
            return
    screen.slide_fill = fill
    await _resize_slide(app, pilot, screen, shown, cursor, target, was)


async def _fit_height(app, pilot, screen, cols: int, shown, cursor, target) -> None:
    """As tall as the text at this width, where that is shorter."""
    tallest = max(sum(c.outer_size.height for c in p.children) + 2 for p in shown)   # + the border
    rows = -(-len(shown) // cols)
    needed = screen.query_one("#slidehead").outer_size.height + rows * tallest + \
        screen.query_one("#captionbar").outer_size.height
    if needed + 2 >= app.size.height:
        return
    screen.slide_fill = True           # rows share what is left, so none scrolls
    await _resize_slide(app, pilot, screen, shown, cursor, target, (app.size.width, max(needed, LEAST[1])))


async def _show(app, pilot, step: int, panel: str | None, path: str, focus: bool = False,
                grow: tuple[int, int] | None = None) -> int:
    """Go to 0-based `step` (clamped) and wait until it is drawn; returns the step shown. With
    `focus` (a slide of the whole screen), only the panels its caption is about are shown.
    `grow`: the size asked for (the default one), which a picture of the whole screen may
    exceed, keeping its proportions, where a title would be cut or a panel scroll, and a
    picture of text panels only (the grid's, or one maximised) may shrink to (_fit_text)."""
    from lineage.playback.session import caption_at

    from .panels.base import Panel
    screen, cursor = app.screen, app.cursor
    target = max(0, min(step, cursor.total - 1))
    if grow and tuple(app.size) != tuple(grow):              # the last picture grew: this one starts afresh
        await pilot.resize_terminal(*grow)
    grid = screen.query_one("#panels")
    panels = [p for p in grid.children if isinstance(p, Panel)]
    kinds = slide_kinds(cursor.info, target, panel) if focus or panel else None
    kind = kinds[0] if kinds else None
    whole = panel is None or _several(app, panel)       # not one panel maximised: the grid, filtered
    if whole:
        for p in panels:               # hidden ones are not prepared: set before the step is asked for
            p.display = kinds is None or p.kind in kinds
        screen.slide_columns, screen.slide_fill = None, False
        screen._fit_layout()
    app.request(target)
    await settle(pilot)
    if len(app.screen_stack) > 1:                            # the step failed: its dialog says why
        lines = getattr(app.screen, "lines", None) or ["could not be shown"]
        raise RuntimeError(f"{path}: step {target + 1}: {lines[0]}")
    head = screen.query_one("#slidehead")
    lines = head_lines(cursor, target, app.size.width - 2)
    head.update("\n".join(lines))
    head.styles.height = len(lines)
    # a caption about another panel is not this slide's
    screen.query_one("#captionbar").display = about(caption_at(cursor.info["captions"], target), kind)
    await pilot.pause(0.2)
    shown = [screen.maximized] if screen.maximized is not None else [p for p in panels if p.display]
    titles = [cell_len(str(p.border_title)) for p in shown]       # whole: nothing has shortened them yet
    if whole:
        await _fit_columns(app, pilot, screen, grid, shown, titles, cursor, target)
    if screen.maximized is not None:
        screen.maximized.show(cursor, target)                # drawn at its maximised size
        await pilot.pause(0.1)
    await _name_models(app, pilot, screen, shown, cursor, target)
    if whole and grow:                 # a crowded picture: the same picture larger, so it all fits
        for _ in range(3):
            if not _crowded(shown) or app.size.width >= grow[0] * MOST_GROWTH:
                break
            w = min(int(app.size.width * 1.2), int(grow[0] * MOST_GROWTH))
            await pilot.resize_terminal(w, round(grow[1] * w / grow[0]))
            await settle(pilot)
            await _fit_columns(app, pilot, screen, grid, shown, titles, cursor, target, force=True)
            await _name_models(app, pilot, screen, shown, cursor, target)
    if grow:                           # text panels only (the grid's, or one maximised): as large as the text
        await _fit_text(app, pilot, screen, grid, shown, cursor, target)
    return target


async def _export(path: str, steps: list[int], panel: str | None, size, salvage: bool, cursor,
                  theme: str, each, focus: bool = False, grow: bool = False) -> None:
    """Open `path` headless once and call each(step, svg) for every 0-based step. `grow`: a
    crowded picture of the whole screen may be drawn larger than `size` (see _show)."""
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
        grow = tuple(size) if grow else None
        for step in steps:
            shown = await _show(app, pilot, step, panel, path, focus, grow)
            each(shown, screen_svg(app, f"lineage - step {shown + 1}"))


def render_svg(path: str, step: int, panel: str | None = None, size: tuple[int, int] | None = None,
               salvage: bool = False, cursor=None, theme: str = "dark") -> str:
    """SVG of the app at 0-based `step` (a slide of `panel` if given). `cursor`: the file
    already opened (lineage.playback.session.open_path), so it is not opened a second time."""
    _captions_alone(panel)
    out = []
    grow = size is None                # a size asked for is kept
    size = size or (PANEL_SIZE if panel else SCREEN_SIZE)
    asyncio.run(_export(path, [step], panel, size, salvage, cursor, theme, lambda i, svg: out.append(svg), grow=grow))
    return out[0]


CAPTIONS_ALONE = ("--panel captions: a caption is pictured under its panels; leave out --panel, "
                  "name a panel it is about, or write .txt for its text")


def _captions_alone(panel: str | None) -> None:
    """A picture of the captions panel alone would be a line of text floating in an empty
    screen: a caption is drawn under the panels it is about, and its text is the .txt form."""
    if panel == "captions":
        raise RuntimeError(CAPTIONS_ALONE)


def slide_names(steps: list[int]) -> list[str]:
    """The stem of each slide, numbered in order, for the 0-based steps: 01-step0001, ..."""
    width = max(2, len(str(len(steps))))
    return [f"{n:0{width}d}-step{i + 1:04d}" for n, i in enumerate(steps, 1)]


def slide_text(cursor, i: int, panel: str | None, focus: bool = False) -> str:
    """The text form of what a snapshot or slide shows at 0-based step i: a panel's picture
    carries the caption, so its text does too. `focus`: a slide of the whole screen, which
    shows the panels its caption is about."""
    from .panels import render
    from lineage.playback.session import caption_at
    kinds = slide_kinds(cursor.info, i, panel) if focus else None
    if kinds:
        panel = kinds[0]
    text = render(cursor, i, panel)
    for k in (kinds or ())[1:]:        # the others under it, without the head line again
        text += "\n\n" + render(cursor, i, k).split("\n", 2)[2]
    if panel not in (None, "captions") and about(caption_at(cursor.info.get("captions") or [], i), panel):
        text += "\n" + render(cursor, i, "captions").split("\n", 2)[2]
    return text


def write_slides(path: str, out_dir: Path, cursor, panel: str | None = None, size=None, scale: float = 1.0,
                 theme: str = "dark", salvage: bool = False, force: bool = False) -> list[Path]:
    """One PNG and one .txt per caption, at its slide step, numbered in order: 01-step0008.png, ... Each is
    written whole and never through a link; one already there is replaced only with `force`."""
    from lineage.files import write_new

    _captions_alone(panel)
    steps = slide_steps(cursor.info, cursor.total, panel)
    stems = dict(zip(steps, slide_names(steps)))
    written: list[Path] = []
    pictures: list[tuple[int, str]] = []           # drawn first: the deck's size is its largest slide's

    grow = size is None                # a size asked for is kept
    size = size or (PANEL_SIZE if panel else SCREEN_SIZE)
    asyncio.run(_export(path, steps, panel, size, salvage, cursor, theme, lambda i, svg: pictures.append((i, svg)),
                        focus=True, grow=grow))
    sizes = [svg_size(svg) for _, svg in pictures]
    width, height = max(w for w, _ in sizes), max(h for _, h in sizes)
    for i, svg in pictures:
        png, txt = out_dir / (stems[i] + ".png"), out_dir / (stems[i] + ".txt")
        write_new(png, svg_to_png(on_canvas(svg, width, height), scale, theme), force)
        write_new(txt, slide_text(cursor, i, panel, focus=True), force)
        written.extend([png, txt])
    return written
