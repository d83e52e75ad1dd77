"""What the figure panels state beside a caption is true (issue 28): figure 8's verdict matches
the share it prints, and active_params' columns are rounded down as its footnote says."""
import re
from pathlib import Path

from lineage.figures import SPARSE_BELOW
from lineage.playback.session import Session
from lineage.scenario import load
from tui.panels import render

SC = Path(__file__).resolve().parents[2] / "scenarios"


def test_fig8_verdict_matches_the_share_it_prints():
    s = Session(load(SC / "fig8_moe_sparsity.yaml"))
    for i in range(s.total):
        text = render(s, i, panel="figure")
        share = float(re.search(r", (\d+\.\d)%\): ", text).group(1)) / 100
        assert "most weights" not in text or share > 0.5, text
        assert (f"sparse: under {SPARSE_BELOW:.0%}" in text) == (share < SPARSE_BELOW), text


def test_active_params_columns_are_rounded_down():
    """Each "total/active" ratio printed is the true ratio rounded down: whole models from 10,
    hundredths below (0.037 printed 0.04 beside "rounded down" before)."""
    s = Session(load(SC / "active_params.yaml"))
    i = s.total - 1
    row, text = s.frame(i).figure(), render(s, i, panel="figure")
    assert "rounded down" in text
    for r in row["rows"]:
        line = next(ln for ln in text.splitlines() if ln[2:].startswith(r["preset"] + " "))
        pairs = re.findall(r"([\d,]+(?:\.\d+)?)/([\d,]+(?:\.\d+)?)", line)
        for (tot, act), small in zip(pairs, ("gpt2-small", "gpt2-xl")):
            for shown, key in ((tot, "total"), (act, "active")):
                x, y = r["vs"][small][key], float(shown.replace(",", ""))
                unit = 1 if x >= 10 else 0.01
                assert y <= x < y + unit, (r["preset"], small, key, x, shown)
