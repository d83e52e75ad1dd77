"""Gated DeltaNet with beta in (0, 2) (negative eigenvalues, OLMo-Hybrid), and the two attention
block options OLMo-Hybrid brings with it (post-norm blocks, q/k norm over all heads).

The references are float64 plain loops written out here, one head and one token at a time, not
lineage.ops' own recurrence: beta near 2 makes the write a near-reflection of what k recalls,
which a formula that assumed beta <= 1 anywhere (a clamp, a bound, a 1 - beta that must be >= 0)
would get wrong."""
import dataclasses

import pytest
import torch

from lineage import ops
from lineage.arithmetic import count
from lineage.config_dict import config_from_dict
from lineage.configs import AttentionConfig, ConfigError, DenseFFNConfig, GatedDeltaNetConfig, ModelConfig
from lineage.mixers.gated_deltanet.module import GatedDeltaNet
from lineage.model import LM
from lineage.observed import LayerObs


def plain_loop(q, k, v, g, beta, S0, scale):
    """S = e^g S;  S = S + k^T beta (v - k S);  o = scale q S: per batch, head and token, float64."""
    B, T, H, K = q.shape
    o = torch.zeros(B, T, H, v.shape[-1], dtype=torch.float64)
    S = S0.double().clone()
    for b in range(B):
        for h in range(H):
            s = S[b, h]                                                  # (K, V)
            for t in range(T):
                s = s * torch.exp(g[b, t, h].double())
                kt = k[b, t, h].double()
                s = s + torch.outer(kt, beta[b, t, h].double() * (v[b, t, h].double() - kt @ s))
                o[b, t, h] = scale * q[b, t, h].double() @ s
            S[b, h] = s
    return o, S


def near_two(T=63, K=33, V=20, H=3, B=2, seed=0):
    """Inputs with beta in (1.9, 2) and a weak decay (a strong one would hide what beta does)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, K, generator=gen)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    v = torch.randn(B, T, H, V, generator=gen)
    g = -0.1 * torch.rand(B, T, H, generator=gen)
    beta = 2 - 0.1 * torch.rand(B, T, H, generator=gen)
    S0 = torch.randn(B, H, K, V, generator=gen)
    return q, k, v, g, beta, S0


def rel(a, b):
    return float((a.double() - b).norm() / b.norm())


@pytest.mark.parametrize("chunk_size", [None, 16, 64])
def test_ops_at_beta_near_two_equal_a_plain_loop(chunk_size):
    q, k, v, g, beta, S0 = near_two()
    o_ref, S_ref = plain_loop(q, k, v, g, beta, S0, 33 ** -0.5)
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
        o, S = ops.gated_delta_rule(*(x.to(dtype) for x in (q, k, v, g, beta)), initial_state=S0.to(dtype),
                                    chunk_size=chunk_size)
        assert rel(o, o_ref) < tol and rel(S, S_ref) < tol, (dtype, rel(o, o_ref), rel(S, S_ref))


def test_beta_two_on_one_key_flips_what_it_recalls():
    """With beta = 2 and no decay, writing value 0 under a unit key negates what the key recalled:
    the transition has eigenvalue 1 - beta = -1 along k (beta = 1 would erase it)."""
    K, V = 5, 3
    k = torch.nn.functional.normalize(torch.randn(K, dtype=torch.float64), dim=0)
    S0 = torch.randn(1, 1, K, V, dtype=torch.float64)
    shape = (1, 1, 1)
    for chunk in (None, 8):
        _, S = ops.gated_delta_rule(k.view(1, 1, 1, K), k.view(1, 1, 1, K), torch.zeros(1, 1, 1, V, dtype=torch.float64),
                                    torch.zeros(shape, dtype=torch.float64), torch.full(shape, 2.0, dtype=torch.float64),
                                    initial_state=S0, chunk_size=chunk)
        assert torch.allclose(k @ S[0, 0], -(k @ S0[0, 0]))


def gdn(allow, **kw):
    torch.manual_seed(0)
    cfg = GatedDeltaNetConfig(d_model=24, n_heads=3, head_dim=7, conv_size=3, allow_neg_eigval=allow, **kw)
    m = GatedDeltaNet(cfg).double().eval()
    with torch.no_grad():
        m.b_proj.weight.mul_(8)                                   # betas spread to both ends of their range
    return m


@pytest.mark.parametrize("allow", [False, True])
def test_module_beta_range_and_observed_beta(allow):
    m = gdn(allow)
    x = torch.randn(2, 24, dtype=torch.float64)
    obs = LayerObs()
    with torch.no_grad():
        m.step(x, None, obs)
        want = (2 if allow else 1) * torch.sigmoid(m.b_proj(x))
    assert torch.allclose(obs.mixer.beta, want)
    assert float(obs.mixer.beta.max()) > (1.5 if allow else 0.9) and float(obs.mixer.beta.max()) < (2 if allow else 1)


@pytest.mark.parametrize("chunk_size", [None, 16])
def test_module_forward_equals_steps_with_beta_up_to_two(chunk_size):
    m = gdn(True, chunk_size=chunk_size)
    x = torch.randn(2, 63, 24, dtype=torch.float64)
    with torch.no_grad():
        y, st = m(x[:, :40])
        y2, st = m(x[:, 40:], st)
        s = None
        steps = []
        for t in range(63):
            o, s = m.step(x[:, t], s)
            steps.append(o)
    assert torch.allclose(torch.cat([y, y2], 1), torch.stack(steps, 1), atol=1e-10)
    assert torch.allclose(st.S, s.S, atol=1e-10) and torch.allclose(st.conv, s.conv)


def test_flag_changes_nothing_else():
    """Same weights, flag off and on: the same q, k, v and decay; only beta doubles."""
    off, on = gdn(False), gdn(True)
    on.load_state_dict(off.state_dict())
    x = torch.randn(1, 9, 24, dtype=torch.float64)
    a, b = off._qkvb(x, None), on._qkvb(x, None)
    for i in (0, 1, 2, 4):
        assert torch.equal(a[i], b[i])
    assert torch.equal(2 * a[3], b[3])
    assert GatedDeltaNetConfig().allow_neg_eigval is False
    assert GatedDeltaNetConfig(allow_neg_eigval=True).params() == GatedDeltaNetConfig().params()


# ------------------------------------------------------- post-norm blocks, all-heads q/k norm

def olmo_like(post=("softmax",), all_heads=True):
    d = 30
    return ModelConfig(
        name="olmo-like", vocab_size=53, d_model=d, mixers=("gdn", "softmax", "gdn"), ffns=("dense",) * 3,
        attention=AttentionConfig(d_model=d, n_heads=5, n_kv_heads=1, bias=False, qk_norm=True,
                                  qk_norm_all_heads=all_heads, rope_dim=6),
        gdn=GatedDeltaNetConfig(d_model=d, n_heads=3, head_dim=5, conv_size=3, allow_neg_eigval=True),
        dense=DenseFFNConfig(d_model=d, d_ff=20, act="silu"), post_norm=post)


def stirred(model):
    torch.manual_seed(3)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.4)
    return model.double().eval()


def test_post_norm_block_is_what_it_says():
    """One post-norm block by hand: x + n1(attn(x)), then + n2(ffn(.))."""
    model = stirred(LM(olmo_like()))
    blk = model.blocks[1]
    assert blk.post and not model.blocks[0].post
    x = torch.randn(2, 7, 30, dtype=torch.float64)
    from lineage.model import Residual
    res = Residual(x)
    with torch.no_grad():
        blk(res, None)
        h = x + blk.norm1(blk.mixer(x)[0])
        want = h + blk.norm2(blk.ffn(h)[0])
    assert torch.allclose(res.x, want)


def test_all_heads_qk_norm_is_one_rms_over_every_head():
    cfg = olmo_like()
    cfg.attention = dataclasses.replace(cfg.attention, rope_dim=0)
    att = stirred(LM(cfg)).blocks[1].mixer
    assert att.q_norm.weight.shape == (30,) and att.k_norm.weight.shape == (6,)
    x = torch.randn(1, 4, 30, dtype=torch.float64)
    with torch.no_grad():
        q, k = att._qkv(x)[:2]                                   # (B, H, T, D), (B, Hkv, T, D)
        raw = att.c_attn(x)
        for got, part, w in ((q, raw[..., :30], att.q_norm.weight), (k, raw[..., 30:36], att.k_norm.weight)):
            want = part * torch.rsqrt(part.pow(2).mean(-1, keepdim=True) + 1e-6) * w      # (B, T, H*D)
            assert torch.allclose(got.transpose(1, 2).flatten(-2), want)


@pytest.mark.parametrize("post,all_heads", [(("softmax",), True), (None, True), (("softmax", "gdn"), False)])
def test_model_forward_equals_steps_and_counts(post, all_heads):
    model = stirred(LM(olmo_like(post, all_heads)))
    ids = torch.randint(0, 53, (2, 20))
    with torch.no_grad():
        logits, _ = model(ids)
        st, outs = None, []
        for t in range(20):
            lg, st = model.step(ids[:, t], st)
            outs.append(lg)
    assert torch.allclose(logits, torch.stack(outs, 1), atol=1e-9)
    assert count(model.cfg)["total"] == sum(p.numel() for p in model.parameters())


def test_config_round_trip_and_refusals():
    cfg = olmo_like()
    back = config_from_dict(dataclasses.asdict(cfg))
    assert back.post_norm == ("softmax",) and back.gdn.allow_neg_eigval and back.attention.qk_norm_all_heads
    assert ModelConfig().post_norm is None and AttentionConfig().qk_norm_all_heads is False
    with pytest.raises(ConfigError, match="post_norm names 'attention'"):
        olmo_like(post=("attention",)).check()
