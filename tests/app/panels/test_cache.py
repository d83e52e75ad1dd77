"""The cache panel. Its chart's axis: ticks at even powers of two in the app's binary units
(fmt_bytes: KiB, MiB), equal steps at equal distances, each line on the row its value names,
a key that never wraps mid-entry, and colours that stay readable on a light theme; the same
checked on what the panel shows in the app; and the words that name its fixed bytes."""
import math

import pytest
from rich.style import Style

from tests.app.helpers import SC, opened, panel, run, settle
from lineage.app.app import LineageApp
from lineage.app.panels.cache import COLOURS, NAMES, key_lines, y_label
from lineage.app.widgets.log_chart import Series, chart


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


# -- in the app: the tour at 160 x 50, step 300 ---------------------------------------------
# It read `953.7 MiB / 976.6 KiB / 9.8 KiB / 100 B` (decimal decades in binary units, unevenly
# spaced, other labels on another launch), drew the constant state on the `9.8 KiB` row while
# the text said `state 123.0 KiB`, wrapped its key away from the third swatch, and in the light
# theme keyed its lines in colours the lines did not have.

UNITS = {"B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}


async def _cache_at(size, step, theme=None):
    """The cache panel's plot (rich Text) and legend text at `step` (1-based) of the tour."""
    app = LineageApp(str(SC / "tour.yaml"))
    async with app.run_test(size=size) as pilot:
        if theme:
            app.theme = theme
        await settle(pilot, app, 0)
        app.request(step - 1)
        await settle(pilot, app, step - 1)
        await pilot.pause(0.5)
        p = panel(app, "cache")
        return p.query_one("#plot").shown, str(p.query_one("#legend").shown)


def _ticks_shown(lines) -> list[tuple[int, float]]:
    """(line, log2 bytes) of every y tick label: 'N UNIT ┤'."""
    out = []
    for n, line in enumerate(lines):
        if "┤" in line:
            num, unit = line.split("┤")[0].split()
            out.append((n, math.log2(float(num)) + UNITS[unit]))
    return out


def _cells(plot):
    """(line, column) -> (char, Style) of the plot's text, spans resolved."""
    styles = {}
    for span in plot.spans:
        st = span.style if isinstance(span.style, Style) else Style.parse(span.style)
        for i in range(span.start, span.end):
            styles[i] = styles.get(i, Style()) + st
    out, at = {}, 0
    for n, line in enumerate(plot.plain.split("\n")):
        for c, ch in enumerate(line):
            out[(n, c)] = (ch, styles.get(at + c, Style()))
        at += len(line) + 1
    return out


def test_cache_axis_at_160x50_step_300_is_even_binary_and_true_to_the_state():
    plot, legend = run(_cache_at((160, 50), 300))
    lines = plot.plain.split("\n")
    ticks = _ticks_shown(lines)
    assert len(ticks) >= 2
    assert len({b[0] - a[0] for a, b in zip(ticks, ticks[1:])}) == 1          # equal rows apart
    assert len({a[1] - b[1] for a, b in zip(ticks, ticks[1:])}) == 1          # equal powers apart
    assert all(v == int(v) for _, v in ticks)                                  # exact powers of two
    for _, v in ticks:                                                         # named as fmt_bytes names them
        assert any(f"{2 ** (int(v) - u):g} {name} ┤" in plot.plain for name, u in UNITS.items() if v >= u)
    assert "state 123.0 KiB" in legend
    # the state is the one series drawn on a single row from the first column to the last
    cells = _cells(plot)
    axis = next(line.index("┤") for line in lines if "┤" in line)
    state_rows = []
    for n, line in enumerate(lines):
        if "┤" not in line and "│" not in line[:axis + 1]:
            continue
        row = [cells[(n, c)] for c in range(axis + 1, len(line))]
        colours = {st.color.triplet for ch, st in row if ch in "▀▄█" and st.color}
        if len(row) > 30 and all(ch in "▀▄█" for ch, _ in row[:30]) and len(colours) >= 1:
            state_rows.append(n)
    (l0, v0), (l1, v1) = ticks[0], ticks[1]
    per_line = (v0 - v1) / (l1 - l0)                                           # log2 bytes a line
    readings = [v0 - (n - l0) * per_line for n in state_rows]
    assert any(abs(math.log2(123.0 * 1024) - r) <= per_line / 2 + 1e-9 for r in readings), (state_rows, ticks)


def test_cache_axis_is_the_same_on_another_launch():
    first = run(_cache_at((160, 50), 300))[0].plain
    again = run(_cache_at((160, 50), 300))[0].plain
    assert first == again


def test_cache_key_on_whole_lines_in_the_colours_of_the_lines_light_theme():
    plot, _ = run(_cache_at((160, 50), 300, theme="textual-light"))
    lines = plot.plain.split("\n")
    cells = _cells(plot)
    names = ["latent/KV cache", "as plain MHA KV", "recurrent state (constant)"]
    key = [n for n, line in enumerate(lines) if any(name in line for name in names)]
    assert all(any(name in lines[n] for n in key) for name in names)           # each entry whole, on a line
    swatches = []
    for n in key:
        for name in names:
            at = lines[n].find(" " + name)
            if at >= 2:
                ch, st = cells[(n, at - 1)]
                swatches.append(cells[(n, at - 2)][1].color.triplet)
    drawn = set()
    for (n, c), (ch, st) in cells.items():
        if n not in key and ch in "▀▄█":
            drawn |= {x.triplet for x in (st.color, st.bgcolor) if x is not None}
    assert len(swatches) == 3 and set(swatches) == drawn                        # the key's colours are the lines'
    assert all(sum(rgb) < 3 * 200 for rgb in swatches)                          # none too pale for a light page


# -- its words ------------------------------------------------------------------------------

def test_cache_panel_names_what_the_fixed_bytes_are():
    """Attention with a short conv holds constant conv inputs, not a recurrent state, and has no
    crossover with its cache; a model with no fixed part (GPT-2) still reads 'recurrent state'."""
    from lineage.playback.observe import CacheView
    from lineage.app.panels.cache import CachePanel, CachePanelView, lines
    conv = CacheView(tokens=32, kv=32768, latent=0, state=4608, kv_per_tok=1024.0, latent_per_tok=0.0,
                     kv_equiv_per_tok=0, conv=4608)
    gpt2 = CacheView(tokens=5, kv=100, latent=0, state=0, kv_per_tok=20.0, latent_per_tok=0.0, kv_equiv_per_tok=0)
    kda = CacheView(tokens=5, kv=0, latent=100, state=20992, kv_per_tok=0.0, latent_per_tok=20.0,
                    kv_equiv_per_tok=90.0, conv=4608)
    text = lines(CachePanelView(["soft", "gpt2", "k3"], [conv, gpt2, kda], 0, 1 << 20, None), 120)
    assert "short-conv inputs 4.5 KiB" in text[1] and not any("crossover" in t for t in text[1:3])
    assert any("gpt2:" in t and "recurrent state 0 B" in t for t in text)
    assert any("k3:" in t and "recurrent state" in t for t in text)
    assert CachePanel._names(conv)[2] == "short-conv inputs (constant)"
    assert CachePanel._names(kda)[2] == "recurrent state (constant)"


def test_a_softmax_model_has_no_mha_figure_and_keys_only_its_lines():
    """tiny-softmax has no MLA layer: nothing to compare with plain MHA. The legend printed
    'as plain MHA 0 B' and the key named an 'as plain MHA KV' line the chart did not draw."""
    async def go():
        async with opened("attention_recall", (160, 50), 20) as (pilot, app):
            await pilot.pause(0.5)
            p = panel(app, "cache")
            return p.query_one("#plot").shown, str(p.query_one("#legend").shown), app.current_theme.dark
    plot, legend, dark = run(go())
    assert "as plain MHA" not in legend and "as plain MHA" not in plot.plain
    assert "latent/KV cache" in plot.plain and "short-conv inputs (constant)" in plot.plain
    key = [n for n, line in enumerate(plot.plain.split("\n")) if "latent/KV cache" in line]
    drawn = {x.triplet.hex for (n, c), (ch, st) in _cells(plot).items() if n not in key and ch in "▀▄█"
             for x in (st.color, st.bgcolor) if x is not None}
    assert drawn == {COLOURS[dark][0].lower(), COLOURS[dark][2].lower()}     # the cache and the fixed part, no MHA line


def test_the_key_names_only_the_lines_drawn():
    from lineage.playback.observe import CacheView
    from lineage.app.panels.cache import CachePanel
    gpt2 = CacheView(tokens=5, kv=100, latent=0, state=0, kv_per_tok=20.0, latent_per_tok=0.0, kv_equiv_per_tok=0)
    kda = CacheView(tokens=5, kv=0, latent=100, state=20992, kv_per_tok=0.0, latent_per_tok=20.0,
                    kv_equiv_per_tok=90.0, conv=4608)
    assert CachePanel._drawn(gpt2) == [0] and CachePanel._drawn(kda) == [0, 1, 2]
