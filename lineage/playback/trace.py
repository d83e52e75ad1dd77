"""Trace files: the scenario text plus its frames, written as they are made, read lazily.

Layout (little-endian):

    b"LNTRACE\\n"                       magic
    record*                            kind (1 byte) | length (u32) | crc32 (u32) | zlib(payload)
        kind b"H": JSON header {"format": 1, "lineage": version, "scenario": text, "info": {...}}
        kind b"F": one Frame (see frame.py)
        kind b"E": JSON footer {"frames": N, "digest": sha256 over every earlier record's crc}

Each frame is flushed as written, so a crash loses at most the step being written; such a
file has no footer and reads as truncated (its complete frames are still there: `salvage=True`).
Reading indexes record offsets without decompressing, so a long trace never has to fit in memory.
No torch and no pickle anywhere on this path.
"""
from __future__ import annotations

import hashlib
import json
import struct
import zlib
from pathlib import Path

from .frame import Frame

MAGIC = b"LNTRACE\n"
FORMAT = 1
_REC = struct.Struct("<cII")


class TraceError(Exception):
    """A trace that cannot be read, with the file and the reason in the message."""


class TraceWriter:
    def __init__(self, path: str | Path, scenario_text: str, info: dict, level: int = 0):
        """level: zlib level for frames. 0 (stored) by default: float16 state matrices are noise to
        zlib (level 1 saved 11% of a k3-mini frame and cost 1.6 ms, a quarter of a step)."""
        from .. import __version__
        self.path = Path(path)
        self.level = level
        self._f = open(self.path, "wb")
        self._digest = hashlib.sha256()
        self.frames = 0
        self.bytes_frames = 0
        self._f.write(MAGIC)
        head = {"format": FORMAT, "lineage": __version__, "scenario": scenario_text, "info": info}
        self._record(b"H", json.dumps(head).encode(), 6)

    def _record(self, kind: bytes, payload: bytes, level: int | None = None) -> int:
        z = zlib.compress(payload, self.level if level is None else level)
        crc = zlib.crc32(z)
        self._f.write(_REC.pack(kind, len(z), crc) + z)
        self._f.flush()
        self._digest.update(struct.pack("<I", crc))
        return _REC.size + len(z)

    def write(self, frame: Frame) -> None:
        if frame.step != self.frames:
            raise ValueError(f"frames must be written in order: expected step {self.frames}, got {frame.step}")
        self.bytes_frames += self._record(b"F", frame.to_bytes())
        self.frames += 1

    def close(self) -> None:
        if self._f.closed:
            return
        foot = {"frames": self.frames, "digest": self._digest.hexdigest()}
        self._record(b"E", json.dumps(foot).encode(), 6)
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TraceReader:
    """Random access to a trace's frames. `salvage=True` opens a trace whose recording was cut
    short (no footer, or a torn last record) and serves its complete frames."""

    def __init__(self, path: str | Path, salvage: bool = False):
        self.path = Path(path)
        self.truncated = False
        try:
            self._f = open(self.path, "rb")
        except OSError as e:
            raise TraceError(f"{self.path}: cannot open: {e.strerror or e}") from None
        if self._f.read(len(MAGIC)) != MAGIC:
            raise TraceError(f"{self.path}: not a lineage trace (bad magic; is it a scenario file?)")
        self._offsets: list[tuple[int, int, int]] = []   # (offset of payload, length, crc) per frame
        digest = hashlib.sha256()
        header = footer = None
        pos = len(MAGIC)
        size = self.path.stat().st_size
        problem = None
        while pos < size:
            self._f.seek(pos)
            raw = self._f.read(_REC.size)
            if len(raw) < _REC.size:
                problem = f"truncated: a record header at byte {pos} is cut off"
                break
            kind, n, crc = _REC.unpack(raw)
            if pos + _REC.size + n > size:
                problem = f"truncated: the record at byte {pos} needs {n:,} bytes, the file ends first"
                break
            if kind == b"H" and header is None:
                header = json.loads(self._payload(pos + _REC.size, n, crc, "header"))
            elif kind == b"F":
                self._offsets.append((pos + _REC.size, n, crc))
            elif kind == b"E":
                footer = json.loads(self._payload(pos + _REC.size, n, crc, "footer"))
                pos += _REC.size + n
                break
            else:
                raise TraceError(f"{self.path}: corrupt: unknown record kind {kind!r} at byte {pos}")
            digest.update(struct.pack("<I", crc))
            pos += _REC.size + n
        if header is None:
            raise TraceError(f"{self.path}: corrupt or empty: no header record")
        if header.get("format") != FORMAT:
            raise TraceError(f"{self.path}: trace format {header.get('format')} is not supported (this lineage reads {FORMAT})")
        if footer is None and problem is None:
            problem = "truncated: the recording stopped before it finished (no footer)"
        if footer is not None:
            if footer.get("frames") != len(self._offsets):
                raise TraceError(f"{self.path}: corrupt: footer says {footer.get('frames')} frames, found {len(self._offsets)}")
            if footer.get("digest") != digest.hexdigest():
                raise TraceError(f"{self.path}: corrupt: checksum mismatch (records were changed or reordered)")
            if pos != size:
                raise TraceError(f"{self.path}: corrupt: {size - pos:,} stray bytes after the footer")
        if problem is not None:
            if not salvage:
                raise TraceError(f"{self.path}: {problem}; its first {len(self._offsets)} frames are intact "
                                 "(open with --salvage to read them)")
            self.truncated = True
        self.header = header
        self.scenario_text: str = header["scenario"]
        self.info: dict = header["info"]

    def _payload(self, offset: int, n: int, crc: int, what: str) -> bytes:
        self._f.seek(offset)
        z = self._f.read(n)
        if zlib.crc32(z) != crc:
            raise TraceError(f"{self.path}: corrupt: {what} at byte {offset} fails its checksum")
        try:
            return zlib.decompress(z)
        except zlib.error as e:
            raise TraceError(f"{self.path}: corrupt: {what} at byte {offset}: {e}") from None

    def __len__(self) -> int:
        return len(self._offsets)

    def frame(self, i: int) -> Frame:
        if not 0 <= i < len(self._offsets):
            raise IndexError(f"{self.path}: step {i} out of range (0-{len(self._offsets) - 1})")
        off, n, crc = self._offsets[i]
        try:
            return Frame.from_bytes(self._payload(off, n, crc, f"frame {i}"))
        except (ValueError, KeyError, struct.error, json.JSONDecodeError) as e:
            raise TraceError(f"{self.path}: corrupt: frame {i}: {e}") from None

    def close(self) -> None:
        self._f.close()
