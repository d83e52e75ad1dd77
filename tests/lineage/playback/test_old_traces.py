"""Traces recorded before frames kept the delta-rule write (trace format 1, made by the code of
commit 43e22da with `lineage record recall --steps 5` and `lineage record lineage_compare
--steps 2`) still replay, and read as a fresh session of the same scenario does."""
from pathlib import Path

import numpy as np
import pytest

from lineage.playback.session import Replay, Session
from lineage.scenario import load, loads
from lineage.app.panels import PANELS, default_panels

ROOT = Path(__file__).resolve().parents[3]
OLD = [(ROOT / "tests/lineage/data/recall_5steps.trace", ROOT / "lineage/scenarios/recall.yaml"),
       (ROOT / "tests/lineage/data/lineage_compare_2steps.trace",
        ROOT / "lineage/scenarios/lineage_compare_random.yaml")]        # recorded with random weights


@pytest.mark.parametrize("trace,scenario", OLD, ids=lambda p: p.stem)
def test_old_trace_panels_read_as_a_fresh_session(trace, scenario):
    old = Replay(trace)
    # the scenario as it was recorded (the bundled file has moved on since: names, sizes)
    new = Session(loads(old.scenario_text, str(scenario), scenario.parent), device="cpu")
    new.total = old.total               # the trace holds the first steps only ("step i / N" agrees)
    for i in range(old.total):
        for p in default_panels(old.info):
            assert PANELS[p["kind"]].text_form(old, i, p, 100) == PANELS[p["kind"]].text_form(new, i, p, 100)


@pytest.mark.parametrize("trace,scenario", OLD, ids=lambda p: p.stem)
def test_old_trace_state_rebuilds_the_write(trace, scenario):
    """An old trace has no dS: its state record rebuilds the write from k, v, the read-back and
    beta; a fresh session's frames carry the model's own (float16 for a language model)."""
    old = Replay(trace)
    new = Session(loads(old.scenario_text, str(scenario), scenario.parent), device="cpu")
    for i in range(old.total):
        f_old, f_new = old.frame(i), new.frame(i)
        assert not any(k.endswith("/dS") for k in f_old.arrays)
        for m in range(len(old.info["models"])):
            for layer in range(len(f_old.meta["models"][m]["layers"])):
                a, b = f_old.state(m, layer), f_new.state(m, layer)
                if a is None:
                    assert b is None
                    continue
                assert a.dS.shape == b.dS.shape == a.S.shape
                scale = max(float(np.abs(a.dS).max()), 1e-12)
                assert np.abs(a.dS - b.dS.astype(np.float64)).max() <= 2e-3 * scale
