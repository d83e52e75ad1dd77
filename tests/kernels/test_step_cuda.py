"""kda_step on a CUDA device, with Triton's compiled kernels (skipped where there is none).

After a call signature's first launch, kda_step starts the compiled kernel directly (its
arguments as plain ints); these tests check that this gives the bits of Triton's generic
launch, agrees with the float64 recurrence, hands unaligned and wrongly laid out calls back to
the checks and the generic launch, and works on a side stream, inside a CUDA graph and under
torch.compile. The interpreter tests of the same kernel are in interpreted/test_kernels.py.
"""
import os

import pytest
import torch
import torch.nn.functional as F

from lineage import ops

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1",
                                reason="needs CUDA with compiled Triton kernels")


@pytest.fixture
def step():
    """kernels.step with no plans: each test starts from Triton's generic launch."""
    from lineage.ops.delta import fused_recurrent as step
    step._PLANS.clear()
    yield step
    step._PLANS.clear()


def inputs(B, H, K, V, gate, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, K, generator=gen)
    k = F.normalize(torch.randn(B, H, K, generator=gen), dim=-1)
    v = torch.randn(B, H, V, generator=gen)
    g = {"channel": -5 * torch.rand(B, H, K, generator=gen), "head": -5 * torch.rand(B, H, generator=gen),
         "none": None}[gate]
    beta = torch.rand(B, H, generator=gen)
    S = torch.randn(B, H, K, V, generator=gen)
    cast = lambda x: None if x is None else x.to("cuda", dtype)  # noqa: E731
    return cast(q), cast(k), cast(v), cast(g), cast(beta), S.cuda()


def run_tokens(step, q, k, v, g, beta, S, read, tokens=3, scale=None, generic=False):
    """`tokens` calls on the running state; generic=True forgets the plans before each call,
    so every call goes through Triton's generic launch."""
    outs, reads = [], []
    for _ in range(tokens):
        if generic:
            step._PLANS.clear()
        r = None if read is None else torch.empty_like(v)
        outs.append(step.kda_step(q, k, v, g, beta, S, read=r, scale=scale))
        reads.append(r)
    return outs, reads


def took_direct(step) -> bool:
    return bool(step._PLANS) and all(plan[step._DIRECT] for plan in step._PLANS.values())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("shape", [(1, 16, 128, 128), (3, 5, 32, 48)], ids=["B1", "awkward"])
@pytest.mark.parametrize("gate", ["channel", "head", "none"])
@pytest.mark.parametrize("read", [False, True], ids=["", "read"])
def test_direct_launch_is_bit_identical_to_the_generic_launch(step, gate, shape, dtype, read):
    q, k, v, g, beta, S0 = inputs(*shape, gate, dtype)
    S_gen, S_dir = S0.clone(), S0.clone()
    o_gen, r_gen = run_tokens(step, q, k, v, g, beta, S_gen, read or None, tokens=4, generic=True)
    step._PLANS.clear()
    o_dir, r_dir = run_tokens(step, q, k, v, g, beta, S_dir, read or None, tokens=4)
    assert took_direct(step), "the calls after the first did not take the direct launch"
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(o_gen, o_dir)) and torch.equal(S_gen, S_dir)
    if read:
        assert all(torch.equal(a, b) for a, b in zip(r_gen, r_dir))


def test_many_signatures_side_by_side_each_get_their_own_kernel(step):
    """Plans of one shape that differ in gate, read-back, dtype and tiles coexist, and each
    gives the generic launch's bits."""
    cases = [(gate, dtype, read, config) for gate in ("channel", "head", "none")
             for dtype in (torch.bfloat16, torch.float32) for read in (False, True) for config in (None, (64, 64, 8))]
    expected = {}
    for case in cases:
        gate, dtype, read, config = case
        q, k, v, g, beta, S = inputs(2, 4, 64, 64, gate, dtype, seed=7)
        step._PLANS.clear()
        expected[case] = (step.kda_step(q, k, v, g, beta, S, read=torch.empty_like(v) if read else None,
                                        config=config), S)
    step._PLANS.clear()
    for case in cases + cases:                          # all planned before the second round
        gate, dtype, read, config = case
        q, k, v, g, beta, S = inputs(2, 4, 64, 64, gate, dtype, seed=7)
        o = step.kda_step(q, k, v, g, beta, S, read=torch.empty_like(v) if read else None, config=config)
        assert torch.equal(o, expected[case][0]) and torch.equal(S, expected[case][1]), case
    assert len(step._PLANS) == len(cases) and took_direct(step)


def test_an_empty_batch_launches_nothing(step):
    q, k, v, g, beta, S = inputs(0, 4, 32, 32, "channel", torch.bfloat16)
    for _ in range(3):
        o = step.kda_step(q, k, v, g, beta, S)
        assert o.shape == (0, 4, 32)
    torch.cuda.synchronize()


@pytest.mark.parametrize("gate", ["channel", "head", "none"])
def test_matches_the_float64_recurrence(step, gate):
    B, H, K, V = 2, 3, 64, 48
    q, k, v, g, beta, S0 = inputs(B, H, K, V, gate, torch.float32, seed=3)
    S = S0.clone()
    ptr = S.data_ptr()
    outs, _ = run_tokens(step, q, k, v, g, beta, S, None, tokens=4, scale=0.3)
    assert took_direct(step) and S.data_ptr() == ptr
    ref = {"channel": ops.kda, "head": ops.gated_delta_rule, "none": ops.delta_rule}[gate]
    rep = lambda x: x.double().cpu()[:, None].expand(B, 4, *x.shape[1:])  # noqa: E731 - the same token 4 times
    gates = () if g is None else (rep(g),)
    o_ref, S_ref = ref(rep(q), rep(k), rep(v), *gates, rep(beta), scale=0.3, initial_state=S0.double().cpu())
    for t, o in enumerate(outs):
        err = (o.double().cpu() - o_ref[:, t]).norm() / o_ref[:, t].norm()
        assert err < 1e-5, f"token {t}: relative error {err:.2e}"
    assert (S.double().cpu() - S_ref).norm() / S_ref.norm() < 1e-5


def test_unaligned_and_badly_laid_out_calls(step):
    q, k, v, g, beta, S = inputs(1, 4, 32, 32, "channel", torch.bfloat16)
    for _ in range(2):
        step.kda_step(q, k, v, g, beta, S.clone())
    assert took_direct(step)
    # unaligned: a view one element into a larger buffer (Triton specialized on 16-byte alignment)
    buf = torch.empty(q.numel() + 1, device="cuda", dtype=q.dtype)
    q_off = buf[1:].view_as(q)
    q_off.copy_(q)
    S1, S2 = S.clone(), S.clone()
    assert torch.equal(step.kda_step(q_off, k, v, g, beta, S1), step.kda_step(q, k, v, g, beta, S2))
    assert torch.equal(S1, S2)
    strided = torch.cat([q, q], -1)[..., ::2]         # (1, 4, 32), every other element
    assert not strided.is_contiguous()
    with pytest.raises(ValueError, match="contiguous"):
        step.kda_step(strided, k, v, g, beta, S)
    with pytest.raises(ValueError, match="state"):
        step.kda_step(q, k, v, g, beta, S.double())
    with pytest.raises(ValueError, match="g must be"):
        step.kda_step(q, k, v, g[..., :3].contiguous(), beta, S)
    with pytest.raises(ValueError, match="one device"):
        step.kda_step(q, k, v, g, beta, S.cpu())


def test_on_a_side_stream_and_in_a_cuda_graph(step):
    q, k, v, g, beta, S0 = inputs(1, 16, 128, 128, "channel", torch.bfloat16, seed=5)
    S_ref = S0.clone()
    o_ref = [step.kda_step(q, k, v, g, beta, S_ref) for _ in range(3)]
    s = torch.cuda.Stream()
    S = S0.clone()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        big = torch.randn(4096, 4096, device="cuda")
        big @ big                                     # work ahead of the step on the same stream
        o_side = [step.kda_step(q, k, v, g, beta, S) for _ in range(3)]
    assert took_direct(step)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(o_side, o_ref)) and torch.equal(S, S_ref)
    # captured: the launch lands in the graph and replays against the same buffers
    S = S0.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o_graph = step.kda_step(q, k, v, g, beta, S)
    assert torch.equal(S, S0)                         # capture launched nothing
    outs = []
    for _ in range(3):
        graph.replay()
        outs.append(o_graph.clone())
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(outs, o_ref)) and torch.equal(S, S_ref)


def test_compiled_callers_neither_break_nor_recompile_when_eager_plans_arrive(step):
    """Under torch.compile kda_step traces into torch.ops.lineage.kda_step, with no graph
    break; eager calls that make plans afterwards must not invalidate the compiled graph."""
    import torch._dynamo
    q, k, v, g, beta, S = inputs(1, 4, 32, 32, "channel", torch.float32)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    f = torch.compile(lambda *a: step.kda_step(*a), backend=backend, fullgraph=True)
    S1, S2 = S.clone(), S.clone()
    o1 = f(q, k, v, g, beta, S1)
    for _ in range(2):
        step.kda_step(q, k, v, g, beta, S.clone())    # eager: plans, then the direct launch
    assert took_direct(step)
    o2 = f(q, k, v, g, beta, S2)
    assert len(graphs) == 1, f"compiled {len(graphs)} times"
    assert torch.equal(o1, step.kda_step(q, k, v, g, beta, S.clone()))
    assert torch.equal(o1, o2) and torch.equal(S1, S2)
