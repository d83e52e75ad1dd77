"""Checkpoints that transformers runs one way and lineage must run the same way, or refuse in one
line: a head of its own under tie_word_embeddings, odd rotary widths, no shared expert, tensors
that are not weights, fused tensors of the wrong shape."""
import json

import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402

from .helpers import compare  # noqa: E402
from .test_gpt2 import gpt2  # noqa: E402
from .test_hybrids import kimi, qwen  # noqa: E402


def refused(path, *words):
    with pytest.raises(PretrainedError) as e:
        lineage.load_pretrained(path)
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg
    return msg


def rewrite(path, **tensors):
    f = path / "model.safetensors"
    sd = load_file(str(f))
    for name, fn in tensors.items():
        sd[name.replace("__", ".")] = fn(sd[name.replace("__", ".")])
    save_file(sd, str(f), metadata={"format": "pt"})


def test_kimi_linear_head_is_the_files_under_tie_word_embeddings(tmp_path):
    """transformers' Kimi Linear never ties (and saves lm_head): the field must not drop the head."""
    ref = kimi(tmp_path, tie_word_embeddings=True)
    assert not torch.equal(ref.lm_head.weight, ref.model.embed_tokens.weight)
    assert "lm_head.weight" in load_file(str(tmp_path / "model.safetensors"))
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.lm_head.weight is not model.wte.weight
    assert max(compare(ref, tmp_path, 97, prefill=4, steps=3)) < 1e-4


def test_kimi_linear_without_a_head_is_refused(tmp_path):
    kimi(tmp_path, tie_word_embeddings=True)
    f = tmp_path / "model.safetensors"
    sd = load_file(str(f))
    del sd["lm_head.weight"]
    save_file(sd, str(f), metadata={"format": "pt"})
    refused(tmp_path, "lm_head.weight", "lacks")


def test_gpt2_tied_but_a_different_head_in_the_file_is_refused(tmp_path):
    """GPT-2 really ties: a file's head that differs from the embedding is refused, never dropped."""
    gpt2(tmp_path)
    f = tmp_path / "model.safetensors"
    sd = load_file(str(f))
    sd["lm_head.weight"] = sd["transformer.wte.weight"] + 0.5
    save_file(sd, str(f), metadata={"format": "pt"})
    refused(tmp_path, "model.safetensors", "lm_head.weight", "tie_word_embeddings")
    sd["lm_head.weight"] = sd["transformer.wte.weight"].clone()       # the same head: tied, loads
    save_file(sd, str(f), metadata={"format": "pt"})
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.lm_head.weight is model.wte.weight


def test_qwen3_next_tied_but_a_different_head_in_the_file_is_refused(tmp_path):
    qwen(tmp_path, tie_word_embeddings=True, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
         mlp_only_layers=[])
    f = tmp_path / "model.safetensors"
    sd = load_file(str(f))
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"] * 2
    save_file(sd, str(f), metadata={"format": "pt"})
    refused(tmp_path, "lm_head.weight", "tie_word_embeddings")


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.int64])
def test_integer_and_bool_tensors_refused(tmp_path, dtype):
    """Cast into float weights they would load and give NaN probabilities in the app."""
    gpt2(tmp_path)
    rewrite(tmp_path, transformer__h__1__ln_1__bias=lambda t: torch.ones(t.shape, dtype=dtype))
    refused(tmp_path, "model.safetensors", "transformer.h.1.ln_1.bias", str(dtype).removeprefix("torch."))


def test_qwen3_next_norm_weights_as_integers_refused(tmp_path):
    """Norms go through 1 + w (a float copy) before the loader sees them: still refused."""
    qwen(tmp_path, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"], mlp_only_layers=[])
    rewrite(tmp_path, model__layers__0__input_layernorm__weight=lambda t: t.to(torch.int32))
    refused(tmp_path, "model.layers.0.input_layernorm.weight", "int32")


TWO = dict(num_hidden_layers=2, layer_types=["linear_attention", "full_attention"], mlp_only_layers=[])


@pytest.mark.parametrize("name", ["model.layers.0.linear_attn.in_proj_qkvz.weight",
                                  "model.layers.0.linear_attn.in_proj_ba.weight",
                                  "model.layers.1.self_attn.q_proj.weight"])
def test_qwen3_next_transposed_fused_tensor_refused(tmp_path, name):
    """A transposed fused tensor passes `view(..., -1)` and every later shape check."""
    qwen(tmp_path, **TWO)
    rewrite(tmp_path, **{name.replace(".", "__"): lambda t: t.T.contiguous()})
    refused(tmp_path, "model.safetensors", name, "shape")


@pytest.mark.parametrize("name", ["model.layers.0.linear_attn.in_proj_qkvz.weight",
                                  "model.layers.0.linear_attn.in_proj_ba.weight",
                                  "model.layers.1.self_attn.q_proj.weight"])
def test_qwen3_next_fused_tensor_with_a_row_missing_is_one_line(tmp_path, name):
    qwen(tmp_path, **TWO)
    rewrite(tmp_path, **{name.replace(".", "__"): lambda t: t[1:].contiguous()})
    msg = refused(tmp_path, "model.safetensors", name, "config.json implies")
    assert "view" not in msg and "invalid" not in msg


@pytest.mark.parametrize("head_dim,part", [(12, 0.25), (20, 0.25), (10, 0.5)])
def test_qwen3_next_odd_rotary_width_equals_transformers(tmp_path, head_dim, part):
    """head_dim * partial_rotary_factor odd (3, 5): transformers rotates one channel more, with
    frequencies spaced for the odd width."""
    ref = qwen(tmp_path, head_dim=head_dim, partial_rotary_factor=part, rope_theta=500.0, **TWO)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.attention.rope_dim == int(head_dim * part) + 1
    assert max(compare(ref, tmp_path, 97, prefill=6, steps=6)) < 1e-4


def test_qwen3_next_without_a_shared_expert_equals_transformers(tmp_path):
    ref = qwen(tmp_path, shared_expert_intermediate_size=0, **TWO)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["shared_expert_intermediate_size"] == 0
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.moe.n_shared == 0
    assert max(compare(ref, tmp_path, 97, prefill=5, steps=3)) < 1e-4


def test_cli_messages_name_the_directory_not_the_made_scenario(tmp_path, capsys):
    """`lineage record / validate DIR` speak of DIR and its files, never of /tmp/lineage-*/NAME.yaml."""
    from lineage.cli.main import main
    gpt2(tmp_path / "m")
    rewrite(tmp_path / "m", transformer__h__0__ln_1__bias=lambda t: t[1:].contiguous())
    capsys.readouterr()
    assert main(["record", str(tmp_path / "m"), "--ids", "1,2", "-o", str(tmp_path / "t.trace"), "--steps", "2"]) == 2
    msg = capsys.readouterr().err.strip()
    assert msg.startswith(f"{tmp_path / 'm' / 'model.safetensors'}: tensor transformer.h.0.ln_1.bias"), msg
    assert "lineage-" not in msg and ".yaml" not in msg
    assert main(["validate", str(tmp_path / "m")]) == 2           # the safetensors headers, no weights read
    assert capsys.readouterr().err.strip() == msg
    edit = json.loads((tmp_path / "m" / "config.json").read_text())
    edit["n_head"] = 5
    (tmp_path / "m" / "config.json").write_text(json.dumps(edit))
    assert main(["validate", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err.strip() == f"{tmp_path / 'm' / 'config.json'}: n_head: 5 does not divide n_embd 36"


def test_scenario_problems_and_dialog_title_name_the_directory(tmp_path):
    from lineage.cli.opening import as_given, made_scenario
    from lineage.app.screens.error import ErrorScreen
    gpt2(tmp_path / "m")
    made = made_scenario(str(tmp_path / "m"), ids=[1])
    root = str((tmp_path / "m").resolve())
    assert as_given(f"{made}:4:15: model.pretrained: {root}/model.safetensors: bad") == f"{root}/model.safetensors: bad"
    assert as_given(f"{made}:7:3: input.ids: 999 is out of range") == f"{tmp_path / 'm'}: input.ids: 999 is out of range"
    screen = ErrorScreen(f"Could not open {made}", [f"{made}:1:1: oops"], None)
    assert screen.title_text == f"Could not open {tmp_path / 'm'}" and screen.lines == [f"{tmp_path / 'm'}: oops"]


def test_a_checkpoint_without_a_tokenizer_shows_ids_as_ids(tmp_path):
    """The status bar says tokens are shown as ids: the stream and the guesses are ids, not bytes."""
    from lineage.playback.session import Session
    from lineage.scenario import loads
    gpt2(tmp_path / "m")
    s = Session(loads(f"version: 1\ntitle: t\nmodel: {{pretrained: {tmp_path / 'm'}}}\ninput: {{ids: [5, 73, 100]}}\n"
                      "decoding: {mode: greedy}\nsteps: 3\npanels: [{kind: tokens}]\n"), device="cpu")
    assert [s.frame(i).token().text for i in range(3)] == ["#5 ", "#73 ", "#100 "]
    g = s.frame(0).guesses(0)
    assert list(g.texts) == [f"#{int(t)}" for t in g.ids]
    assert any("shown as ids" in n for n in s.info.get("notes", []))
    s.close()


def test_gpt2_exact_gelu_equals_transformers(tmp_path):
    """`activation_function: gelu` (transformers' own GPT-2 test config) is the erf GELU, not gelu_new."""
    ref = gpt2(tmp_path, activation_function="gelu", n_embd=30, n_head=5, n_layer=2, n_inner=23)
    model, _ = lineage.load_pretrained(tmp_path)
    assert model.cfg.dense.gelu_form == "erf"
    assert max(compare(ref, tmp_path, 101, prefill=6, steps=4)) < 1e-5
