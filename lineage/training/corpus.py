"""The `text` task's corpus: the Python standard library's own source, which every machine
with Python has offline under the PSF licence. Byte-level, so no tokenizer to ship.

Files are read in sorted order up to a byte budget; a file goes to the held-out split when a
CRC of its path (relative to the library) falls in one bucket of ten, so the split is the
same on every machine and never depends on the order files were found in. Different Python
versions ship different files: the sidecar records the version a model was trained with.
"""
from __future__ import annotations

import copy
import gzip
import sys
import sysconfig
import zlib
from pathlib import Path

import numpy as np

from .tasks import Batch

HELD_OUT_BUCKET = 0          # crc32(path) % 10 == 0: held out
# the held-out split a shipped text model was scored on, as that Python version's standard
# library holds it (PSF licence, lineage/scenarios/data/README.md): scoring reads it in place of this
# machine's, so the sidecar's bits per byte reproduce on any Python
SHIPPED = Path(__file__).resolve().parents[1] / "scenarios" / "data"


def shipped_held_out(python: str | None, size: int | None) -> np.ndarray | None:
    """The shipped held-out bytes of Python `python`'s standard library, if there are exactly
    `size` of them (a sidecar's record); None when none is shipped."""
    path = SHIPPED / f"stdlib-{python}-held-out.py.gz"
    if python is None or not path.is_file():
        return None
    data = np.frombuffer(gzip.decompress(path.read_bytes()), np.uint8)
    return data if data.size == size else None


class Corpus:
    def __init__(self, max_bytes: int = 8_000_000, root: Path | None = None):
        self.root = Path(root or sysconfig.get_paths()["stdlib"])
        if not self.root.is_dir():
            raise ValueError(f"the text corpus needs the Python standard library, not found at {self.root}")
        train, held = [], []
        size = 0
        for path in sorted(self.root.rglob("*.py")):
            rel = path.relative_to(self.root).as_posix()
            if rel.startswith(("site-packages/", "dist-packages/")):
                continue                                   # third-party code, and differs per machine
            try:
                data = path.read_bytes()
            except OSError:
                continue
            (held if zlib.crc32(rel.encode()) % 10 == HELD_OUT_BUCKET else train).append(data)
            size += len(data)
            if size >= max_bytes:
                break
        if not train or not held:
            raise ValueError(f"too little Python source under {self.root} for the text task")
        self.splits = {"train": np.frombuffer(b"\n".join(train), np.uint8),
                       "held_out": np.frombuffer(b"\n".join(held), np.uint8)}
        self.version = f"{sys.version_info.major}.{sys.version_info.minor}"
        self.held_out_python = self.version           # whose standard library the held-out split is
        self.held_out_file: Path | None = None        # the shipped file it was read from (None: self.root)

    def describe(self) -> dict:
        return {"source": "Python standard library", "python": self.version,
                **{f"{k}_bytes": int(v.size) for k, v in self.splits.items()}}

    def scored_as(self, recorded: dict | None) -> "Corpus | None":
        """This corpus holding out what a sidecar's model was scored on (its `corpus` record),
        where that split is shipped; None where it is not."""
        rec = recorded or {}
        data = shipped_held_out(rec.get("python"), rec.get("held_out_bytes"))
        if data is None:
            return None
        other = copy.copy(self)
        other.splits = {**self.splits, "held_out": data}
        other.held_out_python = rec["python"]
        other.held_out_file = SHIPPED / f"stdlib-{rec['python']}-held-out.py.gz"
        return other

    def held_out_source(self) -> str:
        """Where the held-out bytes were read from, in words: the shipped file (its path from the
        package's folder, lineage/scenarios/data/...) or this machine's standard library."""
        n = f"{int(self.splits['held_out'].size):,} bytes"
        if self.held_out_file is not None:
            path = self.held_out_file
            try:
                path = path.relative_to(SHIPPED.parents[2])
            except ValueError:
                pass
            return f"{path.as_posix()} (Python {self.held_out_python}'s standard library, {n})"
        return (f"this machine's standard library, {self.root} (Python {self.held_out_python}, the .py files "
                f"whose path's crc32 % 10 == {HELD_OUT_BUCKET}, {n})")

    def batch(self, rng: np.random.Generator, B: int, length: int, split: str = "train") -> Batch:
        """B windows of `length` bytes at random places; every position is scored."""
        data = self.splits[split]
        starts = rng.integers(0, data.size - length - 1, B)
        idx = starts[:, None] + np.arange(length + 1)                       # (B, T + 1)
        window = data[idx].astype(np.int64)
        return Batch(window[:, :-1], window[:, 1:], np.ones((B, length), bool))


_CACHE: dict = {}


def corpus() -> Corpus:
    """The corpus, read once per process."""
    if "c" not in _CACHE:
        _CACHE["c"] = Corpus()
    return _CACHE["c"]
