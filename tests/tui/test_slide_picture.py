"""A slide is a picture for a projector: the panel, its title line and its caption, and nothing
of the app or the exporter around it (no window buttons, no key hints, no web font)."""
from __future__ import annotations

from tui.cli import main


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

    from tui.widgets.sweep import Sweep
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
