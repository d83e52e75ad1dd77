"""The Triton kernels with beta in (0, 2) (Gated DeltaNet with negative eigenvalues, OLMo-Hybrid),
on the CPU under TRITON_INTERPRET=1 (run by tests/kernels/test_interpreter.py in a child pytest).

Nothing in the kernels may assume beta <= 1: the chunk's (I + A) then has entries up to 2 and its
inverse alternates in sign, and the step's write nearly reflects what k recalls. The reference is a
float64 plain loop written out here, per head and token; T = 63 leaves a masked tail chunk and
K = 33 is odd (the kernels pad it to 64 channels), V = 20 is no power of two."""
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="triton is not installed: the kernels cannot run")

from lineage.ops import kernels                      # noqa: E402
from lineage.observed import StepObs

B, T, H, K, V = 2, 63, 3, 33, 20          # near_two's sizes


def plain_loop(q, k, v, g, beta, S0):
    """S = e^g S;  S = S + k^T beta (v - k S);  o = K^-1/2 q S, in float64."""
    B, T, H, K = q.shape
    o = torch.zeros(B, T, H, v.shape[-1], dtype=torch.float64)
    S = S0.double().clone()
    for b in range(B):
        for h in range(H):
            s = S[b, h]
            for t in range(T):
                s = s * torch.exp(g[b, t, h].double())
                kt = k[b, t, h].double()
                s = s + torch.outer(kt, beta[b, t, h].double() * (v[b, t, h].double() - kt @ s))
                o[b, t, h] = K ** -0.5 * q[b, t, h].double() @ s
            S[b, h] = s
    return o, S


def near_two(seed, decay=0.1):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, K, generator=gen)
    k = F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    v = torch.randn(B, T, H, V, generator=gen)
    g = -decay * torch.rand(B, T, H, generator=gen)
    beta = 2 - 0.1 * torch.rand(B, T, H, generator=gen)          # (1.9, 2)
    S0 = torch.randn(B, H, K, V, generator=gen)
    return q, k, v, g, beta, S0


def close(a, b, rtol=1e-4):
    a = a.double()
    assert torch.isfinite(a).all()
    err = float((a - b).norm() / b.norm())
    assert err < rtol, f"relative error {err:.2e}"


@pytest.mark.parametrize("decay", [0.0, 0.1])
def test_chunked_kernel_at_beta_near_two(decay):
    q, k, v, g, beta, S0 = near_two(1, decay)
    o_ref, S_ref = plain_loop(q, k, v, g, beta, S0)
    o, S = kernels.gated_delta_rule(q, k, v, g, beta, initial_state=S0)
    close(o, o_ref)
    close(S, S_ref)
    o, S = kernels.delta_rule(q, k, v, beta, initial_state=S0)            # no decay at all
    o_ref, S_ref = plain_loop(q, k, v, torch.zeros_like(g), beta, S0)
    close(o, o_ref)
    close(S, S_ref)


def test_step_kernel_at_beta_near_two():
    q, k, v, g, beta, S0 = near_two(2)
    q, k, v, g, beta = (x[:, :12] for x in (q, k, v, g, beta))      # twelve steps: the interpreter is slow
    o_ref, S_ref = plain_loop(q, k, v, g, beta, S0)
    S = S0.clone()
    for t in range(12):
        o = kernels.kda_step(*(x[:, t].contiguous() for x in (q, k, v, g, beta)), S)
        close(o, o_ref[:, t])
    close(S, S_ref)


def test_model_on_kernels_equals_reference_with_beta_up_to_two():
    """A Gated DeltaNet model with allow_neg_eigval on the Triton backend (the CUDA path): its
    chunked prefill and its steps equal the reference backend's."""
    from lineage.backend import set_backend
    from lineage.configs import DenseFFNConfig, GatedDeltaNetConfig, ModelConfig
    from lineage.model import LM
    cfg = ModelConfig(name="gdn-2", vocab_size=61, d_model=24, mixers=("gdn", "gdn"), ffns=("dense", "dense"),
                      gdn=GatedDeltaNetConfig(d_model=24, n_heads=3, head_dim=11, conv_size=3, allow_neg_eigval=True),
                      dense=DenseFFNConfig(d_model=24, d_ff=32, act="silu"))
    torch.manual_seed(0)
    ref = LM(cfg).eval()
    with torch.no_grad():
        for blk in ref.blocks:
            blk.mixer.b_proj.weight.mul_(10)                     # betas out to both ends of (0, 2)
    tri = LM(cfg).eval()
    tri.load_state_dict(ref.state_dict())
    set_backend(tri, "triton")
    ids = torch.randint(0, 61, (2, 68))
    with torch.no_grad():
        l_ref, s_ref = ref(ids[:, :66])                          # a chunk of 64 and a masked tail
        l_tri, s_tri = tri(ids[:, :66])
        close(l_tri, l_ref.double())
        for t in range(66, 68):
            obs = StepObs()
            a, s_ref = ref.step(ids[:, t], s_ref, obs)
            b, s_tri = tri.step(ids[:, t], s_tri)
            close(b, a.double())
        assert float(obs.layers[0].mixer.beta.max()) > 1.5
    for x, y in zip(s_tri.layers, s_ref.layers):
        close(x.S, y.S.double())
