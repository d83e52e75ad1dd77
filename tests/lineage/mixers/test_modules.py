"""Every mechanism module: forward(x) over a sequence equals repeated step(x_t), final state included."""
import pytest
import torch
import torch.nn.functional as F

from lineage.mixers.attention.module import KVCache, SoftmaxAttention
from lineage.configs import (AttentionConfig, DeltaNetConfig, DenseFFNConfig, GatedConvConfig, GatedDeltaNetConfig,
                             KDAConfig, LinearAttentionConfig, MLAConfig, MoEConfig)
from lineage.mixers.deltanet.module import DeltaNet
from lineage.ffns.dense import DenseFFN
from lineage.mixers.gated_conv.module import GatedConv
from lineage.mixers.gated_deltanet.module import GatedDeltaNet
from lineage.mixers.kda.module import KDA
from lineage.mixers.linear_attention.module import LinearAttention
from lineage.mixers.mla.module import MLA
from lineage.ffns.moe import MoE
from lineage.mixers.short_conv import ShortConv
from lineage.observed import LayerObs

D = 60
TOL = 1e-10


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


MODULES = {
    "softmax": lambda: SoftmaxAttention(AttentionConfig(d_model=D, n_heads=6)),
    "softmax-gqa": lambda: SoftmaxAttention(AttentionConfig(d_model=D, n_heads=6, n_kv_heads=2, bias=False)),
    "softmax-conv": lambda: SoftmaxAttention(AttentionConfig(d_model=D, n_heads=6, n_kv_heads=3, conv_size=4)),
    "linear": lambda: LinearAttention(LinearAttentionConfig(d_model=D, n_heads=3, head_dim=20)),
    "deltanet": lambda: DeltaNet(DeltaNetConfig(d_model=D, n_heads=3, head_dim=20, chunk_size=16)),
    "deltanet-noconv": lambda: DeltaNet(DeltaNetConfig(d_model=D, n_heads=3, head_dim=20, conv_size=0)),
    "gdn": lambda: GatedDeltaNet(GatedDeltaNetConfig(d_model=D, n_heads=3, head_dim=20, chunk_size=16)),
    "kda-bounded": lambda: KDA(KDAConfig(d_model=D, n_heads=3, head_dim=20, gate_form="bounded")),
    "kda-kimi": lambda: KDA(KDAConfig(d_model=D, n_heads=3, head_dim=20, gate_form="kimi", output_gate_rank=8,
                                      chunk_size=None)),
    # LFM2's conv layers: a 3-token window, and with biases on every part
    "gated_conv": lambda: GatedConv(GatedConvConfig(d_model=D, conv_size=3)),
    "gated_conv-bias-wide": lambda: _biased_conv(GatedConv(GatedConvConfig(d_model=D, conv_size=5, bias=True))),
    "mla": lambda: MLA(MLAConfig(d_model=D, n_heads=3, kv_lora_rank=24, qk_nope_head_dim=12,
                                 qk_rope_head_dim=6, v_head_dim=10)),
    "mla-gated-qlora-rope": lambda: MLA(MLAConfig(d_model=D, n_heads=3, q_lora_rank=20, kv_lora_rank=24,
                                                  qk_nope_head_dim=12, qk_rope_head_dim=6, v_head_dim=10,
                                                  rope=True, output_gate=True)),
    "dense-gelu": lambda: DenseFFN(DenseFFNConfig(d_model=D, d_ff=90, act="gelu", bias=True)),
    "dense-situ": lambda: DenseFFN(DenseFFNConfig(d_model=D, d_ff=90, act="situ", linear_beta=25.0)),
    "moe-latent": lambda: MoE(MoEConfig(d_model=D, n_experts=7, top_k=3, n_shared=2, expert_dim=18,
                                        latent_dim=24, linear_beta=25.0, routed_scale=2.5)),
    "moe-plain": lambda: MoE(MoEConfig(d_model=D, n_experts=5, top_k=2, n_shared=0, expert_dim=18, act="silu")),
    # the options real checkpoints need (issue 13): Qwen3-Next's gated attention and GQA-shaped
    # delta heads, Kimi Linear's biased grouped router, Qwen3-Next's softmax router and shared gate
    "softmax-qwen3next": lambda: SoftmaxAttention(AttentionConfig(d_model=D, n_heads=4, n_kv_heads=2, head_dim=14,
                                                                  bias=False, qk_norm=True, rope_dim=6, output_gate=True)),
    "gdn-gqa-heads": lambda: GatedDeltaNet(GatedDeltaNetConfig(d_model=D, n_heads=6, head_dim=10, n_key_heads=2,
                                                               value_dim=7, chunk_size=16)),
    "moe-kimi-router": lambda: _biased(MoE(MoEConfig(d_model=D, n_experts=8, top_k=3, n_shared=1, expert_dim=18,
                                                      act="silu", routed_scale=2.4, score_bias=True, n_group=4,
                                                      topk_group=2, router_fp32=True))),
    "moe-qwen3next-router": lambda: MoE(MoEConfig(d_model=D, n_experts=7, top_k=3, n_shared=1, expert_dim=18,
                                                  shared_dim=11, act="silu", router="softmax", shared_gate=True)),
}


def _biased_conv(mod):
    with torch.no_grad():
        mod.conv_bias.normal_()                 # zeros at init: a bias dropped anywhere would go unseen
    return mod


def _biased(moe):
    with torch.no_grad():
        moe.score_bias.normal_()
    return moe


def states_equal(a, b):
    if a is None or b is None:
        return a is None and b is None
    for name in ("S", "z", "k", "v", "c", "k_pe", "conv"):
        x, y = getattr(a, name, None), getattr(b, name, None)
        if x is None and y is None:
            continue
        if rel(x, y) > TOL:
            return False
    return True


@pytest.mark.parametrize("name", list(MODULES))
@pytest.mark.parametrize("T", [1, 7, 63])
def test_forward_equals_steps(name, T):
    torch.manual_seed(hash((name, T)) % 2**31)
    mod = MODULES[name]().double()
    x = torch.randn(2, T, D, dtype=torch.float64)
    y_full, s_full = mod(x)
    st, ys = None, []
    for t in range(T):
        obs = LayerObs()
        y, st = mod.step(x[:, t], st, obs)
        ys.append(y)
        # a dense FFN and the gated conv (no state matrix, no attention row) observe nothing
        assert (obs.mixer is None) == name.startswith(("dense", "gated_conv")) and obs.ffn is None or name.startswith("moe")
    y_steps = torch.stack(ys, 1)
    assert rel(y_full, y_steps) < TOL, name
    assert states_equal(s_full, st), name


@pytest.mark.parametrize("name", [n for n in MODULES if not n.startswith(("dense", "moe"))])
def test_forward_continues_from_state(name):
    """Two forward calls carrying the state equal one call over the whole sequence."""
    torch.manual_seed(1)
    mod = MODULES[name]().double()
    x = torch.randn(2, 40, D, dtype=torch.float64)
    y, s = mod(x)
    y1, s1 = mod(x[:, :23])
    y2, s2 = mod(x[:, 23:], s1)
    assert rel(torch.cat([y1, y2], 1), y) < TOL and states_equal(s2, s)


@pytest.mark.parametrize("conv", [0, 4])
def test_softmax_attention_matches_sdpa(conv):
    """Against torch's attention, with q, k, v made independently (conv1d for the short conv)."""
    torch.manual_seed(2)
    for kv in (6, 3, 1):
        mod = SoftmaxAttention(AttentionConfig(d_model=D, n_heads=6, n_kv_heads=kv, conv_size=conv)).double()
        x = torch.randn(2, 63, D, dtype=torch.float64)
        qkv = mod.c_attn(x)                                                  # (B, T, C)
        if conv:
            w = mod.conv.weight                                              # (C, 1, conv)
            qkv = F.conv1d(F.pad(qkv.transpose(1, 2), (conv - 1, 0)), w, groups=w.shape[0]).transpose(1, 2)
        q, k, v = (t.reshape(2, 63, -1, 10).transpose(1, 2) for t in qkv.split([60, 10 * kv, 10 * kv], -1))
        rep = 6 // kv
        ref = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                             is_causal=True)
        expect = mod.c_proj(ref.transpose(1, 2).reshape(2, 63, -1))
        y, cache = mod(x)
        assert rel(y, expect) < TOL
        assert isinstance(cache, KVCache) and cache.length == 63 and (cache.conv is None) == (conv == 0)
        assert cache.nbytes == 2 * 2 * kv * 10 * 63 * 8        # K and V, B=2, kv heads x 10 dims, float64


def test_delta_observations_explain_the_write():
    """obs: S_new = decay * S_old + dS, and dS = k^T beta (v - read)."""
    torch.manual_seed(3)
    mod = MODULES["kda-bounded"]().double()
    x = torch.randn(1, 5, D, dtype=torch.float64)
    st = None
    for t in range(5):
        old = None if st is None else st.S
        obs = LayerObs()
        _, st = mod.step(x[:, t], st, obs)
        seen = obs.mixer
        decayed = 0 if old is None else old * seen.alpha[..., None]
        assert rel(seen.S, decayed + seen.dS) < TOL
        u = seen.beta[..., None] * (seen.v - seen.read)
        assert rel(seen.dS, seen.k[..., None] * u[:, :, None]) < TOL
        assert seen.alpha.shape == (1, 3, 20) and (seen.alpha >= torch.exp(torch.tensor(-5.0)) - 1e-12).all()


def test_kda_gate_forms_respect_their_range():
    torch.manual_seed(4)
    x = torch.randn(2, 9, D, dtype=torch.float64) * 30      # large inputs push gates to their extremes
    bounded = MODULES["kda-bounded"]().double()
    g = bounded._decay(x)
    assert g.shape == (2, 9, 3, 20) and (g <= 0).all() and (g >= -5).all()
    kimi = MODULES["kda-kimi"]().double()
    assert (kimi._decay(x) <= 0).all()
    gdn = MODULES["gdn"]().double()
    assert gdn._decay(x).shape == (2, 9, 3)


def test_moe_routing_observations():
    torch.manual_seed(5)
    mod = MODULES["moe-latent"]().double()
    obs = LayerObs()
    mod.step(torch.randn(2, D, dtype=torch.float64), None, obs)
    obs = obs.ffn
    assert obs.experts.shape == (2, 3) and obs.weights.shape == (2, 3)
    assert torch.allclose(obs.weights.sum(-1), torch.full((2,), 2.5, dtype=torch.float64))
    top = obs.scores.topk(3, -1).indices
    assert torch.equal(obs.experts, top)
    assert ((obs.shared_share > 0) & (obs.shared_share < 1)).all()


def test_short_conv_matches_conv1d():
    torch.manual_seed(6)
    conv = ShortConv(12, 4).double()
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    y, cache = conv(x)
    ref = F.conv1d(F.pad(x.transpose(1, 2), (3, 0)), conv.weight, groups=12).transpose(1, 2)
    assert rel(y, ref) < TOL and torch.equal(cache, x[:, -3:])


@pytest.mark.parametrize("name", ["gated_conv", "gated_conv-bias-wide"])
def test_gated_conv_is_c_times_the_conv_of_b_times_x(name):
    """Against conv1d over B * x, written from LFM2's equations: y = out_proj(C * (conv(B * x) + bias))."""
    torch.manual_seed(7)
    mod = MODULES[name]().double()
    x = torch.randn(2, 11, D, dtype=torch.float64)
    b, c, v = mod.in_proj(x).split(D, -1)
    w = mod.conv.weight                                                     # (D, 1, size)
    size = w.shape[-1]
    conv = F.conv1d(F.pad((b * v).transpose(1, 2), (size - 1, 0)), w, mod.conv_bias, groups=D).transpose(1, 2)
    y, state = mod(x)
    assert rel(y, mod.out_proj(c * conv)) < TOL
    assert state.conv.shape == (2, size - 1, D) and torch.equal(state.conv, (b * v)[:, -(size - 1):])
    assert state.nbytes == 2 * mod.cfg.state_bytes(4, 8)               # two sequences' float64 cache


def test_grouped_routing_picks_only_from_the_best_groups():
    """Kimi's grouped top-k: a group scores its two best experts (with the choice bias); experts
    of other groups are never chosen, and weights come from the unbiased scores."""
    torch.manual_seed(0)
    moe = _biased(MoE(MoEConfig(d_model=D, n_experts=8, top_k=2, n_shared=0, expert_dim=4, act="silu",
                                score_bias=True, n_group=4, topk_group=1, routed_scale=2.0)))
    x = torch.randn(50, D, dtype=torch.float64)
    moe = moe.double()
    scores, idx, w = moe.route(x)
    choice = (scores + moe.score_bias).view(50, 4, 2)
    best = choice.sum(-1).argmax(-1)                                   # each group has two: both count
    assert torch.equal(idx // 2, best[:, None].expand(-1, 2))
    top = scores.gather(-1, idx)
    assert torch.allclose(w, 2.0 * top / top.sum(-1, keepdim=True))


@pytest.mark.parametrize("name", [n for n in MODULES if n.startswith("moe")])
def test_moe_dense_dispatch_equals_the_loop(name):
    """Training on a GPU runs every expert on every token (no host sync); it must equal the
    per-expert loop, gradients included."""
    torch.manual_seed(7)
    mod = MODULES[name]().double()
    xl = torch.randn(37, mod.w_in.shape[-1], dtype=torch.float64)
    _, idx, w = mod.route(torch.randn(37, D, dtype=torch.float64))
    loop = mod._routed(xl, idx, w)
    dense = mod._routed_dense(xl, idx, w)
    assert rel(dense, loop) < TOL
    g_loop = torch.autograd.grad(loop.square().sum(), mod.w_in)[0]
    g_dense = torch.autograd.grad(dense.square().sum(), mod.w_in)[0]
    assert rel(g_dense, g_loop) < TOL


@pytest.mark.parametrize("name", [n for n in MODULES if n.startswith("moe")])
@pytest.mark.parametrize("gather_bytes", [0, 1 << 40], ids=["views", "gathered"])
def test_moe_step_paths_equal_the_forward(name, gather_bytes, monkeypatch):
    """A CPU step gathers small experts and loops over views of large ones (moe.GATHER_BYTES):
    both equal the whole-sequence forward, token by token."""
    from lineage.ffns import moe as moe_module
    monkeypatch.setattr(moe_module, "GATHER_BYTES", gather_bytes)
    torch.manual_seed(8)
    mod = MODULES[name]().double()
    x = torch.randn(3, 5, D, dtype=torch.float64)
    whole, _ = mod(x)
    stepped = torch.stack([mod.step(x[:, t], None)[0] for t in range(5)], 1)
    assert rel(stepped, whole) < TOL
