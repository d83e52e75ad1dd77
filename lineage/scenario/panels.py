"""The panel kinds a scenario may name, and the one answer to "which layers can this panel show".

Validation refuses a layer outside `panel_layers`, a checkpoint's frames keep the layers it
picks (`playback.runners._watched`), `lineage run DIR` opens a panel where it finds a layer
(`pretrained.scenario`), and the panels draw its layers and step their pickers through them.
What a layer's mixer has is its descriptor's flag (`lineage.configs.MIXERS`), never its name.
Torch-free.
"""
from __future__ import annotations

from typing import NamedTuple

from ..configs import FFNS, MIXERS

PANEL_KINDS = ("state", "decay", "routing", "depth", "cache", "tokens", "captions", "lineage", "figure", "recall", "gate",
               "attention")

# the panels that show one layer's mixer: the descriptor flag that layer's mixer needs
NEEDS = {"state": "holds_state", "decay": "has_decay", "gate": "gate", "attention": "attends"}
# the panels that show one layer at a time: those above, and routing (a layer whose ffn is a MoE)
LAYER_PANELS = (*NEEDS, "routing")
# the panels whose fields a checkpoint's frames keep for its watched layers only (observe.lm_fields)
WATCHED = ("state", "decay", "attention")
# the panels a toy memory (one hand-set layer) has something for
MEMORY_PANELS = ("state", "decay", "tokens", "recall")


class PanelLayers(NamedTuple):
    layers: tuple[int, ...]    # every layer the panel can show, in order
    shown: int | None          # the one it shows: the layer asked for if it is one of them, else the first


def mixer_kinds(kind: str) -> tuple[str, ...]:
    """The mixer kinds whose layers a panel of this kind can show (state: linear, deltanet, ...).
    The attention panel shows every mixer: a recurrent state's rows are the attention it
    implements (playback.effective), beside a cache's softmax rows."""
    if kind == "attention":
        return tuple(name for name, m in MIXERS.items() if m.attends or m.holds_state)
    return tuple(name for name, m in MIXERS.items() if getattr(m, NEEDS[kind]))


def panel_layers(cfg, kind: str, asked: int | None = None, watch=None) -> PanelLayers:
    """The layers of a ModelConfig that a panel of this kind (one of LAYER_PANELS) can show, and
    the one it shows. `watch`: the layers a checkpoint's frames keep (None: all of them)."""
    if kind == "routing":
        layers = tuple(i for i, f in enumerate(cfg.ffns) if FFNS[f].routes)
    else:
        kinds = mixer_kinds(kind)
        layers = tuple(i for i, m in enumerate(cfg.mixers) if m in kinds)
    if watch is not None and kind in WATCHED:
        layers = tuple(i for i in layers if i in watch)
    if asked in layers:
        return PanelLayers(layers, asked)
    if kind == "attention":     # unasked: a cache's softmax rows first, where the model has a cache
        return PanelLayers(layers, next((i for i in layers if MIXERS[cfg.mixers[i]].attends),
                                        layers[0] if layers else None))
    return PanelLayers(layers, layers[0] if layers else None)
