"""Parameter arithmetic: exact for GPT-2 small, equal to the real modules' numel for every preset."""
import pytest
import torch

from lineage.model import LM
from lineage.arithmetic import count
from lineage.presets import PRESETS, get_preset, runnable


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
    """Build every preset on the meta device (no memory) and count real parameters."""
    cfg = get_preset(name)
    with torch.device("meta"):
        model = LM(runnable(cfg))
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
