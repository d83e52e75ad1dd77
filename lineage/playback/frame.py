"""A Frame: everything the panels need at one step, as plain numpy arrays and JSON-able values.

Nothing here needs torch: a frame recorded on a GPU box reads on a laptop. Arrays are keyed
by path, "m{model}/l{layer}/{name}" for per-layer data and "m{model}/{name}" for per-model data;
`meta` holds scalars and text (token, caption, cache lengths and bytes, ...).
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class Frame:
    step: int
    meta: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)      # str -> np.ndarray

    # -- reading ----------------------------------------------------------------------
    def get(self, model: int, name: str, layer: int | None = None):
        key = f"m{model}/{name}" if layer is None else f"m{model}/l{layer}/{name}"
        return self.arrays.get(key)

    def model_meta(self, model: int) -> dict:
        return self.meta["models"][model]

    def layer_meta(self, model: int, layer: int) -> dict:
        return self.meta["models"][model]["layers"][layer]

    def last_write(self, model: int, layer: int, head: int) -> np.ndarray:
        """One head's last write to its state, delta S = k^T u (K, V) in float64: u = v for
        linear attention (it adds), beta (v - read-back) for the delta rule (it corrects what k
        recalled). Frames keep k, v, the read-back and beta, not a second K x V matrix."""
        k, v, read = (self.get(model, n, layer)[head].astype(np.float64) for n in ("k", "v", "read"))
        beta = self.get(model, "beta", layer)
        linear = self.layer_meta(model, layer)["mixer"] == "linear"
        return np.outer(k, v if linear else (1.0 if beta is None else float(beta[head])) * (v - read))

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
    def to_bytes(self) -> bytes:
        table, chunks, offset = [], [], 0
        for key, a in self.arrays.items():
            a = np.ascontiguousarray(a)
            table.append([key, a.dtype.str, list(a.shape), offset, a.nbytes])
            chunks.append(a.tobytes())
            offset += a.nbytes
        head = json.dumps({"step": self.step, "meta": self.meta, "arrays": table}, separators=(",", ":")).encode()
        return struct.pack("<I", len(head)) + head + b"".join(chunks)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Frame":
        (n,) = struct.unpack_from("<I", data, 0)
        head = json.loads(data[4:4 + n])
        body = memoryview(data)[4 + n:]
        arrays = {}
        for key, dtype, shape, offset, nbytes in head["arrays"]:
            dt = np.dtype(dtype)
            if dt.hasobject or offset + nbytes > len(body):
                raise ValueError(f"array {key!r} is corrupt")
            arrays[key] = np.frombuffer(body[offset:offset + nbytes], dtype=dt).reshape(shape)
        return cls(head["step"], head["meta"], arrays)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())
