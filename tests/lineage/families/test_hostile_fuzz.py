"""Checkpoint folders mutated by structure (issue 31): config.json values of every JSON kind at
every field of each family (nested objects' fields too, fields dropped or added, values huge or
nested past the parser), tokenizer files, shard indexes. Each folder loads, or is refused with one
PretrainedError line; no other exception, no warning (how fast each is refused:
tests/benchmarks/bench_reliability.py; a loaded CI box is no clock). The tiny checkpoints are built once per module; each example rewrites one
file of a copy."""
import base64
import json
import shutil
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")
tiktoken = pytest.importorskip("tiktoken")
tokenizers = pytest.importorskip("tokenizers")

import lineage  # noqa: E402
from lineage.arithmetic import count  # noqa: E402
from lineage.families import PretrainedError, read_model_config  # noqa: E402
from lineage.families.tokenizer import load_tokenizer  # noqa: E402

from .test_deepseek_v3 import deepseek  # noqa: E402
from .test_gemma3 import gemma  # noqa: E402
from .test_gpt2 import gpt2  # noqa: E402
from .test_hybrids import kimi, qwen as qwen3_next  # noqa: E402
from .test_lfm2 import lfm2  # noqa: E402
from .test_llama import make as llama  # noqa: E402
from .test_mamba2_checkpoint import mamba  # noqa: E402
from .test_olmo_hybrid import olmo  # noqa: E402
from .test_qwen3_5 import qwen as qwen3_5  # noqa: E402
from .test_tokenizers import kimi_files  # noqa: E402

FAMILIES = {
    "gpt2": gpt2, "llama": llama, "qwen3": lambda p: llama(p, "qwen3"), "kimi_linear": kimi,
    "qwen3_next": qwen3_next, "qwen3_5": lambda p: qwen3_5(p, moe=True, composite=True),
    "olmo_hybrid": olmo, "mamba2": mamba, "deepseek_v3": deepseek, "gemma3_text": gemma, "lfm2": lfm2,
}
FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
DEEP = "\x00deep\x00"        # stands for a value nested past the parser, spliced into the text


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    for name, make in FAMILIES.items():
        make(root / name)
    return root


# any JSON value, and the ones that broke loaders before: zero, negative, past every bound, a
# float where an int goes, NaN (which Python's json reads), long strings and lists, deep nesting
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 130), st.integers(-2 ** 70, 2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from([0, 1, 2, 1 << 24, (1 << 24) + 1, 1 << 40, 10 ** 400, 0.5, 4.0, 1e308, "16", "abc", "silu",
                     "full_attention", "linear_attention", "x" * 5000, DEEP]),
)
containers = st.recursive(scalars, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(
    st.text(max_size=6), inner, max_size=4), max_leaves=12)
# a scalar as often as a container, so that in-range sizes reach the families' arithmetic
values = st.one_of(scalars, containers, st.sampled_from([[0] * 70_000, list(range(8)), ["linear_attention"] * 4,
                                                         {"rope_type": "yarn"}]))
values = values.map(lambda v: json.loads(json.dumps(v)))    # a copy: a later mutation must not edit the sample

def _dumps(obj) -> str:
    text = json.dumps(obj)
    return text.replace(json.dumps(DEEP), "[" * 50_000 + "]" * 50_000)


def _fields(cfg: dict) -> list[tuple]:
    """Every field's path: the top level's, and one level into each nested object."""
    paths = [(k,) for k in cfg]
    paths += [(k, j) for k, v in cfg.items() if isinstance(v, dict) for j in v]
    return sorted(paths)


def _mutate(cfg: dict, data) -> dict:
    cfg = json.loads(json.dumps(cfg))
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["set", "set", "set", "drop", "add"]))
        path = data.draw(st.sampled_from(_fields(cfg))) if cfg else ("x",)
        owner = cfg
        for k in path[:-1]:
            owner = owner[k] if isinstance(owner.get(k), dict) else {}
        if op == "drop":
            owner.pop(path[-1], None)
        else:
            owner[path[-1] if op == "set" else data.draw(st.text(min_size=1, max_size=8))] = data.draw(values)
    return cfg


def _one_line_or_loads(load):
    """What a loader must do with a hostile file: return, or raise PretrainedError in one line."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return load()
        except PretrainedError as e:
            assert str(e) and "\n" not in str(e), repr(str(e))
            return None


@pytest.fixture
def folder(built, tmp_path):
    def copy(family):
        shutil.copytree(built / family, tmp_path / family, dirs_exist_ok=True)
        return tmp_path / family
    return copy


@pytest.mark.parametrize("family", FAMILIES)
@FUZZ
@given(data=st.data())
def test_config_values_of_every_kind_at_every_field(folder, family, data):
    path = folder(family)
    original = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(_dumps(_mutate(original, data)))
    got = _one_line_or_loads(lambda: read_model_config(path))
    if got is not None:
        assert count(got[0])["total"] > 0            # `lineage params` answers too
        _one_line_or_loads(lambda: lineage.load_pretrained(path))


def _tokenizer_json() -> dict:
    bpe = tokenizers.models.BPE(vocab={"a": 0, "b": 1, "ab": 2, " ": 3}, merges=[("a", "b")])
    tok = tokenizers.Tokenizer(bpe)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return json.loads(tok.to_str())


def _paths(obj, prefix=()) -> list[tuple]:
    out = [prefix]
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in list(items)[:40]:       # a long list's first entries stand for the rest
        out += _paths(v, prefix + (k,))
    return out


def _encodes(tok) -> None:
    if tok is not None:                 # a tokenizer that loads also works
        tok.decode(tok.encode("ab ba 文 [BOS]"))


@FUZZ
@given(data=st.data())
def test_tokenizer_json_mutated_by_structure(tmp_path, data):
    doc = _tokenizer_json()
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)[1:]))
        owner = doc
        for k in path[:-1]:
            owner = owner[k]
        owner[path[-1]] = data.draw(values)
    (tmp_path / "tokenizer.json").write_text(_dumps(doc))
    _encodes(_one_line_or_loads(lambda: load_tokenizer(tmp_path)))


token = st.one_of(st.binary(min_size=1, max_size=4).map(base64.b64encode),
                  st.binary(max_size=6), st.sampled_from([b"@@@@", b"YQ==", b"", b"====", b"YWI"]))
rank = st.one_of(st.integers(0, 400).map(lambda i: b"%d" % i), st.sampled_from([b"-1", b"1.5", b"x", b"9" * 30]))


@FUZZ
@given(lines=st.lists(st.tuples(token, rank), max_size=6), cut=st.integers(0, 256),
       specials=st.one_of(st.none(), st.just({}), st.just({"300": {"content": "[BOS]"}}), values))
def test_tiktoken_files_mutated_by_structure(tmp_path, lines, cut, specials):
    kimi_files(tmp_path)
    good = (tmp_path / "tiktoken.model").read_bytes().splitlines()
    body = good[:cut] + [t + b" " + r for t, r in lines] + good[cut + 1:]
    (tmp_path / "tiktoken.model").write_bytes(b"\n".join(body) + b"\n")
    if specials is None:            # no tokenizer_config.json: the ranks alone
        (tmp_path / "tokenizer_config.json").unlink()
    else:
        (tmp_path / "tokenizer_config.json").write_text(_dumps({"added_tokens_decoder": specials}))
    _encodes(_one_line_or_loads(lambda: load_tokenizer(tmp_path)))


shard_names = st.one_of(values, st.sampled_from(["model.safetensors", "../model.safetensors", "/etc/passwd", "",
                                                  ".", "config.json", "model-2.safetensors", "a\\b", "x" * 300]))


@FUZZ
@given(data=st.data())
def test_shard_indexes_mutated_by_structure(folder, data):
    path = folder("gpt2")
    names = list(json.loads((path / "model.safetensors")
                            .read_bytes()[8:8 + int.from_bytes((path / "model.safetensors").read_bytes()[:8], "little")]))
    names = [n for n in names if n != "__metadata__"]
    weight_map = data.draw(st.one_of(
        values,
        st.just({n: "model.safetensors" for n in names}),
        st.dictionaries(st.sampled_from(names) | st.text(max_size=8), shard_names, max_size=len(names)),
    ))
    index = data.draw(st.one_of(st.just({"weight_map": weight_map}), values,
                                st.just({"metadata": {"total_size": -1}, "weight_map": weight_map})))
    (path / "model.safetensors.index.json").write_text(_dumps(index))
    _one_line_or_loads(lambda: lineage.load_pretrained(path))

