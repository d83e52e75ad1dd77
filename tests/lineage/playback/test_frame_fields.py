"""Every array a frame holds is declared once, in lineage/playback/observe.py's tables: what a
model's step records is written into a frame by them and read back by them, every declared
quantity round trips (through a trace's bytes too), and a key renamed since a trace was recorded
reads through the one alias table."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from lineage.observed import AttentionObs, LayerObs, RoutingObs, StateObs, StepObs
from lineage.playback import observe
from lineage.playback.frame import Frame
from lineage.playback.session import Replay

ROOT = Path(__file__).resolve().parents[3]
H, K, V, E, N, TOP = 2, 3, 4, 5, 3, 4        # heads, key and value width, experts, depth sources, guesses


def _step():
    """A tiny two-layer model's observed step with every optional field set: a gated recurrent
    layer (its attention rows followed) then a gated MLA layer, each with a routed FFN that has a
    shared expert, attention residuals throughout. Batch 1, as a session steps."""
    g = torch.Generator().manual_seed(3)

    def r(*shape):
        return torch.randn(1, *shape, generator=g)

    def routing():
        return RoutingObs(scores=r(E), experts=torch.tensor([[1, 3]]), weights=r(2).softmax(-1),
                          shared_share=r().sigmoid())
    state = StateObs(S=r(H, K, V), dS=r(H, K, V), k=r(H, K), v=r(H, V), read=r(H, V), beta=r(H).sigmoid(),
                     alpha=r(H, K).sigmoid(), state_bytes=H * K * V * 4, q=r(H, K))
    attn = AttentionObs(weights=r(H, 6).softmax(-1), length=4, cache_len=4, cache_bytes=64, gate=r(H * V).sigmoid())
    layers = [LayerObs(state, routing(), (torch.randn(1, 1, generator=g), torch.randn(2, 1, generator=g))),
              LayerObs(attn, routing(), (torch.randn(2, 1, generator=g), torch.randn(N, 1, generator=g)))]
    return StepObs(layers, top_ids=torch.tensor([[7, 2, 9, 4]]), top_probs=r(TOP).softmax(-1), pos=0,
                   attnres_final=torch.randn(N, 1, generator=g))


def _frame(obs) -> Frame:
    cfg = SimpleNamespace(mixers=["gdn", "mla"], ffns=["moe", "moe"], mla=SimpleNamespace(n_heads=H),
                          moe=SimpleNamespace(n_experts=E))
    step = observe.lm_fields(obs, cfg, load={}, follow={})
    meta, arrays = observe.lm_step_fields(observe.token_meta(0, 7, "a", "input", None, None), [step])
    f = Frame(0, meta, arrays)
    return Frame.from_bytes(f.to_bytes())         # as a trace keeps it


def _memory_frame() -> Frame:
    """A toy memory's step (float64, one head), its dict named as the tables name their fields."""
    rng = np.random.default_rng(5)
    o = {name: torch.from_numpy(rng.standard_normal(shape)) for name, shape in
         (("S", (K, V)), ("dS", (K, V)), ("k", (K,)), ("v", (V,)), ("read", (V,)), ("alpha", (K,)),
          ("recall", (2, V)), ("target", (2, V)), ("out", (V,)))}
    o.update(beta=0.5, keys=[1, 0])
    meta, arrays = observe.memory_step_fields("write", [observe.memory_fields(o, "kda", "write")])
    return Frame(0, meta, arrays), o


def _near(got, want, compact=False):
    want = want.detach().double().numpy()
    tol = 2e-3 * max(np.abs(want).max(), 1) if compact else 1e-6
    return got.shape == want.shape and np.abs(got.astype(np.float64) - want).max() <= tol


def test_every_declared_quantity_round_trips_through_a_frame():
    obs = _step()
    f = _frame(obs)
    mem, o = _memory_frame()
    # what is written is what is declared: a quantity declared and never written (or written
    # under a key no table declares) fails here
    written = {k.rpartition("/")[2] for k in f.arrays} | {k.rpartition("/")[2] for k in mem.arrays}
    declared = {field.key for table in observe.TABLES for field in table.values()}
    assert written == declared - {observe.ROUTING["shared_share"].key}      # that one is kept in the meta

    state, attn = obs.layers[0].mixer, obs.layers[1].mixer
    st = f.state(0, 0)
    for name, field in observe.STATE.items():
        assert _near(getattr(st, name), getattr(state, name)[0], field.how == "compact"), name
    assert _near(f.decay(0, 0).alpha, state.alpha[0])
    rows = f.attention(0, 0)                       # the attention the state implements: one position so far
    assert rows.weights.shape == rows.shares.shape == (H, 1) and rows.before.shape == (H,)
    assert np.allclose(rows.shares[:, 0] + rows.before, 1, atol=1e-5)
    assert _near(f.attention(0, 1).weights, attn.weights[0][:, :4], compact=True)
    assert f.attention(0, 1).shares is None and f.state(0, 1) is None and f.decay(0, 1) is None
    assert _near(f.gate(0, 1), attn.gate[0].reshape(H, V)) and f.gate(0, 0) is None
    for layer in (0, 1):
        ff, got = obs.layers[layer].ffn, f.routing(0, layer)
        assert _near(got.scores, ff.scores[0]) and _near(got.weights, ff.weights[0])
        assert got.experts.tolist() == [1, 3] and got.load.tolist() == [0, 1, 0, 1, 0]
        assert abs(got.shared_share - float(ff.shared_share[0])) < 1e-6
    depth = f.depth(0)
    assert [(d.layer, d.part) for d in depth.reads] == [(0, "mixer"), (0, "ffn"), (1, "mixer"), (1, "ffn")]
    for d, w in zip(depth.reads, [w for lo in obs.layers for w in lo.attnres]):
        assert _near(d.weights, w[:, 0])
    assert _near(depth.final, obs.attnres_final[:, 0])
    guesses = f.guesses(0)
    assert guesses.ids.tolist() == [7, 2, 9, 4] and _near(guesses.probs, obs.top_probs[0])

    # a toy memory's, float64 as made, with a head axis of 1
    st = mem.state(0, 0)
    for name in observe.STATE:
        assert np.array_equal(getattr(st, name), np.asarray(o[name], dtype=np.float64)[None]), name
    assert np.array_equal(mem.decay(0, 0).alpha[0], o["alpha"].numpy())
    rec = mem.recall(0)
    assert rec.keys.tolist() == [1, 0] and np.array_equal(rec.recall, o["recall"].numpy())
    assert np.array_equal(rec.target, o["target"].numpy()) and np.array_equal(mem.readout(0), o["out"].numpy())


def test_a_key_renamed_since_a_trace_was_recorded_reads_through_the_alias_table():
    """alpha was kept as "decay" (it always held alpha, not a decay rate): a frame of then reads as now."""
    f = _frame(_step())
    now = "/" + observe.DECAY["alpha"].key
    assert any(k.endswith(now) for k in f.arrays)
    then = Frame(f.step, f.meta, {(k[:-len(now)] + "/decay" if k.endswith(now) else k): a for k, a in f.arrays.items()})
    assert "m0/l0/decay" in then.arrays and not any(k.endswith(now) for k in then.arrays)
    assert np.array_equal(then.decay(0, 0).alpha, f.decay(0, 0).alpha)
    # and a trace recorded then (tests/lineage/data: its frames say "decay")
    old = Replay(ROOT / "tests/lineage/data/recall_5steps.trace")
    frame = old.frame(0)
    assert "m0/l0/decay" in frame.arrays and frame.decay(0, 0) is not None
    assert frame.decay(0, 0).alpha.shape == frame.state(0, 0).S.shape[:2]
