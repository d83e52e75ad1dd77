"""A Frame: everything the panels need at one step, as plain numpy arrays and JSON-able values.

Nothing here needs torch: a frame recorded on a GPU box reads on a laptop. This is the storage:
arrays keyed by path ("m{model}/l{layer}/{name}" for per-layer data, "m{model}/{name}" per
model) and `meta` (scalars and text). Which fields there are, how a model's observations become
them and the typed records they read back as (`frame.state(m, layer)`, ...) is `observe.py`.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

import numpy as np

from ..escapes import visible_tree
from .observe import Views


class FrameProblem(ValueError):
    """Data a panel cannot draw: a frame that is corrupt or lacks a field, an array of the wrong
    shape, a value that is not finite where a count or a length is due, a trace's panel option
    that is not one. Panels show it as a notice on their border and the app carries on; any
    other exception a panel raises is a bug in the panel and is not caught (ValueError's
    subclass, so callers that caught a corrupt frame's ValueError still do)."""


@dataclass(frozen=True, eq=False)
class Frame(Views):
    step: int
    meta: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)      # str -> np.ndarray

    # -- equality is bit-for-bit ------------------------------------------------------
    def __eq__(self, other) -> bool:
        if not isinstance(other, Frame) or self.step != other.step:
            return False
        if json.dumps(self.meta, sort_keys=True) != json.dumps(other.meta, sort_keys=True):
            return False
        if self.arrays.keys() != other.arrays.keys():
            return False
        return all(a.dtype == other.arrays[k].dtype and a.shape == other.arrays[k].shape
                   and a.tobytes() == other.arrays[k].tobytes() for k, a in self.arrays.items())

    # -- bytes (no pickle: a trace from a stranger cannot run code) --------------------
    def parts(self) -> list:
        """The frame's bytes as pieces: the table's length, the table, then each array's memory
        (views, not copies). Joined they are to_bytes(); written one by one, as the session's
        frame store does every step (store._write_all), they need no frame-sized copy of the arrays."""
        table, views, offset = [], [], 0
        for key, a in self.arrays.items():
            a = np.ascontiguousarray(a)
            table.append([key, a.dtype.str, list(a.shape), offset, a.nbytes])
            views.append(memoryview(a).cast("B"))
            offset += a.nbytes
        head = json.dumps({"step": self.step, "meta": self.meta, "arrays": table}, separators=(",", ":")).encode()
        return [struct.pack("<I", len(head)), head, *views]

    def to_bytes(self) -> bytes:
        return b"".join(self.parts())

    @classmethod
    def from_bytes(cls, data: bytes) -> "Frame":
        """The frame, or FrameProblem naming what is corrupt. Every number the bytes declare is
        checked before it sizes anything: the bytes may come from a stranger's trace."""
        (n,) = struct.unpack_from("<I", data, 0)
        if 4 + n > len(data):
            raise FrameProblem(f"its table claims {n:,} bytes, the frame has {len(data) - 4:,}")
        head = json.loads(data[4:4 + n])
        if not (isinstance(head, dict) and _is_int(head.get("step")) and isinstance(head.get("meta"), dict)
                and isinstance(head.get("arrays"), list)):
            raise FrameProblem("its table lacks step, meta or arrays")
        body = memoryview(data)[4 + n:]
        arrays = {}
        for entry in head["arrays"]:
            key, dt, shape, offset, nbytes = _array_entry(entry, len(body))
            arrays[key] = np.frombuffer(body[offset:offset + nbytes], dtype=dt).reshape(shape)
        # text in a frame (tokens, captions) is shown on a terminal: no raw control characters
        return cls(head["step"], visible_tree(head["meta"]), arrays)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _array_entry(entry, body_len: int):
    """(key, dtype, shape, offset, nbytes) of one table row, checked against the body's size."""
    if not (isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str)):
        raise FrameProblem("an array entry is not [key, dtype, shape, offset, nbytes]")
    key, dtype, shape, offset, nbytes = entry
    if not isinstance(dtype, str) or len(dtype) > 8:
        raise FrameProblem(f"array {key!r} has no dtype")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise FrameProblem(f"array {key!r} has an unknown dtype {dtype!r}") from None
    if dt.kind not in "biuf":               # numbers only: no objects, strings or records
        raise FrameProblem(f"array {key!r} has dtype {dtype!r}, not a number type")
    if not (isinstance(shape, list) and len(shape) <= 8 and all(_is_int(d) and d >= 0 for d in shape)):
        raise FrameProblem(f"array {key!r} has a bad shape")
    if not (_is_int(offset) and _is_int(nbytes) and 0 <= offset and 0 <= nbytes and offset + nbytes <= body_len):
        raise FrameProblem(f"array {key!r} lies outside the frame")
    if int(np.prod(shape, dtype=object)) * dt.itemsize != nbytes:
        raise FrameProblem(f"array {key!r}: its shape does not match its {nbytes:,} bytes")
    return key, dt, shape, offset, nbytes
