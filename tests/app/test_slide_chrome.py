"""Exports of the whole screen are pictures, not screenshots of the app: no window title or
transport, titles whole and in the text colour, the step never cut from the head, and a deck
of the whole screen shows the panels each caption is about."""
from __future__ import annotations

import html
import re

import pytest

import lineage.app.headless
from lineage.app.snapshot import svg_size
from lineage.cli.main import main


def _svg(tmp_path, *args) -> str:
    out = tmp_path / "s.svg"
    assert main(["snapshot", *args, "-o", str(out)]) == 0
    return _read(out)


def _read(path) -> str:
    return html.unescape(path.read_text()).replace("\xa0", " ")


def _fills(svg: str) -> dict[str, str]:
    """Each text run of the SVG and the colour it is drawn in."""
    styles = dict(re.findall(r"\.(\S+-r\d+) \{([^}]*)\}", svg))
    runs = re.findall(r'<text class="([^"]+)"[^>]*>([^<]*)<', svg)
    return {text.strip(): re.search(r"fill: (#[0-9a-f]+)", styles.get(c, "fill: #000000")).group(1)
            for c, text in runs if text.strip()}


def test_a_snapshot_of_the_screen_has_no_app_chrome(tmp_path):
    svg = _svg(tmp_path, "fig5_gating", "--step", "9")
    assert "fig5_gating.yaml" not in svg          # the app header's sub-title
    assert "paused" not in svg and "1/s" not in svg     # the transport
    assert "step 9 / 25" in svg and "separator (g = -5)" in svg
    assert "…" not in svg                         # no title cut
    # the long model name that a title cannot hold is named whole, in a legend, by its number
    assert "model 2: gated delta rule (alpha = e^-5 at the separator)" in svg
    assert "state · model 2 · L0 gated_delta · head 0/1 · S" in svg


def test_panel_titles_are_drawn_in_the_text_colour(tmp_path):
    fills = _fills(_svg(tmp_path, "fig5_gating", "--step", "9"))
    text = fills["Figure 5: gating clears the desk  ·  step 9 / 25  ·  separator (g = -5)"]
    assert fills["recall"] == fills["tokens"] == text     # not the border's dim teal


def test_a_light_slide_has_a_dark_caption(tmp_path):
    fills = _fills(_svg(tmp_path, "fig5_gating", "--step", "17", "--panel", "recall", "--theme", "light"))
    caption = next(c for t, c in fills.items() if t.startswith("Topic B in."))
    r, g, b = (int(caption[i:i + 2], 16) for i in (1, 3, 5))
    assert 0.2126 * r + 0.7152 * g + 0.0722 * b < 80, caption     # dark on the light page


def test_a_long_title_never_cuts_the_step_from_the_head(tmp_path):
    svg = _svg(tmp_path, "lineage_compare", "--step", "60", "--panel", "state")
    assert "step 60 / 64" in svg and "Mamba-2 (trained)" in svg


@pytest.fixture
def deck(tmp_path, monkeypatch):
    """`lineage slides` with each PNG written as its SVG, so the test can read it."""
    monkeypatch.setattr(lineage.app.headless, "svg_to_png", lambda svg, scale=1.0, theme="dark": svg.encode())
    return tmp_path / "deck"


def test_a_deck_of_the_whole_screen_shows_each_captions_panels(deck):
    assert main(["slides", "fig5_gating", "-o", str(deck)]) == 0
    slides = {p.stem: _read(p) for p in deck.glob("*.png")}
    assert sorted(slides) == ["01-step0008", "02-step0009", "03-step0017", "04-step0025"]
    first = slides["01-step0008"]                   # "the state is full": the two state panels
    assert "delta rule (alpha = 1) · L0 delta" in first and "L0 gated_delta" in first
    assert "reads, error" not in first and "write k1 -> v8" in first and "the state is full" in first
    assert "paused" not in first and "fig5_gating.yaml" not in first
    recall = slides["03-step0017"]                  # "Topic B in": the recall panel
    assert "reads, error" in recall and "key channel" not in recall and "Topic B in." in recall
    text = (deck / "01-step0008.txt").read_text()
    assert "the state is full" in text and "reads, error" not in text
    # one size per deck: the recall panel's slide is smaller than the screen's, and is centred
    # on a canvas of the largest slide's size (the PNG's size is its root viewBox)
    assert len({(_width(svg), _height(svg)) for svg in slides.values()}) == 1
    assert _width(recall) > float(re.findall(r'viewBox="0 0 ([\d.]+) ', recall)[1])


def _width(svg: str) -> float:
    return float(re.search(r'viewBox="0 0 ([\d.]+) ', svg).group(1))


def test_a_crowded_picture_grows_until_every_title_and_panel_fits(tmp_path):
    # lineage_compare: seven panels; at 160x50 the decay title was cut and the tokens panel
    # scrolled its last models out of sight
    svg = _svg(tmp_path, "lineage_compare", "--step", "64")
    assert "…" not in svg and "decay · " in svg and " · L0 head 0 · " in svg
    assert "Mamba-2:" in svg and "KDA:" in svg                # every model's guesses in the tokens panel
    asked = _svg(tmp_path, "lineage_compare", "--step", "64", "--size", "160", "50", "--force")
    assert _width(asked) < _width(svg)                         # a size asked for is kept


def _height(svg: str) -> float:
    return float(re.search(r'viewBox="0 0 [\d.]+ ([\d.]+)"', svg).group(1))


def test_a_slide_of_text_is_as_tall_as_its_text(deck):
    # fig3_dials: one figure table of 16 lines; at 160x50 it sat on top of an empty box
    assert main(["slides", "fig3_dials", "-o", str(deck)]) == 0
    for png in sorted(deck.glob("*.png")):
        svg = _read(png)
        assert _height(svg) < 0.6 * 1219, png.name        # 1219: the default picture's height
        assert "needs at least" not in svg and " c  beta  old err  new err" in svg
    assert "> 0.70  1.00     0.49" in _read(deck / "02-step0005.png")


def test_a_slide_of_a_small_table_is_as_wide_as_the_table(deck):
    # fig6's recall slide: a table of 31 columns and 6 rows in a frame of 160 x 20 cells, a
    # strip with the table in its corner once projected
    assert main(["slides", "fig6_channel_decay", "-o", str(deck)]) == 0
    svg = _read(deck / "02-step0007.png")
    w, h = svg_size(svg)                                     # the picture, centred on the deck's canvas
    assert w < 0.3 * 1951 and h < 0.35 * 1219                # the default picture's size
    assert "0.00 0.00 0.00 0.25" in svg and "0.75" in svg and "read k2" in svg     # k3, its row whole
    assert "facts on fast" in svg and "scroll" not in svg and "needs at least" not in svg


def test_a_deck_of_tables_keeps_its_width_and_never_cuts_its_caption(deck):
    # recall_overload: the last caption is the longest; as narrow as the first table, its bar
    # was too short for it ("lines 1-4 of 5")
    assert main(["slides", "recall_overload", "-o", str(deck)]) == 0
    slides = [_read(p) for p in sorted(deck.glob("*.png"))]
    widths = [svg_size(svg)[0] for svg in slides]               # each table's own, on the deck's canvas
    assert widths == sorted(widths) and widths[0] < 0.5 * 1951
    assert all("scroll" not in svg and "…" not in svg for svg in slides)
    assert "favours recent" in slides[-1]


def test_a_panels_slide_shows_every_panel_of_its_kind(tmp_path):
    # fig5 step 9: the separator clears the gated memory; its state panel is the second one
    svg = _svg(tmp_path, "fig5_gating", "--step", "9", "--panel", "state")
    assert "L0 delta · head 0/1" in svg and "L0 gated_delta · head 0/1" in svg
    assert "norm 2.347" in svg and "norm 0.016" in svg           # the full memory and the cleared one
    assert "reads, error" not in svg and "The separator:" in svg


def test_an_svg_names_system_monospace_fonts_and_no_web_font(tmp_path):
    svg = _svg(tmp_path, "fig5_gating", "--step", "17", "--panel", "recall")
    family = re.search(r"font-family: ([^;]+);", svg).group(1)
    assert family.startswith('"DejaVu Sans Mono", Menlo, Consolas') and family.endswith("monospace")
    assert "@font-face" not in svg and "url(http" not in svg and "Fira Code" not in svg


def test_a_picture_of_the_captions_alone_is_refused_its_text_is_not(tmp_path, capsys):
    """--panel captions: a caption alone would float in an empty picture; it is pictured under
    its panels, so the picture is refused in one line, exit 2, and nothing is written; its
    text form is the caption's text."""
    out = tmp_path / "s.svg"
    assert main(["snapshot", "tour", "--step", "2", "--panel", "captions", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--panel captions" in err[0] and not out.exists()
    txt = tmp_path / "s.txt"
    assert main(["snapshot", "tour", "--step", "2", "--panel", "captions", "-o", str(txt)]) == 0
    assert "Each step feeds one byte." in txt.read_text()


def test_a_deck_of_the_captions_alone_is_refused_before_its_folder_is_made(tmp_path, capsys):
    deck = tmp_path / "deck"
    assert main(["slides", "tour", "--panel", "captions", "-o", str(deck)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--panel captions" in err[0] and not deck.exists()


def test_a_slide_reads_no_cursor(tmp_path):
    """The legends under the maps read the keyboard cursor's or the mouse's cell in the app; an
    exported picture has no cursor, so its readout would name a cell nobody chose."""
    svg = _svg(tmp_path, "tour", "--step", "25")
    assert "k3-mini" in svg and "alpha per channel" in svg and "the router" in svg    # the maps and legends
    assert "cursor key" not in svg and "cursor expert" not in svg and "cursor channel" not in svg
