"""One definition of "holding" and "clearing" (lineage.retention) for the decay panel, `eval`
and the captions: a caption's threshold is the panel's, and what a caption counts at a step
(both heads included) is on the decay panel there (issues 27 and 28)."""
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from lineage.playback.session import Session
from lineage.retention import CLEARING, CLEARS, HOLDING, HOLDS, tally
from lineage.scenario import load
from lineage.training.evaluate import gate_stats
from lineage.app.panels import render
from lineage.app.panels.common import History, HeadSweep
from lineage.app.panels.decay import lines

SC = Path(__file__).resolve().parents[2] / "lineage" / "scenarios"
THRESHOLD = re.compile(r"alpha\s*([<>])\s*(\d*\.\d+|\d+)")
# the scenarios whose captions count channels that hold or clear
COUNTED = ["forgetting", "forgetting_gone", "two_timescales", "lineage_compare", "tour", "tour_random"]


def test_eval_and_the_panel_count_alike():
    rng = np.random.default_rng(0)
    alpha = np.concatenate([rng.uniform(0, 1, (2, 29)), np.full((2, 3), 0.93)], axis=1)    # 0.93: not held
    t = tally(alpha)
    assert t.holding == tuple((alpha > HOLDING).sum(1)) and t.clearing == tuple((alpha < CLEARING).sum(1))
    sep = torch.tensor([[True]])
    stats = gate_stats([torch.tensor(alpha, dtype=torch.float64)[None, None]], sep)    # (B, T, H, K)
    assert stats["hold_sep"] == pytest.approx(sum(t.holding) / t.channels)
    assert stats["clear_sep"] == pytest.approx(sum(t.clearing) / t.channels)
    view = HeadSweep("m", 0, 0, (0,), 1, 2, 0, History(0, (alpha[1],)), t)
    now = lines(view, 100)[-1]
    assert f"head 1: {t.holding[1]}/32 hold ({HOLDS}), {t.clearing[1]} clear ({CLEARS})" in now
    assert f"all 2 heads: {sum(t.holding)}/64 hold, {sum(t.clearing)} clear" in now


def test_a_per_head_alpha_counts_one_channel_a_head():
    t = tally(np.array([0.99, 0.05, 0.5]))
    assert (t.holding, t.clearing, t.per_head, t.channels) == ((1, 0, 0), (0, 1, 0), 1, 3)


def test_every_captions_threshold_is_the_panels():
    for path in sorted(SC.glob("*.yaml")):
        for c in load(path).captions:
            for op, x in THRESHOLD.findall(c.text):
                assert float(x) == (HOLDING if op == ">" else CLEARING), \
                    f"{path.name} caption at {c.at}: 'alpha {op} {x}', the panel's is {HOLDS if op == '>' else CLEARS}"


def _counts(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])\d+(?![\w.])", text))


@pytest.mark.parametrize("name", COUNTED)
def test_what_a_caption_counts_is_on_the_decay_panel(name):
    """At a caption's step, the decay panels print the caption's definition, and every count in
    the words before each '(alpha ...' (from the last sentence break) is among their counts."""
    sc = load(SC / f"{name}.yaml")
    s = Session(sc, device="cpu")
    try:
        checked = 0
        for c in sc.captions:
            if not THRESHOLD.search(c.text):
                continue
            text = render(s, c.at, panel="decay")
            now = " ".join(line for line in text.splitlines() if line.strip().startswith("now:"))
            for m in re.finditer(r"\(alpha\s*([<>])", c.text):
                assert (HOLDS if m.group(1) == ">" else CLEARS) in now, f"{name} at {c.at}: {now}"
                clause = re.split(r"[.;:,)]\s", c.text[:m.start()])[-1]
                missing = _counts(clause) - _counts(now)
                assert not missing, f"{name} caption at {c.at}: {sorted(missing)} of {clause!r} not in {now!r}"
                checked += 1
        assert checked
    finally:
        s.close()
