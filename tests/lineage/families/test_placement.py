"""Device maps (issue 32, the CPU part): the placement of published checkpoints over several
GPUs planned on the meta device from their config.json alone, the map's forms as Hugging Face
writes them, and each refusal one line naming where and what. No GPU is needed: the GPUs are
described by --gpu-memory."""
from __future__ import annotations

import json
import os
import signal
from contextlib import contextmanager

import pytest

from lineage.arithmetic import count, model_memory
from lineage.families.loader import read_model_config
from lineage.families.placement import (PlacementError, capacities, describe, layer_cache_bytes, parse_device_map,
                                          parse_gpu_memory, plan)
from lineage.cli.main import main

H200 = 141 * 10**9
CTX = 131072

# published config.json files (the fields lineage reads; Qwen3.5 as the hub's multimodal composite)
QWEN3_NEXT_80B = dict(
    architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", vocab_size=151936, hidden_size=2048,
    num_hidden_layers=48, intermediate_size=5120, num_attention_heads=16, num_key_value_heads=2, head_dim=256,
    partial_rotary_factor=0.25, rope_theta=10000000, rms_norm_eps=1e-6, hidden_act="silu", full_attention_interval=4,
    linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32,
    linear_value_head_dim=128, num_experts=512, num_experts_per_tok=10, moe_intermediate_size=512,
    shared_expert_intermediate_size=512, decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
    tie_word_embeddings=False, max_position_embeddings=262144, torch_dtype="bfloat16")
QWEN3_5_122B = dict(
    architectures=["Qwen3_5MoeForConditionalGeneration"], model_type="qwen3_5_moe", tie_word_embeddings=False,
    text_config=dict(
        model_type="qwen3_5_moe_text", vocab_size=248320, hidden_size=3072, num_hidden_layers=48,
        num_attention_heads=32, num_key_value_heads=2, head_dim=256, num_experts=256, num_experts_per_tok=8,
        moe_intermediate_size=1024, shared_expert_intermediate_size=1024, linear_num_key_heads=16,
        linear_num_value_heads=64, linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
        full_attention_interval=4, rms_norm_eps=1e-6, hidden_act="silu", attn_output_gate=True, dtype="bfloat16",
        rope_parameters=dict(rope_type="default", rope_theta=10000000, partial_rotary_factor=0.25,
                             mrope_section=[11, 11, 10], mrope_interleaved=True)))
MLA_AT = (4, 8, 12, 16, 20, 24, 27)          # 1-based, as published
KIMI_LINEAR_48B = dict(
    architectures=["KimiLinearForCausalLM"], model_type="kimi_linear", vocab_size=163840, hidden_size=2304,
    num_hidden_layers=27, intermediate_size=9216, moe_intermediate_size=1024, num_attention_heads=32,
    kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, q_lora_rank=None,
    num_experts=256, num_experts_per_token=8, num_shared_experts=1, first_k_dense_replace=1,
    routed_scaling_factor=2.446, moe_renormalize=True, num_expert_group=1, topk_group=1,
    moe_router_activation_func="sigmoid", use_grouped_topk=True, mla_use_nope=True, rms_norm_eps=1e-5,
    hidden_act="silu", tie_word_embeddings=False, torch_dtype="bfloat16",
    linear_attn_config=dict(full_attn_layers=list(MLA_AT), kda_layers=[i for i in range(1, 28) if i not in MLA_AT],
                            head_dim=128, num_heads=32, short_conv_kernel_size=4))


def make(tmp_path, raw: dict, name: str = "ckpt"):
    """A checkpoint folder holding only config.json (a plan reads no weight) -> (folder, ModelConfig)."""
    root = tmp_path / name
    root.mkdir()
    (root / "config.json").write_text(json.dumps(raw))
    return root, read_model_config(root)[0]


def planned(cfg, text="auto", gpus="2x141GB", context=CTX):
    request = parse_device_map(text)
    return plan(cfg, request, capacities(request, parse_gpu_memory(gpus), ()), context)


def check_whole(p, cfg):
    """Every layer on one device, in order; the embedding on the first device used, the head and
    final norm on the last; the bytes per device those of its layers, all of them counted once."""
    used = p.used()
    order = [u for d in used for u in d.units]
    assert order == ["wte"] + [f"blocks.{i}" for i in range(cfg.n_layers)] + ["norm_f", "lm_head"]
    assert used[0].units[0] == "wte" and used[-1].units[-1] == "lm_head"
    assert sum(d.weight_bytes for d in p.devices) == count(cfg)["total"] * 2 + _score_bias_extra(cfg)
    assert sum(d.cache_bytes for d in p.devices) == model_memory(cfg, p.context)["total_bytes"]
    assert all(d.total <= d.capacity for d in p.devices)


def _score_bias_extra(cfg) -> int:
    """A router's choice bias is kept in float32, 2 bytes a value more than bf16."""
    moe_layers = sum(f == "moe" for f in cfg.ffns)
    return 2 * cfg.moe.n_experts * moe_layers if cfg.moe is not None and cfg.moe.score_bias else 0


def test_qwen3_next_80b_splits_evenly_over_two_h200s(tmp_path):
    _, cfg = make(tmp_path, QWEN3_NEXT_80B)
    p = planned(cfg)
    check_whole(p, cfg)
    a, b = p.devices
    assert (a.device, b.device) == ("cuda:0", "cuda:1")
    assert describe(a.units) == "embedding, layers 0-23" and describe(b.units) == "layers 24-47, final norm, head"
    assert 79e9 < a.weight_bytes < 81e9 and 79e9 < b.weight_bytes < 81e9       # 159 GB in all, about half each
    # the 12 attention layers' KV cache at 128K tokens (6 on each side) and the 36 GDN states
    assert a.cache_bytes == b.cache_bytes == sum(layer_cache_bytes(cfg, CTX)[:24])


def test_sequential_fills_the_first_gpu_before_the_next(tmp_path):
    _, cfg = make(tmp_path, QWEN3_NEXT_80B)
    p = planned(cfg, "sequential")
    check_whole(p, cfg)
    a, b = p.devices
    assert len(a.units) > 30 and a.total > 130e9 and "lm_head" in b.units


def test_qwen3_5_122b_fits_two_h200s_and_not_two_80gb_cards(tmp_path):
    _, cfg = make(tmp_path, QWEN3_5_122B)
    p = planned(cfg, "cuda:0,cuda:1", gpus="141GB")
    check_whole(p, cfg)
    assert [d.device for d in p.used()] == ["cuda:0", "cuda:1"]
    assert all(120e9 < d.total < H200 for d in p.devices)                        # 244 GB of weights, halved
    with pytest.raises(PlacementError) as e:
        planned(cfg, "cuda:0,cuda:1", gpus="80GB")
    msg = str(e.value)
    assert "\n" not in msg and "does not fit: cuda:1 needs" in msg and "over its 80.0 GB" in msg
    assert "the 2 devices hold 160.0 GB" in msg


def test_kimi_linear_48b_fits_one_h200_not_one_80gb_card(tmp_path):
    _, cfg = make(tmp_path, KIMI_LINEAR_48B)
    p = planned(cfg, "auto", gpus="1x141GB")
    check_whole(p, cfg)
    (d,) = p.devices
    assert d.device == "cuda:0" and 98e9 < d.weight_bytes < 99e9
    # 7 MLA layers cache a 576-value latent per token; 20 KDA layers hold a fixed state
    mla = [layer_cache_bytes(cfg, CTX)[i - 1] for i in MLA_AT]
    assert mla == [576 * 2 * CTX] * 7
    with pytest.raises(PlacementError, match=r"cuda:0 needs 99\.\d GB .* 19\.\d GB over its 80\.0 GB"):
        planned(cfg, "auto", gpus="1x80GB")


def test_each_layer_cache_sums_to_the_one_accounting(tmp_path):
    _, cfg = make(tmp_path, QWEN3_NEXT_80B)
    for ctx in (1, 4096, CTX):
        per = layer_cache_bytes(cfg, ctx)
        assert sum(per) == model_memory(cfg, ctx)["total_bytes"]
    per = layer_cache_bytes(cfg, CTX)
    assert per[3] > per[0] == per[1]            # layer 4 attention grows; GDN layers hold the same state


def test_a_longer_context_moves_the_cache_with_its_layers(tmp_path):
    """At 1M tokens the attention layers' KV cache is 25 GB: it is counted on the devices that hold them."""
    _, cfg = make(tmp_path, QWEN3_NEXT_80B)
    p = planned(cfg, context=1 << 20)
    check_whole(p, cfg)
    assert sum(d.cache_bytes for d in p.devices) > 25e9


# --------------------------------------------------------------------------- the map's forms


def test_map_forms():
    assert parse_device_map("auto").kind == "auto" and parse_device_map("balanced").kind == "balanced"
    r = parse_device_map("cuda:0, 1,cpu")
    assert (r.kind, r.devices) == ("devices", ("cuda:0", "cuda:1", "cpu"))


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("autoo", "entry 1, 'autoo', is not a device (cuda:N or cpu) (did you mean 'auto'?)"),
    ("cuda:0,gpu1", "entry 2, 'gpu1', is not a device"),
    ("cuda:0,cuda:0", "entry 2, cuda:0, is listed twice"),
    ("cuda:1,cuda:0", "list the GPUs in index order, then cpu"),
    ("cpu,cuda:0", "list the GPUs in index order, then cpu"),
    ("disk", "is not a device"),
])
def test_bad_device_lists_are_one_line(text, words):
    with pytest.raises(PlacementError) as e:
        parse_device_map(text)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_gpu_memory_forms():
    assert parse_gpu_memory("141GB") == H200
    assert parse_gpu_memory("2x141GB") == (H200, H200)
    assert parse_gpu_memory("80GB,139GiB") == (80 * 10**9, 139 * 2**30)
    for bad in ("141", "0GB", "two GB", "0x141GB", "100x1GB"):
        with pytest.raises(PlacementError, match="--gpu-memory"):
            parse_gpu_memory(bad)


def write_map(tmp_path, text: str):
    path = tmp_path / "map.json"
    path.write_text(text)
    return str(path)


def test_a_map_file_in_the_hubs_names_places_as_written(tmp_path):
    _, cfg = make(tmp_path, KIMI_LINEAR_48B)
    body = {"model.embed_tokens": 0, **{f"model.layers.{i}": "cuda:0" if i < 10 else 1 for i in range(27)},
            "model.norm": "cuda:1", "lm_head": "cuda:1"}
    p = planned(cfg, write_map(tmp_path, json.dumps(body, indent=1)), gpus="2x141GB")
    check_whole(p, cfg)
    assert describe(p.devices[0].units) == "embedding, layers 0-9"
    assert describe(p.devices[1].units) == "layers 10-26, final norm, head"


def test_a_map_file_prefix_covers_the_rest(tmp_path):
    _, cfg = make(tmp_path, KIMI_LINEAR_48B)
    p = planned(cfg, write_map(tmp_path, '{"": "cuda:1", "model.layers.26": 0, "lm_head": 0}'), gpus="2x141GB")
    assert p.devices[0].units == ("blocks.26", "lm_head")
    assert len(p.devices[1].units) == 1 + 26 + 1


@pytest.mark.parametrize("body, words", [
    ('{"model.embed_tokens": 0,\n  "model.layers": cuda}', ":2:19: not JSON"),
    ('["cuda:0"]', ":1:1: a device map is a JSON object"),
    ('{}', "the device map is empty"),
    ('{"": 0,\n "model.layerz.3": 1}', ":2:2: 'model.layerz.3' is not a module of ckpt (did you mean 'model.layers.3'?)"),
    ('{"": 0,\n "model.layers.60": 1}', ":2:2: 'model.layers.60' is not a module of ckpt"),
    ('{"": 0, "model.layers.3.mlp": 1}', "'model.layers.3.mlp' is part of layer 3; layers are placed whole"),
    ('{"model.layers": 0, "lm_head": 0}', "model.embed_tokens is not mapped to a device"),
    ('{"": "disk"}', "maps to 'disk', not a device"),
    ('{"": {"cuda": 0}}', "maps to a list or an object"),
    ('{"": 0, "": 1}', "'' is mapped twice"),
])
def test_bad_map_files_are_one_line_at_their_position(tmp_path, body, words):
    _, cfg = make(tmp_path, QWEN3_NEXT_80B)
    path = write_map(tmp_path, body)
    with pytest.raises(PlacementError) as e:
        planned(cfg, path, gpus="2x141GB")
    assert str(e.value).startswith(path) and words in str(e.value) and "\n" not in str(e.value)


@contextmanager
def never_blocks(seconds: int = 60):
    """A safety net, not a timing: a read that blocks (a FIFO with no writer) fails the test
    instead of hanging the run. Correct code returns at once and never meets it."""
    def fail(*_):
        raise AssertionError(f"still reading after {seconds} s: the map file blocked")
    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# (name, how it is made, words the one line holds): each would hang, grow without end or raise
# a traceback if read as a plain file (issue 51, item 1)
HOSTILE_MAPS = {
    "a FIFO named .json": ("map.json", os.mkfifo, "a FIFO"),
    "a FIFO without .json": ("map", os.mkfifo, "a FIFO"),
    "a link to /dev/zero": ("map.json", lambda p: p.symlink_to("/dev/zero"), "a character device"),
    "a link to /dev/zero without .json": ("zero", lambda p: p.symlink_to("/dev/zero"), "a character device"),
    "2 MB sparse": ("map.json", lambda p: p.write_bytes(b"") or os.truncate(p, 2 << 20), "limit 1,048,576"),
    "nested 100,000 deep": ("map.json", lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nested too deeply"),
    "an integer of 5,000 digits": ("map.json", lambda p: p.write_text('{"": ' + "1" * 5000 + "}"), "not JSON"),
    "not UTF-8": ("map.json", lambda p: p.write_bytes(b'{"\xff": 0}'), "UTF-8"),
}


@pytest.mark.parametrize("case", HOSTILE_MAPS)
def test_a_hostile_map_file_is_refused_at_once_in_one_line(tmp_path, case):
    name, make_it, words = HOSTILE_MAPS[case]
    path = tmp_path / name
    make_it(path)
    with never_blocks(), pytest.raises(PlacementError) as e:
        parse_device_map(str(path))
    said = str(e.value)
    assert said.startswith(str(path)) and words in said and "\n" not in said, said


def test_lineage_memory_refuses_a_fifo_map_exit_2(tmp_path, capsys):
    root, _ = make(tmp_path, QWEN3_NEXT_80B)
    os.mkfifo(tmp_path / "map.json")
    with never_blocks():
        code = main(["memory", str(root), "--device-map", str(tmp_path / "map.json"), "--gpu-memory", "2x141GB"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "a FIFO" in err and "Traceback" not in err, err


def test_a_device_that_is_not_visible_is_refused(tmp_path):
    _, cfg = make(tmp_path, QWEN3_NEXT_80B)
    path = write_map(tmp_path, '{"": 0,\n "model.layers.40": "cuda:2"}')
    with pytest.raises(PlacementError, match=r"map\.json:2:2: cuda:2 is not visible \(the 2 GPUs --gpu-memory "
                                             r"describes: cuda:0, cuda:1\)"):
        planned(cfg, path, gpus="2x141GB")
    r = parse_device_map("cuda:0,cuda:3")
    with pytest.raises(PlacementError, match=r"--device-map cuda:0,cuda:3: cuda:3 is not visible \(the 2 visible"):
        capacities(r, None, visible=(H200, H200))
    assert capacities(r, None, visible=(H200,) * 4) == {"cuda:0": H200, "cuda:3": H200}


def test_with_no_gpu_visible_the_plan_asks_for_one():
    with pytest.raises(PlacementError, match=r"no GPU is visible here .* --gpu-memory 2x141GB"):
        capacities(parse_device_map("auto"), None, visible=())
    with pytest.raises(PlacementError, match=r"no GPU is visible here to count; .* --gpu-memory 2x141GB"):
        capacities(parse_device_map("auto"), H200, visible=())
    assert capacities(parse_device_map("cuda:0,cpu"), H200, (), cpu_bytes=7) == {"cuda:0": H200, "cpu": 7}
    assert capacities(parse_device_map("cpu"), None, (), cpu_bytes=7) == {"cpu": 7}


# --------------------------------------------------------------------------- the command


def test_lineage_memory_prints_the_plan(tmp_path, capsys):
    root, _ = make(tmp_path, QWEN3_NEXT_80B, "Qwen3-Next-80B-A3B-Instruct")
    assert main(["memory", str(root), "--device-map", "auto", "--gpu-memory", "2x141GB"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Qwen3-Next-80B-A3B-Instruct: device map auto over 2 of 2 devices")
    assert "131,072 tokens (nothing loaded)" in out[0]
    assert out[2].split()[:1] == ["cuda:0"] and out[2].endswith("embedding, layers 0-23")
    assert out[3].endswith("layers 24-47, final norm, head") and "141.0 GB" in out[3]
    assert main(["memory", str(root), "--device-map", "auto", "--gpu-memory", "2x141GB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["placement"]["blocks.24"] == "cuda:1" and data["placement"]["wte"] == "cuda:0"


def test_lineage_memory_refuses_in_one_line_exit_2(tmp_path, capsys):
    root, _ = make(tmp_path, QWEN3_5_122B)
    assert main(["memory", str(root), "--device-map", "auto", "--gpu-memory", "2x100GB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lineage memory: --device-map auto: does not fit: cuda:1 needs")
    assert main(["memory", str(root), "--device-map", "cuda:0,cuda:1", "--gpu-memory", "1x141GB"]) == 2
    assert "cuda:1 is not visible" in capsys.readouterr().err


def test_lineage_memory_without_a_map_is_as_before(tmp_path, capsys):
    root, _ = make(tmp_path, QWEN3_NEXT_80B)
    assert main(["memory", str(root), "--cards", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ckpt: weights 159.3 GB at 2.0 B/param on 2 x 141 GB cards") and "device map" not in out


GPT2 = dict(architectures=["GPT2LMHeadModel"], model_type="gpt2", vocab_size=50257, n_positions=1024, n_embd=768,
            n_layer=12, n_head=12, activation_function="gelu_new")


def test_a_tied_head_stays_with_the_embedding_and_counts_once(tmp_path):
    _, cfg = make(tmp_path, GPT2)
    assert cfg.tie_embeddings
    p = planned(cfg, "auto", gpus="2x1GB", context=1024)
    assert sum(d.weight_bytes for d in p.devices) == count(cfg)["total"] * 2
    assert p.device_map["lm_head"] == p.device_map["wte"] == "cuda:0"
    path = write_map(tmp_path, '{"": 0, "lm_head": 1}')
    with pytest.raises(PlacementError, match="the head is tied to the embedding .* map lm_head to cuda:0"):
        planned(cfg, path, gpus="2x1GB", context=1024)
