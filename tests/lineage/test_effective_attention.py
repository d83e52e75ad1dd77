"""The attention each recurrent op's state implements (`attention=True`), in float64 on fresh
random inputs at awkward sizes and both gate extremes, against two formulations it shares no code
with: the token recurrence's read-out (o = A v + the initial state's part) and a plain loop over
the published transition matrices, A[t, s] = c_s q_t M_t ... M_{s+1} k_s^T."""
import pytest
import torch
import torch.nn.functional as F

from lineage import ops
from tests.lineage.test_ops import inputs, rel

TOL = 1e-8


def read_out(A, v, part):
    """o (B, T, H, V) from A (B, H, T, T), v (B, T, H, V) and the state's part."""
    return torch.einsum("bhts,bshv->bthv", A, v) + part


def product_loop(q, k, g, beta, scale):
    """A[b, h, t, s] from the transitions M_j = (I - beta_j k_j k_j^T) diag(alpha_j), one at a time."""
    B, T, H, K = q.shape
    A = torch.zeros(B, H, T, T, dtype=q.dtype)
    eye = torch.eye(K, dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            def M(j):
                if g is None:
                    D = eye
                elif g.dim() == 3:
                    D = eye * torch.exp(g[b, j, h])
                else:
                    D = torch.diag(torch.exp(g[b, j, h]))
                kj = k[b, j, h].reshape(K, 1)
                return (eye - beta[b, j, h] * kj @ kj.T) @ D
            for s in range(T):
                phi = eye.clone()                      # M_t ... M_{s+1}, grown one step at a time
                for t in range(s, T):
                    if t > s:
                        phi = M(t) @ phi
                    A[b, h, t, s] = scale * beta[b, s, h] * q[b, t, h] @ phi @ k[b, s, h]
    return A


FAMILIES = {   # name -> (op, which gates)
    "delta_rule": (ops.delta_rule, lambda g_ch, g_hd, beta: (beta,)),
    "gated_delta_rule": (ops.gated_delta_rule, lambda g_ch, g_hd, beta: (g_hd, beta)),
    "kda": (ops.kda, lambda g_ch, g_hd, beta: (g_ch, beta)),
}


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("T", [1, 7, 63])
@pytest.mark.parametrize("g_mode,beta_mode", [("random", "random"), ("zero", "one"), ("min", "zero"), ("min", "one")])
def test_delta_family_attention_gives_the_recurrence(name, T, g_mode, beta_mode):
    op, gates = FAMILIES[name]
    q, k, v, beta, g_ch, g_hd, S0 = inputs(T, K=60, V=20, g_mode=g_mode, beta_mode=beta_mode)
    gs = gates(g_ch, g_hd, beta)
    o, S = op(q, k, v, *gs, initial_state=S0)                                 # the token recurrence
    o2, S2, A, part = op(q, k, v, *gs, initial_state=S0, chunk_size=16, attention=True)
    assert A.shape == (2, 3, T, T) and part.shape == o.shape
    assert rel(read_out(A, v, part), o) < TOL
    assert rel(o2, o) < TOL and rel(S2, S) < TOL                              # the op's own results unchanged
    assert not A.triu(1).any()                                                # causal
    _, _, A_other, part0 = op(q, k, torch.randn_like(v), *gs, attention=True)   # other values, no state
    assert rel(A_other, A) < TOL                                              # A depends on neither
    assert part0.abs().max() == 0


@pytest.mark.parametrize("name", FAMILIES)
def test_delta_family_attention_is_the_product_of_transitions(name):
    op, gates = FAMILIES[name]
    q, k, v, beta, g_ch, g_hd, S0 = inputs(13, K=6, V=3, B=1, H=2)
    gs = gates(g_ch * 0.3, g_hd * 0.3, beta * 1.5)      # decays that leave old writes readable; beta up to 1.5
    _, _, A, _ = op(q, k, v, *gs, attention=True)
    want = product_loop(q, k, gs[0] if len(gs) == 2 else None, gs[-1], 6 ** -0.5)
    assert rel(A, want) < TOL
    assert (A < 0).any()        # the delta rule's correction: negative weight where a write erased


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("T", [1, 63, 100])
def test_linear_attention_attention_gives_the_loop(normalize, T):
    q, k, v, _, _, _, S0 = inputs(T, K=60, V=20)
    q, k = F.elu(q) + 1, F.elu(k) + 1                                         # the layer's feature map
    z0 = torch.rand(2, 3, 60, dtype=torch.float64)
    o, _ = ops.linear_attention(q, k, v, normalize=normalize, initial_state=(S0, z0))
    _, _, A, part = ops.linear_attention(q, k, v, normalize=normalize, initial_state=(S0, z0), attention=True)
    assert rel(read_out(A, v, part), o) < TOL
    scale = 60 ** -0.5
    t, s = min(T - 1, 40), min(T - 1, 17)
    den = scale * q[0, t, 1] @ (z0[0, 1] + k[0, :t + 1, 1].sum(0)) if normalize else 1.0
    assert A[0, 1, t, s] == pytest.approx(float(scale * q[0, t, 1] @ k[0, s, 1] / den), rel=1e-12)
    assert not A.triu(1).any()


@pytest.mark.parametrize("T", [1, 63])
@pytest.mark.parametrize("decay", ["random", "none", "huge"])
def test_ssd_attention_gives_the_recurrence(T, decay):
    gen = torch.Generator().manual_seed(torch.seed() % 2**31)
    b, H, P, G, N = 2, 4, 20, 2, 60
    d = torch.float64
    x = torch.randn(b, T, H, P, generator=gen, dtype=d)
    dt = torch.rand(b, T, H, generator=gen, dtype=d) + 0.05
    A_log = {"random": -2 * torch.rand(b, T, H, generator=gen, dtype=d),
             "none": torch.zeros(b, T, H, dtype=d), "huge": torch.full((b, T, H), -40.0, dtype=d)}[decay]
    g = dt * A_log
    Bm, Cm = (torch.randn(b, T, G, N, generator=gen, dtype=d) for _ in range(2))
    D = torch.randn(H, generator=gen, dtype=d)
    S0 = torch.randn(b, H, N, P, generator=gen, dtype=d)
    y, _ = ops.ssd(x, dt, g, Bm, Cm, D=D, initial_state=S0)
    _, _, A, part = ops.ssd(x, dt, g, Bm, Cm, D=D, initial_state=S0, chunk_size=16, attention=True)
    assert rel(read_out(A, x, part) + D[:, None] * x, y) < TOL
    t, s = T - 1, max(0, T - 3)                    # by hand: (C_t . B_s) dt_s prod_{s < j <= t} alpha_j
    want = Cm[0, t, 0] @ Bm[0, s, 0] * dt[0, s, 1] * torch.exp(g[0, s + 1:t + 1, 1].sum())
    assert A[0, 1, t, s] == pytest.approx(float(want), rel=1e-10, abs=1e-300)
