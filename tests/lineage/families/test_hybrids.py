"""Qwen3-Next and Kimi Linear checkpoints: logits equal to transformers over a prefill and cached
steps, and every linear layer's recurrent state (and short-conv cache) equal to transformers' cache."""
import json

import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402
from .helpers import import_cpu_models  # noqa: E402

import_cpu_models("qwen3_next.modeling_qwen3_next", "kimi_linear.modeling_kimi_linear")
from transformers import KimiLinearConfig, KimiLinearForCausalLM, Qwen3NextConfig, Qwen3NextForCausalLM  # noqa: E402

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402

from .helpers import compare, rel  # noqa: E402
from lineage.observed import StepObs

TOKENS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)


def stirred(model):
    """transformers initialises norms to 1 (or 0), biases to 0, decays to one value: random
    everything so a swapped or transposed tensor cannot hide."""
    torch.manual_seed(1)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3)
    for m in model.modules():
        if hasattr(m, "e_score_correction_bias"):
            torch.nn.init.normal_(m.e_score_correction_bias, std=0.3)
    return model.eval()


def qwen(path, **kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=97, hidden_size=40, intermediate_size=56, moe_intermediate_size=24,
               shared_expert_intermediate_size=20, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
               head_dim=16, linear_num_value_heads=6, linear_num_key_heads=2, linear_key_head_dim=10,
               linear_value_head_dim=7, num_experts=7, num_experts_per_tok=3, mlp_only_layers=[1],
               linear_conv_kernel_dim=3, **TOKENS)
    cfg.update(kw)
    ref = stirred(Qwen3NextForCausalLM(Qwen3NextConfig(**cfg)))
    ref.save_pretrained(str(path))
    return ref


def kimi(path, **kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=97, hidden_size=40, intermediate_size=56, moe_intermediate_size=24, num_hidden_layers=5,
               num_attention_heads=3, kv_lora_rank=20, qk_rope_head_dim=6, v_head_dim=10, qk_nope_head_dim=12,
               num_local_experts=8, num_experts_per_tok=3, linear_head_dim=16, linear_num_heads=3, n_group=2,
               topk_group=1, routed_scaling_factor=2.446, rms_norm_eps=1e-5,
               layer_types=["linear_attention"] * 3 + ["full_attention", "linear_attention"], **TOKENS)
    cfg.update(kw)
    ref = stirred(KimiLinearForCausalLM(KimiLinearConfig(**cfg)))
    ref.save_pretrained(str(path))
    return ref


def states_equal(kinds: str):
    """A state_check for `compare`: each linear layer's S and conv cache against transformers'."""
    def check(step, cache, state):
        for i, st in enumerate(state.layers):
            if not hasattr(st, "S"):
                continue
            assert rel(st.S, cache.get_recurrent_state(i)) < 1e-4, (kinds, step, i)
            conv = cache.get_conv_state(i)                             # (B, C, width) in transformers
            w = st.conv.shape[1]
            assert rel(st.conv, conv[..., -w:].transpose(1, 2)) < 1e-4, (kinds, step, i, "conv")
    return check


def test_qwen3_next_equals_transformers(tmp_path):
    ref = qwen(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.mixers == ("gdn", "gdn", "gdn", "softmax") and model.cfg.ffns == ("moe", "dense", "moe", "moe")
    errs = compare(ref, tmp_path, 97, prefill=9, steps=5, state_check=states_equal("qwen3_next"))
    assert max(errs) < 1e-4, errs


def test_qwen3_next_one_token_prefill_and_mha(tmp_path):
    ref = qwen(tmp_path, linear_num_key_heads=6, linear_value_head_dim=10, num_key_value_heads=4,
               full_attention_interval=2, layer_types=None, num_hidden_layers=3, mlp_only_layers=[])
    errs = compare(ref, tmp_path, 97, prefill=1, steps=6, state_check=states_equal("qwen3_next"))
    assert max(errs) < 1e-4, errs


def test_kimi_linear_equals_transformers(tmp_path):
    ref = kimi(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.mixers == ("kda", "kda", "kda", "mla", "kda") and model.cfg.ffns == ("dense",) + ("moe",) * 4
    assert model.blocks[1].ffn.score_bias.dtype == torch.float32
    errs = compare(ref, tmp_path, 97, prefill=8, steps=5, state_check=states_equal("kimi_linear"))
    assert max(errs) < 1e-4, errs


def test_kimi_linear_hub_config_and_query_lora(tmp_path):
    """The hub's config spells the layer pattern as 1-based lists in linear_attn_config."""
    ref = kimi(tmp_path, q_lora_rank=14, n_group=1, topk_group=1, num_hidden_layers=4,
               layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"])
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["layer_types"], cfg["mlp_layer_types"]
    cfg.update(linear_attn_config={"full_attn_layers": [2, 4], "kda_layers": [1, 3], "head_dim": 16, "num_heads": 3,
                                   "short_conv_kernel_size": 4}, first_k_dense_replace=1, mla_use_nope=True)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    errs = compare(ref, tmp_path, 97, prefill=3, steps=4, state_check=states_equal("kimi_linear"))
    assert max(errs) < 1e-4, errs


def test_observations_of_a_real_hybrid(tmp_path):
    kimi(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    obs = StepObs()
    with torch.no_grad():
        _, state = model(torch.tensor([[5, 6, 7]]))
        model.step(torch.tensor([8]), state, obs)
    kda, mla, moe = obs.layers[0].mixer, obs.layers[3].mixer, obs.layers[1].ffn
    assert kda.S.shape == (1, 3, 16, 16) and kda.alpha.shape == (1, 3, 16)
    assert mla.cache_len == 4 and moe.experts.shape == (1, 3)


@pytest.mark.parametrize("make", [qwen, kimi])
def test_parameter_arithmetic_counts_what_loads(tmp_path, make):
    from lineage.arithmetic import count
    make(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    assert count(model.cfg)["total"] == sum(p.numel() for p in model.parameters())


def test_rotary_wider_than_the_head_refused(tmp_path):
    """An odd rotary width is rotated one channel wider (test_fidelity); all of an odd head cannot be."""
    qwen(tmp_path)                       # transformers refuses such a config too: written by hand
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["head_dim"], cfg["rope_parameters"]["partial_rotary_factor"] = 9, 1.0
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(PretrainedError, match="rotates 10 channels of 9"):
        lineage.load_pretrained(tmp_path)
