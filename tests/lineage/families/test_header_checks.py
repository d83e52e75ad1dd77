"""A checkpoint tensor of the wrong shape, name or dtype is refused from the safetensors headers
alone (issue 31): before any destination is allocated or any tensor is read, and without the meta
build that imported torch._dynamo (torch's meta kernels for random draws and elementwise math pull
it in: 2 s of a 2 s refusal on the 2-core box). How fast: bench_reliability, not a timed test."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import lineage  # noqa: E402
from lineage.model import LM  # noqa: E402
from lineage.presets import PRESETS  # noqa: E402
from lineage.families import PretrainedError, read_model_config  # noqa: E402
from lineage.families.loader import build_on_meta  # noqa: E402
from lineage.families.shards import Shards  # noqa: E402

from .test_gpt2 import gpt2  # noqa: E402
from .test_hybrids import kimi, qwen  # noqa: E402
from .test_mamba2_checkpoint import mamba  # noqa: E402

BUILDERS = {"gpt2": gpt2, "qwen3_next": qwen, "kimi_linear": kimi, "mamba2": mamba}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    for name, make in BUILDERS.items():
        make(root / name)
    return root


def spoiled(built, tmp_path, family, name, shape):
    """A copy of the family's checkpoint with tensor `name` replaced: zeros of `shape`, or for
    "int32" the same values as integers."""
    path = tmp_path / family
    shutil.copytree(built / family, path)
    sd = load_file(str(path / "model.safetensors"))
    sd[name] = sd[name].int() if shape == "int32" else torch.zeros(shape)
    save_file(sd, str(path / "model.safetensors"))
    return path


# (family, tensor, its new shape, words of the one line)
CASES = {
    "gpt2 3-D projection": ("gpt2", "transformer.h.0.attn.c_attn.weight", (36, 108, 1), "implies (108, 36)"),
    "gpt2 last layer narrower": ("gpt2", "transformer.h.2.mlp.c_proj.weight", (144, 30), "implies (36, 144)"),
    "gpt2 int32 weights": ("gpt2", "transformer.h.1.mlp.c_fc.weight", "int32", "holds int32 values"),
    "qwen3_next fused qkvz transposed": ("qwen3_next", "model.layers.1.linear_attn.in_proj_qkvz.weight", (40, 124),
                                         "implies (124, 40)"),
    "kimi expert narrower": ("kimi_linear", "model.layers.1.block_sparse_moe.experts.3.w2.weight", (40, 23),
                             "implies (40, 24)"),
    "mamba2 in_proj a row short": ("mamba2", "backbone.layers.1.mixer.in_proj.weight", (136, 30), "implies (137, 30)"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_wrong_tensor_is_refused_before_any_tensor_is_read(built, tmp_path, monkeypatch, case):
    family, name, shape, words = CASES[case]
    path = spoiled(built, tmp_path, family, name, shape)

    def read(self, tensor):
        raise AssertionError(f"read {tensor} before the headers were checked")

    monkeypatch.setattr(Shards, "get", read)
    with pytest.raises(PretrainedError) as e:
        lineage.load_pretrained(path)
    msg = str(e.value)
    assert "\n" not in msg and f"{family}/model.safetensors: tensor {name}" in msg and words in msg, msg


PROBE = """
import sys
import lineage
from lineage.families import PretrainedError
try:
    lineage.load_pretrained(sys.argv[1])
    print("loaded", "torch._dynamo" in sys.modules)
except PretrainedError as e:
    print("refused", "torch._dynamo" in sys.modules, e)
"""


@pytest.mark.parametrize("spoil", [None, ("model.layers.3.mlp.experts.2.up_proj.weight", (23, 40))])
def test_a_load_or_a_refusal_never_imports_dynamo(built, tmp_path, spoil):
    """In a fresh process: a model of every kind of layer Qwen3-Next has (its short convs draw
    randn and scale it, its norms' pieces add one) built and split on meta, with no torch._dynamo."""
    path = built / "qwen3_next" if spoil is None else spoiled(built, tmp_path, "qwen3_next", *spoil)
    out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.startswith("refused False" if spoil else "loaded False"), out.stdout + out.stderr


def _params(model) -> dict:
    return {n: (tuple(p.shape), p.dtype) for n, p in model.named_parameters()}


def test_the_shapes_only_build_has_the_models_parameters(built):
    """build_on_meta skips draws and elementwise math: it must still give every parameter of the
    plain meta build, at its shape and dtype, for every runnable preset and these families."""
    cfgs = [fn() for fn in PRESETS.values()]
    cfgs = [c for c in cfgs if not c.shape_only] + [read_model_config(built / f)[0] for f in BUILDERS]
    for cfg in cfgs:
        with torch.device("meta"):
            want = _params(LM(cfg))
        assert _params(build_on_meta(cfg)) == want, cfg.name


@pytest.mark.parametrize("case", ["gpt2 int32 weights", "kimi expert narrower"])
def test_validate_refuses_a_wrong_tensor_from_its_header(built, tmp_path, monkeypatch, capsys, case):
    """`lineage validate DIR`, and validate of a scenario naming DIR, run the same header checks
    as a load (before, both exited 0 and only `run` found the tensor): one line, exit 2, no tensor read."""
    from lineage.cli.main import main
    family, name, shape, words = CASES[case]
    path = spoiled(built, tmp_path, family, name, shape)
    sc = tmp_path / "s.yaml"
    sc.write_text(f"version: 1\ntitle: t\nmodel: {{pretrained: {family}}}\ninput: {{ids: [1, 2, 3]}}\n")

    def read(self, tensor):
        raise AssertionError(f"validate read {tensor}")

    monkeypatch.setattr(Shards, "get", read)
    capsys.readouterr()
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{path / 'model.safetensors'}: tensor {name}") and words in err[0], err
    assert main(["validate", str(sc)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{sc}:3:21: model.pretrained: {path / 'model.safetensors'}: tensor "
                                               f"{name}") and words in err[0], err
    assert main(["validate", str(built / family)]) == 0          # the unspoiled folder still validates


def test_a_parameter_filled_twice_is_named_as_such(built, tmp_path):
    """Two tensors of the file landing on one parameter (GPT-2's names with and without the
    `transformer.` prefix) are refused as filled twice, not as missing weights."""
    path = tmp_path / "gpt2"
    shutil.copytree(built / "gpt2", path)
    sd = load_file(str(path / "model.safetensors"))
    sd["h.0.attn.c_attn.weight"] = sd["transformer.h.0.attn.c_attn.weight"].clone()
    save_file(sd, str(path / "model.safetensors"))
    with pytest.raises(PretrainedError, match="more than once") as e:
        lineage.load_pretrained(path)
    assert "lacks" not in str(e.value)
