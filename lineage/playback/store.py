"""Every frame a session has made, in a fixed amount of memory.

Stepping back reads a recorded frame, never recomputes it, so a session keeps every frame; held
in memory, a k3-mini tour grew by about 150 KB a step (2.6 MB/s at top speed; 15 GB projected
at the 100,000-step limit). Here the newest frames stay in memory up to a byte budget and every
frame is also appended to an unlinked temporary file (nothing is left behind, even on a crash),
from which older ones are read back when asked for. Frames are immutable, so a frame read back
equals the one made, bit for bit.
"""
from __future__ import annotations

import ctypes
import tempfile
import threading
from collections import OrderedDict

from .frame import Frame

MEMORY_BUDGET = 128 << 20      # bytes of frames kept in memory: ~1,100 k3-mini frames of ~118 KB


def _give_large_frees_back() -> None:
    """glibc raises its mmap threshold each time a large block is freed, so a long session's
    growing caches and frames move onto the heap, where the holes evicted frames leave are never
    returned: a k3-mini session held 1.8 GB after 3,000 steps with the store, 0.58 GB with the
    threshold fixed at its default (which also stops the raising). Not glibc: nothing to do."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 128 << 10)      # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


class FrameStore:
    def __init__(self, budget: int = MEMORY_BUDGET):
        _give_large_frees_back()
        self.budget = budget
        self._file = tempfile.TemporaryFile(prefix="lineage-frames-")
        self._spans: list[tuple[int, int]] = []          # (offset, length) of frame i in the file
        self._end = 0
        self._recent: OrderedDict[int, tuple[Frame, int]] = OrderedDict()     # i -> (frame, its bytes)
        self._held = 0                                   # bytes of the frames in _recent
        self._lock = threading.Lock()                    # the stepping worker appends while the UI reads

    def __len__(self) -> int:
        return len(self._spans)

    def append(self, frame: Frame) -> None:
        with self._lock:
            if frame.step != len(self._spans):
                raise ValueError(f"frames are stored in order: expected step {len(self._spans)}, got {frame.step}")
            self._file.seek(self._end)
            n = frame.write_to(self._file)              # piece by piece: no frame-sized temporary
            self._spans.append((self._end, n))
            self._end += n
            self._keep(frame.step, frame, n)

    def __getitem__(self, i: int) -> Frame:
        with self._lock:
            held = self._recent.get(i)
            if held is not None:
                self._recent.move_to_end(i)
                return held[0]
            offset, n = self._spans[i]                   # IndexError past the end, as a list
            self._file.seek(offset)
            f = Frame.from_bytes(self._file.read(n))
            self._keep(i, f, n)
            return f

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def _keep(self, i: int, frame: Frame, n: int) -> None:
        self._recent[i] = (frame, n)
        self._held += n
        while self._held > self.budget and len(self._recent) > 1:      # the least recently used go
            _, (_, m) = self._recent.popitem(last=False)
            self._held -= m

    def close(self) -> None:
        self._file.close()
