"""DeepSeek-V3 checkpoints (`deepseek_v3`, and Kimi K2's `kimi_k2`): logits equal to transformers
over a prefill (whole, one token, and in chunks that continue the latent cache) and cached steps,
every layer's latent cache equal to transformers' cache, greedy tokens equal; with and without the
query LoRA, interleaved and plain rope channels, YaRN with its mscale folded into the softmax, the
hub's older config spelling; the refusals in one line; the scenario `lineage run DIR` opens."""
import json

import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

from .helpers import compare, greedy_equal, import_cpu_models, rel  # noqa: E402

import_cpu_models("deepseek_v3.modeling_deepseek_v3")
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM  # noqa: E402

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402

from .test_hybrids import TOKENS, stirred  # noqa: E402

VOCAB = 97
YARN = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16, beta_fast=32.0, beta_slow=1.0,
            mscale=1.0, mscale_all_dim=0.8, rope_theta=10000.0)


def deepseek(path, **kw):
    """A tiny random DeepSeek-V3, saved. Odd sizes: 3 heads, a query LoRA of 24, a latent of 20,
    6 rotated + 10 unrotated query/key channels, values of 12; 9 experts in 3 groups, 3 per token
    from the 2 best groups, one shared expert, the first layer dense."""
    torch.manual_seed(0)
    cfg = dict(vocab_size=VOCAB, hidden_size=40, intermediate_size=56, moe_intermediate_size=24, num_hidden_layers=4,
               num_attention_heads=3, q_lora_rank=24, kv_lora_rank=20, qk_rope_head_dim=6, qk_nope_head_dim=10,
               v_head_dim=12, n_routed_experts=9, num_experts_per_tok=3, n_group=3, topk_group=2, n_shared_experts=1,
               first_k_dense_replace=1, routed_scaling_factor=2.5, **TOKENS)
    cfg.update(kw)
    ref = stirred(DeepseekV3ForCausalLM(DeepseekV3Config(**cfg)))
    ref.save_pretrained(str(path))
    return ref


def latents_equal(step, cache, state):
    """Each layer's latent cache (normalised latent, rotated shared key part) against transformers'."""
    for i, st in enumerate(state.layers):
        hf = cache.layers[i]
        assert st.c.shape[1] == hf.keys.shape[2], (step, i)
        assert rel(st.c, hf.keys[:, 0]) < 1e-5, (step, i, "latent")
        assert rel(st.k_pe, hf.values[:, 0]) < 1e-5, (step, i, "k_pe")


@pytest.mark.parametrize("q_lora_rank", [24, None])
def test_equals_transformers(tmp_path, q_lora_rank):
    ref = deepseek(tmp_path, q_lora_rank=q_lora_rank)
    model, _ = lineage.load_pretrained(tmp_path)
    c = model.cfg
    assert c.mixers == ("mla",) * 4 and c.ffns == ("dense", "moe", "moe", "moe")
    assert c.mla.rope and c.mla.rope_interleave and c.mla.q_lora_rank == q_lora_rank
    assert model.blocks[1].ffn.score_bias.dtype == torch.float32
    errs = compare(ref, tmp_path, VOCAB, prefill=9, steps=5, state_check=latents_equal)
    assert max(errs) < 1e-4, errs


def test_one_token_prefill_plain_rope_and_moonlight_routing(tmp_path):
    """Moonlight's shape: no query LoRA, one group, two shared experts; plus rope channels in
    halves (rope_interleave false), unnormalised top-k weights and two dense layers."""
    ref = deepseek(tmp_path, q_lora_rank=None, n_group=1, topk_group=1, n_shared_experts=2, rope_interleave=False,
                   norm_topk_prob=False, first_k_dense_replace=2, routed_scaling_factor=2.446)
    model, _ = lineage.load_pretrained(tmp_path)
    assert not model.cfg.mla.rope_interleave and model.cfg.ffns == ("dense", "dense", "moe", "moe")
    errs = compare(ref, tmp_path, VOCAB, prefill=1, steps=8, state_check=latents_equal)
    assert max(errs) < 1e-4, errs


def test_no_shared_expert_and_no_dense_layer(tmp_path):
    """n_shared_experts 0 (transformers saves an empty shared MLP, which adds zeros) and
    first_k_dense_replace 0: every layer routed."""
    ref = deepseek(tmp_path, n_shared_experts=0, first_k_dense_replace=0)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.ffns == ("moe",) * 4 and model.cfg.moe.n_shared == 0
    errs = compare(ref, tmp_path, VOCAB, prefill=5, steps=3, state_check=latents_equal)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("beta_fast", [32.0, 1.0])
def test_yarn_past_the_original_context(tmp_path, beta_fast):
    """YaRN stretched 4x over an original context of 16, 30 tokens in: the rotated part's
    frequencies and cos/sin scale, and mscale_all_dim's mscale^2 on the whole softmax. Kimi K2
    ships beta_fast = beta_slow = 1 (a ramp of one channel)."""
    ref = deepseek(tmp_path, rope_parameters=dict(YARN, beta_fast=beta_fast), max_position_embeddings=64)
    model, _ = lineage.load_pretrained(tmp_path)
    m = model.cfg.mla
    assert m.rope_scaling.kind == "yarn" and m.softmax_scale == pytest.approx(ref.model.layers[0].self_attn.scaling)
    errs = compare(ref, tmp_path, VOCAB, prefill=30, steps=4, state_check=latents_equal)
    assert max(errs) < 1e-4, errs


def test_chunked_prefill_continues_the_latent_cache(tmp_path):
    """A prompt read 4 tokens a pass (each chunk attending over the latents before it), then steps."""
    from lineage.prefill import prefill
    ref = deepseek(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 15), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = ref(ids[:, :11], use_cache=True)
        logits, state = prefill(model, ids[:, :11], chunk=4)
        errs = [rel(logits, out.logits[:, -1])]
        latents_equal(-1, out.past_key_values, state)
        cache = out.past_key_values
        for i in range(11, 15):
            out = ref(ids[:, i:i + 1], cache=cache, use_cache=True)
            cache = out.past_key_values
            logits, state = model.step(ids[:, i], state)
            errs.append(rel(logits, out.logits[:, 0]))
    assert max(errs) < 1e-4, errs


def test_static_latent_cache_steps_as_the_growing_one(tmp_path):
    """The fixed-capacity latent cache a CUDA graph captures (its positions a tensor, YaRN and the
    de-interleave applied there too) steps as the growing cache does, on the CPU."""
    from lineage.graph_step import to_static
    from lineage.observed import StepObs
    deepseek(tmp_path, rope_parameters=YARN, max_position_embeddings=64)
    model, _ = lineage.load_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 26), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        _, st = model(ids[:, :20])
        static = to_static(st, capacity=32)
        for t in range(20, 26):
            o1, o2 = StepObs(), StepObs()
            a, st = model.step(ids[:, t], st, o1)
            b, static = model.step(ids[:, t], static, o2)
            assert rel(b, a) < 1e-5, t
            assert rel(o2.layers[2].mixer.weights[..., :t + 1], o1.layers[2].mixer.weights) < 1e-5, t


def test_greedy_tokens_equal(tmp_path):
    ref = deepseek(tmp_path)
    greedy_equal(ref, tmp_path)


def test_routed_scaling_factor_is_read(tmp_path):
    """The comparison is sharp enough to see one routing number: the same weights with the factor
    config.json names changed are far from transformers."""
    ref = deepseek(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["routed_scaling_factor"] = 1.0
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert max(compare(ref, tmp_path, VOCAB, prefill=6, steps=2)) > 1e-2


def hub_config(path, model_type="deepseek_v3"):
    """Rewrite a saved config.json as the hub's files spell it (DeepSeek-V3, Moonlight, Kimi K2):
    `rope_scaling` with `type` and a top-level rope_theta, the remote code's routing fields."""
    cfg = json.loads((path / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    rope["type"] = rope.pop("rope_type")
    for k in ("head_dim", "qk_head_dim", "rope_interleave"):
        cfg.pop(k)
    cfg.update(model_type=model_type, rope_scaling=rope, scoring_func="sigmoid", topk_method="noaux_tc",
               moe_layer_freq=1, aux_loss_alpha=0.001, seq_aux=True, ep_size=1, num_nextn_predict_layers=1)
    (path / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("model_type", ["deepseek_v3", "kimi_k2"])
def test_hub_spelling_and_a_multi_token_prediction_layer(tmp_path, model_type):
    """The hub's config, and a file holding layer 4 of a 4-layer model (V3's MTP module, with its
    own eh_proj and norms): skipped, as transformers skips it."""
    ref = deepseek(tmp_path, rope_parameters=dict(YARN, beta_fast=1.0, beta_slow=1.0), max_position_embeddings=64)
    hub_config(tmp_path, model_type)
    weights = load_file(str(tmp_path / "model.safetensors"))
    weights.update({k.replace("layers.3.", "layers.4."): v.clone() for k, v in weights.items() if "layers.3." in k})
    weights["model.layers.4.eh_proj.weight"] = torch.zeros(40, 80)
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.n_layers == 4 and model.cfg.notes.startswith("Kimi K2" if model_type == "kimi_k2" else "DeepSeek")
    errs = compare(ref, tmp_path, VOCAB, prefill=20, steps=3, state_check=latents_equal)
    assert max(errs) < 1e-4, errs


@pytest.mark.parametrize("field,value,match", [
    ("scoring_func", "softmax", "scoring_func: 'softmax' is not supported"),
    ("topk_method", "greedy", "topk_method: 'greedy' is not supported"),
    ("moe_layer_freq", 2, "moe_layer_freq: 2 is not supported"),
    ("hidden_act", "gelu", "hidden_act: 'gelu' is not supported"),
    ("quantization_config", {"quant_method": "fp8"}, "quantization_config: quantized weights"),
    ("rope_parameters", {"rope_type": "dynamic", "factor": 2.0}, "rope_parameters: rope_type 'dynamic' is not supported"),
    ("attention_bias", True, "attention_bias: True is not supported"),
    ("use_mla_gate", True, "use_mla_gate: a field the deepseek_v3 loader does not understand"),
])
def test_what_lineage_cannot_run_is_refused_in_one_line(tmp_path, field, value, match):
    deepseek(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg[field] = value
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(PretrainedError, match=match) as e:
        lineage.load_pretrained(tmp_path)
    assert "config.json" in str(e.value) and "\n" not in str(e.value)


def test_a_deepseek_v2_is_pointed_at_v3(tmp_path):
    deepseek(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["model_type"] = "deepseek_v2"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(PretrainedError, match=r"model_type 'deepseek_v2' is not supported \(did you mean 'deepseek_v3'"):
        lineage.load_pretrained(tmp_path)


def test_parameter_arithmetic_counts_what_loads(tmp_path):
    from lineage.arithmetic import count
    deepseek(tmp_path)
    model, _ = lineage.load_pretrained(tmp_path)
    assert count(model.cfg)["total"] == sum(p.numel() for p in model.parameters())


def test_opens_as_a_scenario_with_routing_and_cache(tmp_path):
    """What `lineage run DIR` opens: the router of the first MoE layer and the latent cache."""
    import yaml

    from lineage.families.scenario import checkpoint_scenario
    from lineage.playback.session import Session
    from lineage.scenario import loads
    deepseek(tmp_path)
    text = checkpoint_scenario(tmp_path, ids=[5, 6, 7], steps=4)
    panels = yaml.safe_load(text)["panels"]
    assert [p["kind"] for p in panels] == ["tokens", "routing", "cache"] and panels[1]["layer"] == 1
    s = Session(loads(text), device="cpu")
    f = s.frame(3)
    r = f.routing(0, 1)
    assert r.experts.shape == (3,) and r.scores.shape == (9,) and r.shared_share is not None
    assert r.weights.sum() == pytest.approx(2.5, rel=1e-5)         # normalised, times routed_scaling_factor
    cache = f.cache(0, s.model_config(0))
    assert cache.kv == 0 and cache.latent == 4 * 4 * (20 + 6) * 4   # 4 tokens x 4 layers x (latent + rope) x fp32
    s.close()


def test_params_and_memory_print(tmp_path, capsys):
    from lineage.cli.main import main
    deepseek(tmp_path)
    assert main(["params", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "active" in out
    assert main(["memory", str(tmp_path), "--context", "1000"]) == 0
    assert "cache" in capsys.readouterr().out.lower()
