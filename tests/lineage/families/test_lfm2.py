"""LFM2 checkpoints (`lfm2`): logits equal to transformers over a prefill and cached steps, every
gated-conv layer's cache equal to transformers' conv state, greedy tokens equal; layer patterns
(`layer_types` and the older `full_attn_idxs`), the FFN width transformers derives from
`intermediate_size`, conv biases, tied and untied heads, Liquid's own config spellings; the
parameter and memory arithmetic; the app's scenario; the refusals in one line."""
import json

import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402

from .helpers import compare, greedy_equal, import_cpu_models, rel  # noqa: E402

import_cpu_models("lfm2.modeling_lfm2")
from transformers import Lfm2Config, Lfm2ForCausalLM  # noqa: E402

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402

VOCAB = 97
TOKENS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
TYPES = ["conv", "full_attention", "conv", "conv", "full_attention"]


def lfm2(path, **kw):
    """A tiny random LFM2, saved. Odd sizes: width 40, 4 query heads of 10 over 2 KV heads, a
    3-token conv, an MLP of 48 (56 * 2/3 = 37, rounded up to a multiple of 12)."""
    torch.manual_seed(0)
    cfg = dict(vocab_size=VOCAB, hidden_size=40, intermediate_size=56, num_hidden_layers=5, num_attention_heads=4,
               num_key_value_heads=2, conv_L_cache=3, layer_types=TYPES, block_multiple_of=12, norm_eps=1e-5, **TOKENS)
    cfg.update(kw)
    ref = Lfm2ForCausalLM(Lfm2Config(**cfg))
    torch.manual_seed(1)        # transformers sets norms to 1 and biases to 0: random all
    for p in ref.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ref.eval().save_pretrained(str(path))
    return ref


def caches_equal(step, cache, state):
    """Each conv layer's last conv_size - 1 inputs equal transformers' conv state (which keeps
    conv_size columns, channels first); each attention layer holds as many tokens."""
    for i, st in enumerate(state.layers):
        if hasattr(st, "k"):
            assert st.k.shape[2] == cache.get_seq_length(i), (step, i)
            continue
        w = st.conv.shape[1]
        assert rel(st.conv, cache.get_conv_state(i)[..., -w:].transpose(1, 2)) < 1e-4, (step, i)


def test_equals_transformers_with_conv_caches(tmp_path):
    ref = lfm2(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    c = model.cfg
    assert c.mixers == ("gated_conv", "softmax", "gated_conv", "gated_conv", "softmax")
    assert c.dense.d_ff == 48 == ref.model.layers[0].feed_forward.w1.out_features
    assert c.attention.qk_norm and c.attention.rope_dim == 10 and c.attention.rope_theta == 1e6
    assert c.tie_embeddings and model.lm_head.weight is model.wte.weight
    errs = compare(ref, tmp_path, VOCAB, prefill=9, steps=5, state_check=caches_equal)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("prefill", [1, 2, 40])
def test_short_and_long_prefills(tmp_path, prefill):
    """One token (the conv's cache still part zeros), two (shorter than the conv), forty."""
    ref = lfm2(tmp_path)
    errs = compare(ref, tmp_path, VOCAB, prefill=prefill, steps=4, seed=prefill, state_check=caches_equal)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("kw,d_ff", [
    (dict(block_auto_adjust_ff_dim=False), 56),                                 # intermediate_size as is
    (dict(block_ffn_dim_multiplier=1.5), 60),                                   # int(1.5 * 37) = 55 -> 60
    (dict(block_ffn_dim_multiplier=0.5, block_multiple_of=1), 18),              # int(0.5 * 37), multiples of 1
])
def test_ffn_width_as_transformers_derives_it(tmp_path, kw, d_ff):
    ref = lfm2(tmp_path, **kw)
    assert ref.model.layers[0].feed_forward.w1.out_features == d_ff
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.dense.d_ff == d_ff
    errs = compare(ref, tmp_path, VOCAB, prefill=5, steps=2)
    assert max(errs) < 1e-4, errs


def test_conv_bias_untied_head_wide_conv_attention_first(tmp_path):
    """Biases on in_proj, the conv and out_proj; a head of its own; a 4-token conv; MHA."""
    ref = lfm2(tmp_path, conv_bias=True, tie_word_embeddings=False, conv_L_cache=4, num_key_value_heads=4,
               layer_types=["full_attention", "conv", "conv", "full_attention", "conv"])
    model, _ = lineage.load_pretrained(tmp_path)
    c = model.cfg
    assert c.gated_conv.bias and c.gated_conv.conv_size == 4 and not c.tie_embeddings
    assert c.mixers == ("softmax", "gated_conv", "gated_conv", "softmax", "gated_conv")
    errs = compare(ref, tmp_path, VOCAB, prefill=7, steps=4, state_check=caches_equal)
    assert max(errs) < 1e-4, errs


def test_liquid_config_spellings(tmp_path):
    """Liquid's own config.json: block_ff_dim, tie_embedding, full_attn_idxs, the training code's
    fields, a top-level rope_theta; transformers reads it, and so do we, alike."""
    lfm2(tmp_path, tie_word_embeddings=False)
    cfg = json.loads((tmp_path / "config.json").read_text())
    for k in ("intermediate_size", "tie_word_embeddings", "layer_types", "rope_parameters", "full_attn_idxs"):
        cfg.pop(k, None)
    cfg.update(block_ff_dim=56, tie_embedding=False, full_attn_idxs=[1, 4], rope_theta=5e5, theta=5e5,
               block_dim=40, conv_dim=40, conv_dim_out=40, num_heads=4, block_use_swiglu=True, use_pos_enc=True,
               block_norm_eps=1e-5, block_mlp_init_scale=1.0, block_out_init_scale=1.0, block_use_xavier_init=True,
               conv_use_xavier_init=True)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    ref = Lfm2ForCausalLM.from_pretrained(str(tmp_path)).eval()
    assert ref.config.layer_types == TYPES and ref.config.rope_parameters["rope_theta"] == 5e5
    model, _ = lineage.load_pretrained(tmp_path)
    c = model.cfg
    assert c.mixers == ("gated_conv", "softmax", "gated_conv", "gated_conv", "softmax")
    assert c.attention.rope_theta == 5e5 and not c.tie_embeddings and c.dense.d_ff == 48
    errs = compare(ref, tmp_path, VOCAB, prefill=6, steps=3, state_check=caches_equal)
    assert max(errs) < 1e-4, errs


def test_greedy_tokens_equal(tmp_path):
    ref = lfm2(tmp_path)
    greedy_equal(ref, tmp_path)


def test_parameter_and_memory_arithmetic(tmp_path):
    """Parameters count what loads; the memory counts each conv layer's cache (2 inputs of 40
    channels) beside the attention layers' KV, and no state matrix."""
    from lineage.arithmetic import count, model_memory
    lfm2(tmp_path, conv_bias=True, tie_word_embeddings=False)
    model, _ = lineage.load_pretrained(tmp_path)
    assert count(model.cfg)["total"] == sum(p.numel() for p in model.parameters())
    m = model_memory(model.cfg, 100)
    assert m["matrix_bytes"] == 0 and m["conv_bytes"] == 3 * 2 * 40 * 2                 # 3 conv layers, bf16
    assert m["bytes_per_token"] == 2 * 2 * 2 * 10 * 2                                     # 2 layers, K and V


def test_params_and_memory_print(tmp_path, capsys):
    from lineage.cli.main import main
    lfm2(tmp_path)
    assert main(["params", str(tmp_path)]) == 0
    assert "active" in capsys.readouterr().out
    assert main(["memory", str(tmp_path), "--context", "1000"]) == 0
    out = capsys.readouterr().out.lower()
    assert "cache" in out and "conv" in out


def test_opens_as_a_scenario(tmp_path):
    import yaml
    from lineage.families.scenario import checkpoint_scenario
    from lineage.playback.session import Session
    from lineage.scenario import loads
    lfm2(tmp_path)
    text = checkpoint_scenario(tmp_path, ids=[5, 6, 7], steps=4)
    kinds = [p["kind"] for p in yaml.safe_load(text)["panels"]]
    assert "state" not in kinds and "decay" not in kinds      # no state matrix to draw
    s = Session(loads(text), device="cpu")
    f = s.frame(3)
    cache = f.cache(0, s.model_config(0))
    assert cache.kv == 4 * 2 * 2 * 2 * 10 * 4                    # 4 tokens, 2 layers, K and V, 2 heads of 10, fp32
    assert cache.conv == 3 * 2 * 40 * 4                          # 3 conv layers' last 2 inputs, fp32
    assert f.state(0, 0) is None                                 # the conv layer claims no state
    s.close()


@pytest.mark.parametrize("field,value,match", [
    ("rope_parameters", {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}, "rope_parameters: rope_type 'yarn'"),
    ("layer_types", ["conv", "sliding_attention", "conv", "conv", "full_attention"], "layer_types: expected 5 entries"),
    ("conv_dim", 48, "conv_dim: 48 is not supported"),
    ("block_use_swiglu", False, "block_use_swiglu: False is not supported"),
    ("use_pos_enc", False, "use_pos_enc: False is not supported"),
    ("conv_L_cache", 0, "conv_L_cache: 0 is out of range"),
    ("block_ffn_dim_multiplier", 1e308, "block_ffn_dim_multiplier: makes an MLP of inf channels"),
    ("block_ffn_dim_multiplier", -1.0, "block_ffn_dim_multiplier: makes an MLP of -37 channels"),
    ("intermediate_size", 1, "intermediate_size: leaves an MLP of 0 channels"),
    ("full_attn_idxs", [1, 5], "full_attn_idxs: names a layer past the 5"),
    ("attention_bias", True, "attention_bias: a field the lfm2 loader does not understand"),
])
def test_what_lineage_cannot_run_is_refused_in_one_line(tmp_path, field, value, match):
    lfm2(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg[field] = value
    if field == "full_attn_idxs":                                # read only without layer_types
        del cfg["layer_types"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(PretrainedError, match=match) as e:
        lineage.load_pretrained(tmp_path)
    assert "config.json" in str(e.value) and "\n" not in str(e.value)
