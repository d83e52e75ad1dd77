"""A trace's plain-dict config back into the ModelConfig it was made from: every preset round
trips (through JSON too, as a trace stores it), an older dict takes defaults for what it lacks,
and a malformed one is one ConfigError naming its field."""
import dataclasses
import json
from pathlib import Path

import pytest

from lineage.config_dict import config_from_dict
from lineage.configs import ConfigError, KDAConfig, ModelConfig
from lineage.playback.session import Replay
from lineage.playback.trace import TraceError, TraceWriter
from lineage.presets import PRESETS, get_preset

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_round_trips(name):
    cfg = get_preset(name)
    assert config_from_dict(dataclasses.asdict(cfg)) == cfg
    back = config_from_dict(json.loads(json.dumps(dataclasses.asdict(cfg))))    # lists for tuples
    assert back == cfg and isinstance(back.mixers, tuple) and isinstance(back, ModelConfig)
    for kind in set(cfg.mixers):
        assert type(back.mixer_config(kind)) is type(cfg.mixer_config(kind))


def test_an_older_dict_takes_the_defaults_it_lacks():
    d = dataclasses.asdict(get_preset("tiny-kda"))
    del d["embed_std"], d["kda"]["n_key_heads"], d["kda"]["value_dim"]
    cfg = config_from_dict(d)
    assert cfg.embed_std is None and cfg.kda.n_key_heads is None and cfg.kda.value_dim is None
    assert isinstance(cfg.kda, KDAConfig) and cfg.kda.n_heads == get_preset("tiny-kda").kda.n_heads


def test_an_unknown_field_is_ignored_only_when_off():
    d = dataclasses.asdict(get_preset("tiny-kda"))
    d["kda"]["newer_option"], d["newer_section"] = False, None
    assert config_from_dict(d) == get_preset("tiny-kda")
    d["kda"]["newer_option"] = 2
    with pytest.raises(ConfigError, match=r"kda\.newer_option = 2 is not known") as e:
        config_from_dict(d)
    assert e.value.field == ("kda", "newer_option")


@pytest.mark.parametrize("change,words", [
    (lambda d: d["kda"].update(n_heads="two"), "kda.n_heads: expected an integer, got 'two'"),
    (lambda d: d["kda"].update(n_heads=True), "kda.n_heads: expected int, got a boolean"),
    (lambda d: d["kda"].update(lower_bound=None), "kda.lower_bound: expected float, got null"),
    (lambda d: d.update(mixers="kda"), "mixers: expected a list, got 'kda'"),
    (lambda d: d.update(mixers=["kda", 2]), "mixers: expected a list of names, got ['kda', 2]"),
    (lambda d: d.update(kda=[1]), "kda: expected a mapping, got [1]"),
    (lambda d: d.update(mixers=["kda", "mamba"]), "layer 1: unknown mixer 'mamba'"),
    (lambda d: d.update(mixers=["kda"] * 3), "3 mixers but 2 ffns"),
    (lambda d: d["kda"].update(n_heads=0), "kda.n_heads must be >= 1"),
])
def test_a_malformed_dict_is_one_line(change, words):
    d = dataclasses.asdict(get_preset("tiny-kda"))
    change(d)
    with pytest.raises(ConfigError) as e:
        config_from_dict(d)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("section, name, value", [
    (None, "d_model", 2.5), (None, "d_model", True), (None, "d_model", None), (None, "norm_eps", "x"),
    (None, "tie_embeddings", 3), (None, "mixers", "kda"), (None, "mixers", [1, 2]), (None, "kda", 5),
    (None, "name", 3), ("kda", "n_key_heads", True), ("kda", "n_heads", [1]), ("kda", "lower_bound", None),
])
def test_a_scenario_and_a_trace_refuse_a_value_in_the_same_words(section, name, value):
    """One type check for config values: an override in a scenario (YAML) and a trace's config
    dict (JSON) give the same reason for the same bad value."""
    from lineage.scenario import loads
    from lineage.scenario.problems import ScenarioError
    d = dataclasses.asdict(get_preset("tiny-kda"))
    (d if section is None else d[section])[name] = value
    with pytest.raises(ConfigError) as e:
        config_from_dict(d)
    field = name if section is None else f"{section}.{name}"
    assert str(e.value).startswith(f"{field}: ")
    reason = str(e.value).removeprefix(f"{field}: ")
    over = json.dumps({name: value} if section is None else {section: {name: value}})   # JSON is YAML
    with pytest.raises(ScenarioError) as s:
        loads(f"version: 1\ntitle: t\nmodel: {{preset: tiny-kda, overrides: {over}}}\n"
              "input: {text: hello}\nsteps: 2\n", "m.yaml")
    assert [str(p).split(": ", 1)[1] for p in s.value.problems] == [f"model.overrides.{field}: {reason}"]


def test_a_replay_rebuilds_its_configs_and_refuses_a_bad_one(tmp_path):
    old = Replay(ROOT / "tests/lineage/data/lineage_compare_2steps.trace")     # recorded before embed_std
    assert [c.name for c in old.configs] == [m["config"]["name"] for m in old.info["models"]]
    assert old.model_config(1).deltanet.n_key_heads is None
    toy = Replay(ROOT / "tests/lineage/data/recall_5steps.trace")
    assert toy.configs == [None, None]                                          # toy memories have none
    info = {"title": "t", "models": [{"name": "m", "kind": "lm", "config": dataclasses.asdict(get_preset("tiny-kda"))}]}
    info["models"][0]["config"]["mixers"] = ["mamba", "kda"]
    with TraceWriter(tmp_path / "bad.trace", "", info):
        pass
    with pytest.raises(TraceError, match=r"bad\.trace: corrupt: the header's info has a bad config for model 0 "
                                         r"\(m\): tiny-kda: layer 0: unknown mixer 'mamba'"):
        Replay(tmp_path / "bad.trace")
