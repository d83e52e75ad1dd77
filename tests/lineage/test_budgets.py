"""The scenario memory budget that `validate` and `record` share counts what a prefill needs
while it reads (its activations), not only what the models keep once it has read."""
import subprocess
import sys
from pathlib import Path

from lineage.presets import PRESETS
from lineage.scenario.checks import MAX_SCENARIO_BYTES, prefill_bytes, resident_bytes
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
TOKENS = 600_000            # two k3-mini keep ~0.57 GiB after reading this; reading it on the CPU needs ~1.0 GiB more


def _scenario(tmp_path, prefill, models=2, device="cpu"):
    (tmp_path / "doc.txt").write_bytes(b"abcdefgh" * (TOKENS // 8 + 8))
    path = tmp_path / "long.yaml"
    listed = "\n".join("  - {preset: k3-mini}" for _ in range(models))
    path.write_text(f"version: 1\ntitle: a long prefill\ndevice: {device}\nmodels:\n{listed}\ninput: {{file: doc.txt}}\n"
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
    # decoding: {mode: teacher, prefill: N} is line 8; prefill's value is at column 36
    assert err[0].startswith(f"{path}:8:36: decoding.prefill: reading 600,000 tokens at once on the CPU "
                             "(4,096-token chunks; device: cpu) needs "), err[0]
    assert "GiB of activations" in err[0] and "limit 1.5 GiB" in err[0]


def test_record_refuses_it_the_same_way_before_building_anything(tmp_path):
    path = _scenario(tmp_path, TOKENS)
    r = subprocess.run([sys.executable, "-m", "lineage.cli.main", "record", str(path), "-o", str(tmp_path / "t.trace")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "decoding.prefill" in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "t.trace").exists()


def test_a_prefill_that_fits_still_validates(tmp_path, capsys):
    assert main(["validate", str(_scenario(tmp_path, 12_000))]) == 0
    assert main(["validate", str(_scenario(tmp_path, TOKENS, models=1))]) == 0    # one k3-mini fits


def test_the_budget_is_the_device_the_run_will_use(tmp_path, capsys, monkeypatch):
    """One k3-mini reading 600K tokens fits on the CPU (4K-token chunks) but not on CUDA (16K-token
    chunks, the prefix's keys and values copied for cuDNN): validate budgets where the run goes,
    the scenario's device or, for auto, the machine's, and says which."""
    from lineage.scenario import checks
    k3 = PRESETS["k3-mini"]()
    kept = resident_bytes([k3], "float32", TOKENS + 4)
    assert kept + prefill_bytes([k3], "float32", TOKENS, "cpu") <= MAX_SCENARIO_BYTES
    assert kept + prefill_bytes([k3], "float32", TOKENS, "cuda") > MAX_SCENARIO_BYTES
    monkeypatch.setattr(checks, "run_device", lambda want: "cuda")      # a machine with a GPU
    path = _scenario(tmp_path, TOKENS, models=1, device="auto")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reading 600,000 tokens at once on CUDA (16,384-token chunks; device: auto) needs" \
        in err[0], err


class _Torch:                   # stands for an imported torch: only cuda.is_available is asked
    def __init__(self, gpu):
        self.cuda = type("cuda", (), {"is_available": staticmethod(lambda: gpu)})


def test_run_device_picks_as_the_runner_does(monkeypatch):
    from lineage.scenario.checks import run_device
    assert run_device("cpu") == "cpu"
    for gpu in (True, False):
        monkeypatch.setitem(sys.modules, "torch", _Torch(gpu))
        assert run_device("auto") == run_device("cuda") == ("cuda" if gpu else "cpu")
    monkeypatch.delitem(sys.modules, "torch")               # validate's own process: no torch imported
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert run_device("auto") == "cpu"


def test_the_cpu_estimate_covers_the_measured_prefills():
    """activation_bytes on the CPU against the peak RSS growth bench_prefill --check-estimate
    measured (BENCHMARKS.md, the 2-core box): at least the highest run's, at most ~1.5x the lowest.
    The old formula gave k3-mini 51 MB at 4,096 tokens where 147-168 MB were measured."""
    from lineage.arithmetic import model_memory
    from lineage.prefill import activation_bytes
    measured = {("k3-mini", 4096): (147, 168), ("k3-mini", 16384): (241, 297), ("tiny-hybrid", 4096): (65, 75),
                ("tiny-hybrid", 16384): (151, 198), ("tiny-softmax", 4096): (45, 45)}     # MiB, three runs
    for (name, n), (low, high) in measured.items():
        cfg = PRESETS[name]()
        mib = (activation_bytes(cfg, n, 4, "cpu") +
               model_memory(cfg, n, cache_dtype_bytes=4, state_dtype_bytes=4)["total_bytes"]) / 2**20
        assert high <= mib <= 1.55 * low, (name, n, mib)


def test_the_mask_block_is_causal_attentions():
    from lineage.mixers import causal
    from lineage.prefill import MASK_BLOCK
    assert MASK_BLOCK == causal.BLOCK_ELEMENTS


def test_a_short_convs_cache_holds_its_whole_chunk():
    """A short conv's cache is a view of its chunk's whole input (the concatenation), so the
    estimate counts that chunk for every conv layer. If the view is ever copied, drop that term."""
    import dataclasses

    import torch
    from lineage.mixers.short_conv import ShortConv
    from lineage.prefill import activation_bytes
    conv = ShortConv(8, 4)
    with torch.inference_mode():
        _, cache = conv(torch.zeros(1, 100, 8))
    assert cache.shape == (1, 3, 8) and cache.untyped_storage().nbytes() == (100 + 3) * 8 * 4
    cfg = PRESETS["tiny-kda"]()
    off = dataclasses.replace(cfg, kda=dataclasses.replace(cfg.kda, conv_size=0))
    chunk = cfg.n_layers * cfg.kda.conv_channels * (4096 + 3) * 4
    assert activation_bytes(cfg, 4096, 4) - activation_bytes(off, 4096, 4) >= chunk
