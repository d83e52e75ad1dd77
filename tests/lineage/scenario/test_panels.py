"""`panel_layers` is the one answer to "which layers can this panel show": validation, the layers
a checkpoint's frames keep, `lineage run DIR`'s default panels and the panels all agree with it."""
import typing

import pytest

from lineage.playback import runners
from lineage.playback.session import Session
from lineage.families.scenario import default_panels
from lineage.scenario import loads
from lineage.scenario.panels import LAYER_PANELS, MEMORY_PANELS, PANEL_KINDS, WATCHED, panel_layers
from lineage.scenario.problems import ScenarioError
from lineage.scenario.schema import Panel
from lineage.app.panels import PANELS

# every mixer kind once, MoE every other layer, MLA with its output gate
MODEL = """version: 1
title: every mixer
model:
  config:
    mixers: [softmax, linear, deltanet, gdn, kda, mla]
    ffns: [dense, moe, dense, moe, dense, moe]
    attention: {d_model: 64, n_heads: 2}
    linear: {}
    deltanet: {}
    gdn: {}
    kda: {}
    mla: {output_gate: true}
    dense: {}
    moe: {n_experts: 4, top_k: 2, expert_dim: 32}
input: {text: "abc"}
"""
EXPECTED = {"state": (1, 2, 3, 4), "decay": (3, 4), "gate": (5,), "attention": (0, 1, 2, 3, 4, 5), "routing": (1, 3, 5)}
ASKED = [None, *range(6)]


def scenario(panels: str = "[{kind: tokens}]"):
    return loads(MODEL + f"panels: {panels}\n")


@pytest.fixture(scope="module")
def session():
    s = Session(scenario(), device="cpu")
    yield s
    s.close()


def test_panel_kinds_are_one_list():
    assert typing.get_args(Panel.model_fields["kind"].annotation) == PANEL_KINDS
    assert set(PANELS) == set(PANEL_KINDS)
    assert set(LAYER_PANELS) | set(WATCHED) | set(MEMORY_PANELS) <= set(PANEL_KINDS)


@pytest.mark.parametrize("kind", LAYER_PANELS)
def test_the_layers_each_panel_kind_can_show(kind, session):
    cfg = session.model_config(0)
    assert panel_layers(cfg, kind).layers == EXPECTED[kind]
    for asked in ASKED:
        want = asked if asked in EXPECTED[kind] else EXPECTED[kind][0]
        assert panel_layers(cfg, kind, asked).shown == want
    if kind == "attention":     # unasked, a cache's rows come first where there is a cache
        flipped = type(cfg)(**{**cfg.__dict__, "mixers": cfg.mixers[::-1]}) if hasattr(cfg, "__dict__") else None
        if flipped is not None:
            assert panel_layers(flipped, kind).shown == 0           # mla, now first
            assert panel_layers(type(cfg)(**{**cfg.__dict__, "mixers": ("kda",) + cfg.mixers[1:]}), kind).shown == 5


@pytest.mark.parametrize("kind", LAYER_PANELS)
def test_the_panel_draws_what_panel_layers_says(kind, session):
    cfg = session.model_config(0)
    assert tuple(PANELS[kind].prepare(session, 0, {"kind": kind}, 100).layers) == EXPECTED[kind]
    for asked in ASKED:
        layers, shown = panel_layers(cfg, kind, asked)
        view = PANELS[kind].prepare(session, 0, {"kind": kind, "layer": asked}, 100)
        assert (tuple(view.layers), view.layer) == (layers, shown), asked


@pytest.mark.parametrize("kind", LAYER_PANELS)
def test_validation_refuses_exactly_the_layers_outside(kind, session):
    """A layer the panel cannot show is refused (routing falls back to the first MoE layer, as
    it always did); one it can show passes."""
    layers = panel_layers(session.model_config(0), kind).layers
    for asked in ASKED:
        text = f"[{{kind: {kind}}}]" if asked is None else f"[{{kind: {kind}, layer: {asked}}}]"
        try:
            scenario(text)
            ok = True
        except ScenarioError:
            ok = False
        assert ok == (asked is None or asked in layers or kind == "routing"), asked


@pytest.mark.parametrize("kind", LAYER_PANELS)
def test_a_large_checkpoint_keeps_the_layers_its_panels_show(kind, session, monkeypatch):
    monkeypatch.setattr(runners, "WATCH_ALL_BYTES", 0)      # as if every state were megabytes
    cfg = session.model_config(0)
    for asked in [None, *EXPECTED[kind]]:
        sc = scenario(f"[{{kind: {kind}}}]" if asked is None else f"[{{kind: {kind}, layer: {asked}}}]")
        want = {panel_layers(cfg, kind, asked).shown} if kind in WATCHED else set()
        assert runners._watched(sc, 0, cfg) == want


def test_watched_layers_limit_only_the_watched_panels(session):
    cfg = session.model_config(0)
    assert panel_layers(cfg, "state", 4, watch={2, 4}) == ((2, 4), 4)
    assert panel_layers(cfg, "decay", 3, watch={2, 4}) == ((4,), 4)
    assert panel_layers(cfg, "routing", watch={2, 4}).layers == EXPECTED["routing"]


def test_checkpoint_default_panels_open_where_panel_layers_points(session):
    cfg = session.model_config(0)
    panels = default_panels(cfg)
    assert [p["kind"] for p in panels] == ["tokens", "state", "decay", "routing", "cache"]
    for p in panels:
        if p["kind"] in LAYER_PANELS:
            assert p["layer"] == panel_layers(cfg, p["kind"]).shown


def test_a_panel_no_layer_can_show_is_one_clear_line(tmp_path, capsys):
    from lineage.cli.main import main
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: hi}\npanels: [{kind: decay}]\n"
                   .replace("tiny-kda", "tiny-deltanet"))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"{bad}:5:17: panels[0].kind: tiny-deltanet has no layer the decay panel can show (it needs gdn/kda/mamba2)"
