"""The one-line colour legend under a map, in the scale its map draws with, and which of the
palette's scales (dark or light) the running app's theme asks for."""
from __future__ import annotations

from rich.style import Style

from .. import palette


def colour_bar(scale: str, vmax: float, width: int = 26, no_color: bool = False, vmin: float = 0.0,
               dark: bool | None = None):
    """A one-line legend: -vmax .. 0 .. +vmax (diverging) or vmin .. vmax (sequential), in the
    scale its map draws with: `dark` names the theme, None the running app's (dark outside one)."""
    from rich.text import Text
    if dark is None:
        dark = app_is_dark()
    n = len(palette.DIVERGING if scale == "diverging" else palette.SEQUENTIAL)
    t = Text()
    lo = f"{-vmax:+.2g}" if scale == "diverging" else f"{vmin:.2g}"
    hi = f"{vmax:+.2g}" if scale == "diverging" else f"{vmax:.2g}"
    t.append(lo + " ")
    for i in range(n):
        if no_color:
            t.append(palette.glyph(i, scale) * 2)
        else:
            t.append("██", Style(color=palette.colour(i, scale, dark)))
    t.append(" " + hi)
    return t


def app_is_dark(app=None) -> bool:
    """Whether an app's theme is dark: a light one draws the maps and panels in the palette's
    light scales (zero near the page, strong values dark), so a light slide has no dark boxes.
    None: the running app's, the one whose widget is drawing (dark where no app runs)."""
    if app is None:
        from textual._context import active_app
        try:
            app = active_app.get()
        except LookupError:
            return True
    return app.current_theme.dark is not False
