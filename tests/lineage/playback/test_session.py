"""Sessions and traces: the figures' numbers through real frames, stepping, record and replay."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lineage.scenario import load, loads
from lineage.playback.session import Replay, Session, open_path
from lineage.playback.trace import TraceError, TraceReader
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
SC = ROOT / "lineage" / "scenarios"
BUNDLED = sorted(SC.glob("*.yaml"))


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_scenario_records_20_steps(path, tmp_path):
    s = Session(load(path), device="cpu")
    n = min(20, s.total)
    assert n >= 1
    s.record_to(tmp_path / "t.trace")
    s.record_all(n)
    s.close()
    r = Replay(tmp_path / "t.trace")
    assert r.total == n
    for i in range(n):
        assert r.frame(i) == s.frame(i)          # bit-identical


def _recall(frame, model):
    r = frame.recall(model)
    keys, rec = r.keys, r.recall
    return {int(k): float(r[0]) for k, r in zip(keys, rec)}


def test_two_facts_numbers():
    s = Session(load(SC / "fig3_two_facts.yaml"))
    f = s.jump(1)                                # both facts written
    additive, delta = _recall(f, 0), _recall(f, 1)
    assert additive[0] == pytest.approx(1.70, abs=1e-12) and additive[1] == pytest.approx(1.70, abs=1e-12)
    assert delta[1] == pytest.approx(1.00, abs=1e-12) and delta[0] == pytest.approx(1.21, abs=1e-12)
    f = s.jump(2)                                # reading the old fact back
    assert float(f.readout(1)[0]) == pytest.approx(1.21, abs=1e-12)


def _plain_memory(rule, keys, values, channel, events):
    """The toy rules as one float64 numpy loop, written here and not taken from lineage.ops:
    decay (alpha = e^(gate [+ channel])), read, then the write (add, or correct what k recalls).
    Yields, per event, S after it and what the event's key reads back before and after."""
    K, V = keys.shape[1], values.shape[1]
    S = np.zeros((K, V))
    for e in events:
        log_a = np.zeros(K)
        if rule in ("gated_delta", "kda", "gated_linear"):
            log_a = log_a + e.gate + (channel if rule in ("kda", "gated_linear") else 0)
        S = np.exp(log_a)[:, None] * S
        k = keys[e.key] if e.kind in ("write", "read") else np.zeros(K)
        before = k @ S
        if e.kind == "write":
            v = values[e.value]
            w = e.beta * v if rule in ("linear", "gated_linear") else e.beta * (v - before)
            for i in range(K):
                for j in range(V):
                    S[i, j] += k[i] * w[j]
        yield S.copy(), before, k @ S


TOYS = [p for p in BUNDLED if "memory:" in p.read_text()]


def test_the_toys_cover_every_rule():
    rules = {s.memory.rule for p in TOYS for s in load(p).model_specs}
    assert rules == {"linear", "gated_linear", "delta", "gated_delta", "kda"}


@pytest.mark.parametrize("path", TOYS, ids=lambda p: p.stem)
def test_toy_memory_is_the_real_rule(path):
    """Every rule the bundled toys use (linear, gated_linear, delta, gated_delta, kda), step by
    step: the state, the read before the write and a read event's output equal a plain loop."""
    from lineage.scenario.tasks import generate
    from lineage.playback.toy import Memory
    sc = load(path)
    seq = generate(sc.input.task)
    for spec in sc.model_specs:
        mem = Memory(spec.memory, seq, sc.input.task, sc.weights.seed, sc.weights.set)
        want = _plain_memory(spec.memory.rule, mem.keys.numpy(), mem.values.numpy(), mem.channel.numpy(),
                             seq.events)
        for ev, (S, before, after) in zip(seq.events, want):
            o = mem.step(ev)
            assert np.abs(o["S"].numpy() - S).max() < 1e-12, (spec.memory.rule, ev.label())
            assert np.abs(o["read"].numpy() - before).max() < 1e-12
            if ev.kind == "read":
                assert np.abs(o["out"].numpy() - after).max() < 1e-12


def test_recall_scenario_shows_interference():
    s = Session(load(SC / "recall.yaml"))
    f = s.end()
    err = {m: np.linalg.norm(f.recall(m).recall - f.recall(m).target, axis=1).mean() for m in (0, 1)}
    assert err[0] > 2 * err[1]                   # additive memory interferes, delta rule corrects


def test_gating_scenario_buys_room_for_the_new_topic():
    """fig5: the state is full after topic A; the gate at the separator clears it, so every one of
    topic B's facts reads back closer in the gated memory than in the delta memory."""
    s = Session(load(SC / "fig5_gating.yaml"))
    f = s.end()
    err = {m: np.linalg.norm(f.recall(m).recall - f.recall(m).target, axis=1) for m in (0, 1)}
    a, b = slice(0, 8), slice(8, 16)                 # topic A's facts were written first
    assert (err[1][b] <= err[0][b] + 1e-12).all() and err[1][b].sum() < err[0][b].sum() - 0.3, err
    assert err[1][a].mean() >= err[0][a].mean()       # and topic A is what the gate gave up


def test_channel_decay_scenario_keeps_slow_rows():
    s = Session(load(SC / "fig6_channel_decay.yaml"))
    f = s.end()
    err = dict(zip(f.recall(0).keys.tolist(),
                   np.linalg.norm(f.recall(0).recall - f.recall(0).target, axis=1)))
    assert err[0] < 1e-9 and err[1] < 1e-9          # keys 0, 1 live on the channels that hold
    assert err[2] > 0.7 and err[3] > 0.7            # keys 2, 3 on the channels that fade


def test_arithmetic_figures():
    fr = Session(load(SC / "fig1_param_ratio.yaml")).frame(0).meta["figure"]
    assert fr["ratio_published"] == 22_580 and fr["small_params"] == 124_439_808
    s = Session(load(SC / "fig2_kv_cache.yaml"))
    rows = [s.frame(i).meta["figure"] for i in range(s.total)]
    for a, b in zip(rows, rows[1:]):
        assert b["context"] == 2 * a["context"] and b["batch"] in (a["batch"] // 2, (a["batch"] + 1) // 2)
    s = Session(load(SC / "fig4_chunk_dial.yaml"))
    last = s.end().meta["figure"]
    assert last["chunk"] == 8192 and round(last["vs64"]) == 43
    s = Session(load(SC / "fig8_moe_sparsity.yaml"))
    k3 = s.frame(0).meta["figure"]
    assert k3["experts"] == 896 and k3["top_k"] == 16 and k3["sparsity"] == 56 and k3["shared"] == 2
    s = Session(load(SC / "fig9_memory_table.yaml"))
    first, last = s.frame(0).meta["figure"]["rows"], s.end().meta["figure"]["rows"]
    k3_first, k3_last = first[2], last[2]
    assert k3_first["state_bytes"] > k3_first["cache_bytes"] and k3_last["state_bytes"] < k3_last["cache_bytes"]
    s = Session(load(SC / "fig7_k3_layer_map.yaml"))
    assert s.frame(0).meta["figure"]["counts"] == {"kda": 69, "mla": 24}


def test_cursor_reads_back_without_recomputing():
    s = Session(load(SC / "tour.yaml"))
    made = []
    orig = s._make
    s._make = lambda i: made.append(i) or orig(i)
    s.jump(10)
    assert made == list(range(11))
    s.prev(), s.prev(), s.reset(), s.jump(7), s.next()
    assert made == list(range(11)) and s.index == 8
    s.jump(10_000)
    assert s.index == s.total - 1 and made == list(range(s.total))


def test_deterministic():
    a, b = Session(load(SC / "tour.yaml")), Session(load(SC / "tour.yaml"))
    for i in (0, 5, 30):
        assert a.frame(i) == b.frame(i)


def test_greedy_and_sampled_decoding_past_the_input():
    base = "version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: ab}\nsteps: 6\n"
    for mode in ("greedy", "sample"):
        s = Session(loads(base + f"decoding: {{mode: {mode}, temperature: 0.8, top_k: 5, seed: 1}}\n"))
        frames = [s.frame(i) for i in range(6)]
        assert [f.meta["source"] for f in frames] == ["input", "input"] + [mode] * 4
        if mode == "greedy":   # the token fed next is the argmax of the previous step
            assert frames[3].meta["token"] == int(frames[2].guesses(0).ids[0])


def test_prefill_uses_forward_then_steps():
    text = "version: 1\ntitle: t\nmodel: {preset: k3-mini}\ninput: {text: 'hello there'}\ndecoding: {prefill: 6}\n"
    s = Session(loads(text))
    assert s.total == 5 and s.frame(0).meta["pos"] == 6
    full = Session(loads(text.replace("decoding: {prefill: 6}\n", "")))
    a, b = s.frame(0).guesses(0).probs, full.frame(6).guesses(0).probs
    assert np.allclose(a, b, atol=1e-5)          # chunked prefill lands where stepping does


# ----------------------------------------------------------------------------- traces

def _record(tmp_path, steps=12):
    out = tmp_path / "t.trace"
    assert main(["record", str(SC / "tour.yaml"), "-o", str(out), "--steps", str(steps)]) == 0
    return out


def test_truncated_and_corrupt_traces(tmp_path, capsys):
    path = _record(tmp_path)
    raw = path.read_bytes()
    cut = tmp_path / "cut.trace"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(TraceError, match="truncated"):
        TraceReader(cut)
    salvaged = TraceReader(cut, salvage=True)
    assert salvaged.truncated and 0 < len(salvaged) < 12
    salvaged.frame(len(salvaged) - 1)
    assert main(["snapshot", str(cut), "--step", "1", "-o", str(tmp_path / "x.txt")]) == 2
    assert "truncated" in capsys.readouterr().err
    assert main(["snapshot", str(cut), "--step", "1", "--salvage", "-o", str(tmp_path / "x.txt")]) == 0
    flipped = bytearray(raw)
    flipped[len(raw) // 2] ^= 0xFF
    bad = tmp_path / "bad.trace"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(TraceError, match="corrupt|checksum"):
        r = TraceReader(bad)
        for i in range(len(r)):
            r.frame(i)
    assert main(["validate", str(bad)]) == 2
    junk = tmp_path / "junk.trace"
    junk.write_bytes(b"LNTRACE\n\x00\x01\x02")
    with pytest.raises(TraceError):
        TraceReader(junk)


def test_trace_replays_without_torch(tmp_path):
    path = _record(tmp_path, steps=6)
    code = f"""
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this test")
sys.meta_path.insert(0, NoTorch())
from lineage.cli.main import main
rc = main(["snapshot", {str(path)!r}, "--step", "6", "-o", "-"])
assert rc == 0, rc
assert "torch" not in sys.modules
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "step 6 / 6" in r.stdout and "state:" in r.stdout


def test_snapshot_same_from_scenario_and_trace(tmp_path):
    path = _record(tmp_path, steps=8)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    assert main(["snapshot", str(SC / "tour.yaml"), "--step", "8", "-o", str(a)]) == 0
    assert main(["snapshot", str(path), "--step", "8", "-o", str(b)]) == 0
    # the same frame either way; only the title's "step 8 / M" differs (82 planned, 8 recorded)
    assert a.read_text().splitlines()[1:] == b.read_text().splitlines()[1:]
    assert main(["snapshot", "tour", "--step", "3", "--panel", "routing", "-o", str(tmp_path / "c.txt")]) == 0
    assert "routing: k3-mini layer 1" in (tmp_path / "c.txt").read_text()


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "tour" in out and "fig3_two_facts" in out


def test_concurrent_callers_step_once():
    """Two threads asking for frames at once must not feed a token twice (a race the app had:
    a panel redraw on the UI thread while the worker stepped)."""
    import threading
    ref = Session(load(SC / "tour.yaml"))
    s = Session(load(SC / "tour.yaml"))
    threads = [threading.Thread(target=s.frame, args=(i,)) for i in (9, 3, 9, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(s.frames) == 10
    for i in range(10):
        assert s.frame(i) == ref.frame(i)


def test_checkpoint_weights(tmp_path, monkeypatch):
    """weights.checkpoint loads a safetensors file; a file that does not fit is a located error."""
    from safetensors.torch import save_file
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)     # on the CPU, as the model here
    from lineage.model import LM
    from lineage.presets import get_preset
    from lineage.scenario.problems import ScenarioError
    torch.manual_seed(123)
    model = LM(get_preset("tiny-kda"))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "w.safetensors"))
    text = ("version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: abc}\n"
            "weights: {seed: 7, checkpoint: w.safetensors}\n")
    (tmp_path / "s.yaml").write_text(text)
    s = Session(load(tmp_path / "s.yaml"))
    loaded = s.runner.models[0].model
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
    seeded = Session(loads(text.replace(", checkpoint: w.safetensors", "")))
    assert not np.array_equal(s.frame(0).guesses(0).probs, seeded.frame(0).guesses(0).probs)
    # a checkpoint of another shape names the problem
    save_file({"wte.weight": torch.zeros(3, 3)}, str(tmp_path / "bad.safetensors"))
    (tmp_path / "b.yaml").write_text(text.replace("w.safetensors", "bad.safetensors"))
    with pytest.raises(ScenarioError) as e:
        Session(load(tmp_path / "b.yaml"))
    line = str(e.value)
    assert "bad.safetensors does not fit the model: size mismatch for wte.weight" in line and "\n" not in line
    (tmp_path / "m.yaml").write_text(text.replace("w.safetensors", "missing.safetensors"))
    with pytest.raises(ScenarioError, match="no such file"):
        load(tmp_path / "m.yaml")


def test_checkpoint_problems_point_at_the_field(tmp_path, monkeypatch):
    """Problems found only when the checkpoint is read (NaN or inf weights, wrong shapes, a file
    that is not safetensors) are placed at weights.checkpoint, not at 1:1."""
    from safetensors.torch import save_file
    import torch
    from lineage.model import LM
    from lineage.presets import get_preset
    from lineage.scenario.problems import ScenarioError
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    state = {k: v.contiguous() for k, v in LM(get_preset("tiny-kda")).state_dict().items()}
    first = next(k for k, v in state.items() if v.is_floating_point())
    for name, bad in (("nan", float("nan")), ("inf", float("inf"))):
        save_file({**state, first: torch.full_like(state[first], bad)}, str(tmp_path / f"{name}.safetensors"))
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 64)
    import struct
    (tmp_path / "huge.safetensors").write_bytes(struct.pack("<Q", 1 << 62) + b"{}")         # a header of 4 EiB
    head = b'{"wte.weight": {"dtype": "F32", "shape": [1000000000, 1000000], "data_offsets": [0, 4]}}'
    (tmp_path / "lies.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + b"\0" * 4)
    text = ("version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: abc}\n"
            "weights: {seed: 7, checkpoint: X.safetensors}\n")
    for name, needle in (("nan", "NaN or inf"), ("inf", "NaN or inf"), ("junk", "cannot read"),
                         ("huge", "cannot read"), ("lies", "cannot read")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text.replace("X", name))
        with pytest.raises(ScenarioError) as e:
            Session(load(path))
        (p,) = e.value.problems
        assert (p.line, p.col, p.path) == (5, 32, "weights.checkpoint") and needle in p.message, str(p)
