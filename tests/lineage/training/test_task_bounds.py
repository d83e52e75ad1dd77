"""two_timescales' block (segment) count is bounded wherever a task is read: a sidecar's
task_params and a TaskSpec handed to evaluate alike, refused before anything is drawn (2,000
blocks once took 128 s and 3.2 GB). Work is counted as draws, not timed."""
import numpy as np
import pytest

from lineage.model import LM
from lineage.presets import get_preset
from lineage.training import checkpoint, tasks
from lineage.training.evaluate import evaluate
from lineage.training.tasks import KEY_IDS, TaskSpec, two_timescales
from lineage.cli.main import main


@pytest.fixture
def draws(monkeypatch):
    """How many times the tasks drew random indices (every block draws three times)."""
    n = [0]
    real = tasks._distinct

    def counted(*a, **kw):
        n[0] += 1
        return real(*a, **kw)
    monkeypatch.setattr(tasks, "_distinct", counted)
    return n


def test_the_generator_refuses_too_many_blocks_before_drawing(draws):
    with pytest.raises(ValueError, match=r"two_timescales blocks must be in 1\.\.124 .* got 2000 blocks"):
        two_timescales(np.random.default_rng(0), 2, pairs=1, blocks=2000, key_pool=16)
    with pytest.raises(ValueError, match="got 0 blocks"):
        two_timescales(np.random.default_rng(0), 2, pairs=1, blocks=0, key_pool=16)
    with pytest.raises(ValueError, match="at most 2,048 tokens"):        # few blocks, but too long
        two_timescales(np.random.default_rng(0), 2, pairs=16, blocks=100, key_pool=16)
    assert draws[0] == 0
    b = two_timescales(np.random.default_rng(0), 2, pairs=1, blocks=len(KEY_IDS), key_pool=16)   # the most
    assert b.ids.shape == (2, 5 + len(KEY_IDS) * 5)


def test_evaluate_refuses_a_task_spec_made_directly(draws):
    model = LM(get_preset("tiny-kda"))
    with pytest.raises(ValueError, match="2000 blocks"):
        evaluate(model, TaskSpec("two_timescales", pairs=1, segments=2000, key_pool=16), sequences=2)
    assert draws[0] == 0


def test_a_sidecar_with_2000_segments_is_one_line(tmp_path, capsys, draws):
    model = LM(get_preset("tiny-kda"))
    meta = {"preset": "tiny-kda", "config_hash": checkpoint.config_hash(model.cfg), "task": "two_timescales",
            "task_params": {"pairs": 1, "segments": 2000, "key_pool": 16}}
    checkpoint.save(model, tmp_path / "m.safetensors", meta)
    assert main(["eval", str(tmp_path / "m.safetensors"), "--sequences", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "m.json: task_params: segments must be in 1..124, got 2000" in err
    assert draws[0] == 0
