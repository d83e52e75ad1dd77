"""lineage.ops against independent formulations, in float64, on fresh random inputs.

The independent formulation is a plain loop over batch, head and token written in the
matrix form of the Kimi Linear report, S_t = (I - beta k^T k) Diag(alpha) S_{t-1} + beta k^T v,
which shares no code with the vectorised recurrence or the chunked solve.
"""
import pytest
import torch
import torch.nn.functional as F

from lineage import ops

RTOL = 1e-10
SIZES = [1, 7, 63, 100]


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def plain_loop(q, k, v, g, beta, scale, S0, normalize_la=None):
    """Per (b, h, t) loop in the published matrix form. g: None, (B,T,H) or (B,T,H,K)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    o = torch.zeros(B, T, H, V, dtype=q.dtype)
    S_out = torch.zeros(B, H, K, V, dtype=q.dtype)
    eye = torch.eye(K, dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            S = S0[b, h].clone()
            for t in range(T):
                kt = k[b, t, h].reshape(K, 1)                 # column key
                if g is None:
                    D = eye
                elif g.dim() == 3:
                    D = eye * torch.exp(g[b, t, h])
                else:
                    D = torch.diag(torch.exp(g[b, t, h]))
                bt = beta[b, t, h]
                S = (eye - bt * kt @ kt.T) @ D @ S + bt * kt @ v[b, t, h].reshape(1, V)
                o[b, t, h] = scale * q[b, t, h] @ S
            S_out[b, h] = S
    return o, S_out


def inputs(T, K=60, V=20, B=2, H=3, seed=None, g_mode="random", beta_mode="random"):
    gen = torch.Generator().manual_seed(seed if seed is not None else torch.seed() % 2**31)
    dt = torch.float64
    q = torch.randn(B, T, H, K, generator=gen, dtype=dt)
    k = F.normalize(torch.randn(B, T, H, K, generator=gen, dtype=dt), dim=-1)
    v = torch.randn(B, T, H, V, generator=gen, dtype=dt)
    beta = {"random": torch.rand(B, T, H, generator=gen, dtype=dt),
            "zero": torch.zeros(B, T, H, dtype=dt),
            "one": torch.ones(B, T, H, dtype=dt)}[beta_mode]
    if g_mode == "random":
        g_ch = -5 * torch.rand(B, T, H, K, generator=gen, dtype=dt)
        g_hd = -5 * torch.rand(B, T, H, generator=gen, dtype=dt)
    else:
        val = {"zero": 0.0, "min": -5.0}[g_mode]
        g_ch = torch.full((B, T, H, K), val, dtype=dt)
        g_hd = torch.full((B, T, H), val, dtype=dt)
    S0 = torch.randn(B, H, K, V, generator=gen, dtype=dt)
    return q, k, v, beta, g_ch, g_hd, S0


def run_all_forms(op, q, k, v, gates, S0):
    K = q.shape[-1]
    ref_o, ref_S = plain_loop(q, k, v, gates[0] if len(gates) == 2 else None, gates[-1], K ** -0.5, S0)
    results = {"recurrent": op(q, k, v, *gates, initial_state=S0)}
    for C in (16, 64):
        results[f"chunk{C}"] = op(q, k, v, *gates, initial_state=S0, chunk_size=C)
    for name, (o, S) in results.items():
        assert rel(o, ref_o) < RTOL, (op.__name__, name, "output", rel(o, ref_o))
        assert rel(S, ref_S) < RTOL, (op.__name__, name, "state", rel(S, ref_S))


@pytest.mark.parametrize("T", SIZES)
def test_delta_rule_forms_agree(T):
    q, k, v, beta, _, _, S0 = inputs(T)
    run_all_forms(ops.delta_rule, q, k, v, (beta,), S0)


@pytest.mark.parametrize("T", SIZES)
def test_gated_delta_rule_forms_agree(T):
    q, k, v, beta, _, g, S0 = inputs(T)
    run_all_forms(ops.gated_delta_rule, q, k, v, (g, beta), S0)


@pytest.mark.parametrize("T", SIZES)
def test_kda_forms_agree(T):
    q, k, v, beta, g, _, S0 = inputs(T)
    run_all_forms(ops.kda, q, k, v, (g, beta), S0)


@pytest.mark.parametrize("g_mode", ["zero", "min"])
@pytest.mark.parametrize("beta_mode", ["zero", "one", "random"])
def test_gate_extremes(g_mode, beta_mode):
    q, k, v, beta, g_ch, g_hd, S0 = inputs(63, g_mode=g_mode, beta_mode=beta_mode)
    run_all_forms(ops.kda, q, k, v, (g_ch, beta), S0)
    run_all_forms(ops.gated_delta_rule, q, k, v, (g_hd, beta), S0)
    run_all_forms(ops.delta_rule, q, k, v, (beta,), S0)


def test_gate_extremes_meaning():
    """g = 0 is the plain delta rule; beta = 0 writes nothing, so only decay acts."""
    q, k, v, beta, g_ch, g_hd, S0 = inputs(20, g_mode="zero")
    assert rel(ops.kda(q, k, v, g_ch, beta, initial_state=S0)[1],
               ops.delta_rule(q, k, v, beta, initial_state=S0)[1]) < RTOL
    q, k, v, beta, g_ch, g_hd, S0 = inputs(20, beta_mode="zero")
    _, S = ops.kda(q, k, v, g_ch, beta, initial_state=S0, chunk_size=16)
    expect = S0 * g_ch.sum(1).exp()[..., None]
    assert rel(S, expect) < RTOL


def test_float32_chunked_close_at_strong_decay():
    """The chunked form must not overflow in float32 when cumulative decay reaches -5 * 64."""
    q, k, v, beta, g, _, S0 = inputs(130, g_mode="min", seed=1)
    q, k, v, beta, g, S0 = (x.float() for x in (q, k, v, beta, g, S0))
    o1, S1 = ops.kda(q, k, v, g, beta, initial_state=S0)
    o2, S2 = ops.kda(q, k, v, g, beta, initial_state=S0, chunk_size=64)
    assert torch.isfinite(o2).all() and rel(o2, o1) < 1e-5 and rel(S2, S1) < 1e-5


def test_linear_attention_matches_loop():
    for T in SIZES:
        q, k, v, _, _, _, S0 = inputs(T)
        q, k = F.elu(q) + 1, F.elu(k) + 1
        z0 = torch.rand(2, 3, 60, dtype=torch.float64)
        scale = 60 ** -0.5
        for normalize in (True, False):
            o, (S, z) = ops.linear_attention(q, k, v, normalize=normalize, initial_state=(S0, z0))
            Sr, zr = S0.clone(), z0.clone()
            ref = torch.zeros_like(o)
            for t in range(T):
                Sr = Sr + k[:, t, :, :, None] * v[:, t, :, None, :]
                zr = zr + k[:, t]
                num = torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, Sr)
                den = torch.einsum("bhk,bhk->bh", q[:, t] * scale, zr)[..., None]
                ref[:, t] = num / den if normalize else num
            assert rel(o, ref) < RTOL and rel(S, Sr) < RTOL and rel(z, zr) < RTOL


def test_situ():
    x = torch.linspace(-50, 50, 1001, dtype=torch.float64)
    y = ops.situ(x)
    assert (y.abs() <= 4.0).all()                                 # bounded by beta
    small = x.abs() < 1e-2
    assert torch.allclose(y[small], F.silu(x[small]), atol=1e-6)   # SiLU-like near 0
    xx = torch.randn(5, 8, dtype=torch.float64) * 40
    gate, up = xx.chunk(2, -1)
    expect = 4 * torch.tanh(gate / 4) * torch.sigmoid(gate) * (25 * torch.tanh(up / 25))
    assert rel(ops.situ_glu(xx, 4.0, 25.0), expect) < RTOL
    with pytest.raises(ValueError):
        ops.situ_glu(torch.randn(3, 5))


def test_attn_res():
    N, D = 5, 60
    src = torch.randn(N, 2, 3, D, dtype=torch.float64)
    w = torch.randn(D, dtype=torch.float64)
    gain = torch.rand(D, dtype=torch.float64)
    h, p = ops.attn_res(w, src, gain)
    assert p.shape == (N, 2, 3) and torch.allclose(p.sum(0), torch.ones(2, 3, dtype=torch.float64))
    # plain loop
    for i in range(2):
        for j in range(3):
            s = torch.stack([(w * gain) @ (src[n, i, j] / src[n, i, j].pow(2).mean().add(1e-6).sqrt())
                             for n in range(N)])
            pr = torch.softmax(s, 0)
            assert rel(p[:, i, j], pr) < RTOL
            assert rel(h[i, j], (pr[:, None] * src[:, i, j]).sum(0)) < RTOL
    # scaling a source up does not change its key: the norm protects against loud layers
    src2 = src.clone()
    src2[2] *= 100
    assert rel(ops.attn_res(w, src2, gain)[1], p) < 1e-5   # equal up to eps


def test_shape_errors_are_clear():
    q = torch.randn(1, 4, 2, 8)
    with pytest.raises(ValueError, match="beta"):
        ops.delta_rule(q, q, q, torch.rand(1, 4, 3))
    with pytest.raises(ValueError, match="g must be"):
        ops.kda(q, q, q, torch.rand(1, 4, 2), torch.rand(1, 4, 2))
    with pytest.raises(ValueError, match="chunk_size"):
        ops.delta_rule(q, q, q, torch.rand(1, 4, 2), chunk_size=0)


@pytest.mark.parametrize("C", [1, 5, 12, 24, 128])
def test_any_chunk_size(C):
    """Chunk sizes that are not a multiple of the sub-chunk take the pairwise path; larger ones many sub-chunks."""
    q, k, v, beta, g, _, S0 = inputs(63, K=20, V=9)
    o1, S1 = ops.kda(q, k, v, g, beta, initial_state=S0)
    o2, S2 = ops.kda(q, k, v, g, beta, initial_state=S0, chunk_size=C)
    assert rel(o2, o1) < RTOL and rel(S2, S1) < RTOL
