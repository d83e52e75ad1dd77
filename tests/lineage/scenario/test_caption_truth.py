"""The bundled scenarios' captions are true: what a caption says is what its frames show.

The general check: a number a caption writes with decimals or thousands separators (1.70, 0.21,
27,648, 428.6) must be, at the caption's precision, a number printed by some panel at some step
the caption is shown (`at` to `until`, or to the end). Bare small integers (93 layers, 8 keys)
are definitions the scenario sets, not readings, and are not checked here; counts a caption
states ("7 of 16") have their own tests below.

Two more kinds of claim, each checked at EVERY step the caption is shown: a number written with
its sign (-0.49, +0.0070) must be printed with that sign, and text a caption quotes in backticks
(`raise TypeError(`) must be in the token stream the tokens panel shows (the text as printed:
a newline is `\\n`). Steps are rendered only where a caption has something to check.
"""
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from lineage.arithmetic import measured_memory, model_memory
from lineage.playback.session import Session
from lineage.presets import get_preset
from lineage.scenario import load
from lineage.app.panels import render

SC = Path(__file__).parents[3] / "lineage" / "scenarios"
LESSONS = ["fig1_param_ratio", "fig2_kv_cache", "fig3_two_facts", "fig3_dials", "fig4_chunk_dial", "fig5_gating",
           "fig6_channel_decay", "fig7_k3_layer_map", "fig8_moe_sparsity", "fig9_memory_table", "recall",
           "recall_overload", "decayed_memory", "active_params", "decode_bytes", "gated_mla", "effective_attention", "tour"]
NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])\d+\.\d+")
# numbers a caption derives rather than reads (each with why it is not on screen)
DERIVED = {
    "fig3_dials": {"0.0067"},          # e^-5, the gate's value, written out
    "fig5_gating": {"0.0067"},
    "decayed_memory": {"0.905"},       # e^-0.1, the decay per step, written out
    "fig9_memory_table": {"0.8"},      # (16,384 - 16,253) / 16,253, both on screen; test_fig9_crossovers
    "recall": {"0.5"},                 # the scenario's key_overlap, a setting
}


def _numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


def _matches(word: str, shown: list[float]) -> bool:
    x = float(word.replace(",", ""))
    d = len(word.split(".")[1]) if "." in word else 0
    return any(round(y, d) == x or (d == 0 and round(y) == x) for y in shown)


def _shown_numbers(text: str) -> list[float]:
    return [float(w.replace(",", "")) for w in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


# a sign written on a number: not a hyphen inside a word or range (0.63-0.98), nor an exponent (e^-5)
SIGN = r"(?<![\w.)\]^])[-+\u2212]"
SIGNED = re.compile(SIGN + r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+)")
SHOWN_SIGNED = re.compile(f"({SIGN})?" + r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)")
QUOTED = re.compile(r"`([^`]+)`")


def _signed(text: str) -> list[str]:
    return SIGNED.findall(text)


def _shown_signed(text: str) -> list[float]:
    """Every number printed with a sign (an unsigned one, such as an error's size, has none to match)."""
    return [(-1 if sign in "-\u2212" else 1) * float(w.replace(",", ""))
            for sign, w in SHOWN_SIGNED.findall(text) if sign]


def _signed_matches(word: str, shown: list[float]) -> bool:
    x = float(word.replace(",", "").replace("\u2212", "-"))
    d = len(word.split(".")[1])
    return any(round(y, d) == x and (y < 0) == (x < 0) for y in shown)


def _stream(text: str) -> str:
    """The token stream the tokens panel prints, the current token's [ ] marks taken off."""
    line = next(line for line in text.splitlines() if line.startswith("tokens (pos "))
    shown = line.split("): ...", 1)[1]
    last = shown.rindex("[")
    assert shown.endswith("]"), line
    return shown[:last] + shown[last + 1:-1]


def _session(name):
    sc = load(SC / f"{name}.yaml")
    return sc, Session(sc)


def _steps(c, total: int) -> range:
    return range(c.at, (c.until if c.until is not None else total - 1) + 1)


@pytest.mark.parametrize("name", LESSONS)
def test_caption_numbers_are_on_screen(name):
    sc, s = _session(name)
    texts = {}

    def text(i):                 # every panel at step i, without the note (rendered once, when asked)
        if i not in texts:
            texts[i] = render(s, i).split("\nnote:")[0]
        return texts[i]
    for c in sc.captions:
        steps = _steps(c, s.total)
        words = [w for w in _numbers(c.text) if w not in DERIVED.get(name, set())]
        if words:
            shown = [y for i in steps for y in _shown_numbers(text(i))]
            missing = [w for w in words if not _matches(w, shown)]
            assert not missing, f"{name} caption at {c.at}: {missing} not shown at steps {steps.start}-{steps.stop - 1}"
        signed = _signed(c.text)
        if signed:
            shown = [y for i in steps for y in _shown_signed(text(i))]
            wrong = [w for w in signed if not _signed_matches(w, shown)]
            assert not wrong, f"{name} caption at {c.at}: {wrong} not printed with that sign at steps " \
                              f"{steps.start}-{steps.stop - 1}"


@pytest.mark.parametrize("name", LESSONS)
def test_caption_quotes_the_text_shown(name):
    """Text a caption quotes in backticks is in the tokens panel's stream at every step it is shown."""
    sc, s = _session(name)
    for c in sc.captions:
        quoted = QUOTED.findall(c.text)
        if not quoted:
            continue
        for i in _steps(c, s.total):
            stream = _stream(render(s, i, "tokens"))
            missing = [q for q in quoted if q not in stream]
            assert not missing, f"{name} caption at step {c.step}: {missing} not in the text shown at step {i + 1}: {stream!r}"


@pytest.mark.parametrize("name", LESSONS)
def test_each_step_shows_its_own_caption(name):
    """Captions that change say `until`: no step shows a caption written for another setting."""
    sc = load(SC / f"{name}.yaml")
    ats = sorted(c.at for c in sc.captions)
    for c in sc.captions:
        later = [a for a in ats if a > c.at]
        if later:
            assert c.until is not None and c.until < later[0], f"{name}: caption at {c.at} runs into {later[0]}"


def _wrong(frame, m):
    r = frame.recall(m)
    return int((r.recall.argmax(1) != r.target.argmax(1)).sum()), len(r.keys)


def test_recall_lesson_holds_within_capacity():
    s = Session(load(SC / "recall.yaml"))
    f = s.frame(11)
    err = {m: np.linalg.norm(f.recall(m).recall - f.recall(m).target, axis=1) for m in (0, 1)}
    assert _wrong(f, 0) == (0, 12) and _wrong(f, 1) == (0, 12)           # "both still name the right value"
    assert err[1].max() < err[0].min() and err[1][-1] < 1e-12             # delta bounded, newest exact
    assert err[0].min() > 1.5                                             # "every key is off by 1.66"


def test_recall_overload_names_where_the_lesson_stops():
    f = Session(load(SC / "recall_overload.yaml")).frame(15)
    assert _wrong(f, 1) == (7, 16)                  # "the wrong value for 7 of 16 keys"
    assert _wrong(f, 0) == (0, 16)                  # "still names all 16"
    wrong = f.recall(1).recall.argmax(1) != f.recall(1).target.argmax(1)
    assert wrong[:8].sum() > wrong[8:].sum()        # "mostly old ones"


def test_gating_counts_in_the_caption():
    f = Session(load(SC / "fig5_gating.yaml")).end()
    a = slice(0, 8)
    for m, right in ((0, 1), (1, 0)):               # "1 of 8 ... the gated memory 0 of 8"
        r = f.recall(m)
        assert int((r.recall[a].argmax(1) == r.target[a].argmax(1)).sum()) == right


def test_gating_topic_b_errors_are_the_captions_ranges():
    """Step 17's caption gives the range of topic B's errors over every B fact but the newest (the
    recall panel's error column, |read - wanted|), gated against delta; it once left out the second
    newest (0.16 against 0.18) and quoted 0.63-0.98 against 0.72-1.05."""
    sc = load(SC / "fig5_gating.yaml")
    f = Session(sc).frame(16)
    err = {m: np.linalg.norm(f.recall(m).recall - f.recall(m).target, axis=1)[8:16] for m in (0, 1)}
    assert [round(float(err[m][-1]), 2) for m in (0, 1)] == [0.0, 0.0]             # "the newest is exact in both"
    assert (err[1][:-1] < err[0][:-1]).all()                                          # "every B fact but the newest"
    lo_hi = {m: (round(float(err[m][:-1].min()), 2), round(float(err[m][:-1].max()), 2)) for m in (0, 1)}
    text = next(c.text for c in sc.captions if c.step == 17)
    assert f"{lo_hi[1][0]:.2f} to {lo_hi[1][1]:.2f} against {lo_hi[0][0]:.2f} to {lo_hi[0][1]:.2f}" in text, lo_hi


def test_two_facts_panel_prints_the_formula_with_its_sign():
    """c (v2 - c v1) at c = 0.7 with values 1 then 0 is -0.49 (the old fact reads 0.51, low): the
    panel once printed its size, 0.49, after the formula."""
    s = Session(load(SC / "fig3_dials.yaml"))
    assert "c (v2 - c v1) = -0.49" in render(s, 4, "figure")
    assert "c (v2 - c v1) = +0.21" in render(s, 2, "figure")          # equal values read high


def test_decayed_memory_oldest_reads_wrong_then_fades():
    s = Session(load(SC / "decayed_memory.yaml"))
    assert _wrong(s.frame(7), 0)[0] == 1 and _wrong(s.frame(7), 1)[0] == 0
    before, after = s.frame(7).recall(0).recall.max(1), s.end().recall(0).recall.max(1)
    assert (after < before).all() and np.allclose(s.frame(7).recall(1).recall, s.end().recall(1).recall)


def test_effective_attention_reads_where_its_captions_say():
    """Steps 33-64 (frames 32-63): at every key asked again, softmax layer 0 head 0's largest weight
    and DeltaNet layer 0 head 0's largest share of the read-out are on the position after the key's
    pair, KDA layer 1 head 0's largest weight on the value; at step 33 the numbers the caption gives."""
    sc = load(SC / "effective_attention.yaml")
    s = Session(sc, device="cpu")
    ids = sc.input.ids
    asked = [t for t in range(32, s.total) if t % 2 == 0]
    assert len(asked) == 16
    for t in asked:
        f = s.frame(t)
        key = ids.index(ids[t])                        # where the pair was written
        assert key < 32 and key % 2 == 0 and f.token().pos == t
        assert [int(f.guesses(m).ids[0]) for m in range(3)] == [ids[key + 1]] * 3, t
        soft, delta, kda = f.attention(0, 0), f.attention(1, 0), f.attention(2, 1)
        assert int(np.argmax(soft.weights[0])) == key + 2, t
        assert int(np.argmax(delta.shares[0])) == key + 2, t
        assert int(np.argmax(kda.weights[0])) == key + 1, t
    f = s.frame(32)
    assert ids[10:12] == [ids[32], 252] and float(f.guesses(0).probs[0]) > 0.9995
    assert round(float(f.attention(0, 0).weights[0, 12]), 2) == 1.00
    delta, kda = f.attention(1, 0), f.attention(2, 1)
    assert (round(float(delta.weights[0, 12]), 4), round(100 * float(delta.shares[0, 12]))) == (0.0070, 69)
    assert (round(float(kda.weights[0, 11]), 3), round(100 * float(kda.shares[0, 11]))) == (0.045, 78)
    assert (delta.weights < 0).any() and (kda.weights < 0).any()     # "small signed weights"


def test_fig9_crossovers():
    k3 = get_preset("k3")
    fp32, bf16 = model_memory(k3, 0, 2, 4), model_memory(k3, 0, 2, 2)
    x32, x16 = fp32["state_bytes"] / fp32["bytes_per_token"], bf16["state_bytes"] / bf16["bytes_per_token"]
    assert round(x32) == 16253 and round(x16) == 8403
    assert round(100 * (16384 - x32) / x32, 1) == 0.8       # "by 0.8%"


def test_fig4_measured_times_are_the_benchmark():
    """The scenario's measured column is BENCHMARKS.md's table, machine and date included."""
    from lineage.figures import CHUNK_DIAL_MEASURED as m
    text = (Path(__file__).parents[3] / "BENCHMARKS.md").read_text()
    section = text[text.index("## Figure 4's time against chunk size"):]
    section = section[:re.search(r"\n#{1,3} ", section[5:]).start() + 5]     # to the next heading
    assert m["date"] in section and m["machine"] in section
    for c, ms in m["ms"].items():
        assert re.search(rf"\| `lineage.ops.delta_rule` \| {c} \| [\d,]+ \| {ms} \|", section), (c, ms)
    assert f"| {m['recurrence_ms']} |" in section and f"| {m['triton_64_ms']} |" in section


# ------------------------------------------------------------------ one accounting of memory

def test_one_accounting_splits_state_and_conv_and_names_dtypes():
    m = model_memory(get_preset("k3"), 1024)
    assert m["state_bytes"] == m["matrix_bytes"] + m["conv_bytes"]
    assert m["matrix_bytes"] == 69 * 96 * 128 * 128 * 4 and m["conv_bytes"] == 69 * 3 * 96 * 128 * 3 * 2
    assert m["dtypes"] == "bf16 cache, fp32 state, bf16 conv cache"
    assert model_memory(get_preset("gpt2-small"), 8)["dtypes"] == "bf16 cache, fp32 state"


def test_cache_panel_counts_what_the_running_model_holds():
    """The running model's S is the accounting's matrix part in the model's dtype; the panel adds
    the convolution caches by the same function and says which dtypes it counted."""
    s = Session(load(SC / "tour.yaml"))
    f = s.frame(3)
    cfg = s.model_config(0)
    v = f.cache(0, cfg)
    account = model_memory(cfg, v.tokens, 4, 4)                     # the tour runs in float32
    assert v.state == account["state_bytes"] and v.conv == account["conv_bytes"] > 0
    assert v.latent_per_tok == account["bytes_per_token"]
    assert v.dtypes == "fp32 cache, fp32 state, fp32 conv cache"
    raw = measured_memory(f.meta["models"][0]["layers"], cfg)
    assert raw["state"] - raw["conv"] == account["matrix_bytes"]


def test_memory_command_states_its_dtypes(capsys):
    from lineage.cli.main import main
    assert main(["memory", "k3"]) == 0
    out = capsys.readouterr().out
    assert "S 434,110,464 + conv cache 15,261,696" in out and "bf16 cache, fp32 state, bf16 conv cache" in out


# ------------------------------------------------------------------------ the toy memories

def test_decayed_sum_is_mamba2s_recurrence():
    """The toy's gated_linear rule against the closed form S_T = sum_t (decay after t) k_t^T v_t,
    written out here rather than taken from the code under test."""
    from lineage.scenario.tasks import generate
    s = Session(load(SC / "decayed_memory.yaml"))
    s.end()
    mem = s.runner.memories[0]                      # the decayed sum; [1] is the delta rule
    assert mem.spec.rule == "gated_linear"
    events = generate(s.sc.input.task).events
    assert s.total == len(events)                   # every event went through the memory
    K, V = mem.spec.key_dim, mem.spec.value_dim
    logs = torch.stack([torch.full((K,), e.gate, dtype=torch.float64) + mem.channel for e in events])   # (T, K)
    after = logs.flip(0).cumsum(0).flip(0) - logs   # (T, K): the log decay applied after step t
    S = torch.zeros(K, V, dtype=torch.float64)
    for t, e in enumerate(events):
        if e.kind == "write":
            S += torch.outer(mem.keys[e.key] * after[t].exp(), e.beta * mem.values[e.value])
    assert (after[0] < 0).all()                     # the oldest fact has decayed: the test sees the gate
    assert torch.allclose(mem.S, S, atol=1e-12)


def test_two_facts_general_error_and_normaliser():
    from lineage.figures import two_facts
    for c in (0.2, 0.7, 1.0):
        r = two_facts(c, 1.0, (1.0, 0.0))
        assert r["delta_old_error"] == pytest.approx(c * c, abs=1e-12) == pytest.approx(-r["old_offset_formula"])
        assert r["delta_old"] - 1.0 == pytest.approx(r["old_offset_formula"], abs=1e-12)    # signed: reads low
        assert r["normalised_old"] == pytest.approx(1 / (1 + c)) and r["normalised_new"] == pytest.approx(c / (1 + c))
    eq = two_facts(0.7)
    assert eq["normalised_old"] == pytest.approx(1.0) == eq["normalised_new"]


# ------------------------------------------------------------------------------ gated MLA

def test_gated_mla_frames_hold_the_gate_per_head_and_channel():
    s = Session(load(SC / "gated_mla.yaml"), device="cpu")
    f = s.frame(19)
    cfg = get_preset("k3-mini")
    for layer, kind in enumerate(cfg.mixers):
        g = f.gate(0, layer)
        if kind != "mla":
            assert g is None
            continue
        assert g.shape == (cfg.mla.n_heads, cfg.mla.v_head_dim) and ((g > 0) & (g < 1)).all()
    assert not np.allclose(f.gate(0, 3), s.frame(18).gate(0, 3))     # recomputed from every token


def test_gate_panel_refused_without_a_gated_mla():
    from lineage.scenario import loads
    from lineage.scenario.problems import ScenarioError
    text = (SC / "gated_mla.yaml").read_text().replace("{preset: k3-mini}", "{preset: tiny-kda}")
    text = text.replace("layer: 3, ", "").replace("layer: 7, ", "")
    with pytest.raises(ScenarioError, match="no gated MLA layer"):
        loads(text)


@pytest.mark.parametrize("figure, says", [
    ("{kind: two_facts, settings: [[0.7]]}", "give [overlap, beta] or [overlap, beta, v1, v2] (got 1 numbers)"),
    ("{kind: two_facts, settings: [[1.5, 1.0]]}", "overlap and beta must be in [0, 1]"),
    ("{kind: kv_cache, compare: k33}", "unknown preset 'k33' (did you mean 'k3'?)"),
    ("{kind: decode_bytes, presets: [gpt3]}", "unknown preset 'gpt3'"),
])
def test_bad_figure_settings_are_one_located_line(tmp_path, capsys, figure, says):
    from lineage.cli.main import main
    f = tmp_path / "bad.yaml"
    f.write_text(f"version: 1\ntitle: x\nfigure: {figure}\n")
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{f}:3:") and says in err[0], err
