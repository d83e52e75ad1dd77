"""Issue 28, the cache chart's axis: ticks at even powers of two in the app's binary units
(fmt_bytes: KiB, MiB), equal steps at equal distances, each line on the row its value names,
a key that never wraps mid-entry, and colours that stay readable on a light theme."""
import math

import pytest
from rich.style import Style

from tests.tui.test_app import SC, run, settle
from tests.tui.test_classroom import panel
from tui.app import LineageApp
from tui.panels.cache import COLOURS, NAMES, key_lines, y_label
from tui.widgets.log_chart import Series, chart


def _draw(width=70, height=16, state=126_976, rate=480, ctx=1 << 20):
    series = [Series("cache", "#ff8700", "c", lambda x: rate * x), Series("state", "#87d700", "s", lambda x: state)]
    return chart(series, ctx, [13], width, height, y_label, ["tokens"], no_color=True)


def _ticks(text) -> list[tuple[int, float]]:
    """(line, log2 bytes) of every y tick label."""
    units = {"B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}
    out = []
    for n, line in enumerate(text.plain.split("\n")):
        if "┤" in line:
            num, unit = line.split("┤")[0].split()
            out.append((n, math.log2(float(num)) + units[unit]))
    return out


@pytest.mark.parametrize("state, rate, height", [(126_976, 480, 16), (3 << 20, 7, 14), (5000, 1 << 16, 30), (126_976, 480, 9)])
def test_cache_ticks_are_even_powers_of_two_evenly_spaced(state, rate, height):
    text, ax = _draw(height=height, state=state, rate=rate)
    ticks = _ticks(text)
    assert len(ticks) >= (3 if height > 12 else 2)
    gaps = {b[0] - a[0] for a, b in zip(ticks, ticks[1:])}
    steps = {a[1] - b[1] for a, b in zip(ticks, ticks[1:])}
    assert len(gaps) == 1 and len(steps) == 1                 # equal values apart, equal rows apart
    lo, hi = math.log2(min(state, rate)), math.log2(max(state, rate << 20))
    assert ticks[-1][0] - (lo - ticks[-1][1]) / (ticks[0][1] - ticks[-1][1]) * (ticks[-1][0] - ticks[0][0]) < \
        len(text.plain.split("\n")) - 3                         # the smallest value is on the plot
    assert all(v == int(v) and int(v) % ax.step == 0 for _, v in ticks)
    assert "KB" not in text.plain and "MB" not in text.plain and "1000 B" not in text.plain


@pytest.mark.parametrize("state", [126_976, 100_000, 1 << 17, 3 << 20, 40_000])
def test_the_state_line_is_on_the_row_its_value_names(state):
    """Read the row back through the tick labels: the line's value must lie within half a row
    (a half block) of what the axis says that row is."""
    text, ax = _draw(state=state)
    lines = text.plain.split("\n")
    ticks = _ticks(text)
    (l0, v0), (l1, v1) = ticks[0], ticks[1]
    per_line = (v0 - v1) / (l1 - l0)                           # log2 bytes a line, downwards
    axis = next(line.index("┤") for line in lines if "┤" in line)    # the plot's cells start after it
    drawn = [n for n in range(ax.rows) if "s" in lines[n][axis + 1:]]
    assert len(drawn) == 1
    at = v0 - (drawn[0] - l0) * per_line                       # the row's centre, as the axis reads
    assert abs(math.log2(state) - at) <= per_line / 2 + 1e-9


def test_cache_tick_labels_use_the_byte_formatter_units():
    from lineage.arithmetic import fmt_bytes
    for e in range(0, 41):
        assert y_label(e).split()[1] == fmt_bytes(2 ** e).split()[1]
    assert y_label(10) == "1 KiB" and y_label(25) == "32 MiB" and y_label(3) == "8 B"


def test_cache_key_never_splits_an_entry():
    names = NAMES[:2] + ["recurrent state (constant)"]
    for width in (30, 44, 48, 60, 76, 80, 120):
        for line in key_lines(names, width):
            assert sum(len(names[k]) + 6 for k in line) - 1 <= width or len(line) == 1
        assert sorted(k for line in key_lines(names, width) for k in line) == [0, 1, 2]


def _contrast(a: str, b: str) -> float:
    def lum(h):
        c = [int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        c = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_cache_colours_stay_readable_on_dark_and_light_themes():
    """Each series' colour against the background of every built-in theme of its kind (the
    theme picker offers them): at least 3:1, the WCAG figure for graphics."""
    from textual.theme import BUILTIN_THEMES
    for theme in BUILTIN_THEMES.values():
        bg = theme.background or ("#121212" if theme.dark else "#efefef")
        if not bg.startswith("#"):                # the terminal's own (textual-ansi): unknown here
            continue
        for colour in COLOURS[theme.dark]:
            assert _contrast(colour, bg) >= 3.0, (theme.name, colour, bg)


def test_cache_chart_and_key_in_the_app_at_80_columns_light():
    async def go():
        app = LineageApp(str(SC / "tour.yaml"))
        async with app.run_test(size=(80, 24)) as pilot:
            app.theme = "textual-light"
            await settle(pilot, app, 0)
            app.request(12)
            await settle(pilot, app, 12)
            cache = panel(app, "cache")
            plot = cache.query_one("#plot").shown
            text = plot.plain
            assert "1 MiB" in text and "9.8 KiB" not in text and "1,000K" not in text
            for name in ("latent/KV cache", "as plain MHA KV", "recurrent state (constant)"):
                assert any(name in line for line in text.split("\n"))      # on one line, whole
            styles = [s.style if isinstance(s.style, Style) else Style.parse(s.style) for s in plot.spans if s.style]
            colours = {st.color.get_truecolor().hex for st in styles if st.color is not None}
            assert set(c.lower() for c in COLOURS[False]) <= colours       # the key's and the lines' colours
            legend = str(cache.query_one("#legend").shown)
            assert "per H200 (131.3 GiB)" in legend and " GB" not in legend   # one kind of unit: binary
    run(go())
