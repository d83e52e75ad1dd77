"""RoPE frequencies at published sizes (Llama 3.1's llama3, YaRN, linear) against transformers'
own rope init functions, and plain rope_scaling=None left exactly as it was."""
import math

import pytest
import torch

from lineage.configs import AttentionConfig, RopeScalingConfig
from lineage.mixers.attention.module import SoftmaxAttention
from lineage.mixers.rope import attention_factor, inv_frequencies, rotate

transformers = pytest.importorskip("transformers")


def _theirs(rope: dict, head_dim=128, max_pos=131072):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    cfg = LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
                      max_position_embeddings=max_pos, rope_parameters=rope)
    inv, att = ROPE_INIT_FUNCTIONS[rope["rope_type"]](cfg, "cpu")
    return inv.double(), att


@pytest.mark.parametrize("rope, ours", [
    (dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
          original_max_position_embeddings=8192),                                   # Llama-3.1-8B
     RopeScalingConfig("llama3", 8.0, 8192, 1.0, 4.0)),
    (dict(rope_type="yarn", rope_theta=1000000.0, factor=4.0, original_max_position_embeddings=32768),
     RopeScalingConfig("yarn", 4.0, 32768)),                                        # Qwen3's YaRN recipe
    (dict(rope_type="yarn", rope_theta=10000.0, factor=16.0, original_max_position_embeddings=4096, beta_fast=16.0,
          beta_slow=2.0, truncate=False, attention_factor=1.7),
     RopeScalingConfig("yarn", 16.0, 4096, beta_fast=16.0, beta_slow=2.0, truncate=False, attention_factor=1.7)),
    (dict(rope_type="linear", rope_theta=10000.0, factor=4.0), RopeScalingConfig("linear", 4.0)),
], ids=["llama3", "yarn", "yarn-untruncated", "linear"])
def test_frequencies_equal_transformers_at_published_sizes(rope, ours):
    inv, att = _theirs(rope)
    mine = inv_frequencies(128, rope["rope_theta"], ours, "cpu")
    assert float((mine - inv).abs().max() / inv.abs().max()) < 1e-6
    assert float(((mine - inv).abs() / inv).max()) < 1e-5            # the slow pairs too, not only the fast
    assert attention_factor(ours) == pytest.approx(att, rel=1e-12)


def test_llama3_has_all_three_bands_at_its_published_size():
    """Kept, divided and blended pairs: a test that only saw one band could not tell them apart."""
    s = RopeScalingConfig("llama3", 8.0, 8192, 1.0, 4.0)
    plain = inv_frequencies(128, 500000.0, RopeScalingConfig(), "cpu")
    ratio = plain / inv_frequencies(128, 500000.0, s, "cpu")
    kept, divided = (ratio - 1).abs() < 1e-12, (ratio - 8).abs() < 1e-9
    assert kept.any() and divided.any() and (~kept & ~divided).any()


def test_rotation_is_a_plain_loop_rotation():
    """rotate against a float64 loop over positions and pairs, YaRN's factor included."""
    torch.manual_seed(0)
    s = RopeScalingConfig("yarn", 4.0, 16)
    x = torch.randn(2, 9, 10, dtype=torch.float64)
    pos = torch.arange(9) + 30
    y = rotate(x, pos, 50.0, s)
    inv, m = inv_frequencies(10, 50.0, s, "cpu").tolist(), attention_factor(s)
    for b in range(2):
        for t in range(9):
            for i in range(5):
                c, sn = math.cos(int(pos[t]) * inv[i]) * m, math.sin(int(pos[t]) * inv[i]) * m
                a, bb = float(x[b, t, i]), float(x[b, t, i + 5])
                assert float(y[b, t, i]) == pytest.approx(a * c - bb * sn, abs=1e-12)
                assert float(y[b, t, i + 5]) == pytest.approx(a * sn + bb * c, abs=1e-12)


def test_no_scaling_is_the_old_rotation():
    torch.manual_seed(0)
    cfg = AttentionConfig(d_model=24, n_heads=3, n_kv_heads=1, head_dim=8, rope_dim=6, rope_theta=77.0)
    att = SoftmaxAttention(cfg)
    x = torch.randn(1, 5, 24)
    q, k, _, _ = att._qkv(x, 3)
    H, D = 3, 8
    q0 = att.c_attn(x)[..., :H * D].view(1, 5, H, D).transpose(1, 2)
    pos = torch.arange(5) + 3
    assert torch.equal(q, torch.cat([rotate(q0[..., :6], pos, 77.0), q0[..., 6:]], -1))


@pytest.mark.parametrize("s", [None, RopeScalingConfig("yarn", 4.0, 4096)], ids=["plain", "yarn"])
def test_bf16_rotation_is_exact_at_long_positions(s):
    """cos and sin are taken before the cast to bf16: an angle of 100,000 radians cast first is
    off by hundreds of radians (relative error near 1 at positions past a few thousand)."""
    torch.manual_seed(0)
    x = torch.randn(1, 64, 64, dtype=torch.float64)
    pos = torch.arange(64) + 100_000
    exact = rotate(x, pos, 10000.0, s)
    ours = rotate(x.bfloat16(), pos, 10000.0, s).double()
    assert float((ours - exact).norm() / exact.norm()) < 2e-2
