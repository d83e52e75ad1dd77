"""Exports: headless snapshots, slides, and the app's own `s` key.

`lineage snapshot SCENARIO|TRACE --step N -o OUT.svg|.png|.txt` and `lineage slides` run the app
off-screen, go to a step and export the screen (text comes from the panels' text forms,
tui/panels/, directly). With a panel named, the export is a slide: that panel alone, filling
the picture, under a line with the title, the step and the current token, over the caption;
no footer, no status line, no hatching. PNG goes through resvg (a Rust SVG renderer shipped
as a wheel), so no system Cairo is needed.
"""
from __future__ import annotations

import asyncio
from functools import lru_cache
from pathlib import Path

from textual.worker import WorkerCancelled

THEMES = {"dark": ("textual-dark", "#0c0c0c"), "light": ("textual-light", "#ffffff")}
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


def step_line(cursor, i: int) -> str:
    """The slide's head: title, step and what this step feeds (a token, or a toy memory's event)."""
    f = cursor.frame(i)
    tok = f.token()
    now = f"token {tok.text!r}" if tok is not None else (f.event() or "")
    return f"{cursor.info['title']}  ·  step {i + 1} / {cursor.total}" + (f"  ·  {now}" if now else "")


def _slide_mode(app, panel: str | None) -> None:
    """Hide the keys and the status line; with a panel, maximise it under a head line."""
    from textual.widgets import Static

    from .panels.base import Panel
    screen = app.screen
    screen.add_class("-slide")
    screen.set_focus(None)             # no heatmap cursor or focus shading on a slide
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
        app.screen.query_one("#slidehead").update(step_line(app.cursor, target))
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
            each(shown, app.export_screenshot(title=f"lineage - step {shown + 1}"))


def render_svg(path: str, step: int, panel: str | None = None, size: tuple[int, int] | None = None,
               salvage: bool = False, cursor=None, theme: str = "dark") -> str:
    """SVG of the app at 0-based `step` (a slide of `panel` if given). `cursor`: the file
    already opened (lineage.playback.session.open_path), so it is not opened a second time."""
    out = []
    size = size or (PANEL_SIZE if panel else SCREEN_SIZE)
    asyncio.run(_export(path, [step], panel, size, salvage, cursor, theme, lambda i, svg: out.append(svg)))
    return out[0]


def caption_steps(info: dict, total: int) -> list[int]:
    """The 0-based steps where a caption starts, in order (the first step if none does)."""
    steps = sorted({c["at"] for c in info.get("captions", []) if c["at"] < total})
    return steps or [0]


def write_slides(path: str, out_dir: Path, cursor, panel: str | None = None, size=None, scale: float = 1.0,
                 theme: str = "dark", salvage: bool = False) -> list[Path]:
    """One PNG and one .txt per caption step, numbered in order: 01-step0001.png, ..."""
    from .panels import render
    steps = caption_steps(cursor.info, cursor.total)
    width = max(2, len(str(len(steps))))
    written: list[Path] = []

    def each(i: int, svg: str) -> None:
        n = len(written) // 2 + 1
        stem = out_dir / f"{n:0{width}d}-step{i + 1:04d}"
        png, txt = stem.with_suffix(".png"), stem.with_suffix(".txt")
        png.write_bytes(svg_to_png(svg, scale, theme))
        text = render(cursor, i, panel)
        if panel not in (None, "captions"):          # a panel's slide shows the caption: so does its text
            text += "\n" + render(cursor, i, "captions").split("\n", 2)[2]
        txt.write_text(text, encoding="utf-8")
        written.extend([png, txt])

    size = size or (PANEL_SIZE if panel else SCREEN_SIZE)
    asyncio.run(_export(path, steps, panel, size, salvage, cursor, theme, each))
    return written


# monospace fonts a system may have, by file name stem, and their family names: resvg draws no
# text at all in a family it cannot find, so the PNG names one that is installed
MONO_FONTS = [("DejaVuSansMono", "DejaVu Sans Mono"), ("LiberationMono", "Liberation Mono"),
              ("NotoSansMono", "Noto Sans Mono"), ("UbuntuMono", "Ubuntu Mono"), ("FiraCode", "Fira Code"),
              ("FiraMono", "Fira Mono"), ("SourceCodePro", "Source Code Pro"), ("Menlo", "Menlo"),
              ("consola", "Consolas"), ("cour", "Courier New")]
FONT_DIRS = ["/usr/share/fonts", "/usr/local/share/fonts", "~/.local/share/fonts", "~/.fonts",
             "/System/Library/Fonts", "/Library/Fonts", "~/Library/Fonts", "C:/Windows/Fonts"]


@lru_cache(maxsize=1)
def mono_family() -> str | None:
    """The first monospace family of MONO_FONTS installed here (None: leave it to resvg)."""
    stems = set()
    for d in FONT_DIRS:
        root = Path(d).expanduser()
        if root.is_dir():
            stems.update(f.stem.split("-")[0] for f in root.rglob("*") if f.suffix.lower() in (".ttf", ".otf", ".ttc"))
    return next((family for stem, family in MONO_FONTS if stem in stems), None)


def svg_to_png(svg: str, scale: float = 1.0, theme: str = "dark") -> bytes:
    import resvg_py
    return resvg_py.svg_to_bytes(svg_string=svg, monospace_family=mono_family(),
                                 background=THEMES[theme][1], zoom=scale)


def free_stem(directory: Path, stem: str, suffixes=(".svg", ".png", ".txt")) -> Path:
    """directory/stem, or stem-2, stem-3, ... : the first name none of whose files exist."""
    n, name = 1, stem
    while any((directory / (name + s)).exists() for s in suffixes):
        n += 1
        name = f"{stem}-{n}"
    return directory / name


def save_from_app(screen) -> None:
    """The `s` key: SVG, PNG and text of the screen (or of the maximised panel, as a slide)
    under a name no earlier snapshot has; the PNG is made in a thread, then the app says where."""
    from .panels.base import Panel
    app = screen.app
    cursor, i = screen.player.cursor, screen.player.index
    if cursor is None:
        return
    stem = free_stem(app.snapshot_dir, f"lineage-{Path(screen.path).stem}-step{i + 1}")
    svg = app.export_screenshot(title=f"lineage - step {i + 1}")
    stem.with_suffix(".svg").write_text(svg, encoding="utf-8")
    panels = [screen.maximized] if isinstance(screen.maximized, Panel) else list(screen.query(Panel))
    text = step_line(cursor, i) + "\n\n" + "\n\n".join(p.text(cursor, i) for p in panels) + "\n"
    stem.with_suffix(".txt").write_text(text, encoding="utf-8")
    theme = "light" if app.current_theme.dark is False else "dark"

    def png() -> None:
        try:
            stem.with_suffix(".png").write_bytes(svg_to_png(svg, 1.0, theme))
            where = f"saved {stem}.svg, .png and .txt"
        except Exception as e:  # noqa: BLE001  no PNG (resvg missing or failing): the SVG and text stand
            where = f"saved {stem}.svg and .txt (no PNG: {str(e).splitlines()[0] if str(e) else type(e).__name__})"
        app.call_from_thread(app.notify, where, title="snapshot", timeout=6)

    app.run_worker(png, thread=True, group="snapshot-png")
