"""A slide is a picture for a projector: the panel, its title line and its caption, and nothing
of the app or the exporter around it (no window buttons, no key hints, no web font); a deck is
one PNG and one text per caption, a panel's picture takes a scale and a theme."""
from __future__ import annotations

from lineage.cli.main import main


def _svg(tmp_path, *args) -> str:
    out = tmp_path / "s.svg"
    assert main(["snapshot", *args, "-o", str(out)]) == 0
    return out.read_text().replace("&#160;", " ")


def test_a_slide_has_no_window_chrome_and_asks_for_no_font(tmp_path):
    svg = _svg(tmp_path, "fig5_gating", "--step", "17", "--panel", "recall")
    assert "<circle" not in svg                      # the exporter's red/amber/green buttons
    assert "@font-face" not in svg and "https://" not in svg
    assert "Topic B in." in svg and "step 17 / 25" in svg


def test_a_slide_shows_no_keys_and_no_caption_label(tmp_path):
    svg = _svg(tmp_path, "tour", "--step", "1", "--panel", "state")
    assert "[ ] layer" not in svg and "t quantity" not in svg
    assert "Each step feeds one byte." in svg and ">captions<" not in svg.replace(" ", "")


def test_a_still_picture_draws_its_sweep_oldest_to_newest():
    import numpy as np

    from lineage.app.widgets.sweep import Sweep
    sw = Sweep()

    def col(j):
        return np.full(3, float(j))
    live = sw.update("k", 100, col, 24)                   # a span of 20 columns
    assert sw.column_of(100) == 0 and live[0, 0] == 100 and live[0, 19] == 99     # the sweep wraps
    still = sw.update("k", 100, col, 24, ordered=True)
    assert list(still[0]) == list(range(81, 101)) and sw.column_of(100) == 19
    assert sw.blank(100) == [] and sw.step_at(0) == 81 and sw.step_at(19) == 100
    early = sw.update("k", 5, col, 24, ordered=True)      # before a sweep fills: the rest is blank
    assert list(early[0, :6]) == list(range(6)) and sw.blank(5) == list(range(6, 20))
    again = sw.update("k", 100, col, 24)                  # and the app's sweep resumes as it was
    assert sw.column_of(100) == 0 and np.array_equal(again, live)


def test_slides_one_png_and_text_per_caption(tmp_path):
    out = tmp_path / "deck"
    assert main(["slides", "fig5_gating", "-o", str(out), "--scale", "0.5"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["01-step0008.png", "01-step0008.txt", "02-step0009.png", "02-step0009.txt",
                     "03-step0017.png", "03-step0017.txt", "04-step0025.png", "04-step0025.txt"]
    assert "note: Topic A" in (out / "01-step0008.txt").read_text()
    assert all((out / n).read_bytes()[:4] == b"\x89PNG" for n in names if n.endswith(".png"))
    assert main(["slides", "fig5_gating", "-o", str(out)]) == 2              # never over a deck
    assert main(["slides", "fig5_gating", "-o", str(tmp_path / "d2"), "--scale", "0"]) == 2
    assert main(["slides", "fig5_gating", "-o", str(tmp_path / "d3"), "--panel", "nope"]) == 2
    # a panel's slides: the panel's text and the caption, as on the picture
    assert main(["slides", "fig5_gating", "-o", str(tmp_path / "d4"), "--panel", "recall", "--scale", "0.5"]) == 0
    # ... of the captions about it: fig5's last two (the first two are about the state panels)
    assert sorted(p.name for p in (tmp_path / "d4").glob("*.txt")) == ["01-step0017.txt", "02-step0025.txt"]
    text = (tmp_path / "d4" / "01-step0017.txt").read_text()
    assert "recall: every fact" in text and "note: Topic B in." in text and "tokens" not in text


def test_panel_slide_scale_and_theme(tmp_path):
    a, b, c = tmp_path / "a.png", tmp_path / "b.png", tmp_path / "c.png"
    args = ["snapshot", "fig3_two_facts", "--step", "2", "--panel", "state"]
    assert main(args + ["-o", str(a)]) == 0
    assert main(args + ["-o", str(b), "--scale", "2"]) == 0
    assert main(args + ["-o", str(c), "--theme", "light"]) == 0

    def size(p):
        head = p.read_bytes()[16:24]
        return int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")
    (w, h), (w2, h2) = size(a), size(b)
    assert (w2, h2) == (2 * w, 2 * h) and w > h                  # landscape, doubled
    assert a.read_bytes() != c.read_bytes()


def _png_size(path) -> tuple[int, int]:
    import struct
    return struct.unpack(">II", path.read_bytes()[16:24])


def test_a_token_stream_slide_is_a_block_not_a_strip(tmp_path, monkeypatch):
    """two_timescales' first and last slides are its tokens panel alone: at the 160 columns of
    the screen the stream was one line, a 7:1 strip on a projector. Each slide's picture is a
    block; the deck's PNGs are one size, each picture centred on it."""
    import lineage.app.headless as headless
    from lineage.app.headless import ASPECT
    from lineage.app.snapshot import svg_size
    drawn, real = [], headless.svg_to_png

    def seen(svg, scale=1.0, theme="dark"):
        drawn.append(svg_size(svg))                                      # the picture, not its canvas
        return real(svg, scale, theme)
    monkeypatch.setattr(headless, "svg_to_png", seen)
    out = tmp_path / "deck"
    assert main(["slides", "two_timescales", "-o", str(out), "--scale", "0.5"]) == 0
    pngs = {_png_size(p) for p in out.glob("*.png")}
    assert len(drawn) == 4 and len(pngs) == 1                            # one size per deck
    sizes = dict(zip(sorted(p.name for p in out.glob("*.png")), drawn))
    for name, (w, h) in sizes.items():
        assert 1.2 <= w / h <= ASPECT + 0.05, (name, w, h)
    assert sizes["04-step0205.png"][1] > sizes["01-step0002.png"][1]      # 200 tokens fill more lines
    assert sizes["04-step0205.png"][0] >= sizes["01-step0002.png"][0]     # never narrower than a slide before


def test_the_stream_block_breaks_at_spaces_and_ends_on_the_current_token():
    from types import SimpleNamespace as NS

    from lineage.app.panels.tokens import TokensPanelView, block
    text = "the cat sat on the mat. the dog sat on the log. where did the cat sit? "
    toks = tuple(NS(text=c, pos=j, source="input") for j, c in enumerate(text))
    view = TokensPanelView(len(toks) - 1, 100, None, [], 0, toks, [], rows=3)

    def lines(v, width):
        out, line = [], ""
        for j, tok in block(v, width):
            if tok is None:
                out.append(line)
                line = ""
            else:
                line += tok.text
        return out + [line]
    got = lines(view, 30)
    assert got == ["the cat sat on the mat. the ", "dog sat on the log. where did ", "the cat sit? "]
    assert all(len(line) <= 30 for line in got)
    short = lines(view, 16)                # three lines of 16 hold the newest, whole words
    assert short[-1].endswith("sit? ") and len(short) == 3 and "".join(short) in text
    one = TokensPanelView(4, 100, None, [], 0, toks[:5], [], rows=6)
    assert lines(one, 30) == ["the c"]     # a stream shorter than the block starts at its start
    # a checkpoint's tokens: a break before one that starts with a space, never past the width
    bpe = tuple(NS(text=t, pos=j, source="input") for j, t in enumerate([" x", " abcdefghijkl", "mnopqrstu"]))
    got = lines(TokensPanelView(2, 10, None, [], 0, bpe, [], rows=4), 20)
    assert all(len(line) <= 20 for line in got) and "".join(got) == " x abcdefghijklmnopqrstu"
    words = tuple(NS(text=t, pos=j, source="input") for j, t in enumerate([" The", " cat", " sat", " on"]))
    assert lines(TokensPanelView(3, 10, None, [], 0, words, [], rows=4), 12) == [" The cat sat", " on"]


def test_a_picture_of_one_text_panel_is_as_large_as_its_text(tmp_path):
    """`snapshot --panel recall` of fig6 maximised its four-row table in a 100 x 30 frame
    (1219 x 731 pixels, three quarters empty); a size asked for is kept."""
    fitted, asked = tmp_path / "fit.png", tmp_path / "asked.png"
    assert main(["snapshot", "fig6_channel_decay", "--step", "7", "--panel", "recall", "-o", str(fitted)]) == 0
    assert main(["snapshot", "fig6_channel_decay", "--step", "7", "--panel", "recall", "-o", str(asked),
                 "--size", "100", "30"]) == 0
    (w, h), (W, H) = _png_size(fitted), _png_size(asked)
    assert (W, H) == (1219, 731) and w < W / 2 and h < H / 1.5
