"""A real checkpoint's recurrent layers get attention rows too (the attention their state
implements), in the layers an attention panel watches and no other: Kimi Linear's KDA, Qwen3-Next's
and Qwen3.5's Gated DeltaNet, Mamba-2. With every write inside the window (no prefill, fewer tokens
than effective.WINDOW), the rows' parts are the whole read-out: what the state held before them is
0, which fails if a decay, a correction or a write strength is missed."""
import pytest

pytest.importorskip("transformers")
import numpy as np  # noqa: E402
import yaml  # noqa: E402

from lineage.families.scenario import checkpoint_scenario  # noqa: E402
from lineage.playback.session import Session  # noqa: E402
from lineage.scenario import loads  # noqa: E402

from . import test_hybrids, test_mamba2_checkpoint, test_qwen3_5  # noqa: E402

IDS = [5, 6, 7, 8, 5, 9, 10, 11, 6, 12, 13, 5, 14, 7, 15, 16, 17, 6]
CASES = {                         # make the checkpoint, the recurrent layer watched, another one not
    "kimi_linear": (test_hybrids.kimi, 2, 0),
    "qwen3_next": (test_hybrids.qwen, 2, 0),
    "qwen3_5": (test_qwen3_5.qwen, 2, 0),
    "mamba2": (test_mamba2_checkpoint.mamba, 1, 0),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_a_checkpoints_rows_are_its_whole_read_out_in_the_watched_layer_only(tmp_path, monkeypatch, family):
    make, watched, other = CASES[family]
    monkeypatch.setattr("lineage.playback.runners.WATCH_ALL_BYTES", 0)     # as at a published width
    make(tmp_path)
    sc = yaml.safe_load(checkpoint_scenario(tmp_path, ids=IDS, device="cpu", dtype="float32"))
    sc["panels"] = [{"kind": "tokens"}, {"kind": "attention", "layer": watched}]
    s = Session(loads(yaml.safe_dump(sc), "real.yaml", tmp_path), device="cpu")
    try:
        assert s.total < 256 and sc["decoding"].get("prefill", 0) == 0     # the input, then greedy steps
        for t in range(s.total):
            f = s.frame(t)
            assert f.attention(0, other) is None, (t, "an unwatched layer kept rows")
            rows = f.attention(0, watched)
            assert rows.weights.shape[1] == t + 1 and rows.before is not None
            assert np.abs(rows.before).max() < 1e-3, (t, rows.before)     # the window is the whole read-out
            assert np.allclose(rows.shares.sum(axis=1) + rows.before, 1.0, atol=1e-3)
    finally:
        s.close()
