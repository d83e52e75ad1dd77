"""Where the trace cache lives and the names in it that need no parsed scenario (no pydantic,
no torch): what a launch reads before anything heavy is imported.

`seen(text, base)` names the marker a published entry leaves for the scenario file with that
text in that directory. The launch's helper (prefetch.py) is not started when the marker is
there: the app will open the entry without it. A marker is a hint only; `cache.lookup` decides.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

ENV = "LINEAGE_CACHE_DIR"     # where entries go; empty or "off": no cache
SETTINGS = ("LINEAGE_BACKEND", "LINEAGE_GRAPH", "CUDA_VISIBLE_DEVICES")
_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path | None:
    where = os.environ.get(ENV)
    if where is not None:
        return None if where in ("", "off") else Path(where)
    import platformdirs
    return Path(platformdirs.user_cache_dir("lineage")) / "traces"


def code_digest() -> str:
    """The source of the code that makes frames (lineage/ and kernels/)."""
    h = hashlib.sha256()
    for folder in ("lineage", "kernels"):
        for f in sorted((_ROOT / folder).rglob("*.py")):
            h.update(str(f.relative_to(_ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def seen(text: str, base) -> str:
    h = hashlib.sha256(text.encode() + b"\0" + str(base).encode() + b"\0" + code_digest().encode())
    for name in SETTINGS:
        h.update(f"{name}={os.environ.get(name, '')}".encode())
    return h.hexdigest()[:32] + ".seen"


def seen_before(path: str) -> bool:
    """Whether the scenario file at `path` left a marker (its text and place, this code)."""
    where = cache_dir()
    try:
        p = Path(path)
        return where is not None and (where / seen(p.read_text(encoding="utf-8"), p.resolve().parent)).is_file()
    except (OSError, UnicodeDecodeError):
        return False
