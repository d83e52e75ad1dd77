"""Qwen3.5 checkpoints, dense and MoE, as transformers saves them: the multimodal composite
(`*ForConditionalGeneration`: config under `text_config`, weights under `model.language_model.`,
a vision tower and MTP layers beside them) and the text-only `*ForCausalLM`. Logits equal to
transformers over a prefill (one token, a few, ~200 through the chunked form) and cached steps,
every DeltaNet layer's state and conv cache equal to transformers' cache, greedy tokens equal;
GQA ratios 1 and 3 in both kinds of layer, attention not last, tied and untied heads, mRoPE
sections interleaved or not; and what is refused, in one line naming config.json's field."""
import json

import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from .helpers import compare, greedy_equal, import_cpu_models, rel  # noqa: E402

import_cpu_models("qwen3_5.modeling_qwen3_5", "qwen3_5_moe.modeling_qwen3_5_moe")
from transformers import (Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration,  # noqa: E402
                          Qwen3_5MoeConfig, Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration,
                          Qwen3_5MoeTextConfig, Qwen3_5TextConfig)

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402

VOCAB = 97
LIN, FULL = "linear_attention", "full_attention"
# 3 query heads over 1 KV head of 16 channels, 12 of them rotated (6 frequencies in mRoPE sections
# 2 + 2 + 2); DeltaNet q/k heads of 10 channels serving 3 value heads each of 7; a 3-wide conv;
# attention second of four layers, not last
TEXT = dict(vocab_size=VOCAB, hidden_size=40, num_hidden_layers=4, num_attention_heads=3, num_key_value_heads=1,
            head_dim=16, linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=10,
            linear_value_head_dim=7, linear_conv_kernel_dim=3, rms_norm_eps=1e-5, layer_types=[LIN, FULL, LIN, LIN],
            rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.75,
                                 mrope_section=[2, 2, 2], mrope_interleaved=True),
            pad_token_id=0, bos_token_id=1, eos_token_id=2)
DENSE = dict(intermediate_size=56)
MOE = dict(moe_intermediate_size=24, shared_expert_intermediate_size=20, num_experts=7, num_experts_per_tok=3)
VISION = dict(depth=1, hidden_size=16, intermediate_size=24, num_heads=2, out_hidden_size=40, patch_size=4,
              num_position_embeddings=16)
CLASSES = {  # (moe, composite): (config class, model class)
    (False, False): (Qwen3_5TextConfig, Qwen3_5ForCausalLM), (True, False): (Qwen3_5MoeTextConfig, Qwen3_5MoeForCausalLM),
    (False, True): (Qwen3_5Config, Qwen3_5ForConditionalGeneration),
    (True, True): (Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration)}


def qwen(path, moe=False, composite=False, tie=False, **kw):
    """A tiny random Qwen3.5, saved by transformers' own class for that layout."""
    torch.manual_seed(0)
    text = {**TEXT, **(MOE if moe else DENSE), **kw}
    config_cls, model_cls = CLASSES[moe, composite]
    cfg = (config_cls(text_config=text, vision_config=VISION, tie_word_embeddings=tie) if composite
           else config_cls(**text, tie_word_embeddings=tie))
    ref = model_cls(cfg)
    torch.manual_seed(1)        # transformers sets norms to 0 or 1 and decays to one range: random all
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


def test_dense_text_only_equals_transformers(tmp_path):
    ref = qwen(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "qwen3_5_text"
    model, _ = lineage.load_pretrained(tmp_path)
    c = model.cfg
    assert c.mixers == ("gdn", "softmax", "gdn", "gdn") and c.ffns == ("dense",) * 4 and not c.tie_embeddings
    assert c.attention.rope_dim == 12 and c.attention.kv_heads == 1 and c.gdn.key_heads == 2
    errs = compare(ref, tmp_path, VOCAB, prefill=9, steps=5, state_check=states_equal)
    assert max(errs) < 1e-4, errs


def test_moe_composite_one_token_prefill_and_ratio_one(tmp_path):
    """The hub's layout: a vision tower and MTP layers in the file, skipped; a tied head (by the
    composite's own flag, text_config's says untied); GQA ratio 1 in attention and in DeltaNet;
    mRoPE sections not interleaved."""
    ref = qwen(tmp_path, moe=True, composite=True, tie=True, num_key_value_heads=3, linear_num_key_heads=3,
               linear_num_value_heads=3, rope_parameters=dict(rope_type="default", rope_theta=500.0,
                                                              partial_rotary_factor=0.75, mrope_section=[3, 2, 1],
                                                              mrope_interleaved=False))
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["model_type"] == "qwen3_5_moe" and raw["text_config"]["model_type"] == "qwen3_5_moe_text"
    assert raw["tie_word_embeddings"] and not raw["text_config"]["tie_word_embeddings"]
    f = tmp_path / "model.safetensors"
    sd = load_file(str(f))
    assert any(n.startswith("model.visual.") for n in sd) and "lm_head.weight" not in sd
    sd["mtp.layers.0.mlp.gate.weight"] = torch.randn(7, 40)                 # as the hub's files carry
    sd["mtp.fc.weight"] = torch.randn(40, 80)
    save_file(sd, str(f), metadata={"format": "pt"})
    model, _ = lineage.load_pretrained(tmp_path)
    c = model.cfg
    assert c.ffns == ("moe",) * 4 and c.dense is None and c.tie_embeddings and model.lm_head.weight is model.wte.weight
    assert c.moe.n_shared == 1 and c.moe.shared_gate and c.moe.norm_topk
    errs = compare(ref, tmp_path, VOCAB, prefill=1, steps=6, state_check=states_equal)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("moe,composite,tie", [(False, True, False), (True, False, True)])
def test_chunked_prefill(tmp_path, moe, composite, tie):
    """200 tokens run the chunked form over three full chunks of 64 and a tail of 8."""
    ref = qwen(tmp_path, moe=moe, composite=composite, tie=tie)
    errs = compare(ref, tmp_path, VOCAB, prefill=200, steps=3, seed=3, state_check=states_equal)
    assert max(errs) < 1e-4, errs


def test_odd_rotary_width(tmp_path):
    """head_dim 14 at 0.5 is 7 rotated channels by the config; transformers turns 8 (4 frequencies
    with exponents over 7)."""
    ref = qwen(tmp_path, head_dim=14, rope_parameters=dict(rope_type="default", rope_theta=10000.0,
                                                          partial_rotary_factor=0.5, mrope_section=[2, 1, 1]))
    assert lineage.load_pretrained(tmp_path)[0].cfg.attention.rope_dim == 8
    errs = compare(ref, tmp_path, VOCAB, prefill=6, steps=3, state_check=states_equal)
    assert max(errs) < 1e-4, errs


def test_greedy_tokens_equal(tmp_path):
    ref = qwen(tmp_path, composite=True)
    greedy_equal(ref, tmp_path)


@pytest.mark.parametrize("moe", [False, True])
def test_parameter_arithmetic_counts_what_loads(tmp_path, moe):
    from lineage.arithmetic import count
    qwen(tmp_path, moe=moe, composite=True)
    model, _ = lineage.load_pretrained(tmp_path)
    assert count(model.cfg)["total"] == sum(p.numel() for p in model.parameters())


def _edit(cfg, where, key, value):
    d = cfg["text_config"] if where == "text" else cfg
    if value is None:
        del d[key]
    else:
        d[key] = value


@pytest.mark.parametrize("where,key,value,match", [
    ("text", "hidden_size", None, "text_config.hidden_size: required"),
    ("text", "sliding_window_size", 8, "text_config.sliding_window_size: a field"),
    ("top", "quantization_config", {"quant_method": "fp8"}, "quantization_config: a field"),
    ("text", "rope_parameters", {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}, "text_config.rope_parameters"),
    ("text", "attn_output_gate", False, "text_config.attn_output_gate"),
    ("text", "mlp_only_layers", [1], "text_config.mlp_only_layers"),
    ("text", "norm_topk_prob", False, "text_config.norm_topk_prob"),
    ("text", "model_type", "qwen3_next", "text_config.model_type"),
    ("top", "text_config", 7, "text_config: expected an object"),
])
def test_refused_in_one_line_naming_the_field(tmp_path, where, key, value, match):
    qwen(tmp_path, moe=True, composite=True)
    cfg = json.loads((tmp_path / "config.json").read_text())
    _edit(cfg, where, key, value)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(PretrainedError, match=match) as e:
        lineage.load_pretrained(tmp_path)
    assert "config.json" in str(e.value) and "\n" not in str(e.value)


def test_qwen3_next_projections_refused(tmp_path):
    """A fused Qwen3-Next projection in a Qwen3.5 file is another layout, not a synonym."""
    qwen(tmp_path)
    f = tmp_path / "model.safetensors"
    sd = load_file(str(f))
    sd["model.layers.0.linear_attn.in_proj_qkvz.weight"] = sd.pop("model.layers.0.linear_attn.in_proj_qkv.weight")
    save_file(sd, str(f), metadata={"format": "pt"})
    with pytest.raises(PretrainedError, match="in_proj_qkvz.weight is not part of a qwen3_5_text model"):
        lineage.load_pretrained(tmp_path)


def test_opens_as_a_scenario_with_state_decay_and_routing(tmp_path):
    from lineage.families.scenario import checkpoint_scenario
    from lineage.playback.session import Session
    from lineage.scenario import loads
    from lineage.cli.main import main
    qwen(tmp_path / "tiny-qwen3.5", moe=True, composite=True)
    text = checkpoint_scenario(tmp_path / "tiny-qwen3.5", ids=[5, 6, 7], steps=4)
    sc = __import__("yaml").safe_load(text)
    assert [p["kind"] for p in sc["panels"]] == ["tokens", "state", "decay", "routing", "cache"]
    assert sc["title"] == "tiny-qwen3.5 (Qwen3.5 MoE)"
    s = Session(loads(text), device="cpu")
    assert s.frame(3).state(0, 0).S.shape == (6, 10, 7)
    s.close()
    (tmp_path / "s.yaml").write_text(text)
    assert main(["validate", str(tmp_path / "s.yaml")]) == 0
