"""Gemma 3's text model (`gemma3_text`): logits equal to transformers over a prefill longer than the
sliding window, cached steps past it and a chunked prefill; windowed and global layers each at
their own RoPE (linear scaling on the global ones), the query_pre_attn_scalar softmax scale, q/k
norms, (1 + w) sandwich norms, the scaled embedding, soft-capped logits; greedy tokens equal; the
hub's older config spelling; the refusals in one line; the scenario `lineage run DIR` opens."""
import json

import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402

from .helpers import compare, greedy_equal, import_cpu_models, rel  # noqa: E402

import_cpu_models("gemma3.modeling_gemma3")
from transformers import Gemma3ForCausalLM, Gemma3TextConfig  # noqa: E402

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402
from lineage.observed import StepObs  # noqa: E402

from .test_hybrids import TOKENS, stirred  # noqa: E402

VOCAB = 83
W = 5
KINDS = ("sliding", "sliding", "full", "sliding", "sliding")      # sliding_window_pattern 3 over 5 layers


def gemma(path, **kw):
    """A tiny random Gemma 3 text model, saved. Odd sizes: hidden 40, 4 query heads over 2 KV heads
    of 12 channels (not 40 / 4), window 5, layers 3 global and the rest windowed,
    query_pre_attn_scalar 20 (not 12), local theta 50 against global 300 stretched 8x (linear),
    logits capped at 3 (below the random model's logits, so the cap bends them)."""
    torch.manual_seed(0)
    cfg = dict(vocab_size=VOCAB, hidden_size=40, intermediate_size=56, num_hidden_layers=5, num_attention_heads=4,
               num_key_value_heads=2, head_dim=12, sliding_window=W, sliding_window_pattern=3,
               query_pre_attn_scalar=20, final_logit_softcapping=3.0, max_position_embeddings=512,
               rope_parameters={"full_attention": dict(rope_type="linear", factor=8.0, rope_theta=300.0),
                                "sliding_attention": dict(rope_type="default", rope_theta=50.0)},
               attn_implementation="eager", **TOKENS)
    cfg.update(kw)
    ref = stirred(Gemma3ForCausalLM(Gemma3TextConfig(**cfg)))
    ref.save_pretrained(str(path))
    return ref


def kv_equal(kinds):
    """Each layer's cache against transformers': a windowed layer holds min(tokens, W) (transformers
    keeps W - 1 between steps), a global one every token."""
    def check(step, cache, state):
        for i, (st, kind) in enumerate(zip(state.layers, kinds)):
            theirs = cache.layers[i]
            n = theirs.keys.shape[2]
            assert st.length == (min(state.pos, W) if kind == "sliding" else state.pos), (step, i)
            assert n == (min(state.pos, W - 1) if kind == "sliding" else state.pos), (step, i)
            assert rel(st.k[:, :, -n:], theirs.keys) < 1e-4 and rel(st.v[:, :, -n:], theirs.values) < 1e-4, (step, i)
    return check


@pytest.mark.parametrize("prefill", [20, 3, 1])
def test_equals_transformers_past_the_window(tmp_path, prefill):
    """A prefill longer than the window (20), shorter (3: the steps cross W), one token; then 9
    cached steps, every layer's cache equal to transformers'."""
    ref = gemma(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    c, a = model.cfg, model.cfg.attention
    assert c.windows == KINDS and c.sandwich_norm and c.embed_scale == 40 ** 0.5 and c.logit_softcap == 3.0
    assert (a.n_heads, a.kv_heads, a.dim, a.sliding_window, a.rope_scaling.kind) == (4, 2, 12, W, "linear")
    assert a.softmax_scale == pytest.approx(ref.model.layers[0].self_attn.scaling)
    assert [(b.mixer.cfg.rope_theta, b.mixer.cfg.rope_scaling is None) for b in model.blocks] == \
        [(300.0, False) if k == "full" else (50.0, True) for k in KINDS]
    assert model.lm_head.weight is model.wte.weight
    errs = compare(ref, tmp_path, VOCAB, prefill=prefill, steps=9, state_check=kv_equal(KINDS))
    assert max(errs) < 1e-4, errs


def test_untied_head_and_attention_biases_without_a_cap(tmp_path):
    """An untied head, q/k/v/o biases, no logit cap, the default pattern of 6 (one global layer,
    the last of 6), head_dim 16."""
    ref = gemma(tmp_path, tie_word_embeddings=False, attention_bias=True, final_logit_softcapping=None,
                sliding_window_pattern=6, num_hidden_layers=6, head_dim=16)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.lm_head.weight is not model.wte.weight and model.cfg.logit_softcap is None
    assert model.cfg.windows == ("sliding",) * 5 + ("full",)
    errs = compare(ref, tmp_path, VOCAB, prefill=12, steps=4)
    assert max(errs) < 1e-4, errs


def test_every_layer_windowed_or_none(tmp_path):
    """layer_types all sliding (no global layer: every layer at the local theta) and all full."""
    ref = gemma(tmp_path, layer_types=["sliding_attention"] * 5)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.windows is None and {b.mixer.cfg.rope_theta for b in model.blocks} == {50.0}
    assert max(compare(ref, tmp_path, VOCAB, prefill=12, steps=4, state_check=kv_equal(("sliding",) * 5))) < 1e-4
    ref = gemma(tmp_path / "full", layer_types=["full_attention"] * 5)
    model, _ = lineage.load_pretrained(tmp_path / "full")
    assert model.cfg.attention.sliding_window is None and {b.mixer.cfg.rope_theta for b in model.blocks} == {300.0}
    assert max(compare(ref, tmp_path / "full", VOCAB, prefill=12, steps=4)) < 1e-4


def test_chunked_prefill_past_the_window(tmp_path):
    """A prompt read 4 tokens a pass, each chunk attending over the windowed cache before it, then steps."""
    from lineage.prefill import prefill
    ref = gemma(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 23), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = ref(ids[:, :17], use_cache=True)
        logits, state = prefill(model, ids[:, :17], chunk=4)
        errs = [rel(logits, out.logits[:, -1])]
        cache = out.past_key_values
        kv_equal(KINDS)(-1, cache, state)
        for i in range(17, 23):
            out = ref(ids[:, i:i + 1], cache=cache, use_cache=True)
            cache = out.past_key_values
            logits, state = model.step(ids[:, i], state)
            errs.append(rel(logits, out.logits[:, 0]))
    assert max(errs) < 1e-4, errs


def test_static_step_as_the_growing_one(tmp_path):
    """The fixed-capacity cache a CUDA graph captures steps as the growing cache does, past W."""
    from lineage.graph_step import to_static
    gemma(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 16), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        _, st = model(ids[:, :9])
        static = to_static(st, capacity=32)
        for t in range(9, 16):
            a, st = model.step(ids[:, t], st, StepObs())
            b, static = model.step(ids[:, t], static, StepObs())
            assert rel(b, a) < 1e-5, t


def test_greedy_tokens_equal(tmp_path):
    ref = gemma(tmp_path, final_logit_softcapping=30.0)
    greedy_equal(ref, tmp_path)


def hub_spelling(path):
    """Rewrite a saved config.json as the published Gemma 3 files spell it (transformers 4.50):
    rope_theta, rope_local_base_freq and the global layers' rope_scaling; the pattern, no layer_types."""
    cfg = json.loads((path / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    for k in ("layer_types", "_sliding_window_pattern", "use_bidirectional_attention", "dtype"):
        cfg.pop(k)
    full = rope["full_attention"]
    cfg.update(rope_theta=full.pop("rope_theta"), rope_local_base_freq=rope["sliding_attention"]["rope_theta"],
               rope_scaling=full, cache_implementation="hybrid", attn_logit_softcapping=None, torch_dtype="float32")
    (path / "config.json").write_text(json.dumps(cfg))


def test_hub_spelling(tmp_path):
    ref = gemma(tmp_path)
    hub_spelling(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.windows == KINDS and model.cfg.attention.rope_scaling.factor == 8.0
    assert max(compare(ref, tmp_path, VOCAB, prefill=14, steps=4)) < 1e-4


@pytest.mark.parametrize("field,value", [
    ("query_pre_attn_scalar", 12),                   # head_dim's scale instead
    ("rope_parameters", {"full_attention": dict(rope_type="linear", factor=8.0, rope_theta=300.0),
                         "sliding_attention": dict(rope_type="default", rope_theta=300.0)}),   # one theta
])
def test_the_comparison_sees_each_number(tmp_path, field, value):
    """The same weights with one number of config.json changed are far from transformers."""
    ref = gemma(tmp_path)
    _edit(tmp_path, **{field: value})
    assert max(compare(ref, tmp_path, VOCAB, prefill=12, steps=2)) > 1e-2


def _edit(path, **fields):
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(fields)
    (path / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("fields, match", [
    (dict(attn_logit_softcapping=50.0), "attn_logit_softcapping: soft-capped attention scores"),
    (dict(use_bidirectional_attention=True), "use_bidirectional_attention: True is not supported"),
    (dict(hidden_activation="gelu"), "hidden_activation: 'gelu' is not supported"),
    (dict(rope_parameters={"full_attention": dict(rope_type="dynamic", factor=2.0, rope_theta=1e4),
                           "sliding_attention": dict(rope_type="default", rope_theta=1e4)}),
     "rope_parameters: rope_type 'dynamic' is not supported"),
    (dict(rope_parameters={"full_attention": dict(rope_type="default", rope_theta=1e4),
                           "sliding_attention": dict(rope_type="linear", factor=2.0, rope_theta=1e4)}),
     "rope_parameters.sliding_attention.rope_type: 'linear' on the sliding layers"),
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 1e4}), "rope_parameters: expected one entry"),
    (dict(rope_theta=1e4), "rope_theta: given beside rope_parameters"),
    (dict(layer_types=["full_attention"] * 4), "layer_types: expected 5 entries"),
    (dict(sliding_window=None), "sliding_window: missing or null"),
    (dict(final_logit_softcapping=0.0), "final_logit_softcapping: must be positive"),
    (dict(use_mla_gate=True), "use_mla_gate: a field the gemma3_text loader does not understand"),
])
def test_what_lineage_cannot_run_is_refused_in_one_line(tmp_path, fields, match):
    gemma(tmp_path, num_hidden_layers=5)
    _edit(tmp_path, **fields)
    with pytest.raises(PretrainedError, match=match) as e:
        lineage.load_pretrained(tmp_path)
    assert "config.json" in str(e.value) and "\n" not in str(e.value)


def test_the_multimodal_composite_is_refused_and_pointed_at_the_text_model(tmp_path):
    """`Gemma3ForConditionalGeneration` (model_type gemma3: text and vision) is not opened; lineage
    opens the text-only gemma3_text."""
    gemma(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma3", "text_config": cfg}))
    with pytest.raises(PretrainedError, match=r"model_type 'gemma3' is not supported \(did you mean 'gemma3_text'"):
        lineage.load_pretrained(tmp_path)


def test_a_gemma3_text_is_no_longer_pointed_elsewhere(tmp_path):
    from lineage.families.loader import ARCHS
    assert ARCHS["gemma3_text"].__name__ == "lineage.families.gemma3_text"


def test_parameter_arithmetic_counts_what_loads(tmp_path):
    from lineage.arithmetic import count
    gemma(tmp_path, tie_word_embeddings=False, attention_bias=True)
    model, _ = lineage.load_pretrained(tmp_path)
    assert count(model.cfg)["total"] == sum(p.numel() for p in model.parameters())


def test_windowed_memory_stops_growing_but_the_global_layer_grows(tmp_path):
    """What the layers report each step equals model_memory: the four windowed layers stop at W
    tokens, the global one grows with every token."""
    from lineage.arithmetic import model_memory
    gemma(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    windowed, full = [], []
    with torch.no_grad():
        _, state = model(torch.tensor([[3, 4]]))
        for t in range(8):
            obs = StepObs()
            _, state = model.step(torch.tensor([10 + t]), state, obs)
            assert sum(lo.mixer.cache_bytes for lo in obs.layers) == model_memory(model.cfg, state.pos, 4, 4)["cache_bytes"]
            windowed.append(obs.layers[0].mixer.cache_bytes)
            full.append(obs.layers[2].mixer.cache_bytes)
    assert windowed[2] == windowed[-1] > windowed[1] and full[-1] > full[2]
    per_token = model.cfg.attention.cache_bytes_per_token(4)
    assert model_memory(model.cfg, 1000, 4, 4)["cache_bytes"] == per_token * (1000 + 4 * W)


def test_opens_as_a_scenario(tmp_path):
    """What `lineage run DIR` opens: tokens, the attention of layer 0 and the cache, stepped a few frames."""
    from lineage.families.scenario import checkpoint_scenario
    from lineage.playback.session import Session
    from lineage.scenario import loads
    gemma(tmp_path / "tiny-gemma")
    text = checkpoint_scenario(tmp_path / "tiny-gemma", ids=[5, 6, 7, 8, 9, 10, 11], steps=9)
    sc = loads(text)
    assert [p.kind for p in sc.panels] == ["tokens", "attention", "cache"]
    s = Session(sc, device="cpu")
    f = s.frame(8)
    assert f is not None and s.info["models"][0]["kind"] == "lm"
    s.close()


def test_params_and_memory_print(tmp_path, capsys):
    """`lineage params DIR` counts transformers' parameters; `lineage memory DIR` counts the
    windowed layers' cache at W tokens, however long the context."""
    from lineage.cli.main import main
    ref = gemma(tmp_path)
    capsys.readouterr()
    assert main(["params", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{sum(p.numel() for p in ref.parameters()):,} parameters" in out and "Gemma 3 checkpoint" in out, out
    assert main(["memory", str(tmp_path), "--context", "1000"]) == 0
    out = capsys.readouterr().out
    # bf16, 96 B a token a layer: at 1,000 tokens the global layer holds 1,000, each windowed one W
    row = next(line for line in out.splitlines() if line.split()[:1] == ["1,000"])
    assert f"{(1000 + 4 * W) * 96 / 1024:.1f} KiB" in row, out
