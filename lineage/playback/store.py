"""Every frame a session has made, in a fixed amount of memory, each one served as it was made.

Stepping back reads a recorded frame, never recomputes it, so a session keeps every frame; held
in memory, a k3-mini tour grew by about 150 KB a step (2.6 MB/s at top speed; 15 GB projected
at the 100,000-step limit). Here the newest frames stay in memory up to a byte budget and every
frame is also written to an unlinked temporary file (nothing is left behind, even on a crash),
from which older ones are read back when asked for.

The write happens on a writer thread of the store's own, so the step that made a frame does not
wait for its checksum and write (on an H200 a 27-layer Kimi Linear frame of 2.18 MB took 3 ms of
a 10.9 ms step there; zlib and pwritev let go of the GIL, so the next step runs meanwhile). A
frame counts as waiting in memory until it is on file; the writer may fall behind by at most the
waiting budget, then `append` waits for it. The thread ends when it has had nothing to do for a
moment (a store dropped with its session is not kept alive by it).

The file may fail us: the temporary directory fills up, then has room again. So a frame is
written unbuffered at an offset of its own (no buffer or file position a failed write can leave
behind), and its span counts only once the whole of it is written; its crc32 is checked each
time it is read back, so a frame that does not read back as written raises (OSError) instead of
being served. A frame the file would not take stays in memory and is written at the next append
that finds room. Only when those frames outgrow a budget of their own does `append` refuse
(OSError): the caller learns that this frame was not kept. Frames are immutable, so a frame
read back equals the one made, bit for bit, or is not served at all.
"""
from __future__ import annotations

import atexit
import ctypes
import errno
import os
import tempfile
import threading
import weakref
import zlib
from collections import OrderedDict

from .frame import Frame

MEMORY_BUDGET = 128 << 20      # bytes of frames kept in memory: ~1,100 k3-mini frames of ~118 KB
_IOV_MAX = 1024                # buffers in one pwritev (POSIX guarantees at least 16, Linux 1024)
_WRITER_IDLE_S = 1.0           # the writer thread ends after this long with nothing to write


def _give_large_frees_back() -> None:
    """glibc raises its mmap threshold each time a large block is freed, so a long session's
    growing caches and frames move onto the heap, where the holes evicted frames leave are never
    returned: a k3-mini session held 1.8 GB after 3,000 steps with the store, 0.58 GB with the
    threshold fixed at its default (which also stops the raising). Not glibc: nothing to do."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 128 << 10)      # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def _pwrite(fd: int, views: list, offset: int) -> int:
    """Write some of `views` (byte memoryviews, in order) at `offset`; the bytes written."""
    if hasattr(os, "pwritev"):
        return os.pwritev(fd, views[:_IOV_MAX], offset)
    return os.pwrite(fd, views[0], offset)


def _pread(fd: int, n: int, offset: int) -> bytes:
    return os.pread(fd, n, offset)


def _write_all(fd: int, parts: list, offset: int) -> tuple[int, int]:
    """Every byte of `parts` at `offset`, however short the writes: (bytes, crc32)."""
    views = [v for v in (memoryview(p).cast("B") for p in parts) if len(v)]
    crc = 0
    for v in views:
        crc = zlib.crc32(v, crc)
    total = sum(len(v) for v in views)
    pos = offset
    while views:
        n = _pwrite(fd, views, pos)
        if n <= 0:
            raise OSError(errno.EIO, "the frame file took no bytes")
        pos += n
        while n:                                     # drop what was written, keep the rest
            if n >= len(views[0]):
                n -= len(views.pop(0))
            else:
                views[0], n = views[0][n:], 0
    return total, crc


def _read_all(fd: int, n: int, offset: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        b = _pread(fd, n - got, offset + got)
        if not b:
            break
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


# Stores whose writer thread may still be alive. A writer that ends during interpreter shutdown
# can hold a store's last reference: freeing its frames there frees torch tensors, which drops
# the GIL, and a daemon thread that asks for it back then is cancelled mid-C++ (the process
# aborts: "terminate called without an active exception"). Closing them at exit ends every
# writer while the interpreter still runs.
_OPEN: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for store in list(_OPEN):
        store.close()


class FrameStore:
    def __init__(self, budget: int = MEMORY_BUDGET, waiting_budget: int = MEMORY_BUDGET):
        """budget: bytes of recent frames kept in memory; waiting_budget: bytes of frames kept in
        memory (besides) until the file has them: while the writer catches up, or while the file
        cannot take them."""
        _give_large_frees_back()
        self.budget, self.waiting_budget = budget, waiting_budget
        self.problem: str | None = None          # why the file fails writes, while it does
        try:
            self._file = tempfile.TemporaryFile(prefix="lineage-frames-", buffering=0)
        except OSError as e:                         # no temporary directory: frames stay in memory
            self._file, self.problem = None, f"no temporary file for frames ({e.strerror or e})"
        self._spans: list[tuple[int, int, int] | None] = []   # (offset, length, crc32) of frame i, None: not on file
        self._end = 0                                # the file's bytes in use: every span lies before it
        self._unwritten: OrderedDict[int, tuple] = OrderedDict()   # i -> (frame, bytes, parts): not on file yet
        self._unwritten_bytes = 0
        self._recent: OrderedDict[int, tuple[Frame, int]] = OrderedDict()     # i -> (frame, its bytes)
        self._held = 0                                   # bytes of the frames in _recent
        # the stepping worker appends while the UI reads and the writer writes; _changed wakes
        # the writer (work to do, a retry asked) and whoever waits for it (a frame written)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._writer: threading.Thread | None = None
        self._writing = False                            # the writer holds a frame it is writing
        self._retry = False                              # after a failure: try the waiting frames again
        self._closed = False

    def __len__(self) -> int:
        return len(self._spans)

    def append(self, frame: Frame) -> None:
        """Keep `frame`; OSError (and the frame not kept) only when the file cannot take it and
        the frames waiting for the file already fill the budget."""
        parts = frame.parts()                            # here, so the writer thread runs no Python to speak of
        n = sum(memoryview(p).nbytes for p in parts)
        with self._lock:
            i = len(self._spans)
            if frame.step != i:
                raise ValueError(f"frames are stored in order: expected step {i}, got {frame.step}")
            if self._file is not None:
                if self.problem is not None:             # the file failed: try it again now, and wait
                    self._retry = True
                    self._start_writer()
                    self._changed.wait_for(self._idle)
                while self.problem is None and self._unwritten and self._unwritten_bytes + n > self.waiting_budget:
                    self._changed.wait()                 # the writer is behind: wait for it, not refuse
            if self.problem is not None:
                self._refuse_past_budget(i, n)
            self._spans.append(None)                     # not on file yet: it waits in memory
            self._unwritten[i] = (frame, n, parts)
            self._unwritten_bytes += n
            self._keep(i, frame, n)
            if self._file is not None and self.problem is None:
                self._start_writer()
                self._changed.notify_all()

    def _idle(self) -> bool:
        return not self._writing and (not self._unwritten or self._file is None
                                      or (self.problem is not None and not self._retry))

    def _refuse_past_budget(self, i: int, n: int) -> None:
        if self._unwritten and self._unwritten_bytes + n > self.waiting_budget:    # one frame always fits
            raise OSError(errno.ENOSPC, f"step {i + 1} could not be kept: {self.problem}; "
                          f"{self._unwritten_bytes / 1e6:.0f} MB of frames already wait in memory for room on disk")

    def _start_writer(self) -> None:
        if self._writer is None and not self._closed:     # (under the lock)
            self._writer = threading.Thread(target=self._write_loop, name="lineage-frame-writer", daemon=True)
            _OPEN.add(self)
            self._writer.start()

    def _write_loop(self) -> None:
        """The writer thread: the waiting frames onto the file, oldest first, each whole (then its
        span is set and it stops waiting) or not at all (then `problem` says why, and the frames
        wait until an append asks for a retry). Only this thread writes the file."""
        while True:
            with self._lock:
                if not self._changed.wait_for(lambda: self._closed or not self._idle(),
                                              timeout=_WRITER_IDLE_S) or self._closed:
                    self._writer = None                  # nothing to do for a while: end (a new one starts)
                    self._changed.notify_all()
                    return
                self._retry = False
                i, (_, n, parts) = next(iter(self._unwritten.items()))
                self._writing, end = True, self._end
            span, problem = self._write(parts, end)     # outside the lock: readers read on
            with self._lock:
                self._writing = False
                self.problem = problem
                if span is not None:
                    self._spans[i] = span
                    self._end += n
                    del self._unwritten[i]
                    self._unwritten_bytes -= n
                self._changed.notify_all()

    def _write(self, parts: list, offset: int) -> tuple[tuple[int, int, int] | None, str | None]:
        """A frame's bytes (`parts`) onto the file at `offset`, whole: ((offset, bytes, crc32),
        None), or not at all: (None, why)."""
        try:
            n, crc = _write_all(self._file.fileno(), parts, offset)
        except OSError as e:
            try:                                     # give back what the torn write took
                os.ftruncate(self._file.fileno(), offset)
            except OSError:
                pass
            return None, f"the frames' temporary file cannot be written ({e.strerror or e})"
        return (offset, n, crc), None

    def __getitem__(self, i: int) -> Frame:
        with self._lock:
            held = self._recent.get(i) or self._unwritten.get(i)
            if held is not None:
                if i in self._recent:
                    self._recent.move_to_end(i)
                return held[0]
            offset, n, crc = self._spans[i]              # IndexError past the end, as a list
            data = _read_all(self._file.fileno(), n, offset)
            if len(data) != n or zlib.crc32(data) != crc:
                raise OSError(errno.EIO, f"step {i + 1} does not read back from the frames' temporary file as it "
                              "was written (the disk returned other bytes); it is not shown")
            f = Frame.from_bytes(data)
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
        with self._lock:
            self._closed = True
            self._changed.notify_all()
            writer = self._writer
        if writer is not None:
            writer.join()                                # not while it writes: then the file closes
        if self._file is not None:
            self._file.close()
