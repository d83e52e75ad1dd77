"""A scenario on the reader's own input: `lineage run tour --text "..."` plays the tour's models,
weights and panels on that text instead of the tour's. Torch-free.

What changes, and why:
- `input` is the reader's text (or file, or token ids).
- The captions go: each was written for the scenario's own input and would say false things
  about another; one caption, true at every step, says so instead.
- A long input is read at once up to its last TAIL tokens, as `lineage run CHECKPOINT_DIR` does,
  unless `--prefill N` says otherwise; a prefill the scenario set for its own input goes with it.
- Paths the scenario names (checkpoints, a device-map file) are made absolute: the made file
  lives elsewhere.

Which scenarios read text: those whose models are language models with a text or file input.
A model trained on token ids (the MQAR lessons) takes `--ids`; a toy memory or a figure takes
neither, and says so in one line.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from . import load
from .schema import Scenario

LONG_INPUT = 256        # as lineage.families.scenario: an input longer than this is prefilled ...
TAIL = 32               # ... up to its last TAIL tokens, which are stepped through


class NotOwnInput(ValueError):
    """This scenario cannot take that input (one line, naming the scenario and why)."""


def reads(sc: Scenario) -> str | None:
    """What input a scenario's models read: "text", "ids", or None (a toy memory, a figure)."""
    specs = sc.model_specs
    if not specs or any(s.memory is not None for s in specs) or sc.input is None:
        return None
    return "text" if sc.input.text is not None or sc.input.file is not None else "ids"


def with_input(path: str, name: str, *, text: str | None = None, file: str | None = None,
               ids: list[int] | None = None, prefill: int | None = None) -> tuple[str, str]:
    """(YAML text, title) of the scenario at `path` on this input; NotOwnInput when it cannot
    take it. `name`: the scenario as the reader named it (for messages)."""
    sc = load(path)
    kind = reads(sc)
    given = "--ids" if ids is not None else "--text-file" if file is not None else "--text"
    if kind is None:
        raise NotOwnInput(f"{name}: {given}: its {'toy memory' if sc.model_specs else 'figure'} reads no "
                          "text or token ids; a scenario of language models does (lineage list)")
    if kind == "ids" and ids is None:
        raise NotOwnInput(f"{name}: {given}: its models read token ids ({_ids_source(sc)}), not text: "
                          "give --ids, or pick a scenario that reads text (tour, long_document, lineage_text)")
    data = yaml.safe_load(sc.text)
    base = Path(path).resolve().parent
    data["input"] = {"ids": ids} if ids is not None else {"file": str(Path(file).absolute())} if file is not None \
        else {"text": text}
    data["captions"] = [{"step": 1, "text": f"Your {'token ids' if ids is not None else 'text'}, read by {name}'s "
                         "models. Its own captions are left out: they were written for its own input."}]
    decoding = dict(data.get("decoding") or {})
    decoding.pop("prefill", None)
    n = len(ids) if ids is not None else None
    if n is None and text is not None:
        n = _tokens(sc, base, text)
    if (read := prefilled(name, n, prefill)) is not None:
        decoding["prefill"] = read
    if decoding:
        data["decoding"] = decoding
    else:
        data.pop("decoding", None)
    for spec in ([data["model"]] if "model" in data else data.get("models", [])):
        for key in ("checkpoint", "pretrained"):
            if spec.get(key):
                spec[key] = _absolute(spec[key], base)
        if str(spec.get("device_map", "")).strip().endswith(".json"):
            spec["device_map"] = _absolute(spec["device_map"].strip(), base)
    if (data.get("weights") or {}).get("checkpoint"):
        data["weights"]["checkpoint"] = _absolute(data["weights"]["checkpoint"], base)
    title = f"{sc.title} (your {'ids' if ids is not None else 'text'})"
    data["title"] = title
    data["description"] = (f"{name} on your {'token ids' if ids is not None else 'text'}: the same models, "
                           "weights and panels. Its captions were written for its own input and are left out.")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True), title


def prefilled(name: str, n: int | None, prefill: int | None) -> int | None:
    """The tokens read at once before the first step: `prefill` as given (not past the input's
    `n` tokens), else all but the last TAIL of an input over LONG_INPUT, else none (None)."""
    if prefill is not None:
        if n is not None and prefill > n:
            raise NotOwnInput(f"{name}: --prefill {prefill}: the input is {n:,} tokens")
        return prefill
    return n - TAIL if n is not None and n > LONG_INPUT else None


def _tokens(sc: Scenario, base: Path, text: str) -> int:
    """The text's length in the first model's tokens: a checkpoint's own tokenizer where it has
    one (a BPE token is several bytes: counting bytes would prefill past the input's end), else
    UTF-8 bytes, the presets' tokenizer."""
    spec = next((s for s in sc.model_specs if s.pretrained is not None), None)
    if spec is not None:
        from ..families.tokenizer import tokenizer_for
        from .build import pretrained_dir
        tok = tokenizer_for(pretrained_dir(spec, base))
        if tok is not None:
            return len(tok.encode(text))
    return len(text.encode("utf-8"))


def _absolute(p: str, base: Path) -> str:
    q = Path(p).expanduser()
    return str(q if q.is_absolute() else base / q)


def _ids_source(sc: Scenario) -> str:
    return "a generated task" if sc.input.task is not None else "the MQAR pairs they were trained on"
