"""The frame store when its temporary file fails: a full disk half way through a frame, then
room again. Every frame read back equals the one made, or raises; none ever differs silently,
and a session never makes a step twice (that would feed its models a token twice)."""
import errno
import functools
import os
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest

from lineage.playback import session as session_module
from lineage.playback import store as store_module
from lineage.playback.frame import Frame
from lineage.playback.session import Session
from lineage.playback.store import FrameStore
from lineage.scenario import load
from tests.lineage.playback.test_store import written


TOUR = Path(__file__).resolve().parents[3] / "lineage" / "scenarios" / "tour.yaml"


def _frame(i: int) -> Frame:
    rng = np.random.default_rng(i)
    return Frame(i, {"token": str(i)}, {f"m0/l{k}/S": rng.standard_normal((8, 16)).astype(np.float32)
                                        for k in range(101)})


@pytest.fixture(scope="module")
def made():
    """Frames 0-59 of the tour, made by a session nothing went wrong for."""
    s = Session(load(TOUR))
    return [s.frame(i) for i in range(60)]


def _same_or_raises(cursor, frames) -> int:
    """How many frames read back as made; fails at the first that reads back different."""
    same = 0
    for i, want in enumerate(frames):
        try:
            got = cursor[i] if isinstance(cursor, FrameStore) else cursor.frame(i)
        except OSError:
            continue
        differ = [k for k in want.arrays if got.arrays[k].tobytes() != want.arrays[k].tobytes()]
        assert got == want, f"step {i + 1}: {len(differ)} of {len(want.arrays)} arrays differ"
        same += 1
    return same


@pytest.fixture
def small_store(monkeypatch):
    """Sessions keep only ~2 frames in memory, so the others are read back from the file."""
    monkeypatch.setattr(session_module, "FrameStore", functools.partial(FrameStore, budget=250_000))


def test_a_file_size_limit_mid_frame_then_room_again(made, small_store, monkeypatch):
    """A real failing write (RLIMIT_FSIZE: EFBIG past the limit, with no root and no mount)
    half way through frame 11; the app steps on through the failures, then there is room."""
    resource = pytest.importorskip("resource")
    s = Session(load(TOUR))
    for i in range(10):
        s.frame(i)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # else the kernel ends the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (s.frames._end + 50_000, hard))
    try:
        for i in range(10, 20):
            try:
                s.frame(i)
            except OSError:                              # as the app does: a dialog, then the next key
                pass
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    for i in range(60):
        try:
            s.frame(i)
        except OSError:
            pass
    assert _same_or_raises(s, made) == 60                # and with the store's fix, none is lost


def test_a_full_temporary_directory_then_room_again(made, small_store, tmp_path, monkeypatch, small_fs):
    """The report's case on a real file system: TMPDIR fills up, then space is freed."""
    small = small_fs(16384)
    monkeypatch.setattr(tempfile, "tempdir", str(small))
    s = Session(load(TOUR))
    fill = os.open(small / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        try:
            while True:
                os.write(fill, b"x" * 65536)
        except OSError:
            pass
        os.ftruncate(fill, os.fstat(fill).st_size - 200_000)     # room for a frame and a half
        for i in range(60):
            if i == 5:
                os.ftruncate(fill, 0)                           # space freed
            try:
                s.frame(i)
            except OSError:
                pass
        assert _same_or_raises(s, made) == 60
    finally:
        os.close(fill)
        s.frames.close()


class Failing:
    """os.pwritev as a disk that fills: after `after` more bytes every write fails (ENOSPC),
    until `room()`; and short writes on the way."""

    def __init__(self, monkeypatch, after: int):
        self.real, self.left = store_module._pwrite, after
        monkeypatch.setattr(store_module, "_pwrite", self)

    def __call__(self, fd, views, offset):
        if self.left is not None and self.left <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        take = len(views[0]) if self.left is None else min(len(views[0]), self.left)
        n = self.real(fd, [views[0][:max(1, take // 2)]], offset)
        if self.left is not None:
            self.left -= n
        return n

    def room(self):
        self.left = None


def test_enospc_part_way_through_a_frame(monkeypatch):
    frames = [_frame(i) for i in range(30)]
    one = len(frames[0].to_bytes())
    store = FrameStore(budget=one * 6)
    disk = Failing(monkeypatch, after=one * 10 + one // 3)       # frame 10 is cut a third of the way in
    for f in frames[:15]:
        store.append(f)                                         # kept: in memory, waiting for room
    written(store)
    assert len(store) == 15 and sorted(store._unwritten) == list(range(10, 15))
    assert "No space left on device" in store.problem
    assert _same_or_raises(store, frames[:15]) == 15
    disk.room()
    for f in frames[15:]:
        store.append(f)                                         # the waiting ones are written first
    written(store)
    assert not store._unwritten and store.problem is None
    store._recent.clear()                                       # every frame from the file now
    assert _same_or_raises(store, frames) == 30


def test_a_frame_that_does_not_read_back_as_written_raises():
    store = FrameStore(budget=1)
    frames = [_frame(i) for i in range(4)]
    for f in frames:
        store.append(f)
    written(store)
    offset, n = store._spans[1][:2]
    fd = store._file.fileno()
    byte = os.pread(fd, 1, offset + n - 7)
    os.pwrite(fd, bytes([byte[0] ^ 0x10]), offset + n - 7)     # one bit of an array, on disk
    with pytest.raises(OSError, match="step 2 does not read back"):
        store[1]
    assert store[0] == frames[0] and store[2] == frames[2]


def test_when_memory_too_is_spent_the_session_stops_instead_of_stepping_twice(monkeypatch):
    monkeypatch.setattr(session_module, "FrameStore", functools.partial(FrameStore, waiting_budget=400_000))
    s = Session(load(TOUR))
    s.frame(2)
    Failing(monkeypatch, after=0)                               # the disk is full from now on
    with pytest.raises(OSError, match="could not be kept"):
        s.frame(30)                                             # ~3 frames wait in memory, then no more
    made = s.made
    with pytest.raises(OSError, match=f"step {made + 1} cannot be made"):
        s.frame(made)                                           # not made again from a model one step on
    assert s.made == made and s.frame(made - 1).step == made - 1


def test_no_temporary_directory_keeps_frames_in_memory(monkeypatch):
    def none(*a, **k):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/no/tmp")
    monkeypatch.setattr(tempfile, "TemporaryFile", none)
    store = FrameStore(budget=1 << 20)
    frames = [_frame(i) for i in range(5)]
    for f in frames:
        store.append(f)
    assert "no temporary file" in store.problem and _same_or_raises(store, frames) == 5
