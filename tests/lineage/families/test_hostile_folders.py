"""Checkpoint folders crafted to break the loader (issue 31): each ends in one line naming the
file or field, in seconds, never a traceback. The tiny checkpoints are built once per module and
copied for each case, so a case costs a copy and a load."""
import json
import shutil

import pytest

pytest.importorskip("transformers")

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402
from lineage.cli.main import main  # noqa: E402

from .test_gpt2 import gpt2  # noqa: E402
from .test_hybrids import kimi, qwen  # noqa: E402

BUILDERS = {"gpt2": gpt2, "qwen3_next": qwen, "kimi_linear": kimi}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    for name, make in BUILDERS.items():
        make(root / name)
    return root


def copy(built, family, tmp_path):
    shutil.copytree(built / family, tmp_path / "m")
    return tmp_path / "m"


def edit(path, **fields):
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(fields)
    (path / "config.json").write_text(json.dumps(cfg))


def refused(path, *words) -> str:
    with pytest.raises(PretrainedError) as e:      # how fast: bench_reliability, not a timed test
        lineage.load_pretrained(path)
    msg = str(e.value)
    assert "\n" not in msg, msg
    for w in words:
        assert w in msg, msg
    return msg


def _kimi_pattern(**kw):
    """Kimi's hub spelling of its layer pattern (1-based layer numbers), one value replaced."""
    lin = {"full_attn_layers": [4], "kda_layers": [1, 2, 3, 5], "head_dim": 16, "num_heads": 3, **kw}
    return {"linear_attn_config": lin, "layer_types": None}


# issue 31's traceback cases, one config.json edit each: (family, fields, words the line holds)
CONFIG_CASES = {
    "n_head 0": ("gpt2", {"n_head": 0}, ("n_head", "at least 1")),
    "heads 0, head_dim null": ("qwen3_next", {"num_attention_heads": 0, "head_dim": None},
                               ("num_attention_heads", "at least 1")),
    "layer_types of objects": ("qwen3_next", {"layer_types": [{}, {}]}, ("layer_types[0]", "string")),
    "mlp_only_layers nested": ("qwen3_next", {"mlp_only_layers": [[0]]}, ("mlp_only_layers[0]", "integer")),
    "model_type a list": ("qwen3_next", {"model_type": ["qwen3_next"]}, ("model_type", "list", "not supported")),
    "rope_theta a string": ("qwen3_next", {"rope_theta": "abc"}, ("rope_theta", "number", "'abc'")),
    "partial_rotary_factor a list": ("qwen3_next", {"partial_rotary_factor": [0.25]},
                                     ("partial_rotary_factor", "number")),
    "full_attn_layers an int": ("kimi_linear", _kimi_pattern(full_attn_layers=2),
                                ("linear_attn_config.full_attn_layers", "list")),
    "kda head_dim a string": ("kimi_linear", _kimi_pattern(head_dim="16"), ("linear_attn_config.head_dim", "'16'")),
    "kda num_heads a float": ("kimi_linear", _kimi_pattern(num_heads=4.0), ("linear_attn_config.num_heads", "4.0")),
}


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_config_values_of_the_wrong_kind_are_one_line(built, tmp_path, case):
    family, fields, words = CONFIG_CASES[case]
    path = copy(built, family, tmp_path)
    edit(path, **fields)
    refused(path, "config.json", *words)


def test_config_nested_deeper_than_the_parser_is_one_line(built, tmp_path, capsys):
    path = copy(built, "gpt2", tmp_path)
    (path / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(path, "config.json", "nested too deeply")
    assert main(["params", str(path)]) == 2                     # the command that reads no weights too
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "nested too deeply" in err, err


@pytest.mark.parametrize("weight_map", [["model.safetensors"], "model.safetensors"])
def test_index_whose_weight_map_is_a_list_or_a_string(built, tmp_path, weight_map):
    path = copy(built, "gpt2", tmp_path)
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    refused(path, "model.safetensors.index.json", "weight_map", "expected an object")


@pytest.mark.parametrize("make, words", [
    (lambda p: p.symlink_to("/dev/zero"), ("tokenizer.json", "a character device")),
    (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), ("tokenizer.json", "tokenizers refused it")),
    (lambda p: p.write_text('{"model": 3}'), ("tokenizer.json", "tokenizers refused it")),
], ids=["linked to /dev/zero", "nested", "malformed"])
def test_broken_tokenizer_files_are_not_taken_for_none(built, tmp_path, capsys, make, words):
    """`lineage run DIR` and `validate DIR` name the broken file, rather than saying the folder
    has no tokenizer files and asking for --ids."""
    from lineage.families.scenario import checkpoint_scenario
    path = copy(built, "gpt2", tmp_path)
    make(path / "tokenizer.json")
    for ids in (None, [1, 2]):
        with pytest.raises(PretrainedError) as e:
            checkpoint_scenario(path, ids=ids)
        assert "no tokenizer files" not in str(e.value) and all(w in str(e.value) for w in words), str(e.value)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and all(w in err for w in words), err


# configs that claim more than the files hold: refused from the safetensors headers, before the
# model is built on meta or any destination tensor is allocated (each once took minutes or GBs)
CLAIMS = {
    "20,000 layers": ("gpt2", {"n_layer": 20_000}, ("n_layer", "at most 1,024")),
    "16M layers": ("qwen3_next", {"num_hidden_layers": 16_000_000, "layer_types": None}, ("num_hidden_layers",)),
    "1,024 layers": ("gpt2", {"n_layer": 1024}, ("describes 1,024 layers", "hold 3")),
    "5 layers of 4": ("qwen3_next", {"num_hidden_layers": 5, "layer_types": None}, ("describes 5 layers",)),
    "4,096 wide experts": ("qwen3_next", {"num_experts": 4096, "moe_intermediate_size": 65536},
                           ("parameters", "the safetensors files hold")),
    "a 1M vocabulary": ("kimi_linear", {"vocab_size": 1 << 20}, ("parameters", "the safetensors files hold")),
    "a wide embedding": ("gpt2", {"n_embd": 3 * 65536}, ("parameters", "the safetensors files hold")),
}


@pytest.mark.parametrize("case", CLAIMS)
def test_claims_past_the_files_are_refused_before_the_build(built, tmp_path, monkeypatch, case):
    import lineage.model
    family, fields, words = CLAIMS[case]
    path = copy(built, family, tmp_path)
    edit(path, **fields)

    def never(cfg):
        raise AssertionError(f"built a model of {cfg.n_layers} layers")
    monkeypatch.setattr(lineage.model, "LM", never)
    refused(path, "config.json", *words)


def test_claims_through_a_shard_index(built, tmp_path):
    from transformers import GPT2LMHeadModel
    GPT2LMHeadModel.from_pretrained(str(built / "gpt2")).save_pretrained(str(tmp_path / "s"), max_shard_size="20KB")
    assert (tmp_path / "s" / "model.safetensors.index.json").exists()
    edit(tmp_path / "s", n_layer=1000)
    refused(tmp_path / "s", "describes 1,000 layers", "hold 3")


@pytest.mark.parametrize("layers, rc", [(1024, 0), (16_000_000, 2)])
def test_params_of_many_layers_answers_or_refuses(built, tmp_path, capsys, layers, rc):
    path = copy(built, "gpt2", tmp_path)
    edit(path, n_layer=layers)
    assert main(["params", str(path)]) == rc
    out = capsys.readouterr()
    assert ("1024 layers" in out.out) if rc == 0 else ("at most 1,024" in out.err and "\n" not in out.err.strip())


@pytest.mark.parametrize("shape", [(36, 108, 1), (1, 36, 108), (36 * 108,), ()])
def test_a_gpt2_projection_of_another_rank_is_one_line_and_no_warning(built, tmp_path, shape):
    """Conv1D weights are transposed on load: `.T` of a tensor of another rank made torch print a
    deprecation warning above the one line."""
    import warnings

    import torch
    from safetensors.torch import load_file, save_file
    path = copy(built, "gpt2", tmp_path)
    sd = load_file(str(path / "model.safetensors"))
    sd["transformer.h.0.attn.c_attn.weight"] = torch.zeros(shape)
    save_file(sd, str(path / "model.safetensors"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        refused(path, "transformer.h.0.attn.c_attn.weight", f"has shape {shape}", "implies (108, 36)")


def test_names_from_the_files_cannot_break_the_line_or_reach_the_terminal(built, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file
    path = copy(built, "gpt2", tmp_path)
    edit(path, **{"evil\n\x1b]2;owned\x07": 1})
    msg = refused(path, "evil\\n\\x1b]2;owned\\x07", "does not understand")
    assert "\x1b" not in msg
    path = copy(built, "gpt2", tmp_path / "t")
    sd = load_file(str(path / "model.safetensors"))
    sd["h.0.\x1b[2Jx\ny"] = torch.zeros(1)
    save_file(sd, str(path / "model.safetensors"))
    assert "\x1b" not in refused(path, "h.0.\\x1b[2Jx\\ny", "not part of")


def test_a_broken_tokenizer_is_found_before_the_weights_are_read(built, tmp_path, monkeypatch):
    import lineage.model
    path = copy(built, "gpt2", tmp_path)
    (path / "tokenizer_config.json").symlink_to("/dev/zero")
    (path / "tiktoken.model").write_bytes(b"YQ== 0\n")

    def never(cfg):
        raise AssertionError("built the model before reading the tokenizer")
    monkeypatch.setattr(lineage.model, "LM", never)
    refused(path, "tiktoken.model", "byte 0x00")
    (path / "tiktoken.model").unlink()
    (path / "tokenizer.json").symlink_to(path / "tokenizer_config.json")
    refused(path, "tokenizer.json", "cannot be read (a character device")


def _index(path, n, shards):
    entries = ",".join(f'"t{i}": "s{i % shards}"' for i in range(n))
    (path / "model.safetensors.index.json").write_text('{"weight_map": {' + entries + "}}")


@pytest.mark.parametrize("n, shards, words", [
    (600_000, 1, ("over 524,288 entries",)),            # parsed, 2.6M tiny entries took 840 MB
    (20_000, 20_000, ("names 20,000 shard files", "at most 16,384")),     # a stat each: 46 s for 2.6M
])
def test_an_index_of_too_many_entries_or_shards_is_refused_before_its_cost(built, tmp_path, n, shards, words):
    path = copy(built, "gpt2", tmp_path)
    _index(path, n, shards)
    refused(path, "model.safetensors.index.json", *words)


def test_an_index_past_its_size_limit(built, tmp_path):
    path = copy(built, "gpt2", tmp_path)
    with open(path / "model.safetensors.index.json", "wb") as f:
        f.truncate(40 << 20)
    refused(path, "model.safetensors.index.json", "cannot be read", "limit 33,554,432")


def test_a_scenario_on_a_broken_tokenizer_names_the_file(built, tmp_path, capsys):
    """A scenario file whose text goes to a checkpoint with a broken tokenizer.json: validate's
    located line says what is wrong with the file, not that there are no tokenizer files."""
    path = copy(built, "gpt2", tmp_path)
    (path / "tokenizer.json").write_text('{"model": 3}')
    sc = tmp_path / "s.yaml"
    sc.write_text(f"version: 1\ntitle: t\nmodel: {{pretrained: {path}}}\ninput:\n  text: hello there\n"
                  "steps: 4\npanels: [{kind: tokens}]\n")
    assert main(["validate", str(sc)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s.yaml:5:" in err[0] and "input.text" in err[0] and "tokenizer.json" in err[0] and "tokenizers refused it" in err[0] \
        and "no tokenizer files" not in err[0], err
