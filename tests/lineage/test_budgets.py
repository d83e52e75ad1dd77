"""The scenario memory budget that `validate` and `record` share counts what a prefill needs
while it reads (its activations), not only what the models keep once it has read."""
import subprocess
import sys
from pathlib import Path

from lineage.presets import PRESETS
from lineage.scenario.checks import MAX_SCENARIO_BYTES, prefill_bytes, resident_bytes
from tui.cli import main

ROOT = Path(__file__).resolve().parents[2]
TOKENS = 1_000_000          # two k3-mini keep ~0.95 GB after reading this; reading it needs ~0.8 GB more


def _scenario(tmp_path, prefill, models=2):
    (tmp_path / "doc.txt").write_bytes(b"abcdefgh" * (TOKENS // 8 + 8))
    path = tmp_path / "long.yaml"
    listed = "\n".join("  - {preset: k3-mini}" for _ in range(models))
    path.write_text(f"version: 1\ntitle: a long prefill\nmodels:\n{listed}\ninput: {{file: doc.txt}}\n"
                    f"decoding: {{mode: teacher, prefill: {prefill}}}\nsteps: 4\npanels:\n  - {{kind: tokens}}\n")
    return path


def test_the_arithmetic_puts_the_case_between_the_two_budgets():
    """The case below is refused only because of the prefill: what is kept fits."""
    k3 = PRESETS["k3-mini"]()
    kept = resident_bytes([k3, k3], "float32", TOKENS + 4)
    act = prefill_bytes([k3, k3], "float32", TOKENS)
    assert kept < MAX_SCENARIO_BYTES < kept + act
    assert act == prefill_bytes([k3], "float32", TOKENS)       # one model prefills at a time: the widest counts
    assert prefill_bytes([k3], "float32", 0) == 0


def test_a_prefill_past_the_budget_is_one_located_line(tmp_path, capsys):
    path = _scenario(tmp_path, TOKENS)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    # decoding: {mode: teacher, prefill: N} is line 7; prefill's value is at column 36
    assert err[0].startswith(f"{path}:7:36: decoding.prefill: reading 1,000,000 tokens at once needs "), err[0]
    assert "GiB of activations" in err[0] and "limit 1.5 GiB" in err[0]


def test_record_refuses_it_the_same_way_before_building_anything(tmp_path):
    path = _scenario(tmp_path, TOKENS)
    r = subprocess.run([sys.executable, "-m", "tui.cli", "record", str(path), "-o", str(tmp_path / "t.trace")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "decoding.prefill" in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "t.trace").exists()


def test_a_prefill_that_fits_still_validates(tmp_path, capsys):
    assert main(["validate", str(_scenario(tmp_path, 12_000))]) == 0
    assert main(["validate", str(_scenario(tmp_path, TOKENS, models=1))]) == 0    # one k3-mini fits
