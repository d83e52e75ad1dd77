"""The seed figures that are pure arithmetic or a toy run of a real op, with their published numbers."""
import pytest

from lineage import figures
from lineage.arithmetic import kv_bytes_per_token, mla_bytes_per_token, recurrent_state_bytes, model_memory
from lineage.presets import get_preset


def test_two_facts_at_cosine_07():
    r = figures.two_facts(0.7, beta=1.0)
    assert r["additive_old"] == pytest.approx(1.70, abs=1e-12) and r["additive_new"] == pytest.approx(1.70, abs=1e-12)
    assert r["delta_new"] == pytest.approx(1.00, abs=1e-12)
    assert r["delta_old"] == pytest.approx(1.21, abs=1e-12)


@pytest.mark.parametrize("c", [0.1, 0.3, 0.5, 0.7, 0.9, 0.99])
def test_older_fact_error_is_c_one_minus_c(c):
    assert figures.two_facts(c)["delta_old_error"] == pytest.approx(c * (1 - c), abs=1e-12)


def test_older_fact_error_worst_at_half_overlap():
    errs = {c / 20: figures.two_facts(c / 20)["delta_old_error"] for c in range(1, 20)}
    assert max(errs, key=errs.get) == 0.5


def test_lower_beta_stops_correction_short():
    full, half = figures.two_facts(0.7, beta=1.0), figures.two_facts(0.7, beta=0.5)
    assert half["delta_new"] < full["delta_new"] == pytest.approx(1.0)
    # fact 1 goes in at half strength (S = 0.5 k1), fact 2 corrects half of what k2 then misses
    c = 0.7
    assert half["delta_new"] == pytest.approx(0.5 * c + 0.5 * (1 - 0.5 * c), abs=1e-12)


def test_chunk_dial_43x():
    rows = {r["chunk"]: r for r in figures.chunk_dial(8192, 128)}
    assert round(rows[8192]["vs64"]) == 43
    assert rows[8192]["vs64"] == pytest.approx(43.33, abs=0.01)
    assert rows[1]["vs64"] < rows[64]["vs64"]


def test_parameter_ratio():
    assert figures.param_ratio() == 22_580


def test_batch_halves_with_each_doubling_of_context():
    rows = figures.kv_batch()
    for a, b in zip(rows, rows[1:]):
        assert b["context"] == 2 * a["context"]
        assert b["batch"] in (a["batch"] // 2, (a["batch"] + 1) // 2)
    assert rows[0]["bytes_per_token"] == 2 * 8 * 128 * 2 * 93


def test_cache_arithmetic():
    assert kv_bytes_per_token(12, 64, 2) == 3072                  # GPT-2 MHA, one layer, fp16
    assert kv_bytes_per_token(8, 128, 2) == 4096                  # GQA 8 x 128
    assert mla_bytes_per_token(512, 64, 1) == 576                 # MLA: 512 + 64 elements
    assert recurrent_state_bytes(96, 128, 128, 4) == 96 * 128 * 128 * 4
    m = model_memory(get_preset("k3"), 1 << 20)
    assert m["bytes_per_token"] == 24 * 576 * 2                   # only the 24 MLA layers grow
    gpt2 = model_memory(get_preset("gpt2-small"), 1024)
    assert gpt2["state_bytes"] == 0 and gpt2["cache_bytes"] == 12 * 3072 * 1024


def test_kda_state_larger_than_mla_cache_at_short_context():
    """Figure 9's crossover: constant KDA state per sequence beats the MLA cache only past some length."""
    k3 = get_preset("k3")
    short, long = model_memory(k3, 1024), model_memory(k3, 1 << 20)
    assert short["state_bytes"] > short["cache_bytes"]
    assert long["state_bytes"] < long["cache_bytes"]
