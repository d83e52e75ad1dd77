"""The mixer registry (lineage.configs.MIXERS): one descriptor per kind, and each descriptor's
claims true of the config class, the module and the observations it names."""
import dataclasses
import importlib
import inspect
import pkgutil
import typing

import pytest
import torch
from rich.style import Style
from torch import nn

from lineage.ops import kernels
import lineage.mixers
from lineage import ops
from lineage.backend import set_backend
from lineage.configs import FFNS, MIXERS, ConfigError, MechanismConfig, ModelConfig
from lineage.model import LM, mixer_class
from lineage.presets import PRESETS, get_preset
from lineage.scenario.schema import MemorySpec
from lineage.observed import AttentionObs, StateObs, StepObs

KINDS = list(MIXERS)


def one_layer(kind: str, **options) -> ModelConfig:
    """A small one-layer model of this mixer kind (its config's defaults at d_model 32)."""
    m = MIXERS[kind]
    sub = m.config(d_model=32, **options)
    return ModelConfig(name=kind, d_model=32, mixers=(kind,), ffns=("dense",),
                       **{m.field: sub, "dense": FFNS["dense"].config(d_model=32, d_ff=32)}).check()


def observed(cfg: ModelConfig):
    torch.manual_seed(0)
    model = LM(cfg).eval()
    state = None
    with torch.no_grad():
        for t in (1, 2):                                   # the second step reads a non-empty memory
            obs = StepObs()
            _, state = model.step(torch.tensor([t]), state, obs)
    return obs.layers[0].mixer


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_a_config_field_module_and_glyph(kind):
    m = MIXERS[kind]
    assert m.name == kind and m.label
    assert issubclass(m.config, MechanismConfig) and dataclasses.is_dataclass(m.config)
    assert typing.get_type_hints(ModelConfig)[m.field] == m.config | None
    cls = mixer_class(kind)
    assert issubclass(cls, nn.Module) and callable(cls.step)
    assert typing.get_type_hints(cls.__init__)["cfg"] is m.config
    assert len(m.glyph) == 1 and Style.parse(m.colour).bgcolor is not None


def test_glyphs_and_fields_are_one_per_kind():
    assert len({m.glyph for m in MIXERS.values()}) == len(MIXERS)
    assert len({m.field for m in MIXERS.values()}) == len(MIXERS)


def test_every_mixer_config_field_and_module_has_a_descriptor():
    """A mixer added on one side only fails here: a ModelConfig field of a mechanism config, or
    a mechanism module whose constructor takes a mixer config, with no descriptor naming it."""
    ffn_classes = {f.config for f in FFNS.values() if f.config}
    fields = {name for name, tp in typing.get_type_hints(ModelConfig).items()
              for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, MechanismConfig)
              and a not in ffn_classes}
    assert fields == {m.field for m in MIXERS.values()}
    named = {m.module for m in MIXERS.values()}
    configs = {m.config for m in MIXERS.values()}
    found = set()
    for info in pkgutil.walk_packages(lineage.mixers.__path__, "lineage.mixers."):   # the mixers' folders too
        mod = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod.__name__ and issubclass(cls, nn.Module):
                hint = typing.get_type_hints(cls.__init__).get("cfg")
                if hint in configs:
                    assert f"{mod.__name__}:{name}" in named, f"{name} takes a mixer config but no descriptor names it"
                    found.add(f"{mod.__name__}:{name}")
    assert found == named                                  # the walk reached every module a descriptor names


@pytest.mark.parametrize("kind, options, field", [
    ("softmax", {"n_heads": 64}, "n_heads"),                       # heads of 0 channels
    ("softmax", {"n_heads": 4, "n_kv_heads": 3}, "n_kv_heads"),
    ("softmax", {"rope_dim": 3}, "rope_dim"),
    ("deltanet", {"n_heads": 3, "n_key_heads": 2}, "n_key_heads"),
    ("gdn", {"n_heads": 3, "n_key_heads": 2}, "n_key_heads"),      # DeltaNet's rule, inherited
    ("kda", {"gate_form": "other"}, "gate_form"),
    ("mamba2", {"n_heads": 3, "n_groups": 2}, "n_groups"),
    ("gated_conv", {"conv_size": 0}, "conv_size"),
])
def test_a_mixer_configs_own_rule_names_its_field(kind, options, field):
    """A rule a mixer's config keeps beside it (its `check`) runs in ModelConfig.check and names
    the field, so `lineage validate` points at the override that broke it."""
    with pytest.raises(ConfigError, match=f"^{kind}: {MIXERS[kind].field}\\.") as e:
        one_layer(kind, **options)
    assert e.value.field == (MIXERS[kind].field, field)


@pytest.mark.parametrize("kind", KINDS)
def test_capabilities_are_what_the_layer_observes(kind):
    """holds_state: its step reports S (what the state panel draws); has_decay: a decay
    (the decay panel), from the `_decay` eval's probe wraps; attends: attention rows over its
    cache; gate: its output gate, when the config asks for one."""
    m = MIXERS[kind]
    gated = "output_gate" in {f.name for f in dataclasses.fields(m.config)}
    mx = observed(one_layer(kind, **({"output_gate": True} if gated else {})))
    assert isinstance(mx, StateObs) == m.holds_state
    assert (getattr(mx, "alpha", None) is not None) == m.has_decay
    assert (not m.has_decay) or callable(getattr(mixer_class(kind), "_decay", None))
    assert isinstance(mx, AttentionObs) == m.attends
    assert (getattr(mx, "gate", None) is not None) == m.gate
    assert not m.gate or gated                            # the gate panel's check reads config.output_gate


@pytest.mark.parametrize("kind", KINDS)
def test_kernel_flag_is_what_kernels_has(kind):
    cls = mixer_class(kind)
    op = getattr(cls, "OP", None)
    assert MIXERS[kind].kernel == (op is not None and hasattr(kernels, op) and hasattr(cls, "backend"))


@pytest.mark.parametrize("kind", KINDS)
def test_aliases_and_tiny_preset_are_real_names(kind):
    m = MIXERS[kind]
    cls = mixer_class(kind)
    rules = typing.get_args(MemorySpec.model_fields["rule"].annotation)
    real = {cls.__name__, getattr(cls, "OP", None), *rules, *(n for n in dir(ops) if not n.startswith("_"))}
    if m.tiny:
        real.add(m.tiny.removeprefix("tiny-"))
        assert m.tiny in PRESETS and set(get_preset(m.tiny).mixers) == {kind}
    assert set(m.aliases) <= real


def test_arena_is_the_registry_tiny_presets_in_order():
    from lineage.cli.evaluation import ARENA
    assert ARENA == ("tiny-softmax", "tiny-linear", "tiny-deltanet", "tiny-gated-deltanet", "tiny-kda", "tiny-mamba2")
    assert ARENA == tuple(m.tiny for m in MIXERS.values() if m.tiny)


def test_a_mixer_without_kernels_stays_on_the_reference(monkeypatch):
    """A new kind that reuses DeltaNet's code with an op only lineage.ops has (simulated: KDA
    renamed): its descriptor says kernel=False, so the Triton backend leaves it on the
    reference, on CUDA too, and it runs; routed to Triton it would fail on a GPU only."""
    monkeypatch.setattr(ops, "new_rule", ops.kda, raising=False)
    monkeypatch.setitem(MIXERS, "kda", dataclasses.replace(MIXERS["kda"], kernel=False))
    model = LM(get_preset("tiny-kda")).eval()
    for b in model.blocks:
        monkeypatch.setattr(b.mixer, "OP", "new_rule")
    set_backend(model, "triton")
    assert {b.mixer.backend for b in model.blocks} == {"reference"}
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        logits, _ = model(ids)
        assert torch.isfinite(logits).all()
        for b in model.blocks:                             # what the descriptor spares it
            b.mixer.backend = "triton"
        with pytest.raises(AttributeError, match="new_rule"):
            model(ids)


def test_kernel_kinds_go_to_triton():
    model = LM(get_preset("k3-mini")).eval()               # KDA layers and MLA layers
    set_backend(model, "triton")
    kernel = [b for b in model.blocks if MIXERS[b.mixer_kind].kernel]
    assert kernel and {b.mixer.backend for b in kernel} == {"triton"}
    assert not any(hasattr(b.mixer, "backend") for b in model.blocks if b not in kernel)


def test_every_ffn_config_field_and_module_has_a_descriptor():
    """As for the mixers: a ModelConfig field of an FFN config, its descriptor and its module
    agree, and the module is built from that config."""
    from torch import nn

    from lineage.model import ffn_class
    configs = {f.config for f in FFNS.values() if f.config}
    fields = {name for name, tp in typing.get_type_hints(ModelConfig).items()
              for a in typing.get_args(tp) if a in configs}
    assert fields == {f.field for f in FFNS.values() if f.field}
    assert {f.glyph for f in FFNS.values()} >= {"d", "e"} and len({f.glyph for f in FFNS.values()}) == len(FFNS)
    for f in FFNS.values():
        if f.module is not None:
            cls = ffn_class(f.name)
            assert issubclass(cls, nn.Module)
    assert [f.name for f in FFNS.values() if f.routes] == ["moe"]
