"""Mamba-2: lineage.ops.ssd (token recurrence and chunked form) against a plain float64 loop
written from the equations, its gates at their extremes, the module's forward against its
step, and its arithmetic against the module it describes."""
import pytest
import torch

from lineage import arithmetic, ops
from lineage.backend import set_backend
from lineage.configs import MIXERS, Mamba2Config
from lineage.mixers.mamba2.module import Mamba2
from lineage.model import LM
from lineage.presets import get_preset
from lineage.observed import LayerObs

F64 = torch.float64


def loop(x, dt, A, B, C, D, S0):
    """Per sequence, per head, per token, from Mamba-2's equations:
        S_t = exp(dt_t A) S_{t-1} + outer(B_t, dt_t x_t),   y_t = C_t S_t + D x_t,
    head h reading group h // (H / G) of B and C."""
    b, T, H, P = x.shape
    G = B.shape[2]
    y = torch.zeros_like(x)
    S_end = torch.zeros_like(S0)
    for i in range(b):
        for h in range(H):
            j = h // (H // G)
            S = S0[i, h].clone()                                              # (N, P)
            for t in range(T):
                S = torch.exp(dt[i, t, h] * A[h]) * S + torch.outer(B[i, t, j], dt[i, t, h] * x[i, t, h])
                y[i, t, h] = C[i, t, j] @ S + D[h] * x[i, t, h]
            S_end[i, h] = S
    return y, S_end


def inputs(seed, b=2, T=63, H=6, P=60, G=3, N=20, dtype=F64, dt_scale=1.0, A_scale=3.0):
    """Fresh random inputs: dt > 0, A < 0 per head, and an initial state that is not zero."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, T, H, P, generator=gen, dtype=dtype)
    dt = dt_scale * torch.rand(b, T, H, generator=gen, dtype=dtype)
    A = -A_scale * (0.05 + torch.rand(H, generator=gen, dtype=dtype))
    B = torch.randn(b, T, G, N, generator=gen, dtype=dtype)
    C = torch.randn(b, T, G, N, generator=gen, dtype=dtype)
    D = torch.randn(H, generator=gen, dtype=dtype)
    S0 = torch.randn(b, H, N, P, generator=gen, dtype=dtype)
    return x, dt, A, B, C, D, S0


def run(x, dt, A, B, C, D, S0, chunk_size):
    return ops.ssd(x, dt, dt * A, B, C, D=D, initial_state=S0, chunk_size=chunk_size)


def close(a, b, tol):
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item() < tol


@pytest.mark.parametrize("G", [1, 3, 6])
@pytest.mark.parametrize("seed", [0, 1])
def test_both_forms_equal_the_loop_in_float64(G, seed):
    """T = 63 and head width 60, which no chunk size below divides; G groups for 6 heads."""
    args = inputs(seed, G=G)
    y_ref, S_ref = loop(*args)
    for chunk in (None, 1, 5, 16, 64, 100):
        y, S = run(*args, chunk)
        assert close(y, y_ref, 1e-12) and close(S, S_ref, 1e-12), f"chunk_size={chunk}"


def test_float32_forms_agree():
    args = inputs(2, T=40, dtype=torch.float32)
    y0, S0 = run(*args, None)
    y1, S1 = run(*args, 16)
    assert y1.dtype == torch.float32 and close(y1, y0, 1e-5) and close(S1, S0, 1e-5)


@pytest.mark.parametrize("chunk", [None, 16])
def test_dt_near_zero_holds_the_state(chunk):
    """dt -> 0: alpha = exp(dt A) -> 1 and the write dt x -> 0, so the state is what came in and
    each output reads it (plus the skip)."""
    x, dt, A, B, C, D, S0 = inputs(3, T=21, dt_scale=1e-12)
    y, S = run(x, dt, A, B, C, D, S0, chunk)
    assert torch.allclose(S, S0, rtol=0, atol=1e-9)
    Ch = C.repeat_interleave(2, dim=2)                                          # (b, T, H, N): G = 3 for 6 heads
    held = torch.einsum("bthn,bhnp->bthp", Ch, S0) + D[:, None] * x
    assert torch.allclose(y, held, rtol=0, atol=1e-9)


@pytest.mark.parametrize("chunk", [None, 16])
def test_a_huge_decay_forgets_each_step(chunk):
    """dt |A| of 10^4: alpha = 0, so after every step the state is that token's write alone,
    and nothing overflows in the chunked form's exponentials."""
    x, dt, A, B, C, D, S0 = inputs(4, T=21, dt_scale=1.0)
    dt = dt + 0.5                                                               # in [0.5, 1.5]
    A = torch.full_like(A, -2e4)
    y, S = run(x, dt, A, B, C, D, S0, chunk)
    Bh, Ch = (t.repeat_interleave(2, dim=2) for t in (B, C))                    # (b, T, H, N)
    u = dt[..., None] * x                                                       # (b, T, H, P)
    only_now = torch.einsum("bthn,bthp->bthnp", Bh, u)                          # (b, T, H, N, P)
    assert torch.isfinite(y).all() and torch.allclose(S, only_now[:, -1], rtol=0, atol=1e-10)
    now = torch.einsum("bthn,bthnp->bthp", Ch, only_now) + D[:, None] * x
    assert torch.allclose(y, now, rtol=0, atol=1e-10)


def test_bad_shapes_are_named():
    x, dt, A, B, C, D, S0 = inputs(5, T=4, H=6, G=4)
    with pytest.raises(ValueError, match="groups"):
        run(x, dt, A, B, C, D, S0, None)
    x, dt, A, B, C, D, S0 = inputs(5, T=4)
    with pytest.raises(ValueError, match="chunk_size"):
        run(x, dt, A, B, C, D, S0, 0)
    with pytest.raises(ValueError, match="initial_state"):
        run(x, dt, A, B, C, D, S0[:, :2], None)


# ---------------------------------------------------------------------------- the module

CONFIGS = {
    "groups": dict(d_model=60, n_heads=6, head_dim=10, state_dim=12, n_groups=3, chunk_size=16),
    "one-group-recurrent": dict(d_model=60, n_heads=4, head_dim=15, state_dim=8, chunk_size=None),
    "no-conv": dict(d_model=60, n_heads=2, head_dim=30, state_dim=20, n_groups=2, conv_size=0, chunk_size=5),
}


def randomised(cfg: Mamba2Config) -> Mamba2:
    """A float64 module whose skip, norm and biases are not at their init, so each shows."""
    torch.manual_seed(0)
    m = Mamba2(cfg).double()
    with torch.no_grad():
        for p in (m.D, m.norm.weight, m.dt_bias) + (() if m.conv_bias is None else (m.conv_bias,)):
            p.add_(0.3 * torch.randn_like(p))
    return m


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("T", [1, 7, 63])
def test_forward_equals_stepping_token_by_token(name, T):
    m = randomised(Mamba2Config(**CONFIGS[name]))
    x = torch.randn(2, T, 60, dtype=F64)
    with torch.no_grad():
        y, st = m(x)
        state, ys = None, []
        for t in range(T):
            y_t, state = m.step(x[:, t], state, LayerObs())
            ys.append(y_t)
        assert close(torch.stack(ys, 1), y, 1e-10) and close(state.S, st.S, 1e-10)
        assert (st.conv is None) == (state.conv is None) == (m.conv is None)
        assert st.conv is None or close(state.conv, st.conv, 1e-12)
        # a forward from a state continues the sequence as the steps did
        x2 = torch.randn(2, 5, 60, dtype=F64)
        y2, st2 = m(x2, st)
        for t in range(5):
            y_t, state = m.step(x2[:, t], state, LayerObs())
        assert close(y_t, y2[:, -1], 1e-10) and close(state.S, st2.S, 1e-10)


def test_step_observes_the_state_and_one_retention_per_head():
    m = randomised(Mamba2Config(**CONFIGS["groups"]))
    x = torch.randn(1, 60, dtype=F64)
    obs = LayerObs()
    with torch.no_grad():
        _, state = m.step(x, None, LayerObs())
        _, state2 = m.step(x, state, obs)
        alpha = m._decay(x[:, None])[:, 0].exp()
    assert obs.mixer.S.shape == (1, 6, 12, 10) and obs.mixer.alpha.shape == (1, 6)
    assert torch.allclose(obs.mixer.alpha, alpha) and ((alpha > 0) & (alpha < 1)).all()
    assert torch.allclose(obs.mixer.S, alpha[..., None, None] * state.S + obs.mixer.dS)      # faded, then added
    assert obs.mixer.state_bytes == 6 * 12 * 10 * 8


def test_arithmetic_counts_the_modules():
    cfg = get_preset("tiny-mamba2")
    model = LM(cfg)
    assert arithmetic.count(cfg)["total"] == sum(p.numel() for p in model.parameters())
    for kw in CONFIGS.values():
        c = Mamba2Config(**kw)
        assert c.params() == sum(p.numel() for p in Mamba2(c).parameters())
    # state: S per head in fp32 plus the conv's last conv_size - 1 inputs of x | B | C
    with torch.no_grad():
        _, st = Mamba2(Mamba2Config(**CONFIGS["groups"]))(torch.randn(1, 3, 60))
    c = Mamba2Config(**CONFIGS["groups"])
    assert c.state_bytes(4, 4) == st.S.numel() * 4 + st.conv.numel() * 4


def test_never_routed_to_the_kernels():
    """No Triton kernel runs Mamba-2: the Triton backend leaves its layers alone (they have no
    backend to set), and the model runs."""
    assert not MIXERS["mamba2"].kernel
    model = LM(get_preset("tiny-mamba2")).eval()
    set_backend(model, "triton")
    assert not any(hasattr(b.mixer, "backend") for b in model.blocks)
    with torch.no_grad():
        logits, _ = model(torch.tensor([[1, 2, 3]]))
    assert torch.isfinite(logits).all()
