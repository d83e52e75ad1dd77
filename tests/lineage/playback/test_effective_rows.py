"""The attention rows the attention panel draws for a recurrent layer (lineage.playback.effective),
made live one step at a time, against the whole-sequence closed form (lineage.ops, attention=True)
and against the read-out itself: a row's parts add up to what the state reads."""
import pytest
import torch

from lineage import ops
from lineage.observed import StateObs
from lineage.playback.effective import Window
from tests.lineage.test_ops import inputs, rel


def _steps(q, k, v, g, beta, corrects=True):
    """The delta-rule recurrence (or, corrects=False, Mamba-2's decayed sum over keys k) one
    token at a time, as a mixer's step reports it: StateObs per step, batch element 0."""
    B, T, H, K = q.shape
    S = torch.zeros(B, H, K, v.shape[-1], dtype=q.dtype)
    for t in range(T):
        alpha = None if g is None else g[:, t].exp()
        if alpha is not None:
            S = S * (alpha[..., None, None] if alpha.dim() == 2 else alpha[..., None])
        kt, vt = k[:, t], v[:, t]
        u = beta[:, t, :, None] * (vt - (kt[:, :, None] @ S)[:, :, 0] if corrects else vt)
        S = S + kt[..., None] * u[:, :, None]
        qs = q[:, t] * K ** -0.5
        yield StateObs(S, None, kt, vt, None, beta[:, t], alpha, 0, qs, corrects=corrects), (qs[:, :, None] @ S)[:, :, 0]


@pytest.mark.parametrize("gates", ["none", "head", "channel"])
@pytest.mark.parametrize("size", [5, 256])
def test_rows_are_the_closed_form_and_add_up_to_the_read_out(gates, size):
    q, k, v, beta, g_ch, g_hd, _ = inputs(23, K=12, V=5, B=1, H=2)
    g = {"none": None, "head": g_hd * 0.2, "channel": g_ch * 0.2}[gates]
    op = {"none": ops.delta_rule, "head": ops.gated_delta_rule, "channel": ops.kda}[gates]
    *_, A, _ = op(q, k, v, *(() if g is None else (g,)), beta, attention=True)   # (1, H, T, T)
    win = Window(size)
    for t, (mx, o) in enumerate(_steps(q, k, v, g, beta)):
        row, shares, before = win.step(mx)
        n = min(t + 1, size)
        assert row.shape == (2, n)
        assert rel(row.double(), A[0, :, t, t + 1 - n:t + 1].float().double()) < 1e-5, t
        # the parts: the window's values weighted by the row, and what came before (its share)
        o = o[0].float()
        window_part = (row[..., None] * v[0, t + 1 - n:t + 1].transpose(0, 1).float()).sum(1)   # (H, V)
        assert torch.allclose(shares.sum(1) + before, torch.ones(2), atol=1e-4)
        if t < size:
            assert torch.allclose(before, torch.zeros(2), atol=1e-4)     # nothing before the window yet
            assert torch.allclose(window_part, o, atol=1e-5)


def test_mamba2_rows_have_no_correction():
    q, k, v, beta, _, g_hd, _ = inputs(17, K=8, V=4, B=1, H=2)
    dt = beta + 0.1
    y, _, A, _ = ops.ssd(v, dt, g_hd * 0.3, k, q * 8 ** -0.5, attention=True)   # C = the scaled query
    win = Window()
    for t, (mx, o) in enumerate(_steps(q, k, v, g_hd * 0.3, dt, corrects=False)):
        row, _, _ = win.step(mx)
        assert rel(row.double(), A[0, :, t, :t + 1].float().double()) < 1e-5, t
        assert rel(o, y[:, t]) < 1e-10


@pytest.mark.parametrize("m,preset", [(1, "tiny-deltanet"), (2, "tiny-kda")])   # effective_attention's models
def test_a_trained_models_frames_hold_the_closed_form(m, preset):
    from lineage.model import LM
    from lineage.playback.session import Session
    from lineage.presets import get_preset
    from lineage.scenario import load
    from lineage.scenarios import DIR
    from lineage.weights import load_into
    sc = load(DIR / "effective_attention.yaml")
    ids = sc.input.ids
    model = LM(get_preset(preset)).eval()                 # the same weights, loaded apart from the app
    load_into(model, DIR / sc.model_specs[m].checkpoint)
    mixer = model.blocks[1].mixer
    seen = {}
    hook = mixer.register_forward_pre_hook(lambda mod, args: seen.setdefault("x", args[0]))
    with torch.inference_mode():
        model(torch.tensor([ids]))
        hook.remove()
        x = seen["x"].double()
        mixer.double()
        q, k, v, beta, _ = mixer._qkvb(x, None)
        g = mixer._decay(x)
        op = ops.kda if g is not None else ops.delta_rule
        *_, A, _ = op(q, k, v, *(() if g is None else (g,)), beta, attention=True)   # (1, H, T, T)
    s = Session(sc, device="cpu")
    try:
        frames = [s.frame(i) for i in range(s.total)]
    finally:
        s.close()
    assert sc.decoding.prefill == 0 and s.total == len(ids)      # frame t holds position t
    for t, f in enumerate(frames):
        rows = f.attention(m, 1)
        assert rows.weights.shape == (A.shape[1], t + 1)
        want = A[0, :, t, :t + 1]
        assert (torch.tensor(rows.weights, dtype=torch.float64) - want).abs().max() < 2e-3 * want.abs().max() + 1e-6, t
        assert abs(rows.shares.sum(1) + rows.before - 1).max() < 1e-3
