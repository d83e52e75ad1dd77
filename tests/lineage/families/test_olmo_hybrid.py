"""OLMo-Hybrid checkpoints (`olmo_hybrid`): logits equal to transformers over a prefill (one token,
a few, and ~200 through the chunked form across chunk edges) and cached steps, every Gated DeltaNet
layer's state and conv cache equal to transformers' cache, greedy tokens equal; layer patterns, tied
and untied heads, GQA in both kinds of layer, odd widths, beta in (0, 2) and in (0, 1)."""
import json

import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from .helpers import compare, greedy_equal, import_cpu_models, rel  # noqa: E402

import_cpu_models("olmo_hybrid.modeling_olmo_hybrid")
from transformers import OlmoHybridConfig, OlmoHybridForCausalLM  # noqa: E402

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402

VOCAB = 97
TOKENS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)


def olmo(path, **kw):
    """A tiny random OLMo-Hybrid, saved. Odd sizes everywhere: 5 query heads over 1 KV head, GDN
    q/k heads of 9 channels serving 3 value heads each of 7, a 3-wide conv."""
    torch.manual_seed(0)
    cfg = dict(vocab_size=VOCAB, hidden_size=40, intermediate_size=56, num_hidden_layers=4, num_attention_heads=5,
               num_key_value_heads=1, linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=9,
               linear_value_head_dim=7, linear_conv_kernel_dim=3, rms_norm_eps=1e-5, **TOKENS)
    cfg.update(kw)
    ref = OlmoHybridForCausalLM(OlmoHybridConfig(**cfg))
    torch.manual_seed(1)        # transformers sets norms to 1 and decays to one range: random all
    for p in ref.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ref.eval().save_pretrained(str(path))
    return ref


def states_equal(step, cache, state):
    for i, st in enumerate(state.layers):
        if not hasattr(st, "S"):
            assert st.k.shape[2] == cache.get_seq_length(i), (step, i)
            continue
        assert rel(st.S, cache.get_recurrent_state(i)) < 1e-4, (step, i)
        conv = cache.get_conv_state(i)                                  # (B, C, width) in transformers
        w = st.conv.shape[1]
        assert rel(st.conv, conv[..., -w:].transpose(1, 2)) < 1e-4, (step, i, "conv")


def test_equals_transformers_with_states(tmp_path):
    ref = olmo(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    c = model.cfg
    assert c.mixers == ("gdn", "gdn", "gdn", "softmax") and c.post_norm == ("softmax",)
    assert c.gdn.allow_neg_eigval and c.attention.qk_norm_all_heads and c.attention.rope_dim == 8
    assert [b.post for b in model.blocks] == [False, False, False, True]
    errs = compare(ref, tmp_path, VOCAB, prefill=9, steps=5, state_check=states_equal)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("prefill", [1, 200])
def test_one_token_and_chunked_prefills(tmp_path, prefill):
    """200 tokens run the chunked form over three full chunks of 64 and a tail of 8."""
    ref = olmo(tmp_path)
    errs = compare(ref, tmp_path, VOCAB, prefill=prefill, steps=3, seed=prefill, state_check=states_equal)
    assert max(errs) < 1e-4, errs


def test_a_conv_whose_channels_do_not_split_in_three(tmp_path):
    """q, k, v of 20, 20 and 42 channels: transformers saves the 82 as torch.chunk cuts them,
    28, 28 and 26 rows, which are neither thirds nor q/k/v's own widths."""
    ref = olmo(tmp_path, linear_key_head_dim=10)
    from safetensors import safe_open
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        rows = [f.get_slice(f"model.layers.0.linear_attn.{x}_conv1d.weight").get_shape()[0] for x in "qkv"]
    assert rows == [28, 28, 26]
    errs = compare(ref, tmp_path, VOCAB, prefill=9, steps=3, state_check=states_equal)
    assert max(errs) < 1e-4, errs


def test_pattern_tied_bias_nope_and_beta_below_one(tmp_path):
    """Attention first and twice, a tied head, biased attention, no rotary embedding (as released),
    beta = sigmoid (linear_allow_neg_eigval false), MHA attention and GDN heads one to one."""
    ref = olmo(tmp_path, num_hidden_layers=5, tie_word_embeddings=True, attention_bias=True, num_key_value_heads=5,
               layer_types=["full_attention", "linear_attention", "linear_attention", "full_attention",
                            "linear_attention"], linear_allow_neg_eigval=False, linear_num_key_heads=3,
               linear_num_value_heads=3, linear_value_head_dim=10, rope_parameters={"rope_type": "default",
                                                                                     "rope_theta": None})
    assert ref.model.rotary_emb is None
    model, _ = lineage.load_pretrained(tmp_path)
    c = model.cfg
    assert c.mixers == ("softmax", "gdn", "gdn", "softmax", "gdn") and c.tie_embeddings
    assert not c.gdn.allow_neg_eigval and c.attention.rope_dim == 0 and c.attention.bias
    assert model.lm_head.weight is model.wte.weight
    errs = compare(ref, tmp_path, VOCAB, prefill=70, steps=4, state_check=states_equal)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("theta,rope_dim", [(None, 0), (5e5, 8)])
def test_top_level_rope_theta(tmp_path, theta, rope_dim):
    """OLMo-core's converter writes `rope_theta` at the top level (null for the released NoPE
    checkpoints) and no rope_parameters; transformers folds it in, and so do we."""
    olmo(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["rope_parameters"]
    cfg["rope_theta"] = theta
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    ref = OlmoHybridForCausalLM.from_pretrained(str(tmp_path)).eval()
    assert (ref.model.rotary_emb is None) == (theta is None)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.attention.rope_dim == rope_dim and model.cfg.attention.rope_theta == (theta or 10000.0)
    errs = compare(ref, tmp_path, VOCAB, prefill=6, steps=3)
    assert max(errs) < 1e-4, errs


def test_default_pattern_of_transformers(tmp_path):
    """No layer_types: every fourth layer attends (and the last, when there would be none)."""
    olmo(tmp_path, num_hidden_layers=6)
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["layer_types"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert lineage.load_pretrained(tmp_path)[0].cfg.mixers == ("gdn",) * 3 + ("softmax",) + ("gdn",) * 2
    cfg["num_hidden_layers"] = 3
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    from lineage.families.loader import read_model_config
    assert read_model_config(tmp_path)[0].mixers == ("gdn", "gdn", "softmax")


def test_greedy_tokens_equal(tmp_path):
    ref = olmo(tmp_path)
    greedy_equal(ref, tmp_path)


def test_hub_cut_of_the_conv_and_internal_names(tmp_path):
    """transformers writes the fused conv as three equal thirds; the hub's files cut it at the q, k
    and v widths, and a file may use transformers' module names (conv1d, input_layernorm): all open."""
    ref = olmo(tmp_path)
    f = tmp_path / "model.safetensors"
    sd = load_file(str(f))
    qk = 2 * 9
    for i in range(3):
        p = f"model.layers.{i}.linear_attn."
        fused = torch.cat([sd.pop(p + x + "_conv1d.weight") for x in "qkv"])       # (C, 1, width)
        if i == 0:                                                               # the hub's cut
            sd[p + "q_conv1d.weight"], sd[p + "k_conv1d.weight"], sd[p + "v_conv1d.weight"] = (t.clone() for t in fused.split([qk, qk, 42]))
        elif i == 1:                                                             # transformers' module names
            sd[p + "conv1d.weight"] = fused
            for layer in (i, 3):                             # in a GDN layer, and in the attention layer
                a, b = ("attention_layer_norm", "input_layernorm") if layer == i else ("feedforward_layer_norm",
                                                                                       "post_attention_layernorm")
                sd[f"model.layers.{layer}.{b}.weight"] = sd.pop(f"model.layers.{layer}.{a}.weight")
        else:                                                                    # the three thirds as saved
            sd[p + "q_conv1d.weight"], sd[p + "k_conv1d.weight"], sd[p + "v_conv1d.weight"] = (t.clone() for t in fused.chunk(3))
    save_file(sd, str(f), metadata={"format": "pt"})
    again = OlmoHybridForCausalLM.from_pretrained(str(tmp_path)).eval()       # transformers reads it as well
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), ref.state_dict().values()))
    errs = compare(ref, tmp_path, VOCAB, prefill=5, steps=2, state_check=states_equal)
    assert max(errs) < 1e-4, errs


def test_a_mixed_or_wrong_conv_cut_is_refused(tmp_path):
    olmo(tmp_path)
    f = tmp_path / "model.safetensors"
    sd = load_file(str(f))
    p = "model.layers.0.linear_attn."
    fused = torch.cat([sd.pop(p + x + "_conv1d.weight") for x in "qkv"])
    sd[p + "q_conv1d.weight"], sd[p + "k_conv1d.weight"] = fused[:18].clone(), fused[18:36].clone()  # the hub's q, k
    sd[p + "v_conv1d.weight"] = fused[:26].clone()                                       # a third for v
    save_file(sd, str(f), metadata={"format": "pt"})
    with pytest.raises(PretrainedError, match="conv.weight"):
        lineage.load_pretrained(tmp_path)


def test_parameter_arithmetic_counts_what_loads(tmp_path):
    from lineage.arithmetic import count
    olmo(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    assert count(model.cfg)["total"] == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("field,value,match", [
    ("rope_parameters", {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}, "rope_parameters: rope_type 'yarn'"),
    ("rope_parameters", {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5},
     "partial_rotary_factor is not supported"),
    ("hidden_act", "gelu", "hidden_act: 'gelu' is not supported"),
    ("layer_types", ["linear_attention", "sliding_attention"] * 2, "layer_types: expected 4 entries"),
    ("linear_use_gate", False, "linear_use_gate: False is not supported"),
    ("use_head_qk_norm", True, "use_head_qk_norm: a field the olmo_hybrid loader does not understand"),
])
def test_what_lineage_cannot_run_is_refused_in_one_line(tmp_path, field, value, match):
    olmo(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg[field] = value
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(PretrainedError, match=match) as e:
        lineage.load_pretrained(tmp_path)
    assert "config.json" in str(e.value) and "\n" not in str(e.value)


def test_opens_as_a_scenario_with_state_and_decay_panels(tmp_path):
    from lineage.families.scenario import checkpoint_scenario
    from lineage.playback.session import Session
    from lineage.scenario import loads
    olmo(tmp_path)
    text = checkpoint_scenario(tmp_path, ids=[5, 6, 7], steps=4)
    kinds = [p["kind"] for p in __import__("yaml").safe_load(text)["panels"]]
    assert kinds == ["tokens", "state", "decay", "cache"]
    s = Session(loads(text), device="cpu")
    f = s.frame(3)
    assert f.state(0, 0).S.shape == (6, 9, 7)
    assert float(f.state(0, 0).beta.max()) <= 2.0
    s.close()
