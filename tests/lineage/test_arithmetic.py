"""lineage.arithmetic: parameter counts (exact for GPT-2 small, equal to the real modules' numel
for every preset), the one byte formatter (where it changes unit; the panels and `lineage memory`
use it) and the one dtype map."""
import json
from dataclasses import replace

import pytest
import torch

from lineage.arithmetic import count, fmt_bytes
from lineage.model import LM
from lineage.presets import PRESETS, get_preset


# -- parameter counts -----------------------------------------------------------------------

def test_gpt2_small_exact():
    c = count(get_preset("gpt2-small"))
    assert c["total"] == 124_439_808 and c["active"] == c["total"]


def test_k3_published_totals():
    c = count(get_preset("k3"))
    assert abs(c["total"] / 2.8e12 - 1) < 0.03
    assert abs(c["active"] / 104e9 - 1) < 0.05


def test_kimi_linear_published_totals():
    c = count(get_preset("kimi-linear-48b"))
    assert abs(c["total"] / 48e9 - 1) < 0.05 and 2.5e9 < c["active"] < 4e9


@pytest.mark.parametrize("name", list(PRESETS))
def test_arithmetic_matches_modules(name):
    """Build every preset on the meta device (no memory) and count real parameters (a shape-only
    preset with its flag cleared: LM refuses to build one)."""
    cfg = get_preset(name)
    with torch.device("meta"):
        model = LM(replace(cfg, shape_only=False))
    total = sum(p.numel() for p in model.parameters())
    c = count(cfg)
    assert c["total"] == total
    # active: everything but the routed experts a token skips
    skipped = 0
    for blk in model.blocks:
        if blk.ffn_kind == "moe":
            per_expert = (blk.ffn.w_in[0].numel() + blk.ffn.w_out[0].numel())
            skipped += (cfg.moe.n_experts - cfg.moe.top_k) * per_expert
    assert c["active"] == total - skipped


def test_bad_config_is_named():
    cfg = get_preset("tiny-kda")
    cfg.ffns = ("dense",)
    with pytest.raises(ValueError, match="2 mixers but 1 ffns"):
        count(cfg)
    with pytest.raises(ValueError, match="did you mean 'k3-mini'"):
        get_preset("k3-mni")


# -- sizes in bytes -------------------------------------------------------------------------

@pytest.mark.parametrize("n, shown", [
    (0, "0 B"), (1000, "1000 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (126 * 1024, "126.0 KiB"),
    (1_048_000, "1023.4 KiB"),          # the cli said '1,023 KiB', the panels '1023.4 KiB'
    (1_048_575, "1.0 MiB"),             # never '1024.0 KiB'
    (480 * 2**20, "480.0 MiB"),         # the cli said '480 MiB'
    (int(4.5 * 2**30), "4.5 GiB"), (3 * 2**40, "3.0 TiB"),
])
def test_fmt_bytes(n, shown):
    assert fmt_bytes(n) == shown


def test_the_memory_command_prints_sizes_as_the_panels_do(capsys):
    from lineage.cli.main import main
    assert main(["memory", "k3-mini", "--context", "4096", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert main(["memory", "k3-mini", "--context", "4096"]) == 0
    table = capsys.readouterr().out.splitlines()[-len(rows):]
    for r, line in zip(rows, table):
        assert f"{fmt_bytes(r['cache_bytes'])} " in line and f"{fmt_bytes(r['state_bytes'])} " in line


def test_the_one_dtype_map_is_torchs():
    """Each name is torch's, with its element size; the short names config.json uses read the same."""
    import torch
    from lineage.arithmetic import DTYPE_BYTES, dtype_name
    for name, size in DTYPE_BYTES.items():
        assert getattr(torch, name).itemsize == size and dtype_name(name) == name
    assert [dtype_name(s) for s in ("fp32", "bf16", "fp16", "fp64", "int8", None)] == \
        ["float32", "bfloat16", "float16", "float64", None, None]


def test_dense_and_routed_ffns_are_counted_apart():
    """K3's first FFN is dense, the other 92 routed: each in its own line of the breakdown."""
    from lineage.arithmetic import count
    cfg = get_preset("k3")
    c = count(cfg)
    assert c["ffn_dense"] == cfg.ffns.count("dense") * cfg.dense.params() > 0
    assert c["moe_total"] == cfg.ffns.count("moe") * cfg.moe.params()
    assert c["moe_active"] == cfg.ffns.count("moe") * cfg.moe.active_params()
