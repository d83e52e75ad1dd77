"""The scenario `lineage run CHECKPOINT_DIR` opens: the checkpoint, the given text, file or ids, and
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
LONG_INPUT = 256        # an input longer than this is read at once (prefilled) up to its last TAIL tokens
TAIL = 32               # ... which are stepped through, so that stepping starts near its end


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
                        device: str | None = None, steps: int | None = None, file: str | None = None,
                        prefill: int | None = None, file_named: str | None = None,
                        device_map: str | None = None) -> str:
    """Scenario YAML for a checkpoint directory; PretrainedError (one line) when it cannot be.
    `file`: the input read from a text file (`input.file`; ValueError, one line naming it as
    `file_named`, when it cannot be read). `prefill`: the input tokens read at once before the
    first step; by default an input over LONG_INPUT tokens is read up to its last TAIL, and the
    scenario's description says so."""
    root = Path(path).expanduser().resolve()
    cfg = read_model_config(root)[0]
    # strict: broken tokenizer files are named here (with --ids too, as the load would), not taken for none
    tok = tokenizer_for(root, strict=True)
    if ids is None and text is None and file is None:
        if tok is None:
            raise PretrainedError(f"{root}: no tokenizer files (tokenizer.json): give the input as --ids 1,2,3")
        text = DEFAULT_TEXT
    if file is not None:
        from ..scenario.input_file import read_text_file
        try:
            text = read_text_file(file)
        except ValueError as e:
            raise ValueError(f"--text-file {file_named or file}: {e}") from None
    n = len(ids) if ids is not None else len(tok.encode(text)) if tok is not None else None
    if file is not None and n is not None and cfg.n_positions and n + (steps or GENERATE) > cfg.n_positions:
        raise ValueError(f"--text-file {file_named or file}: {n:,} tokens; {cfg.name} has learned positions for "
                         f"{cfg.n_positions:,}, the input and the {steps or GENERATE} tokens generated after it")
    said = ""
    if prefill is None and n is not None and n > LONG_INPUT:
        prefill = n - TAIL
        said = (f"The input's first {prefill:,} of {n:,} tokens are read at once (prefilled); the steps go "
                f"through its last {TAIL}, then generate {GENERATE} (--prefill N reads N instead).")
    elif prefill and n is not None and prefill > n:      # all of it: the steps generate from its end
        raise ValueError(f"--prefill {prefill}: the input is {n:,} tokens")
    spec = {"pretrained": str(root)}
    if dtype:
        spec["dtype"] = dtype
    if device:
        spec["device"] = device
    if device_map:
        spec["device_map"] = device_map
    source = {"ids": ids} if ids is not None else {"file": file} if file is not None else {"text": text}
    sc = {"version": 1, "title": f"{cfg.name} ({cfg.notes.removesuffix(' checkpoint')})", "model": spec,
          "input": source, "decoding": {"mode": "greedy"}, "panels": default_panels(cfg)}
    if said:
        sc["description"] = said
    if prefill:
        sc["decoding"]["prefill"] = prefill
    if steps is not None:
        sc["steps"] = steps
    return yaml.safe_dump(sc, sort_keys=False, allow_unicode=True)
