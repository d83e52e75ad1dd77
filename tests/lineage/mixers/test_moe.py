"""The MoE forward a prefill takes (every token's choices grouped by expert) against the
per-expert loop of training and against the step, in float64 (the loop over blocks) and in
float32 (torch's grouped matmul where it exists), at awkward sizes and with unused experts."""
import pytest
import torch

from lineage.configs import MoEConfig
from lineage.ffns import moe as moe_module
from lineage.ffns.moe import MoE


def _moe(**kw):
    torch.manual_seed(0)
    cfg = MoEConfig(**{**dict(d_model=64, n_experts=16, top_k=4, n_shared=1, expert_dim=32, latent_dim=48), **kw})
    return MoE(cfg).eval()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kw", [{}, dict(latent_dim=None, n_shared=0, router="softmax"), dict(n_experts=64, top_k=1)])
def test_grouped_equals_the_per_expert_loop(dtype, kw):
    m = _moe(**kw).to(dtype)
    x = torch.randn(3, 63, 64, dtype=dtype)
    with torch.no_grad():
        grouped, _ = m(x)
        m.train()
        loop, _ = m(x)
    m.eval()
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert float((grouped - loop).abs().max()) < tol * float(loop.abs().max())


def test_grouped_equals_the_step():
    m = _moe().double()
    x = torch.randn(2, 9, 64, dtype=torch.float64)
    with torch.no_grad():
        whole, _ = m(x)
        steps = torch.stack([m.step(x[:, t])[0] for t in range(9)], 1)
    assert torch.allclose(whole, steps, atol=1e-12)


def test_the_loop_over_blocks_is_taken_without_a_grouped_matmul(monkeypatch):
    m = _moe()
    x = torch.randn(1, 40, 64)
    with torch.no_grad():
        a, _ = m(x)
        monkeypatch.setattr(moe_module, "_grouped_mm_takes", lambda *t: False)
        b, _ = m(x)
    assert torch.allclose(a, b, atol=1e-5)
