"""Issue 28, the cache chart in the app as a user meets it: the tour at 160 x 50, step 300.
It read `953.7 MiB / 976.6 KiB / 9.8 KiB / 100 B` (decimal decades in binary units, unevenly
spaced, other labels on another launch), drew the constant state on the `9.8 KiB` row while
the text said `state 123.0 KiB`, wrapped its key away from the third swatch, and in the light
theme keyed its lines in colours the lines did not have. Checked on what the panel shows."""
import math

from rich.style import Style

from tests.tui.test_app import SC, run, settle
from tests.tui.test_classroom import panel
from tui.app import LineageApp

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


def _ticks(lines) -> list[tuple[int, float]]:
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
    ticks = _ticks(lines)
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
