"""NaN and inf reaching the panels (a diverging model, a stranger's trace) are drawn as such:
a colour no scale uses, '?' without colour, 'nan' in numbers, and a notice on a panel that
cannot draw its step; never a crash (issue 17)."""
from pathlib import Path

import numpy as np

from lineage.playback.frame import Frame
from lineage.playback.trace import TraceWriter
from lineage.app import palette
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_palette_marks_nan():
    idx = palette.diverging_index(np.array([np.nan, np.inf, -np.inf, 0.0, 1.0]), 1.0)
    assert idx[0] == palette.NAN and idx[1] == len(palette.DIVERGING) - 1 and idx[2] == 0
    assert palette.sequential_index(np.array([np.nan, 0.5]), 0.0, 1.0)[0] == palette.NAN
    assert (palette.diverging_index(np.array([np.nan, 1.0]), np.nan) == [palette.NAN, 6]).all()
    assert palette.colour(palette.NAN, "diverging").name == "#ff00ff" and palette.glyph(palette.NAN, "sequential") == "?"


def test_a_trace_of_nan_renders(tmp_path, capsys):
    from lineage.playback.session import Session
    from lineage.scenario import load
    s = Session(load(ROOT / "lineage" / "scenarios" / "tour.yaml"), device="cpu")
    path = tmp_path / "nan.trace"
    with TraceWriter(path, s.sc.text, s.info) as w:
        for i in range(3):
            f = s.frame(i)
            w.write(Frame(i, f.meta, {k: np.full_like(v, np.nan) if v.dtype.kind == "f" else v
                                      for k, v in f.arrays.items()}))
    assert main(["snapshot", str(path), "--step", "2", "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "nan" in out
    assert main(["snapshot", str(path), "--step", "2", "-o", str(tmp_path / "x.svg")]) == 0
    svg = (tmp_path / "x.svg").read_text()
    assert "ff00ff" in svg.lower() and "cannot&#160;be&#160;drawn" in svg       # SVG text keeps spaces as &#160;


def test_markup_in_a_panel_title_is_text(tmp_path):
    """A panel title that looks like markup (an unclosed tag crashed the SVG export; a link
    tag would become a terminal hyperlink) is shown as the text it is."""
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: hello}\n"
                    'panels: [{kind: state, title: "[bold red]x[/"}, {kind: tokens, title: "[link=x]y"}]\n')
    assert main(["snapshot", str(path), "--step", "2", "-o", str(tmp_path / "x.svg")]) == 0
    svg = (tmp_path / "x.svg").read_text()
    assert "[link=x]y" in svg                  # shown as typed, not turned into a hyperlink
