"""The scenario `lineage run CHECKPOINT_DIR` opens: the checkpoint, the given text or ids, and
the panels its architecture has something to show in (state and decay of its first recurrent
layer, routing of its first MoE layer, or with neither the attention of its first softmax
layer; the cache, the tokens). Torch-free."""
from __future__ import annotations

from pathlib import Path

import yaml

from ..scenario.panels import panel_layers
from .loader import read_model_config
from .problems import PretrainedError
from .tokenizer import tokenizer_for

DEFAULT_TEXT = "The capital of France is Paris. The capital of Japan is Tokyo. The capital of France is"
GENERATE = 32           # greedy tokens after the input


def default_panels(cfg) -> list[dict]:
    panels = [{"kind": "tokens"}]
    for kind in ("state", "decay", "routing"):
        if (layer := panel_layers(cfg, kind).shown) is not None:
            panels.append({"kind": kind, "layer": layer})
    if len(panels) == 1 and (layer := panel_layers(cfg, "attention").shown) is not None:
        panels.append({"kind": "attention", "layer": layer})     # all softmax: what its heads look at
    panels.append({"kind": "cache"})
    return panels


def checkpoint_scenario(path, text: str | None = None, ids: list[int] | None = None, dtype: str | None = None,
                        device: str | None = None, steps: int | None = None) -> str:
    """Scenario YAML for a checkpoint directory; PretrainedError (one line) when it cannot be."""
    root = Path(path).expanduser().resolve()
    cfg = read_model_config(root)[0]
    if ids is None and text is None:
        if tokenizer_for(root) is None:
            raise PretrainedError(f"{root}: no tokenizer files (tokenizer.json): give the input as --ids 1,2,3")
        text = DEFAULT_TEXT
    spec = {"pretrained": str(root)}
    if dtype:
        spec["dtype"] = dtype
    if device:
        spec["device"] = device
    sc = {"version": 1, "title": f"{cfg.name} ({cfg.notes.removesuffix(' checkpoint')})", "model": spec,
          "input": {"ids": ids} if ids is not None else {"text": text},
          "decoding": {"mode": "greedy"}, "panels": default_panels(cfg)}
    if steps is not None:
        sc["steps"] = steps
    return yaml.safe_dump(sc, sort_keys=False, allow_unicode=True)
