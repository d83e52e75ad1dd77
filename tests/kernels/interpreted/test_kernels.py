"""The Triton kernels against the lineage.ops references, on the CPU under TRITON_INTERPRET=1.

The suite runs this module in a child pytest with TRITON_INTERPRET=1 set
(tests/kernels/test_interpreter.py), so the rest of the suite keeps compiled Triton and its
GPU tests; tests/conftest.py leaves it out of a run without that variable. On its own:
``TRITON_INTERPRET=1 python -m pytest tests/kernels/interpreted``.

Sizes are awkward on purpose (T = 63 and 130 leave a masked tail chunk, K = 32 / 64,
V = 48 is no power of two), gates sit at their extremes (g = 0 and g = -5 for every token,
-30 for the score implementations' overflow check, beta 0 and 1), and every comparison is in
fp32 against a float64 reference with a relative error bound of 1e-4: a wrong decay, a dropped
token or a missing initial state fails.
"""
import math

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="triton is not installed: the kernels cannot run")

from lineage.ops import kernels                      # noqa: E402
from lineage.ops.delta import chunk as cd   # noqa: E402
from lineage.ops.delta import chunk_scores   # noqa: E402
from lineage.ops.delta.fused_recurrent import kda_step_op   # noqa: E402
from lineage import ops             # noqa: E402
from lineage.observed import StateObs, StepObs

RTOL = 1e-4
B, H, V = 1, 2, 48


def close(a, b, rtol=RTOL):
    """||a - b|| <= rtol ||b|| (float64), with a floor for references that decayed to ~0."""
    a, b = a.double(), b.double()
    err, ref = (a - b).norm().item(), b.norm().item()
    assert torch.isfinite(a).all(), "non-finite values"
    assert err <= rtol * ref + 1e-6 * b.numel() ** 0.5, f"relative error {err / max(ref, 1e-300):.3e}"


def make(T, K, g_mode="random", beta_mode="random", per_channel=True, seed=0, B=B):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, K, generator=gen)
    k = F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    v = torch.randn(B, T, H, V, generator=gen)
    beta = {"random": torch.rand(B, T, H, generator=gen), "zero": torch.zeros(B, T, H),
            "one": torch.ones(B, T, H)}[beta_mode]
    shape = (B, T, H, K) if per_channel else (B, T, H)
    g = {"random": -5 * torch.rand(*shape, generator=gen), "zero": torch.zeros(shape),
         "min": torch.full(shape, -5.0)}[g_mode]
    S0 = torch.randn(B, H, K, V, generator=gen)
    return q, k, v, g, beta, S0


def d(*xs):
    return [x.double() for x in xs]


def twin_models(preset, seed):
    """The same random model twice: on the reference backend and on the Triton kernels."""
    from lineage.backend import set_backend
    from lineage.model import LM
    from lineage.presets import get_preset
    torch.manual_seed(seed)
    ref = LM(get_preset(preset)).eval()
    tri = LM(get_preset(preset)).eval()
    tri.load_state_dict(ref.state_dict())
    set_backend(tri, "triton")
    return ref, tri


# ------------------------------------------------------------------------ chunked forms

@pytest.mark.parametrize("T,K", [(63, 32), (130, 64)])
@pytest.mark.parametrize("op", ["kda", "gated_delta_rule", "delta_rule"])
def test_chunked_matches_reference(op, T, K):
    q, k, v, g, beta, S0 = make(T, K, per_channel=(op == "kda"), seed=T + K)
    gates = () if op == "delta_rule" else (g,)
    o, S = getattr(kernels, op)(q, k, v, *gates, beta, initial_state=S0)
    o_ref, S_ref = getattr(ops, op)(*d(q, k, v, *gates, beta), initial_state=S0.double())
    assert o.dtype == torch.float32 and S.dtype == torch.float32
    assert o.shape == (B, T, H, V) and S.shape == (B, H, K, V)
    close(o, o_ref)
    close(S, S_ref)


@pytest.mark.parametrize("g_mode,beta_mode", [("zero", "one"), ("zero", "zero"), ("min", "one"), ("min", "zero")])
@pytest.mark.parametrize("per_channel", [True, False], ids=["kda", "gdn"])
def test_chunked_gate_extremes(per_channel, g_mode, beta_mode):
    q, k, v, g, beta, S0 = make(130, 32, g_mode, beta_mode, per_channel, seed=7)
    fn, ref = (kernels.kda, ops.kda) if per_channel else (kernels.gated_delta_rule, ops.gated_delta_rule)
    o, S = fn(q, k, v, g, beta, initial_state=S0)
    o_ref, S_ref = ref(*d(q, k, v, g, beta), initial_state=S0.double())
    close(o, o_ref)
    close(S, S_ref)


def test_chunked_without_initial_state_and_custom_scale():
    q, k, v, g, beta, _ = make(63, 64, seed=3)
    o, S = kernels.kda(q, k, v, g, beta, scale=0.3)
    o_ref, S_ref = ops.kda(*d(q, k, v, g, beta), scale=0.3)
    close(o, o_ref)
    close(S, S_ref)


def test_chunked_half_precision_inputs():
    """16-bit inputs keep W, U, P in the input dtype: fp16 stays within a few 1e-4 of the exact
    answer on the same rounded inputs. (bf16 is checked against 5e-3 on the GPU by the benchmark:
    the interpreter rounds bf16 by truncation, which doubles its error.)"""
    q, k, v, g, beta, S0 = make(70, 32, seed=5)
    for dt, rtol in ((torch.float16, 1e-3), (torch.bfloat16, 2e-2)):
        x16 = [x.to(dt) for x in (q, k, v, g, beta)]
        o, S = kernels.kda(*x16, initial_state=S0)
        o_ref, S_ref = ops.kda(*d(*x16), initial_state=S0.double())
        assert o.dtype == dt and S.dtype == torch.float32
        close(o, o_ref, rtol=rtol)
        close(S, S_ref, rtol=rtol)


# ------------------------------------------------------------------ score kernels

SCORES = {"default": {},
          "bk16": {"split_inter": (16, 2), "split_diag": (16, 2), "diag_token": (16, 2)},
          "bk64": {"split_inter": (64, 4), "split_diag": (64, 4), "diag_token": (1, 1)}}
REFS = {2: ops.kda, 1: ops.gated_delta_rule, 0: ops.delta_rule}


@pytest.mark.parametrize("T,K,g_mode,beta_mode", [
    (63, 32, "random", "random"), (130, 64, "random", "one"), (130, 32, "zero", "zero"),
    (63, 64, "min", "one"), (130, 32, "steep", "random"), (130, 64, "steep", "zero")])
def test_scores_end_to_end_match_reference(T, K, g_mode, beta_mode):
    """The whole op through the score kernels. "steep" is g = -30 for every token: e^{G_r - G_s}
    spans e^{-1890} within a chunk, so any exponent > 0 would overflow to inf / nan."""
    q, k, v, g, beta, S0 = make(T, K, "min" if g_mode == "steep" else g_mode, beta_mode, seed=T * K)
    if g_mode == "steep":
        g = torch.full_like(g, -30.0)
    o, S = cd._chunk_delta(q, k, v, g, beta, None, S0, 64, 2, "kda")
    o_ref, S_ref = ops.kda(*d(q, k, v, g, beta), initial_state=S0.double())
    close(o, o_ref)
    close(S, S_ref)


def scores_reference(q, k, g, beta, scale, gate):
    """A and P of every chunk by their definition, in float64: A[r, s] = beta_r sum_i k_r[i]
    k_s[i] e^{G_r[i] - G_s[i]} for s < r, P[r, s] = scale sum_i q_r[i] k_s[i] e^{...} for s <= r,
    G the in-chunk cumulative log decay; row t holds its chunk's 64 columns. (B, T, H, 64) each."""
    Bq, T, Hq, _ = q.shape
    A = torch.zeros(Bq, T, Hq, 64, dtype=torch.float64)
    P = torch.zeros(Bq, T, Hq, 64, dtype=torch.float64)
    q, k, beta = q.double(), k.double(), beta.double()
    for t0 in range(0, T, 64):
        sl = slice(t0, min(t0 + 64, T))
        n = sl.stop - t0
        if gate == 0:
            G = torch.zeros(Bq, n, Hq, 1, dtype=torch.float64)
        else:
            G = g[:, sl].double().cumsum(1)
            G = G if gate == 2 else G[..., None]                          # (B, n, H, K or 1)
        r, c = torch.arange(n)[:, None], torch.arange(n)[None, :]
        diff = (G[:, :, None] - G[:, None, :]).masked_fill((c > r)[None, :, :, None, None], -torch.inf)
        decay = diff.exp()                                                # (B, n, n, H, K or 1), 0 above
        kk = torch.einsum("brhi,bshi,brshi->brsh", k[:, sl], k[:, sl], decay)
        qk = torch.einsum("brhi,bshi,brshi->brsh", q[:, sl], k[:, sl], decay)
        A[:, sl, :, :n] = (kk * beta[:, sl, None] * (c < r)[None, :, :, None]).permute(0, 1, 3, 2)
        P[:, sl, :, :n] = (scale * qk).permute(0, 1, 3, 2)
    return A, P


@pytest.mark.parametrize("impl", list(SCORES))
@pytest.mark.parametrize("gate", [2, 1, 0], ids=["kda", "gdn", "dn"])
def test_scores_equal_their_definition(impl, gate):
    """Stage 2 alone: every entry of A and P (prefilled with nan, so a block left unwritten
    shows), the zeros above the diagonal included, equals the float64 definition at several
    tilings (K slices of 16 to 64; 1 to 16 heads a program in the per-channel diagonal kernel,
    more than H masks heads); and, at the default tiles, the whole op agrees with the
    reference for every gate kind."""
    T, K = 130, 48                                              # K = 48: a masked K slice
    q, k, v, g, beta, S0 = make(T, K, per_channel=(gate == 2), seed=gate)
    G = torch.zeros(0)
    if gate:
        G = chunk_scores.cumsum(g)
    opt = {"split_inter": (32, 4), "split_diag": (32, 4), "diag_token": (4, 2), **SCORES[impl]}
    A = torch.full((B, T, H, 64), float("nan"))
    P = torch.full((B, T, H, 64), float("nan"))
    chunk_scores.scores(q, k, G if gate else q, beta, A, P, 0.3, gate, "ieee", opt)
    A_ref, P_ref = scores_reference(q, k, g, beta, 0.3, gate)
    for x, y in ((A, A_ref), (P, P_ref)):
        assert torch.isfinite(x).all()
        close(x, y, rtol=1e-5)
    t = torch.arange(T)
    assert (A[0, :, 0][t[:, None] % 64 <= torch.arange(64)[None, :]] == 0).all()   # A strictly lower
    if impl != "default":
        return                                                  # the whole op: default tiles only
    gates = (g,) if gate else ()
    o, S = cd._chunk_delta(q, k, v, g if gate else None, beta, None, S0, 64, gate, "x")
    o_ref, S_ref = REFS[gate](*d(q, k, v, *gates, beta), initial_state=S0.double())
    close(o, o_ref)
    close(S, S_ref)


def test_diagonal_scores_with_head_groups():
    """The per-channel diagonal kernel at 2 heads a program over H = 5 heads and B = 2: three
    head groups per token, the last one half masked, and a batch offset in every address."""
    Bq, T, Hq, K = 2, 37, 5, 48
    gen = torch.Generator().manual_seed(11)
    q, k = torch.randn(Bq, T, Hq, K, generator=gen), F.normalize(torch.randn(Bq, T, Hq, K, generator=gen), dim=-1)
    g, beta = -5 * torch.rand(Bq, T, Hq, K, generator=gen), torch.rand(Bq, T, Hq, generator=gen)
    G = chunk_scores.cumsum(g)
    A = torch.full((Bq, T, Hq, 64), float("nan"))
    P = torch.full((Bq, T, Hq, 64), float("nan"))
    chunk_scores.scores(q, k, G, beta, A, P, 0.3, 2, "ieee", {"split_inter": (32, 1), "diag_token": (2, 1)})
    A_ref, P_ref = scores_reference(q, k, g, beta, 0.3, 2)
    close(A, A_ref, rtol=1e-5)
    close(P, P_ref, rtol=1e-5)


@pytest.mark.parametrize("tiles", ["default", "small"])
@pytest.mark.parametrize("gate", [2, 1, 0], ids=["kda", "gdn", "dn"])
def test_chunked_batch_of_two_at_other_tilings(gate, tiles):
    """B = 2 over three chunks with an initial state, so every kernel's batch offset matters
    (each sequence's entering states differ); "small" runs the state pass in three V blocks
    of 16 and the output kernel over three K slices of 16 and three V blocks."""
    T, K = 130, 48
    q, k, v, g, beta, S0 = make(T, K, per_channel=(gate == 2), seed=20 + gate, B=2)
    gates = (g,) if gate else ()
    opt = {"state": (16, 4, 1), "out": (16, 16, 4, 1)} if tiles == "small" else {}
    o, S = cd._chunk_delta(q, k, v, g if gate else None, beta, None, S0, 64, gate, "x", options=opt)
    o_ref, S_ref = REFS[gate](*d(q, k, v, *gates, beta), initial_state=S0.double())
    close(o, o_ref)
    close(S, S_ref)


@pytest.mark.parametrize("shape,cfg", [((2, 130, 3, 48), (64, 4)), ((2, 130, 5), (4, 1)), ((0, 70, 2, 32), (64, 4))],
                         ids=["per-channel", "per-head", "empty-batch"])
def test_cumsum_in_column_blocks(shape, cfg):
    """Stage 1 alone: the in-chunk cumsum in base-2 units, with the head x channel columns cut
    into blocks that do not divide them (96 = 64 + 32, 5 heads = 4 + 1) and a masked tail chunk."""
    g = -5 * torch.rand(shape, generator=torch.Generator().manual_seed(4))
    G = chunk_scores.cumsum(g, cfg)
    ref = torch.cat([g[:, t0:t0 + 64].double().cumsum(1) for t0 in range(0, g.shape[1], 64)], 1) / math.log(2)
    close(G, ref, rtol=1e-6)


def test_chunked_rejects_bad_options():
    q, k, v, g, beta, _ = make(8, 32)
    with pytest.raises(ValueError, match="unknown options"):
        cd._chunk_delta(q, k, v, g, beta, None, None, 64, 2, "kda", options={"scores_impl": "split"})


def test_chunked_rejects_bad_input():
    q, k, v, g, beta, S0 = make(8, 32)
    with pytest.raises(ValueError, match="g must be"):
        kernels.kda(q, k, v, g[..., 0], beta)
    with pytest.raises(ValueError, match="beta"):
        kernels.kda(q, k, v, g, beta[..., None])
    with pytest.raises(ValueError, match="chunk"):
        kernels.kda(q, k, v, g, beta, chunk_size=32)
    with pytest.raises(ValueError, match="dtype"):
        kernels.delta_rule(q.double(), k.double(), v.double(), beta)
    x = torch.zeros(65536, 1, 1, 16)       # B*H past the grid's 65535: refused before any launch
    with pytest.raises(ValueError, match="65535 sequences"):
        kernels.delta_rule(x, x, x, x[..., 0])


# --------------------------------------------------------------------------------- step

@pytest.mark.parametrize("gate", ["channel", "head", "none"])
def test_step_equals_recurrence_in_place(gate):
    T, K = 4, 32
    q, k, v, g, beta, S0 = make(T, K, per_channel=(gate == "channel"), seed=11)
    ref = {"channel": ops.kda, "head": ops.gated_delta_rule, "none": ops.delta_rule}[gate]
    gates = () if gate == "none" else (g,)
    o_ref, S_ref = ref(*d(q, k, v, *gates, beta), initial_state=S0.double())
    state = S0.clone()
    ptr = state.data_ptr()
    for t in range(T):
        o = kernels.kda_step(q[:, t].contiguous(), k[:, t].contiguous(), v[:, t].contiguous(),
                             None if gate == "none" else g[:, t].contiguous(), beta[:, t].contiguous(), state)
        assert o.shape == (B, H, V)
        close(o, o_ref[:, t])
    assert state.data_ptr() == ptr
    close(state, S_ref)


def test_step_rejects_bad_state():
    q, k, v, g, beta, S0 = make(1, 32)
    with pytest.raises(ValueError, match="state"):
        kernels.kda_step(q[:, 0], k[:, 0], v[:, 0], g[:, 0], beta[:, 0], S0.double())
    with pytest.raises(ValueError, match="g must be"):
        kernels.kda_step(q[:, 0], k[:, 0], v[:, 0], g[:, 0, :, :3].contiguous(), beta[:, 0], S0)


# --------------------------------------------------------------------------------- SiTU

@pytest.mark.parametrize("linear_beta", [None, 25.0, 2.0])
def test_situ_glu_matches_reference(linear_beta):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 5, 2 * 100, generator=gen) * 10          # F = 100: a masked tail
    y = kernels.situ_glu(x, 4.0, linear_beta)
    assert y.shape == (3, 5, 100) and y.dtype == x.dtype
    close(y, ops.situ_glu(x.double(), 4.0, linear_beta))


def test_situ_glu_extremes_and_small_values():
    big = torch.linspace(-300, 300, 1001)                       # sigmoid and tanh saturate: no inf / nan
    small = torch.linspace(-1e-3, 1e-3, 1001)                   # 1 - e^{-2|z|} would cancel here
    for gate in (big, small):
        x = torch.cat([gate, torch.ones_like(gate)])[None]      # gate | up = 1
        close(kernels.situ_glu(x), ops.situ_glu(x.double()))
    with pytest.raises(ValueError, match="even"):
        kernels.situ_glu(torch.randn(4, 7))


def test_available_under_interpreter():
    assert kernels.available()


def test_lineage_dispatches_to_kernels(monkeypatch):
    """LINEAGE_BACKEND=triton puts the kernels under a whole model: the chunked prefill and
    unobserved steps go through kernels and agree with the reference backend."""
    from lineage.backend import resolve
    monkeypatch.setenv("LINEAGE_BACKEND", "triton")
    backend, note = resolve(torch.device("cpu"))
    assert backend == "triton" and note is None                 # TRITON_INTERPRET=1 is set above
    monkeypatch.setenv("LINEAGE_BACKEND", "nonsense")
    assert resolve(torch.device("cpu"))[0] == "reference"
    ref, tri = twin_models("tiny-kda", 0)
    ids = torch.randint(0, 256, (1, 20))
    with torch.no_grad():
        l_ref, s_ref = ref(ids[:, :17])
        l_tri, s_tri = tri(ids[:, :17])
        assert ((l_tri - l_ref).norm() / l_ref.norm()) < 1e-4
        for t in range(17, 20):
            a, s_ref = ref.step(ids[:, t], s_ref)
            b, s_tri = tri.step(ids[:, t], s_tri)
            assert ((b - a).norm() / a.norm()) < 1e-4
        assert s_tri.layers[0].S.dtype == torch.float32


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("preset", ["tiny-kda", "tiny-gated-deltanet", "tiny-deltanet", "k3-mini"])
def test_observed_step_on_kernels_matches_reference(preset, batch):
    """The app's observed step on the Triton backend (kda_step also writes the read-back;
    k3-mini's experts go through moe_experts) gives the reference's observations: state,
    write, read-back, decay, routing, and the logits."""
    from lineage.presets import PRESETS
    if preset not in PRESETS:
        pytest.skip(f"no preset {preset}")
    ref, tri = twin_models(preset, 1)
    ids = torch.randint(0, 256, (batch, 12))
    with torch.no_grad():
        _, s_ref = ref(ids[:, :9])
        _, s_tri = tri(ids[:, :9])
        for t in range(9, 12):
            o_ref, o_tri = StepObs(), StepObs()
            before = [st.S.clone() if hasattr(st, "S") else None for st in s_tri.layers]
            a, s_ref = ref.step(ids[:, t], s_ref, o_ref)
            old = s_tri
            b, s_tri = tri.step(ids[:, t], s_tri, o_tri)
            close(b, a)
            for st, S in zip(old.layers, before):      # a step leaves the caller's state alone
                assert S is None or torch.equal(st.S, S)
            seen = 0
            for la, lb in zip(o_ref.layers, o_tri.layers):
                if la.ffn is not None:
                    assert torch.equal(la.ffn.experts, lb.ffn.experts)
                    close(lb.ffn.weights, la.ffn.weights)
                ma, mb = la.mixer, lb.mixer
                if not isinstance(ma, StateObs):
                    continue
                seen += 1
                assert type(mb) is type(ma) and mb.state_bytes == ma.state_bytes
                for name in ("S", "dS", "read", "v", "k", "beta", "alpha"):
                    if getattr(ma, name) is None:
                        assert getattr(mb, name) is None
                    else:
                        close(getattr(mb, name), getattr(ma, name))
            assert seen > 0


def test_step_op_and_read_back():
    """kda_step's read= output is k S after the decay and before the write, and the custom op
    that torch.compile traces (torch.ops.lineage.kda_step) gives exactly the launcher's answer."""
    gen = torch.Generator().manual_seed(4)
    Bq, Hq, K = 2, 3, 32
    q = torch.randn(Bq, Hq, K, generator=gen)
    k = F.normalize(torch.randn(Bq, Hq, K, generator=gen), dim=-1)
    v = torch.randn(Bq, Hq, V, generator=gen)
    g = -5 * torch.rand(Bq, Hq, K, generator=gen)
    beta = torch.rand(Bq, Hq, generator=gen)
    S0 = torch.randn(Bq, Hq, K, V, generator=gen)
    S1, S2, r = S0.clone(), S0.clone(), torch.empty(Bq, Hq, V)
    o1 = kernels.kda_step(q, k, v, g, beta, S1, read=r)
    o2 = kda_step_op()(q, k, v, g, beta, S2, None, K ** -0.5, 2)
    assert torch.equal(o1, o2) and torch.equal(S1, S2)
    decayed = S0.double() * g.double().exp()[..., None]                        # (B, H, K, V)
    close(r, (k.double()[:, :, None] @ decayed).squeeze(2))
    with pytest.raises(ValueError, match="BK >= K"):
        kernels.kda_step(q, k, v, g, beta, S1, config=(16, 16, 4))


def test_graph_step_body_keeps_its_state_buffers_current():
    """The body GraphStep captures (its _run) leaves the new delta state, conv cache included,
    in its fixed buffers whether the kernel updated S in place or not: two bodies give two
    plain steps' state. (Capture itself needs CUDA; this checks what is captured.)"""
    from lineage.mixers.deltanet.module import DeltaState
    from lineage.graph_step import GraphStep, to_static
    ref, tri = twin_models("tiny-kda", 2)
    ids = torch.randint(0, 256, (1, 12))
    with torch.no_grad():
        _, st = ref(ids[:, :9])
        for in_place in (True, False):
            gs = GraphStep.__new__(GraphStep)
            gs.model, gs.observe = tri, False
            gs.state = to_static(st, capacity=32)
            for layer in gs.state.layers:
                if isinstance(layer, DeltaState):
                    layer.in_place = in_place
            gs.token = torch.zeros(1, dtype=torch.long)
            s_ref = st
            for t in (9, 10):
                gs.token.fill_(int(ids[0, t]))
                gs._run()
                _, s_ref = ref.step(ids[:, t], s_ref)
            for a, b in zip(gs.state.layers, s_ref.layers):
                close(a.S, b.S)
                close(a.conv, b.conv)


def _experts_reference(x, w_in, w_out, idx, weights, act, beta, linear_beta):
    """A plain loop over tokens and choices, float64."""
    out = torch.zeros(x.shape, dtype=torch.float64)
    for b in range(x.shape[0]):
        for j in range(idx.shape[1]):
            e = int(idx[b, j])
            gate_up = w_in[e].double() @ x[b].double()
            gate, up = gate_up.chunk(2)
            if act == "silu":
                h = F.silu(gate) * up
            else:
                h = ops.situ_glu(torch.cat([gate, up]), beta, linear_beta)
            out[b] += float(weights[b, j]) * (w_out[e].double() @ h)
    return out


@pytest.mark.parametrize("act, linear_beta", [("silu", None), ("situ", None), ("situ", 3.0)])
@pytest.mark.parametrize("B, E, k, L, Fe", [(1, 7, 3, 60, 37), (2, 5, 5, 33, 17), (3, 9, 1, 260, 300)])
def test_moe_experts_equal_a_loop_over_choices(act, linear_beta, B, E, k, L, Fe):
    """Awkward widths (no power of two, tails in both tiles), a token choosing every expert,
    repeated experts across tokens, weights of 0 and large gates."""
    gen = torch.Generator().manual_seed(B * 100 + E)
    x = torch.randn(B, L, generator=gen)
    w_in = torch.randn(E, 2 * Fe, L, generator=gen) * L ** -0.5 * 3
    w_out = torch.randn(E, L, Fe, generator=gen) * Fe ** -0.5
    idx = torch.stack([torch.randperm(E, generator=gen)[:k] for _ in range(B)])
    weights = torch.rand(B, k, generator=gen)
    weights[0, 0] = 0.0
    y = kernels.moe_experts(x, w_in, w_out, idx, weights, act=act, linear_beta=linear_beta)
    close(y, _experts_reference(x, w_in, w_out, idx, weights, act, 4.0, linear_beta))


def test_moe_experts_refuse_shapes_that_do_not_fit():
    x, w_in, w_out = torch.randn(1, 8), torch.randn(3, 10, 8), torch.randn(3, 8, 4)
    idx, w = torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2)
    with pytest.raises(ValueError, match="shapes do not fit"):
        kernels.moe_experts(x, w_in, w_out, idx, w)
    with pytest.raises(ValueError, match="act"):
        kernels.moe_experts(x, w_in, torch.randn(3, 8, 5), idx, w, act="gelu")
