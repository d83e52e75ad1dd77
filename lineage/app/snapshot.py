"""Snapshots of a screen: the app's own `s` key, and what the headless exports (lineage/app/headless.py)
share with it: a slide's head line, the caption steps, PNG through resvg (a Rust SVG renderer
shipped as a wheel, so no system Cairo is needed) and fresh file names. Imports no app.
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from lineage.files import name_max

THEMES = {"dark": ("textual-dark", "#0c0c0c"), "light": ("textual-light", "#ffffff")}


def step_line(cursor, i: int) -> str:
    """The slide's head: title, step and what this step feeds (a token, or a toy memory's event)."""
    return "  ·  ".join(head_parts(cursor, i))


def head_parts(cursor, i: int) -> list[str]:
    """The title, "step N / M" and what the step feeds (a token, or a toy memory's event)."""
    f = cursor.frame(i)
    tok = f.token()
    now = f"token {tok.text!r}" if tok is not None else (f.event() or "")
    return [cursor.info["title"], f"step {i + 1} / {cursor.total}"] + ([now] if now else [])


def head_lines(cursor, i: int, width: int) -> list[str]:
    """The head in lines of at most `width` cells: on one line where it fits, else the title
    (wrapped) over the step and token, so that the step is never cut off."""
    import textwrap

    from rich.cells import cell_len
    parts = head_parts(cursor, i)
    line = "  ·  ".join(parts)
    if cell_len(line) <= width:
        return [line]
    return textwrap.wrap(parts[0], max(10, width)) + ["  ·  ".join(parts[1:])]


def caption_steps(info: dict, total: int) -> list[int]:
    """The 0-based steps where a caption starts, in order (the first step if none does)."""
    steps = sorted({c["at"] for c in info.get("captions", []) if c["at"] < total})
    return steps or [0]


def caption_panels(caption: dict | None) -> tuple[str, ...]:
    """The panel kinds a caption (as sessions carry it) names, in its order; a trace
    recorded before captions named several holds only `panel`."""
    if caption is None:
        return ()
    return tuple(caption.get("panels") or ([caption["panel"]] if caption.get("panel") else []))


def about(caption: dict | None, panel: str | None) -> bool:
    """Whether a slide of `panel` (None: the whole screen) shows this caption: one naming other
    kinds of panel is left off a panel's slide (a slide of the captions shows them all)."""
    named = caption_panels(caption)
    return caption is not None and (panel in (None, "captions") or not named or panel in named)


def slide_step(captions: list[dict], c: dict, total: int) -> int:
    """The 0-based step a slide of caption `c` (one of `captions`) shows: the step it names
    (`shot`), else its last one (`until`, or the step before the next caption starts, or the
    end), where what it says has happened."""
    if c.get("shot") is not None:
        return c["shot"]
    later = [d["at"] for d in captions if d["at"] > c["at"]]
    return min(x for x in (c.get("until"), min(later) - 1 if later else None, total - 1) if x is not None)


def slide_steps(info: dict, total: int, panel: str | None = None) -> list[int]:
    """The 0-based step of each caption's slide (slide_step), in order. A panel's slides are
    those of the captions it shows (`about`). The last step if there is none."""
    caps = [c for c in info.get("captions", []) if c["at"] < total]
    return sorted({slide_step(caps, c, total) for c in caps if about(c, panel)}) or [total - 1]


# A picture of the screen and nothing else: no window buttons or title bar, no web font (a
# stack of system monospace fonts whose block glyphs fill their cells, then the viewer's own
# monospace; PNGs name an installed one below). Rich fills the fields.
SVG_FORMAT = """<svg class="rich-terminal" viewBox="0 0 {terminal_width} {terminal_height}" \
xmlns="http://www.w3.org/2000/svg">
<style>
.{unique_id}-matrix {{ font-family: "DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", "Noto Sans Mono", monospace; font-size: {char_height}px; line-height: {line_height}px;
  font-variant-east-asian: full-width; }}
{styles}
</style>
<defs>
<clipPath id="{unique_id}-clip-terminal"><rect x="0" y="0" width="{terminal_width}" height="{terminal_height}"/></clipPath>
{lines}
</defs>
<g clip-path="url(#{unique_id}-clip-terminal)">
{backgrounds}
<g class="{unique_id}-matrix">
{matrix}
</g>
</g>
</svg>
"""


def screen_svg(app, title: str) -> str:
    """The app's screen as an SVG in SVG_FORMAT: what `App.export_screenshot` records (the
    compositor's full frame on a recording console), written without its window chrome."""
    import io

    from rich.console import Console
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_svg(title=title, code_format=SVG_FORMAT)


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


VIEWBOX = re.compile(r'class="rich-terminal" viewBox="0 0 ([\d.]+) ([\d.]+)"')


def svg_size(svg: str) -> tuple[float, float]:
    """(width, height) of a screen's SVG (screen_svg), in the units its PNG is drawn in; of
    the picture itself where it is on a canvas (on_canvas)."""
    m = VIEWBOX.search(svg)
    if m is None:
        raise ValueError("not a screen's SVG: no viewBox on its rich-terminal root")
    return float(m[1]), float(m[2])


def on_canvas(svg: str, width: float, height: float) -> str:
    """The picture centred on a canvas of width x height (at least its own size; svg_to_png
    fills it with the theme's background): the slides of one deck are one size, so they drop
    into a presentation alike, each at the same scale of text."""
    w, h = svg_size(svg)
    if (w, h) == (width, height):
        return svg
    x, y = (width - w) / 2, (height - h) / 2
    inner = svg.replace('<svg class="rich-terminal"',
                        f'<svg x="{x}" y="{y}" width="{w}" height="{h}" class="rich-terminal"', 1)
    return f'<svg viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">\n{inner}\n</svg>\n'


def free_stem(directory: Path, stem: str, suffixes=(".svg", ".png", ".txt")) -> str:
    """stem, or stem-2, stem-3, ... : the first none of whose files (stem + suffix) exist in
    `directory`, a link (even one to nothing) counting as a file. Names are joined, never made
    with `with_suffix`, which would cut a dotted stem (`recall.v2`) at its dot."""
    n, name = 1, stem
    while any(os.path.lexists(directory / (name + s)) for s in suffixes):
        n += 1
        name = f"{stem}-{n}"
    return name


def save_from_app(screen) -> None:
    """The `s` key: SVG, PNG and text of the screen (or of the maximised panel, as a slide)
    under a name no earlier snapshot has (each file created exclusively, never through a link:
    a name taken meanwhile moves on to the next); the PNG is made in a thread, then the app
    says where."""
    from lineage.files import write_new

    from .panels.base import Panel
    from .widgets.legend import app_is_dark
    app = screen.app
    cursor, i = screen.player.cursor, screen.player.index
    if cursor is None:
        return
    directory = Path(app.snapshot_dir)
    svg = screen_svg(app, f"lineage - step {i + 1}")
    panels = [screen.maximized] if isinstance(screen.maximized, Panel) else list(screen.query(Panel))
    text = step_line(cursor, i) + "\n\n" + "\n\n".join(p.text(cursor, i) for p in panels) + "\n"
    base = f"lineage-{Path(screen.path).stem}-step{i + 1}"
    limit = name_max(directory) - len("-999.svg")       # a long scenario name is shortened, not refused
    if len(os.fsencode(base)) > limit:
        base = os.fsencode(base)[:limit].decode("utf-8", "ignore")
    try:
        for _ in range(1000):
            stem = free_stem(directory, base)
            try:
                write_new(directory / (stem + ".svg"), svg)
                break
            except FileExistsError:          # made meanwhile, by another snapshot: the next name
                continue
        else:
            raise FileExistsError(0, "no free snapshot name", str(directory))
        write_new(directory / (stem + ".txt"), text)
    except OSError as e:
        app.notify(f"no snapshot: {e.filename or directory}: {e.strerror or e}", title="snapshot",
                   severity="error", timeout=8)
        return
    theme = "dark" if app_is_dark(app) else "light"
    where = directory / stem

    def png() -> None:
        try:
            write_new(directory / (stem + ".png"), svg_to_png(svg, 1.0, theme))
            said = f"saved {where}.svg, .png and .txt"
        except Exception as e:  # noqa: BLE001  no PNG (resvg missing or failing, a full disk): the SVG and text stand
            said = f"saved {where}.svg and .txt (no PNG: {str(e).splitlines()[0] if str(e) else type(e).__name__})"
        app.call_from_thread(app.notify, said, title="snapshot", timeout=6)

    app.run_worker(png, thread=True, group="snapshot-png")
