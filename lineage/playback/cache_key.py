"""The trace cache's key: everything a scenario's frames depend on, hashed. Its text and the
directory it is read from, the contents of its input file, the size and time of every checkpoint
it names, the source of the code that makes frames (lineage/ but its app and command line), and
the settings that choose device and backend. Two runs with one key make the same frames."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..scenario.schema import Scenario

_SETTINGS = ("LINEAGE_BACKEND", "LINEAGE_GRAPH", "CUDA_VISIBLE_DEVICES")


def _code_digest() -> str:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]
    for f in sorted((root / "lineage").rglob("*.py")):
        if f.relative_to(root).parts[1] in ("app", "cli"):      # what shows frames, not what makes them
            continue
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _checkpoints(tree) -> list[str]:
    """Every weights file or checkpoint directory (`pretrained`) the scenario names."""
    if isinstance(tree, dict):
        return [v for k, v in tree.items() if k in ("checkpoint", "pretrained") and isinstance(v, str)] + \
               [c for v in tree.values() for c in _checkpoints(v)]
    if isinstance(tree, list):
        return [c for v in tree for c in _checkpoints(v)]
    return []


def key(sc: Scenario) -> str:
    h = hashlib.sha256()
    base = sc.base_dir
    h.update((sc.text or "").encode() + b"\0" + str(base).encode() + b"\0" + _code_digest().encode())
    if sc.input is not None and sc.input.file is not None:
        # the file's text as the scenario read it at load (input.text), not the file now: the
        # frames are made of that text, and the YAML naming the file stays the same when it is edited
        h.update(b"input.file\0" + hashlib.sha256((sc.input.text or "").encode()).digest())
    for name in _checkpoints(sc.model_dump()):
        path = Path(name) if Path(name).is_absolute() or base is None else base / name
        try:                   # a checkpoint directory: each of its files (config, shards, tokenizer)
            files = sorted(path.iterdir()) if path.is_dir() else [path]
            for f in files:
                st = f.stat()
                h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}".encode())
        except OSError:
            h.update(f"{path}:missing".encode())
    for name in _SETTINGS:
        h.update(f"{name}={os.environ.get(name, '')}".encode())
    return h.hexdigest()[:32]
