"""Trace files: the scenario text plus its frames, written as they are made, read lazily.

Layout (little-endian):

    b"LNTRACE\\n"                       magic
    record*                            kind (1 byte) | length (u32) | crc32 (u32) | zlib(payload)
        kind b"H": JSON header {"format": 1, "lineage": version, "scenario": text, "info": {...}}
        kind b"F": one Frame (see frame.py)
        kind b"E": JSON footer {"frames": N, "digest": sha256 over every earlier record's crc}

A trace is written to OUT.partial (or a name the writer is given), created exclusively and never
through a symbolic link (so it is also the lock: a second recording to the same OUT is refused),
and becomes OUT only when closed: nobody ever reads a half-written OUT, and without `overwrite`
an existing OUT is never replaced. Records are written unbuffered, so a crash loses at most the
step being written; the .partial file then has no footer and reads as truncated (its complete
frames are still there: `salvage=True`). A write that fails (a full disk) is cut back to the last
whole record and raises, so the file never holds a torn record with others after it.
Reading indexes record offsets without decompressing, so a long trace never has to fit in memory.
No torch and no pickle anywhere on this path. A trace may come from a stranger, so every length
it declares is checked against the file and a cap before anything is allocated, decompression
stops at the cap, and JSON parts are checked for size, depth and shape.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from pathlib import Path

from ..config_dict import config_from_dict
from ..configs import ConfigError
from ..escapes import visible_tree
from ..files import open_regular, publish, replace_problem
from .frame import Frame

MAGIC = b"LNTRACE\n"
FORMAT = 1
_REC = struct.Struct("<cII")
MAX_FRAME_BYTES = 64 << 20      # one frame, decompressed; k3-mini's is ~118 KB
MAX_META_BYTES = 16 << 20       # header or footer JSON, decompressed (the scenario text is at most 1 MiB)
# frames in one trace: ten times a scenario's most steps (100,000). Indexing costs ~2 us and
# ~150 bytes a record, so a file of millions of tiny records would cost seconds and a gigabyte
# before any other check could refuse it
MAX_FRAMES = 1 << 20
_MIN_RECORD = len(zlib.compress(b""))     # 8: no zlib stream, so no record a writer makes, is shorter


SALVAGE_HINT = "(open with --salvage to read them)"     # the app words it as the command to type


class TraceError(Exception):
    """A trace that cannot be read, with the file and the reason in the message."""


class TraceWriter:
    def __init__(self, path: str | Path, scenario_text: str, info: dict, level: int = 0,
                 overwrite: bool = False, partial: str | Path | None = None, mode: int = 0o644):
        """level: zlib level for frames. 0 (stored) by default: float16 state matrices are noise to
        zlib (level 1 saved 11% of a k3-mini frame and cost 1.6 ms, a quarter of a step).
        partial: the file written until `close` publishes it as `path` (default PATH.partial),
        created exclusively with `mode`, never through a symbolic link.
        Raises FileExistsError when `path` exists (unless overwrite) or another writer holds it."""
        from .. import __version__
        self.path = Path(path)
        self.partial = Path(partial) if partial is not None else self.path.with_name(self.path.name + ".partial")
        self.level, self.overwrite = level, overwrite
        special = replace_problem(self.path)              # a device, FIFO or socket: not even with overwrite
        if special is not None:
            raise FileExistsError(0, special, str(self.path))
        if os.path.lexists(self.path) and not overwrite:      # a link too, dangling or not: publish would refuse it
            raise FileExistsError(0, "exists (--force replaces it)", str(self.path))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.partial, flags, mode)
        except FileExistsError:
            raise FileExistsError(0, f"{self.partial.name} exists: another recording is writing it, or one was "
                                  "killed (remove it; its frames open with --salvage)", str(self.path)) from None
        self._f = os.fdopen(fd, "wb", buffering=0)      # unbuffered: a failed write leaves nothing pending
        self._end = 0                                   # bytes of whole records (and the magic) in the file
        self._digest = hashlib.sha256()
        self.frames = 0
        self.bytes_frames = 0
        try:
            self._write(MAGIC)
            head = {"format": FORMAT, "lineage": __version__, "scenario": scenario_text, "info": info}
            self._record(b"H", json.dumps(head).encode(), 6)
        except BaseException:                           # no header, no trace: nothing is left behind
            self._f.close()
            _remove(self.partial)
            raise

    def _write(self, data: bytes) -> None:
        """All of `data` after the last whole record, or OSError with the file cut back to that
        record: a write that failed half way (a full disk) leaves no torn record to follow."""
        fd, done = self._f.fileno(), 0
        view = memoryview(data)
        try:
            while done < len(view):
                done += _write(fd, view[done:])
        except OSError:
            try:
                os.ftruncate(fd, self._end)
                os.lseek(fd, self._end, os.SEEK_SET)
            except OSError:
                pass
            raise
        self._end += done

    def _record(self, kind: bytes, payload: bytes, level: int | None = None) -> int:
        z = zlib.compress(payload, self.level if level is None else level)
        crc = zlib.crc32(z)
        self._write(_REC.pack(kind, len(z), crc) + z)
        self._digest.update(struct.pack("<I", crc))
        return _REC.size + len(z)

    def write(self, frame: Frame) -> None:
        if frame.step != self.frames:
            raise ValueError(f"frames must be written in order: expected step {self.frames}, got {frame.step}")
        payload = frame.to_bytes()
        if len(payload) > MAX_FRAME_BYTES:      # never write what a reader would refuse
            raise ValueError(f"frame {frame.step} is {len(payload):,} bytes (limit {MAX_FRAME_BYTES:,})")
        if self.frames >= MAX_FRAMES:
            raise ValueError(f"frame {frame.step}: a trace holds at most {MAX_FRAMES:,} frames")
        self.bytes_frames += self._record(b"F", payload)
        self.frames += 1

    def close(self) -> None:
        """Finish the trace and publish it as `path`. If the footer cannot be written (a full
        disk), what was written is still published: a truncated trace whose frames salvage reads."""
        if self._f.closed:
            return
        try:
            foot = {"frames": self.frames, "digest": self._digest.hexdigest()}
            self._record(b"E", json.dumps(foot).encode(), 6)
        finally:
            try:
                self._f.close()
            except OSError:
                pass
            self._publish()

    def abandon(self) -> None:
        """Close without publishing and remove the partial: for a recording that failed before
        its first frame (a full disk), whose file would hold nothing to open, not even with
        --salvage, and which must not replace the file --force was given for."""
        if self._f.closed:
            return
        try:
            self._f.close()
        except OSError:
            pass
        _remove(self.partial)

    def _publish(self) -> None:
        try:
            publish(self.partial, self.path, self.overwrite)
        except FileExistsError:
            raise FileExistsError(0, f"appeared while recording; this recording is kept as {self.partial.name}",
                                  str(self.path)) from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _write(fd: int, data) -> int:
    return os.write(fd, data)


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class TraceReader:
    """Random access to a trace's frames. `salvage=True` opens a trace whose recording was cut
    short (no footer, or a torn last record) and serves its complete frames."""

    def __init__(self, path: str | Path, salvage: bool = False):
        self.path = Path(path)
        self.truncated = False
        try:
            self._f = open_regular(self.path)
        except OSError as e:
            raise TraceError(f"{self.path}: cannot open: {e.strerror or e}") from None
        if self._f.read(len(MAGIC)) != MAGIC:
            raise TraceError(f"{self.path}: not a lineage trace (bad magic; is it a scenario file?)")
        self._offsets: list[tuple[int, int, int]] = []   # (offset of payload, length, crc) per frame
        digest = hashlib.sha256()
        header = footer = None
        pos = len(MAGIC)
        size = os.fstat(self._f.fileno()).st_size
        problem = None
        while pos < size:
            self._f.seek(pos)
            raw = self._f.read(_REC.size)
            if len(raw) < _REC.size:
                problem = f"truncated: a record header at byte {pos} is cut off"
                break
            kind, n, crc = _REC.unpack(raw)
            cap = MAX_FRAME_BYTES if kind == b"F" else MAX_META_BYTES
            if n > cap + 1024:      # zlib adds a few bytes even to stored data
                raise TraceError(f"{self.path}: corrupt: the record at byte {pos} claims {n:,} bytes "
                                 f"(limit {cap:,})")
            if n < _MIN_RECORD:     # refused here, at the first, not after indexing millions of them
                raise TraceError(f"{self.path}: corrupt: the record at byte {pos} is {n} bytes, shorter than "
                                 f"any compressed record ({_MIN_RECORD})")
            if pos + _REC.size + n > size:
                problem = f"truncated: the record at byte {pos} needs {n:,} bytes, the file ends first"
                break
            if kind == b"H" and header is None:
                header = self._json(pos + _REC.size, n, crc, "header")
            elif kind == b"F":
                if len(self._offsets) >= MAX_FRAMES:
                    raise TraceError(f"{self.path}: corrupt: the frame record at byte {pos} is past "
                                     f"{MAX_FRAMES:,} frames, the most a trace holds")
                self._offsets.append((pos + _REC.size, n, crc))
            elif kind == b"E":
                footer = self._json(pos + _REC.size, n, crc, "footer")
                pos += _REC.size + n
                break
            else:
                raise TraceError(f"{self.path}: corrupt: unknown record kind {kind!r} at byte {pos}")
            digest.update(struct.pack("<I", crc))
            pos += _REC.size + n
        if header is None:
            raise TraceError(f"{self.path}: corrupt or empty: no header record")
        if not (isinstance(header.get("scenario"), str) and isinstance(header.get("info"), dict)):
            raise TraceError(f"{self.path}: corrupt: the header lacks its scenario text or info")
        info = visible_tree(header["info"])     # its title is shown on a terminal, a bad config's name too
        bad = _info_problem(info)
        if bad is None:
            try:
                self.configs = info_configs(info)
            except ConfigError as e:
                bad = str(e)
        if bad is not None:
            raise TraceError(f"{self.path}: corrupt: the header's info {bad}")
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
            if not salvage and not self._offsets:       # --salvage would open nothing: not offered
                raise TraceError(f"{self.path}: {problem}; no frame was written before it stopped")
            if not salvage:
                raise TraceError(f"{self.path}: {problem}; its first {len(self._offsets)} frames are intact "
                                 + SALVAGE_HINT)
            self.truncated = True
        self.header = header
        self.scenario_text: str = header["scenario"]
        self.info: dict = info

    def _payload(self, offset: int, n: int, crc: int, what: str, cap: int = MAX_FRAME_BYTES) -> bytes:
        self._f.seek(offset)
        z = self._f.read(n)
        if zlib.crc32(z) != crc:
            raise TraceError(f"{self.path}: corrupt: {what} at byte {offset} fails its checksum")
        d = zlib.decompressobj()
        try:
            out = d.decompress(z, cap + 1)      # a zlib bomb stops here, not at gigabytes
        except zlib.error as e:
            raise TraceError(f"{self.path}: corrupt: {what} at byte {offset}: {e}") from None
        if len(out) > cap:
            raise TraceError(f"{self.path}: corrupt: {what} at byte {offset} expands past {cap:,} bytes")
        if not d.eof:
            raise TraceError(f"{self.path}: corrupt: {what} at byte {offset}: its compressed data is incomplete")
        return out

    def _json(self, offset: int, n: int, crc: int, what: str) -> dict:
        """A header or footer: a JSON object of bounded size and depth."""
        raw = self._payload(offset, n, crc, what, MAX_META_BYTES)
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as e:        # RecursionError: nested past the stack
            reason = "nested too deeply" if isinstance(e, RecursionError) else f"not JSON ({e})"
            raise TraceError(f"{self.path}: corrupt: {what} at byte {offset} is {reason}") from None
        if not isinstance(value, dict):
            raise TraceError(f"{self.path}: corrupt: {what} at byte {offset} is not a JSON object")
        return value

    def __len__(self) -> int:
        return len(self._offsets)

    def file_stat(self) -> os.stat_result:
        """The stat of the file this reader has open (not of whatever its path names now)."""
        return os.fstat(self._f.fileno())

    def verify(self, n: int | None = None) -> None:
        """Check the checksums of the first n frames (all by default) without decoding them, a
        tenth of the time reading them takes; TraceError names the first that fails."""
        for i, (off, size, crc) in enumerate(self._offsets[:n]):
            self._f.seek(off)
            if zlib.crc32(self._f.read(size)) != crc:
                raise TraceError(f"{self.path}: corrupt: frame {i} at byte {off} fails its checksum")

    def frame(self, i: int) -> Frame:
        if not 0 <= i < len(self._offsets):
            raise IndexError(f"{self.path}: step {i} out of range (0-{len(self._offsets) - 1})")
        off, n, crc = self._offsets[i]
        try:
            return Frame.from_bytes(self._payload(off, n, crc, f"frame {i}"))
        except (ValueError, TypeError, KeyError, struct.error, RecursionError) as e:
            reason = "nested too deeply" if isinstance(e, RecursionError) else e
            raise TraceError(f"{self.path}: corrupt: frame {i}: {reason}") from None

    def close(self) -> None:
        self._f.close()


def _info_problem(info: dict) -> str | None:
    """What the app needs of a trace's info and this one lacks (it reads these without a
    fallback: a title, and per model its kind, name and config), or None."""
    if not isinstance(info.get("title"), str):
        return "has no title"
    models = info.get("models")
    if not isinstance(models, list):
        return "has no list of models"
    for m, model in enumerate(models):
        if not (isinstance(model, dict) and model.get("kind") in ("lm", "memory") and isinstance(model.get("name"), str)
                and (model["kind"] == "memory" or isinstance(model.get("config"), dict))):
            return f"has a model {m} without its kind, name or config"
    return None


def info_configs(info: dict) -> list:
    """Each model's ModelConfig rebuilt from an info's plain dicts (None for a toy memory: it has
    none); a ConfigError names the model and the field. What panels read instead of the dicts."""
    out = []
    for m, model in enumerate(info["models"]):
        try:
            out.append(config_from_dict(model["config"]) if model["kind"] == "lm" else None)
        except ConfigError as e:
            raise ConfigError(f"has a bad config for model {m} ({model['name']}): {e}", e.field) from None
    return out
