"""The C++ host path of kda_step (kernels/step_launch.cpp, loaded by kernels.native).

On any machine: the extension builds against the installed torch and declines every call it
has no plan for (CPU tensors here), and LINEAGE_NATIVE is parsed strictly. On a CUDA machine
(not under TRITON_INTERPRET=1): the C++ path launches the same compiled kernel as the Python
launcher and must give bit-identical o, S and read-back, agree with the float64 recurrence,
hand every call it cannot take (unaligned, non-contiguous, wrong shapes) back to the Python
path, and work on a side stream and inside a CUDA graph. On a GPU machine run this file on
its own (``python -m pytest tests/test_native_step.py``): test_kernels.py sets
TRITON_INTERPRET=1 for the whole process, and the CUDA tests then skip.
"""
import importlib.util
import os

import pytest
import torch
import torch.nn.functional as F

from kernels import native   # imports neither triton nor the kernels

# triton is not imported here at collection: test_kernels.py must be the first to import it,
# after it sets TRITON_INTERPRET=1, whatever order the files run in
if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed: the kernels cannot run", allow_module_level=True)

GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
gpu = pytest.mark.skipif(not GPU, reason="needs CUDA with compiled Triton kernels")


@pytest.fixture(autouse=True)
def no_plans_left_behind():
    """Each test starts and ends with no plans, so no later test module takes the C++ path unknowingly."""
    yield
    import sys
    if "kernels.step" in sys.modules:
        sys.modules["kernels.step"]._reset()


def taken_by_native(step, call):
    """Runs call() and says whether the C++ path took every kda_step in it: a call the Python
    path takes plans again, so with the Python plans cleared first, none may appear."""
    step._PLANS.clear()
    out = call()
    return out, not step._PLANS


def test_mode_is_parsed_strictly(monkeypatch):
    monkeypatch.setenv("LINEAGE_NATIVE", "0")
    assert native.mode() == "0" and native.status() == "off" and native.load() is None
    monkeypatch.setenv("LINEAGE_NATIVE", "yes")
    with pytest.raises(ValueError, match="LINEAGE_NATIVE must be auto, 1 or 0"):
        native.mode()


def test_extension_builds_and_declines_calls_without_a_plan(monkeypatch):
    monkeypatch.setenv("LINEAGE_NATIVE", "1")
    m = native.load()
    assert m is not None, native.status()
    assert native.status() == "ready"
    q, v = torch.randn(1, 2, 32), torch.randn(1, 2, 48)
    beta, S = torch.rand(1, 2), torch.zeros(1, 2, 32, 48)
    m.clear()
    assert m.step(q, q, v, None, beta, S, None, None) is None          # no plan at all
    assert m.add_plan(q, q, v, None, beta, None, 0, 2, 3, 128, 0, 32 ** -0.5) != ""   # CPU: refused
    assert m.plans() == 0
    with pytest.raises(TypeError):
        m.step(q, q, v, None, 0.5, S, None, None)                       # beta must be a tensor


def test_a_failed_build_says_why_and_leaves_the_python_path(tmp_path, monkeypatch):
    broken = tmp_path / "broken_launch.cpp"
    broken.write_text("#error this launcher does not build\n")
    monkeypatch.setattr(native, "_SOURCE", str(broken))
    monkeypatch.setattr(native, "_NAME", "lineage_broken_launch_test")
    monkeypatch.setattr(native, "_state", {"module": None, "status": "not built", "thread": None})
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("LINEAGE_NATIVE", "auto")
    native.start()                                     # in the background
    native._state["thread"].join()
    assert native.module() is None and native.status().startswith("failed: ")
    monkeypatch.setenv("LINEAGE_NATIVE", "1")
    with pytest.raises(RuntimeError, match="LINEAGE_NATIVE=1 but the C\\+\\+ launcher is unavailable: failed"):
        native.start()


# ----------------------------------------------------------------------------- CUDA only

def inputs(B, H, K, V, gate, dtype, seed=0, device="cuda"):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, K, generator=gen)
    k = F.normalize(torch.randn(B, H, K, generator=gen), dim=-1)
    v = torch.randn(B, H, V, generator=gen)
    g = {"channel": -5 * torch.rand(B, H, K, generator=gen), "head": -5 * torch.rand(B, H, generator=gen),
         "none": None}[gate]
    beta = torch.rand(B, H, generator=gen)
    S = torch.randn(B, H, K, V, generator=gen)
    cast = lambda x: None if x is None else x.to(device, dtype)  # noqa: E731
    return cast(q), cast(k), cast(v), cast(g), cast(beta), S.to(device)


def use(path, monkeypatch):
    """Start from no plans, with the C++ path required (native) or off (python)."""
    from kernels import step
    monkeypatch.setenv("LINEAGE_NATIVE", "1" if path == "native" else "0")
    step._reset()
    return step


def run_tokens(step, q, k, v, g, beta, S, read, tokens=3, scale=None):
    outs, reads = [], []
    for _ in range(tokens):
        r = None if read is None else torch.empty_like(v)
        outs.append(step.kda_step(q, k, v, g, beta, S, read=r, scale=scale))
        reads.append(r)
    return outs, reads


@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("shape", [(1, 16, 128, 128), (3, 5, 32, 48)], ids=["B1", "awkward"])
@pytest.mark.parametrize("gate", ["channel", "head", "none"])
@pytest.mark.parametrize("read", [False, True], ids=["", "read"])
def test_native_path_is_bit_identical_to_the_python_launcher(gate, shape, dtype, read, monkeypatch):
    q, k, v, g, beta, S0 = inputs(*shape, gate, dtype)
    results = {}
    for path in ("python", "native"):
        step = use(path, monkeypatch)
        S = S0.clone()
        outs, reads = run_tokens(step, q, k, v, g, beta, S, read or None)
        if path == "native":
            assert step._native_step is not None and native.module().plans() == 1
            (more, more_reads), taken = taken_by_native(
                step, lambda: run_tokens(step, q, k, v, g, beta, S, read or None, tokens=1))
            assert taken, "the C++ path did not take the call"
        else:
            assert step._native_step is None
            more, more_reads = run_tokens(step, q, k, v, g, beta, S, read or None, tokens=1)
        outs += more
        reads += more_reads
        torch.cuda.synchronize()
        results[path] = (outs, reads, S)
    (o_py, r_py, S_py), (o_nat, r_nat, S_nat) = results["python"], results["native"]
    assert all(torch.equal(a, b) for a, b in zip(o_py, o_nat))
    assert torch.equal(S_py, S_nat)
    if read:
        assert all(torch.equal(a, b) for a, b in zip(r_py, r_nat))


@gpu
def test_many_signatures_side_by_side_each_get_their_own_kernel(monkeypatch):
    """Plans of one shape that differ in gate, read-back, dtype and tiles coexist; each call
    gives the Python launcher's bits, and a config= call never takes over the default plan."""
    cases = [(gate, dtype, read) for gate in ("channel", "head", "none")
             for dtype in (torch.bfloat16, torch.float32) for read in (False, True)]
    expected = {}
    step = use("python", monkeypatch)
    for case in cases:
        gate, dtype, read = case
        q, k, v, g, beta, S = inputs(2, 4, 64, 64, gate, dtype, seed=7)
        expected[case] = (run_tokens(step, q, k, v, g, beta, S, read or None), S)
    step = use("native", monkeypatch)
    q, k, v, g, beta, S = inputs(2, 4, 64, 64, "channel", torch.bfloat16, seed=7)
    for _ in range(2):                                 # a tiled plan of the default signature's shape
        step.kda_step(q, k, v, g, beta, S.clone(), config=(64, 64, 8))
    assert native.module().plans() == 0
    for case in cases:                                 # all planned before any is checked
        gate, dtype, read = case
        q, k, v, g, beta, S = inputs(2, 4, 64, 64, gate, dtype, seed=7)
        run_tokens(step, q, k, v, g, beta, S, read or None, tokens=1)
    assert native.module().plans() == len(cases)
    for case in cases:
        gate, dtype, read = case
        q, k, v, g, beta, S = inputs(2, 4, 64, 64, gate, dtype, seed=7)
        (outs, reads), taken = taken_by_native(step, lambda: run_tokens(step, q, k, v, g, beta, S, read or None))
        assert taken, case
        (outs_py, reads_py), S_py = expected[case]
        assert all(torch.equal(a, b) for a, b in zip(outs, outs_py)) and torch.equal(S, S_py), case
        if read:
            assert all(torch.equal(a, b) for a, b in zip(reads, reads_py)), case


@gpu
def test_an_empty_batch_launches_nothing(monkeypatch):
    step = use("native", monkeypatch)
    q, k, v, g, beta, S = inputs(0, 4, 32, 32, "channel", torch.bfloat16)
    for _ in range(3):
        o = step.kda_step(q, k, v, g, beta, S)
        assert o.shape == (0, 4, 32)
    torch.cuda.synchronize()


@gpu
@pytest.mark.parametrize("gate", ["channel", "head", "none"])
def test_native_path_matches_the_float64_recurrence(gate, monkeypatch):
    from lineage import ops
    B, H, K, V = 2, 3, 64, 48
    step = use("native", monkeypatch)
    q, k, v, g, beta, S0 = inputs(B, H, K, V, gate, torch.float32, seed=3)
    S = S0.clone()
    ptr = S.data_ptr()
    outs, _ = run_tokens(step, q, k, v, g, beta, S, None, tokens=2, scale=0.3)
    (more, _), taken = taken_by_native(step, lambda: run_tokens(step, q, k, v, g, beta, S, None, tokens=2, scale=0.3))
    outs += more
    assert taken and native.module().plans() == 1 and S.data_ptr() == ptr
    ref = {"channel": ops.kda, "head": ops.gated_delta_rule, "none": ops.delta_rule}[gate]
    rep = lambda x: x.double().cpu()[:, None].expand(B, 4, *x.shape[1:])  # noqa: E731 - the same token 4 times
    gates = () if g is None else (rep(g),)
    o_ref, S_ref = ref(rep(q), rep(k), rep(v), *gates, rep(beta), scale=0.3, initial_state=S0.double().cpu())
    for t, o in enumerate(outs):
        err = (o.double().cpu() - o_ref[:, t]).norm() / o_ref[:, t].norm()
        assert err < 1e-5, f"token {t}: relative error {err:.2e}"
    assert (S.double().cpu() - S_ref).norm() / S_ref.norm() < 1e-5


@gpu
def test_calls_the_plan_cannot_take_go_back_to_the_python_path(monkeypatch):
    step = use("native", monkeypatch)
    q, k, v, g, beta, S = inputs(1, 4, 32, 32, "channel", torch.bfloat16)
    step.kda_step(q, k, v, g, beta, S.clone())
    assert native.module().plans() == 1
    m = native.module()
    # unaligned: a view one element into a larger buffer (Triton specialized on 16-byte alignment)
    buf = torch.empty(q.numel() + 1, device="cuda", dtype=q.dtype)
    q_off = buf[1:].view_as(q)
    q_off.copy_(q)
    assert m.step(q_off, k, v, g, beta, S, None, None) is None
    S1, S2 = S.clone(), S.clone()
    assert torch.equal(step.kda_step(q_off, k, v, g, beta, S1), step.kda_step(q, k, v, g, beta, S2))
    assert torch.equal(S1, S2)
    # the errors are the Python launcher's
    strided = torch.cat([q, q], -1)[..., ::2]         # (1, 4, 32), every other element
    assert not strided.is_contiguous() and m.step(strided, k, v, g, beta, S, None, None) is None
    with pytest.raises(ValueError, match="contiguous"):
        step.kda_step(strided, k, v, g, beta, S)
    with pytest.raises(ValueError, match="state"):
        step.kda_step(q, k, v, g, beta, S.double())
    with pytest.raises(ValueError, match="g must be"):
        step.kda_step(q, k, v, g[..., :3].contiguous(), beta, S)
    assert m.step(q, k, v, g, beta, S.double(), None, None) is None
    assert m.step(q, k, v, g, beta[:, :2].contiguous(), S, None, None) is None
    assert m.step(q, k, v, g, beta, S.cpu(), None, None) is None


@gpu
def test_native_path_on_a_side_stream_and_in_a_cuda_graph(monkeypatch):
    step = use("native", monkeypatch)
    q, k, v, g, beta, S0 = inputs(1, 16, 128, 128, "channel", torch.bfloat16, seed=5)
    S_ref = S0.clone()
    o_ref = [step.kda_step(q, k, v, g, beta, S_ref) for _ in range(3)]
    assert native.module().plans() == 1
    s = torch.cuda.Stream()
    S = S0.clone()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        big = torch.randn(4096, 4096, device="cuda")
        big @ big                                     # work ahead of the step on the same stream
        o_side, taken = taken_by_native(step, lambda: [step.kda_step(q, k, v, g, beta, S) for _ in range(3)])
    assert taken
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(o_side, o_ref)) and torch.equal(S, S_ref)
    # captured: the launch lands in the graph and replays against the same buffers
    S = S0.clone()
    graph = torch.cuda.CUDAGraph()
    step._PLANS.clear()
    with torch.cuda.graph(graph):
        o_graph = step.kda_step(q, k, v, g, beta, S)
    assert not step._PLANS, "the C++ path did not take the captured call"
    assert torch.equal(S, S0)                         # capture launched nothing
    outs = []
    for _ in range(3):
        graph.replay()
        outs.append(o_graph.clone())
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(outs, o_ref)) and torch.equal(S, S_ref)


@gpu
def test_compiled_callers_neither_break_nor_recompile_when_a_plan_arrives(monkeypatch):
    """Under torch.compile kda_step traces into torch.ops.lineage.kda_step; a C++ plan made
    later by eager calls must not invalidate the compiled graph (no guard on _native_step)."""
    import torch._dynamo
    step = use("native", monkeypatch)
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
        step.kda_step(q, k, v, g, beta, S.clone())    # eager: plans, then hands the plan to C++
    assert step._native_step is not None and native.module().plans() == 1
    o2 = f(q, k, v, g, beta, S2)
    assert len(graphs) == 1, f"compiled {len(graphs)} times"
    assert torch.equal(o1, step.kda_step(q, k, v, g, beta, S.clone()))
    assert torch.equal(o1, o2) and torch.equal(S1, S2)
