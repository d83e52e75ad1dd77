"""A trained weights file opened as a scenario: `lineage run .../k3-mini-text.safetensors --text
"..."`. The preset and what it was trained on come from the sidecar beside it (OUT.json, written
by `lineage train`); the panels are those a checkpoint directory gets for that architecture.

A model trained on text reads the reader's text (by default a sentence of the tour's); one trained
on token ids (associative recall) reads `--ids`, or by default a held-out recall sequence of 16
pairs, and refuses text in one line.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from .own_input import NotOwnInput, prefilled

DEFAULT_TEXT = "The cat sat on the mat. The dog sat on the log. Where did the cat sit? On the mat."
RECALL = {"kind": "mqar", "pairs": 16, "seed": 0}     # lineage_compare's held-out sequence


def weights_scenario(path: str, name: str, *, text: str | None = None, file: str | None = None,
                     ids: list[int] | None = None, prefill: int | None = None) -> str:
    """YAML text of a scenario for the weights file `path` (`name`: as the reader gave it);
    NotOwnInput (one line) when the sidecar is missing or the input does not fit its training."""
    from ..families.scenario import default_panels
    from ..presets import get_preset
    from ..training.checkpoint import read_sidecar
    try:
        meta = read_sidecar(path)
        cfg = get_preset(meta["preset"])
    except (ValueError, KeyError) as e:
        raise NotOwnInput(f"{name}: {e}") from None
    task = meta.get("task") or "text"
    on_text = task == "text"
    if not on_text and (text is not None or file is not None):
        raise NotOwnInput(f"{name}: {'--text-file' if file is not None else '--text'}: {meta['preset']} was trained "
                          f"on {task} (token ids), not text: give --ids, or weights trained on text")
    if ids is not None:
        source, n = {"ids": ids}, len(ids)
    elif file is not None:
        source, n = {"file": str(Path(file).absolute())}, None
    elif on_text:
        source = {"text": text if text is not None else DEFAULT_TEXT}
        n = len(source["text"].encode("utf-8"))
    else:
        source, n = {"task": dict(RECALL)}, None
    decoding: dict = {"mode": "greedy" if on_text else "teacher"}
    if (read := prefilled(name, n, prefill)) is not None:
        decoding["prefill"] = read
    trained = f"trained on {'text' if on_text else task}"
    panels = default_panels(cfg)
    sc = {"version": 1, "title": f"{Path(path).name}: {meta['preset']}, {trained}",
          "description": f"The weights in {Path(path).name} ({meta['preset']}, {trained}; the recipe is "
                         f"{Path(path).with_suffix('.json').name}) on "
                         + ("your input." if text is not None or file is not None or ids is not None else
                            "a sentence." if on_text else "a held-out recall sequence of 16 pairs."),
          "model": {"preset": meta["preset"], "checkpoint": str(Path(path).resolve())},
          "input": source, "decoding": decoding, "panels": panels}
    return yaml.safe_dump(sc, sort_keys=False, allow_unicode=True)
