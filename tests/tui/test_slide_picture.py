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
