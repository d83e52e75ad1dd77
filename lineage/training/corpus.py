"""The `text` task's corpus: the Python standard library's own source, which every machine
with Python has offline under the PSF licence. Byte-level, so no tokenizer to ship.

Files are read in sorted order up to a byte budget; a file goes to the held-out split when a
CRC of its path (relative to the library) falls in one bucket of ten, so the split is the
same on every machine and never depends on the order files were found in. Different Python
versions ship different files: the sidecar records the version a model was trained with.
"""
from __future__ import annotations

import sys
import sysconfig
import zlib
from pathlib import Path

import numpy as np

from .tasks import Batch

HELD_OUT_BUCKET = 0          # crc32(path) % 10 == 0: held out


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

    def describe(self) -> dict:
        return {"source": "Python standard library", "python": self.version,
                **{f"{k}_bytes": int(v.size) for k, v in self.splits.items()}}

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
