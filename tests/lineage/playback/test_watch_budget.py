"""runners._watched decides from the bytes a frame's states would take whether a checkpoint's
frames keep every layer: those bytes are the mixer config's own answer (state_bytes), equal to
the state a model step makes, here for Mamba-2, whose S is state_dim x head_dim, not head_dim
x head_dim, at the tiny preset's width and at a published one."""
import dataclasses

import pytest
import torch

from lineage.configs import Mamba2Config
from lineage.mixers.deltanet.module import DeltaState
from lineage.model import LM
from lineage.observed import StepObs
from lineage.playback import runners
from lineage.playback.session import Session
from lineage.presets import get_preset
from lineage.scenario import loads

SCENARIO = """\
version: 1
title: watch budget
model: {preset: tiny-mamba2}
input: {text: "a b c"}
panels: [{kind: state, layer: 1}]
"""


def published_width():
    """Mamba-2 2.7B's mixer (d_model 2560, 80 heads of 64 channels, state_dim 128) in one layer."""
    cfg = get_preset("tiny-mamba2")
    d = 2560
    return dataclasses.replace(
        cfg, name="mamba2-width", d_model=d, mixers=("mamba2",), ffns=("none",),
        mamba2=Mamba2Config(d_model=d, n_heads=80, head_dim=64, state_dim=128),
        dense=dataclasses.replace(cfg.dense, d_model=d)).check()


def step_states(cfg) -> list:
    """The mixer states one step of the model (float32, on the CPU) leaves, layer by layer."""
    torch.manual_seed(0)
    model = LM(cfg).eval()
    with torch.inference_mode():
        _, st = model.step(torch.tensor([7]), None, StepObs())
    return [s for s in st.layers if isinstance(s, DeltaState)]


@pytest.mark.parametrize("make", [lambda: get_preset("tiny-mamba2"), published_width], ids=["tiny", "published"])
def test_the_watch_budget_counts_the_state_a_step_makes(make, monkeypatch):
    cfg = make()
    states = step_states(cfg)
    assert len(states) == cfg.n_layers
    per_layer = [cfg.layer_mixer_config(i) for i in range(cfg.n_layers)]
    # the config's answer is the state: S in float32, and S plus the conv's cached inputs
    assert sum(s.S.nbytes for s in states) == sum(c.state_bytes(4, 0) for c in per_layer)
    assert sum(s.S.nbytes + s.conv.nbytes for s in states) == sum(c.state_bytes(4, 4) for c in per_layer)
    # a frame keeps S and dS, each of S's shape, in float16: past the budget by one byte it
    # keeps the watched layers only, at it every layer
    frame = sum(2 * 2 * s.S.numel() for s in states)
    sc = loads(SCENARIO)
    monkeypatch.setattr(runners, "WATCH_ALL_BYTES", frame)
    assert runners._watched(sc, 0, cfg) is None
    monkeypatch.setattr(runners, "WATCH_ALL_BYTES", frame - 1)
    assert runners._watched(sc, 0, cfg) == frozenset({min(1, cfg.n_layers - 1)})


def test_the_estimate_is_what_a_frame_of_the_preset_keeps():
    """The frames a session makes of tiny-mamba2 hold S and dS of every layer in float16: the
    bytes the budget is weighed against."""
    cfg = get_preset("tiny-mamba2")
    s = Session(loads(SCENARIO), device="cpu")
    try:
        arrays = s.frame(0).arrays
        kept = sum(arrays[f"m0/l{i}/{q}"].nbytes for i in range(cfg.n_layers) for q in ("S", "dS"))
    finally:
        s.close()
    assert kept == sum(2 * cfg.layer_mixer_config(i).state_bytes(runners.FRAME_BYTES, 0) for i in range(cfg.n_layers))
