"""What Mamba-2's step observes, against a plain float64 loop of the SSD recurrence: the read is
the delta rule's convention (lineage/mixers/deltanet/module.py: read = k S after the decay, before this
token's write), with Mamba-2's B as the key, so the state panel reads both families alike.

    S'_t = alpha_t S_{t-1}                 alpha_t = exp(dt_t A), one per head
    read_t = B_t S'_t                      what B_t recalls, before the write
    dS_t = outer(B_t, dt_t x_t),   S_t = S'_t + dS_t

At an awkward size: odd state and head widths, three heads a group, a seq no chunk divides."""
import torch

from lineage.configs import Mamba2Config
from lineage.mixers.mamba2.module import Mamba2
from lineage.observed import LayerObs

F64 = torch.float64
CFG = dict(d_model=30, n_heads=6, head_dim=7, state_dim=5, n_groups=2, conv_size=3, chunk_size=4)


def loop(xs, dt, A, Bm):
    """Per head and token: (reads, writes, states), each (T, H, ...), in float64 from the equations."""
    T, H, P = xs.shape
    G, N = Bm.shape[1:]
    reads, writes, states = torch.zeros(T, H, P, dtype=F64), torch.zeros(T, H, N, P, dtype=F64), \
        torch.zeros(T, H, N, P, dtype=F64)
    for h in range(H):
        b = Bm[:, h // (H // G)]                                      # (T, N): head h's group
        S = torch.zeros(N, P, dtype=F64)
        for t in range(T):
            S = torch.exp(dt[t, h] * A[h]) * S                        # the fade, before anything is read
            reads[t, h] = b[t] @ S
            writes[t, h] = torch.outer(b[t], dt[t, h] * xs[t, h])
            S = S + writes[t, h]
            states[t, h] = S
    return reads, writes, states


def test_the_observed_read_is_b_against_the_decayed_state_before_the_write():
    torch.manual_seed(3)
    m = Mamba2(Mamba2Config(**CFG)).double()
    with torch.no_grad():
        for p in (m.dt_bias, m.conv_bias):
            p.add_(0.5 * torch.randn_like(p))
        T = 13
        x = torch.randn(1, T, CFG["d_model"], dtype=F64)
        _, xs, Bm, _, _ = m._inputs(x, None)                          # the causal conv: as the steps see it
        dt, A = m._dt(x)[0], -m.A_log.double().exp()
        reads, writes, states = loop(xs[0], dt, A, Bm[0])
        state, seen = None, []
        for t in range(T):
            obs = LayerObs()
            _, state = m.step(x[:, t], state, obs)
            seen.append(obs.mixer)
    for t, o in enumerate(seen):
        assert torch.allclose(o.read[0], reads[t], rtol=1e-10, atol=1e-12), t
        assert torch.allclose(o.dS[0], writes[t], rtol=1e-10, atol=1e-12), t
        assert torch.allclose(o.S[0], states[t], rtol=1e-10, atol=1e-12), t
        # and not the read after the write: B against S_t differs by B (B^T dt x) = |B|^2 dt x
        after = torch.einsum("hn,hnp->hp", o.k[0], o.S[0])
        assert not torch.allclose(o.read[0], after, rtol=1e-6, atol=1e-9), t
    assert reads[0].abs().max() == 0                                  # nothing to recall before the first write
