"""Bad checkpoint directories: one line naming the file or field, never a traceback or unpickling."""
import json
import os
import shutil

import pytest

pytest.importorskip("transformers")
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import lineage  # noqa: E402
from lineage.families import PretrainedError  # noqa: E402

from .test_gpt2 import gpt2  # noqa: E402


@pytest.fixture
def ckpt(tmp_path):
    gpt2(tmp_path / "m")
    return tmp_path / "m"


def refused(path, *words):
    with pytest.raises(PretrainedError) as e:
        lineage.load_pretrained(path)
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg
    return msg


def edit_config(path, **kw):
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(kw)
    (path / "config.json").write_text(json.dumps(cfg))


def test_pickle_refused_with_how_to_convert(ckpt):
    (ckpt / "model.safetensors").unlink()
    (ckpt / "pytorch_model.bin").write_bytes(b"\x80\x04 not to be unpickled")
    refused(ckpt, "pytorch_model.bin", "never loaded", "save_file")


def test_truncated_safetensors(ckpt):
    f = ckpt / "model.safetensors"
    os.truncate(f, f.stat().st_size - 100)
    refused(ckpt, "model.safetensors", "not a usable safetensors file")


def test_junk_safetensors(ckpt):
    (ckpt / "model.safetensors").write_bytes(b"junk" * 10)
    refused(ckpt, "model.safetensors")


def test_inconsistent_shapes(ckpt):
    sd = load_file(str(ckpt / "model.safetensors"))
    sd["transformer.h.1.mlp.c_fc.weight"] = torch.zeros(36, 143)
    save_file(sd, str(ckpt / "model.safetensors"))
    refused(ckpt, "transformer.h.1.mlp.c_fc.weight", "shape")


def test_missing_and_unknown_tensors(ckpt):
    sd = load_file(str(ckpt / "model.safetensors"))
    del sd["transformer.h.2.ln_2.bias"]
    save_file(sd, str(ckpt / "model.safetensors"))
    refused(ckpt, "blocks.2.norm2.bias", "lacks")
    sd = load_file(str(ckpt / "model.safetensors"))
    sd["transformer.h.2.ln_2.bias"] = torch.zeros(36)
    sd["transformer.h.0.adapter.weight"] = torch.zeros(3)
    save_file(sd, str(ckpt / "model.safetensors"))
    refused(ckpt, "transformer.h.0.adapter.weight", "not part of")


def test_nan_weights(ckpt):
    sd = load_file(str(ckpt / "model.safetensors"))
    sd["transformer.wpe.weight"][3, 4] = float("nan")
    save_file(sd, str(ckpt / "model.safetensors"))
    refused(ckpt, "transformer.wpe.weight", "NaN")


def test_missing_shard(ckpt, tmp_path):
    from transformers import GPT2LMHeadModel
    GPT2LMHeadModel.from_pretrained(str(ckpt)).save_pretrained(str(tmp_path / "s"), max_shard_size="20KB")
    shards = sorted((tmp_path / "s").glob("model-*.safetensors"))
    assert len(shards) > 2
    model, _ = lineage.load_pretrained(tmp_path / "s")           # sharded loads
    shards[1].unlink()
    refused(tmp_path / "s", shards[1].name, "missing")


def test_config_problems(ckpt):
    edit_config(ckpt, model_type="gpt3")
    refused(ckpt, "model_type 'gpt3'", "did you mean 'gpt2'")
    edit_config(ckpt, model_type="gpt2", rotary_pct=0.5)
    refused(ckpt, "rotary_pct", "does not understand")
    cfg = json.loads((ckpt / "config.json").read_text())
    del cfg["rotary_pct"]
    cfg["activation_function"] = "relu"
    (ckpt / "config.json").write_text(json.dumps(cfg))
    refused(ckpt, "activation_function", "'relu'")
    edit_config(ckpt, activation_function="gelu_new", n_embd="wide")
    refused(ckpt, "n_embd", "integer")
    (ckpt / "config.json").write_text("{not json")
    refused(ckpt, "config.json", "JSON")
    (ckpt / "config.json").unlink()
    refused(ckpt, "no config.json")


def test_hub_cache_folder(ckpt, tmp_path):
    """The hub cache: snapshots/<hash>/ holds links into blobs/, refs/main names the hash."""
    repo = tmp_path / "models--openai--tiny"
    commit = "abc123" + "0" * 34                 # refs/main must hold a commit id: 40 hex digits
    snap = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    for f in ckpt.iterdir():
        blob = repo / "blobs" / f"sha-{f.name}"
        shutil.copy(f, blob)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    model, _ = lineage.load_pretrained(repo)
    assert model.cfg.name == "models--openai--tiny"


def test_not_a_directory(tmp_path):
    refused(tmp_path / "nothing", "not a directory")


@pytest.mark.parametrize("weight_map, words", [
    ([], ("weight_map", "expected an object", "list")),
    ("model.safetensors", ("weight_map", "str")),
    ({"wte.weight": 7}, ("tensor wte.weight", "7", "not a file")),
    ({"wte.weight": "..\\evil.safetensors"}, ("not a file",)),
])
def test_index_whose_weight_map_is_not_names_of_files(ckpt, weight_map, words):
    (ckpt / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    refused(ckpt, "model.safetensors.index.json", *words)
