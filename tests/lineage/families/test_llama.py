"""Llama-style checkpoints (llama, qwen3, mistral): logits equal to transformers over a prefill
and cached steps, every RoPE scaling past the pretraining length, q/k norms, biases, tied and
untied heads, greedy tokens; and what is refused, in one line naming config.json's field."""
import json

import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,  # noqa: E402
                          Qwen3Config, Qwen3ForCausalLM)

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402

from .helpers import compare  # noqa: E402
from lineage.observed import StepObs
from lineage.playback.observe import lm_fields

TOKENS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
CLASSES = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM),
           "mistral": (MistralConfig, MistralForCausalLM)}


def make(path, family="llama", **kw):
    """A tiny random transformers model at awkward sizes (5 query heads sharing 1 KV head, heads
    of 8 channels, not 35 / 5), every parameter stirred (transformers leaves norms at 1, biases
    at 0: a swapped tensor could hide), saved with save_pretrained."""
    torch.manual_seed(0)
    cfg = dict(vocab_size=83, hidden_size=35, intermediate_size=50, num_hidden_layers=3, num_attention_heads=5,
               num_key_value_heads=1, head_dim=8, max_position_embeddings=512, attn_implementation="eager", **TOKENS)
    if family == "mistral":
        cfg["sliding_window"] = None
    cfg.update(kw)
    conf_cls, model_cls = CLASSES[family]
    ref = model_cls(conf_cls(**cfg)).eval()
    torch.manual_seed(1)
    for p in ref.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ref.save_pretrained(str(path))
    return ref


def llama3(orig=16):
    return dict(rope_type="llama3", rope_theta=500.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                original_max_position_embeddings=orig)


def test_llama_equals_transformers_past_the_llama3_context(tmp_path):
    """GQA 5:1, head_dim 8 != 35 / 5, attention and MLP biases, llama3 RoPE trained at 16
    positions: a 200-token prefill and steps reach 12x past it."""
    ref = make(tmp_path, rope_parameters=llama3(), attention_bias=True, mlp_bias=True)
    model, _ = lineage.load_pretrained(tmp_path)
    a = model.cfg.attention
    assert (a.n_heads, a.kv_heads, a.dim, a.bias, a.rope_scaling.kind) == (5, 1, 8, True, "llama3")
    assert model.cfg.dense.bias and model.lm_head.weight is not model.wte.weight
    errs = compare(ref, tmp_path, 83, prefill=200, steps=4)
    assert max(errs) < 1e-4, errs


def test_llama_tied_one_token_prefill_mha(tmp_path):
    ref = make(tmp_path, tie_word_embeddings=True, num_key_value_heads=5, head_dim=None, hidden_size=30,
               rope_parameters=dict(rope_type="default", rope_theta=10000.0))
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.lm_head.weight is model.wte.weight and model.cfg.attention.dim == 6
    errs = compare(ref, tmp_path, 83, prefill=1, steps=8)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("rope", [
    dict(rope_type="linear", rope_theta=300.0, factor=3.0),
    dict(rope_type="yarn", rope_theta=300.0, factor=4.0, original_max_position_embeddings=16),
    dict(rope_type="yarn", rope_theta=300.0, factor=4.0, original_max_position_embeddings=16, attention_factor=1.3,
         beta_fast=8.0, beta_slow=2.0, truncate=False),
    dict(rope_type="yarn", rope_theta=300.0, factor=6.0, original_max_position_embeddings=16, mscale=0.7,
         mscale_all_dim=0.4),
    dict(rope_type="llama3", rope_theta=300.0, factor=5.0, low_freq_factor=2.0, high_freq_factor=3.0,
         original_max_position_embeddings=24),
], ids=["linear", "yarn", "yarn-attention-factor", "yarn-mscale", "llama3"])
def test_rope_scaling_past_the_original_context(tmp_path, rope):
    """Each scaling type at positions past original_max_position_embeddings (40 + 4 > 16 or 24)."""
    ref = make(tmp_path, rope_parameters=rope, num_hidden_layers=2)
    errs = compare(ref, tmp_path, 83, prefill=40, steps=4)
    assert max(errs) < 1e-4, errs


def test_older_rope_scaling_spelling(tmp_path):
    """Hub files before transformers 5: `rope_scaling` with `type` and a top-level rope_theta."""
    ref = make(tmp_path, rope_parameters=llama3(), num_hidden_layers=2)
    cfg = json.loads((tmp_path / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    rope["type"] = rope.pop("rope_type")
    cfg["rope_scaling"] = rope
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.attention.rope_scaling.kind == "llama3" and model.cfg.attention.rope_theta == 500.0
    assert max(compare(ref, tmp_path, 83, prefill=30, steps=3)) < 1e-4


def test_greedy_tokens_equal_transformers(tmp_path):
    ref = make(tmp_path, rope_parameters=llama3())
    model, _ = lineage.load_pretrained(tmp_path)
    ids = torch.tensor([[5, 17, 3, 44, 9, 60, 21]])
    with torch.no_grad():
        want = ref.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=0)[0, 7:].tolist()
        logits, state = model(ids)
        got = []
        for _ in range(12):
            got.append(int(logits[0, -1].argmax()) if not got else int(logits[0].argmax()))
            logits, state = model.step(torch.tensor([got[-1]]), state)
    assert got == want


def test_tied_config_with_a_head_in_the_file(tmp_path):
    """tie_word_embeddings with an lm_head.weight in the file: loaded when it is the embedding,
    refused when it differs (never silently dropped)."""
    from safetensors.torch import load_file, save_file
    make(tmp_path, tie_word_embeddings=True, num_hidden_layers=1)
    sd = load_file(str(tmp_path / "model.safetensors"))
    assert "lm_head.weight" not in sd
    save_file(dict(sd, **{"lm_head.weight": sd["model.embed_tokens.weight"].clone()}),
              str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.lm_head.weight is model.wte.weight
    save_file(dict(sd, **{"lm_head.weight": sd["model.embed_tokens.weight"] + 1e-3}),
              str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(PretrainedError, match="lm_head.weight differs from the embedding.*tie_word_embeddings"):
        lineage.load_pretrained(tmp_path)


def test_parameter_arithmetic_counts_what_loads(tmp_path):
    from lineage.arithmetic import count
    make(tmp_path, attention_bias=True, mlp_bias=True)
    model, _ = lineage.load_pretrained(tmp_path)
    assert count(model.cfg)["total"] == sum(p.numel() for p in model.parameters())


def _edit(path, **fields):
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(fields)
    (path / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("fields, match", [
    (dict(rope_parameters=dict(rope_type="dynamic", rope_theta=1e4, factor=2.0)), "rope_type 'dynamic'"),
    (dict(rope_parameters=dict(rope_type="longrope", rope_theta=1e4, factor=2.0)), "rope_type 'longrope'"),
    (dict(rope_parameters=dict(rope_type="linear", rope_theta=1e4, factor=2.0, beta_fast=3)), "'beta_fast'"),
    (dict(rope_parameters=dict(rope_type="linear", rope_theta=1e4, factor=-2.0)), "factor must be a positive"),
    (dict(rope_parameters=dict(rope_type="default", rope_theta=1e4, partial_rotary_factor=0.5)), "partial_rotary"),
    (dict(rope_scaling=dict(rope_type="linear", factor=2.0)), "disagrees with rope_parameters"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(layer_types=["full_attention"] * 3), "layer_types: a field the llama loader does not understand"),
])
def test_refused_in_one_line_naming_the_field(tmp_path, fields, match):
    make(tmp_path, num_hidden_layers=3)
    _edit(tmp_path, **fields)
    with pytest.raises(PretrainedError, match=match) as e:
        lineage.load_pretrained(tmp_path)
    assert "config.json" in str(e.value) and "\n" not in str(e.value)


def test_lineage_run_dir_opens_it(tmp_path, capsys):
    """`lineage run DIR`'s scenario: tokens, the attention of layer 0 and the cache; it records
    and draws headless, and validate accepts it."""
    from lineage.playback.session import Session
    from lineage.families.scenario import checkpoint_scenario
    from lineage.scenario import loads
    from lineage.cli.main import main
    make(tmp_path / "tiny-llama", rope_parameters=llama3())
    text = checkpoint_scenario(tmp_path / "tiny-llama", ids=[5, 6, 7], steps=4)
    sc = loads(text)
    assert [p.kind for p in sc.panels] == ["tokens", "attention", "cache"]
    s = Session(sc, device="cpu")
    f = s.frame(3)
    assert s.info["models"][0]["kind"] == "lm"
    s.close()
    (tmp_path / "s.yaml").write_text(text)
    assert main(["validate", str(tmp_path / "s.yaml")]) == 0
    for panel in ("attention", "cache"):
        assert main(["snapshot", str(tmp_path / "tiny-llama"), "--ids", "5,6,7", "--step", "3", "--panel", panel,
                     "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "attention: tiny-llama layer 0 softmax" in out and "3 tokens cached" in out, out
    assert f is not None


# ------------------------------------------------------------------------------------- qwen3

def test_qwen3_equals_transformers_with_its_qk_norms(tmp_path):
    """Qwen3's per-head q/k RMSNorm stores the plain scale (Qwen3-Next's stores w for 1 + w):
    loaded as is into the attention's q_norm / k_norm; biases, GQA 5:1, 200 tokens of prefill."""
    ref = make(tmp_path, family="qwen3", attention_bias=True, rope_parameters=dict(rope_type="default", rope_theta=1e6))
    model, _ = lineage.load_pretrained(tmp_path)
    a = model.cfg.attention
    assert a.qk_norm and a.bias and not a.output_gate and model.cfg.notes == "Qwen3 checkpoint"
    want = ref.model.layers[1].self_attn.q_norm.weight
    assert torch.equal(model.blocks[1].mixer.q_norm.weight, want)
    errs = compare(ref, tmp_path, 83, prefill=200, steps=4)
    assert max(errs) < 1e-4, errs


def test_qwen3_tied_yarn_and_its_head_dim_default(tmp_path):
    """Qwen3's head_dim defaults to 128, not hidden_size // heads: a config.json without it."""
    ref = make(tmp_path, family="qwen3", tie_word_embeddings=True, head_dim=128, num_hidden_layers=2,
               rope_parameters=dict(rope_type="yarn", rope_theta=1e6, factor=4.0, original_max_position_embeddings=16))
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["head_dim"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.attention.dim == 128 and model.lm_head.weight is model.wte.weight
    errs = compare(ref, tmp_path, 83, prefill=1, steps=30)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("fields, match", [
    (dict(mlp_bias=True), "mlp_bias: a field the qwen3 loader does not understand"),
    (dict(hidden_act="gelu"), "hidden_act"),
])
def test_qwen3_refusals(tmp_path, fields, match):
    make(tmp_path, family="qwen3", num_hidden_layers=1)
    _edit(tmp_path, **fields)
    with pytest.raises(PretrainedError, match=match):
        lineage.load_pretrained(tmp_path)


# ----------------------------------------------------------------------------------- mistral

def test_mistral_without_a_window_equals_transformers(tmp_path):
    """Mistral v0.2/v0.3 (sliding_window null): Llama's layout without biases; head_dim absent
    in old hub files means hidden_size // heads."""
    ref = make(tmp_path, family="mistral", head_dim=None, hidden_size=30, num_key_value_heads=5, num_hidden_layers=2,
               rope_parameters=dict(rope_type="default", rope_theta=1e6))
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["head_dim"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.attention.dim == 6 and not model.cfg.attention.bias
    errs = compare(ref, tmp_path, 83, prefill=200, steps=4)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("fields, match", [
    (dict(attention_bias=True), "attention_bias: a field the mistral loader does not understand"),
    (dict(layer_types=["full_attention"] * 2), "layer_types: a field the mistral loader"),
])
def test_mistral_refusals(tmp_path, fields, match):
    make(tmp_path, family="mistral", num_hidden_layers=2)
    _edit(tmp_path, **fields)
    with pytest.raises(PretrainedError, match=match):
        lineage.load_pretrained(tmp_path)


# ---------------------------------------------------------------------------- sliding window

def kv_equal(window):
    """A state_check for `compare`: each layer holds min(tokens, W) keys and values, and the
    last W - 1 of them (transformers keeps W - 1 between steps) equal transformers' cache."""
    from .helpers import rel

    def check(step, cache, state):
        for i, st in enumerate(state.layers):
            assert st.length == min(state.pos, window), (step, i, st.length)
            theirs = cache.layers[i]
            n = theirs.keys.shape[2]
            assert n == min(state.pos, window - 1)
            assert rel(st.k[:, :, -n:], theirs.keys) < 1e-4 and rel(st.v[:, :, -n:], theirs.values) < 1e-4, (step, i)
    return check


@pytest.mark.parametrize("prefill", [12, 3, 1])
def test_mistral_sliding_window_equals_transformers(tmp_path, prefill):
    """W = 5: a prefill longer than the window (12), shorter (3, the steps cross W), one token;
    the cache stops growing at W tokens and holds what transformers' holds."""
    ref = make(tmp_path, family="mistral", sliding_window=5, num_hidden_layers=2)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.attention.sliding_window == 5
    errs = compare(ref, tmp_path, 83, prefill=prefill, steps=9, state_check=kv_equal(5))
    assert max(errs) < 1e-4, errs


def test_qwen3_window_on_every_layer_and_a_long_prefill(tmp_path):
    """Qwen3 with use_sliding_window and max_window_layers 0 (every layer windowed), W = 7,
    a 200-token prefill: the window reaches back 7 positions, not 200."""
    ref = make(tmp_path, family="qwen3", use_sliding_window=True, sliding_window=7, max_window_layers=0,
               num_hidden_layers=2, rope_parameters=llama3())
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.attention.sliding_window == 7
    errs = compare(ref, tmp_path, 83, prefill=200, steps=5, state_check=kv_equal(7))
    assert max(errs) < 1e-4, errs
    full = make(tmp_path / "full", family="qwen3", num_hidden_layers=2, rope_parameters=llama3())
    assert max(compare(full, tmp_path, 83, prefill=200, steps=1)) > 1e-2        # the window changed the answer


def test_windowed_observations_and_the_static_step(tmp_path):
    """The step's attention row covers positions 0 .. pos with 0 outside the window; the static
    (graph-capturable) step gives the same logits and rows from a cache whose window already
    dropped tokens, and reports the bytes of W tokens."""
    from lineage.graph_step import to_static
    make(tmp_path, family="mistral", sliding_window=4, num_hidden_layers=2)
    model, _ = lineage.load_pretrained(tmp_path)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        _, state = model(ids)
        static = to_static(state, capacity=16)
        for t in (11, 12, 13):
            obs, sobs = StepObs(), StepObs()
            logits, state = model.step(torch.tensor([t]), state, obs)
            slogits, static = model.step(torch.tensor([t]), static, sobs)
            eager, st = obs.layers[1].mixer, sobs.layers[1].mixer
            pos = state.pos - 1
            assert eager.weights.shape[-1] == eager.length == pos + 1
            assert torch.allclose(slogits, logits, atol=1e-5, rtol=1e-5)
            assert st.length == pos + 1
            assert torch.allclose(st.weights[..., :pos + 1], eager.weights, atol=1e-6)
            assert float(eager.weights[..., :pos - 3].abs().max()) == 0.0      # outside the last 4: nothing
            assert eager.cache_len == st.cache_len == 4 and eager.cache_bytes == st.cache_bytes


def mixed_kv_equal(window, kinds):
    """kv_equal per layer: a windowed layer holds min(tokens, W) (transformers W - 1), a full one all."""
    from .helpers import rel

    def check(step, cache, state):
        for i, (st, kind) in enumerate(zip(state.layers, kinds)):
            theirs = cache.layers[i]
            n = theirs.keys.shape[2]
            assert st.length == (min(state.pos, window) if kind == "sliding" else state.pos), (step, i)
            assert n == (min(state.pos, window - 1) if kind == "sliding" else state.pos), (step, i)
            assert rel(st.k[:, :, -n:], theirs.keys) < 1e-4 and rel(st.v[:, :, -n:], theirs.values) < 1e-4, (step, i)
    return check


@pytest.mark.parametrize("spec", [dict(max_window_layers=1), dict(layer_types=["sliding_attention", "full_attention",
                                                                               "sliding_attention"])],
                         ids=["max_window_layers", "layer_types"])
def test_qwen3_windowed_and_full_layers_equal_transformers(tmp_path, spec):
    """Qwen3 with use_sliding_window: the layers from max_window_layers on (or those layer_types
    names) window at W = 5, the others attend to everything; a prefill past W and steps."""
    ref = make(tmp_path, family="qwen3", use_sliding_window=True, sliding_window=5, num_hidden_layers=3, **spec)
    model, _ = lineage.load_pretrained(tmp_path)
    kinds = ("full", "sliding", "sliding") if "max_window_layers" in spec else ("sliding", "full", "sliding")
    assert model.cfg.windows == kinds
    assert [b.mixer.cfg.sliding_window for b in model.blocks] == [5 if k == "sliding" else None for k in kinds]
    errs = compare(ref, tmp_path, 83, prefill=12, steps=6, state_check=mixed_kv_equal(5, kinds))
    assert max(errs) < 1e-4, errs
    from lineage.arithmetic import model_memory
    per_layer = model.cfg.attention.cache_bytes_per_token(4)
    assert model_memory(model.cfg, 100, 4, 4)["cache_bytes"] == per_layer * (100 + 2 * 5)


def test_windowed_memory_arithmetic_stops_growing_as_the_cache_does(tmp_path):
    """model_memory's cache at a context equals what the running layers report (float32), and
    both stop at W tokens."""
    from lineage.arithmetic import model_memory
    make(tmp_path, family="mistral", sliding_window=5, num_hidden_layers=2)
    model, _ = lineage.load_pretrained(tmp_path)
    measured = []
    with torch.no_grad():
        _, state = model(torch.tensor([[3, 4]]))
        for t in range(8):
            obs = StepObs()
            _, state = model.step(torch.tensor([10 + t]), state, obs)
            got = sum(lo.mixer.cache_bytes for lo in obs.layers)
            assert got == model_memory(model.cfg, state.pos, 4, 4)["cache_bytes"], (t, state.pos)
            measured.append(got)
    assert measured[2] == measured[-1] > measured[1]          # full from 5 tokens on, growing before
    m = model_memory(model.cfg, 1 << 20)
    assert m["cache_bytes"] == m["window_bytes"] == model_memory(model.cfg, 5)["cache_bytes"]
    from lineage.arithmetic import measured_memory       # what the cache panel reads: where the KV stops
    seen = measured_memory(lm_fields(obs, model.cfg, {})[0]["layers"], model.cfg)
    assert seen["tokens"] == 5 and seen["kv"] == measured[-1] and seen["kv_window"] == 5


def test_some_layers_windowed_project_layer_by_layer(tmp_path):
    """Qwen3 with one full layer and two windowed at W = 5: what the cache panel projects from a
    frame (CacheView.cache_at) and the batch `lineage memory` prints follow model_memory, the
    full layer growing and the windowed ones stopping, before and past the window."""
    from lineage.arithmetic import batch_per_card, measured_memory, model_memory
    from lineage.playback.observe import CacheView
    make(tmp_path, family="qwen3", use_sliding_window=True, sliding_window=5, num_hidden_layers=3,
         max_window_layers=1)
    model, _ = lineage.load_pretrained(tmp_path)
    with torch.no_grad():
        _, state = model(torch.tensor([[3, 4]]))
        for t in range(6):
            obs = StepObs()
            _, state = model.step(torch.tensor([10 + t]), state, obs)
            view = CacheView(**measured_memory(lm_fields(obs, model.cfg, {})[0]["layers"], model.cfg))
            assert view.windowed and view.kv_window is None
            for n in (3, 5, 100, 1 << 20):
                assert view.cache_at(n) == model_memory(model.cfg, n, 4, 4)["cache_bytes"], (state.pos, n)
    m = model_memory(model.cfg, 1 << 20)
    assert batch_per_card(m["cache_bytes"], 0, 10**12) > batch_per_card(m["bytes_per_token"] << 20, 0, 10**12)


def test_a_windowed_checkpoint_draws_past_its_window(tmp_path, capsys):
    """Past W the attention panel still covers positions 0 .. pos (0 outside the window) and the
    cache panel counts W tokens cached."""
    from lineage.cli.main import main
    make(tmp_path / "tiny-mistral", family="mistral", sliding_window=4, num_hidden_layers=2)
    for panel in ("attention", "cache"):
        assert main(["snapshot", str(tmp_path / "tiny-mistral"), "--ids", "5,6,7,8,9,10", "--step", "6",
                     "--panel", panel, "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "over positions 0-" in out and "4 tokens cached" in out, out
    assert "stops growing at 4 tokens" in out and "at 1,048,576 tokens: cache 512 B" in out, out
