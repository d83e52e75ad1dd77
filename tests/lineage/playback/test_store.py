"""The frame store: every frame comes back bit for bit, whether it was still in memory or read
back from disk, and memory holds to its budget however many frames are made."""
import threading
import time

import numpy as np
import pytest

from lineage.playback.frame import Frame
from lineage.playback.store import FrameStore


def _frame(i: int) -> Frame:
    rng = np.random.default_rng(i)
    return Frame(i, {"token": str(i), "caption": None},
                 {"m0/l0/S": rng.standard_normal((4, 32, 32)).astype(np.float16), "m0/x": np.full(3, i, np.int64)})


def written(store: FrameStore) -> None:
    """Wait until the store's writer has written every frame it can (all of them, unless the
    file fails: then `problem` says why and those frames wait in memory). The app never waits
    for it (a frame not on file yet is read from memory): only these tests look at the file."""
    with store._lock:
        store._changed.wait_for(store._idle)


def test_frames_round_trip_past_the_budget():
    one = len(_frame(0).to_bytes())
    store = FrameStore(budget=one * 5 + 10)        # room for five frames in memory
    frames = [_frame(i) for i in range(40)]
    for f in frames:
        store.append(f)
    assert len(store) == 40 and store._held <= store.budget
    assert len(store._recent) == 5
    for i in (0, 39, 17, 0, 3):                    # old ones from disk, new ones from memory
        assert store[i] == frames[i]
    assert store._held <= store.budget
    assert list(store) == frames
    with pytest.raises(IndexError):
        store[40]
    with pytest.raises(ValueError, match="in order"):
        store.append(_frame(41))


def test_reads_while_a_worker_appends():
    """The UI reads earlier frames, some in memory and some back from the file, while the
    stepping worker appends: each read is the frame made, whatever the interleaving."""
    store, frames = FrameStore(budget=1 << 16), [_frame(i) for i in range(200)]   # ~7 frames in memory
    errors, read, during = [], set(), []
    started, done = threading.Event(), threading.Event()

    def reader():
        k = 0
        started.set()
        while not done.is_set():
            n = len(store)
            if n:                                   # odd reads stride over every earlier frame (most
                if k % 2:                           # back from the file), even ones take one of the
                    i = (k * 7919) % n              # newest four (still in memory)
                else:
                    i = n - 1 - (k // 2) % min(n, 4)
                if store[i] != frames[i]:
                    errors.append(i)
                read.add(i)
                if n < len(frames):
                    during.append((i, n))
            k += 1
        for i in range(len(store)):                 # and then every one, whatever the box's speed
            if store[i] != frames[i]:
                errors.append(i)
            read.add(i)
    t = threading.Thread(target=reader)
    t.start()
    started.wait()
    for f in frames:
        store.append(f)
        time.sleep(0)                               # let the reader in between appends
    done.set()
    t.join()
    assert not errors
    assert read == set(range(len(frames)))           # from disk and from memory
    # and many of them while the worker appended: old frames (from the file) and the newest
    assert len({i for i, n in during if n - i > 16}) > 5 and len({i for i, n in during if n - i <= 4}) > 5, during


class Held:
    """os.pwritev as a slow disk: every write waits until `go` is set."""

    def __init__(self, monkeypatch):
        from lineage.playback import store as store_module
        self.real, self.go, self.calls = store_module._pwrite, threading.Event(), 0
        monkeypatch.setattr(store_module, "_pwrite", self)

    def __call__(self, fd, views, offset):
        self.calls += 1
        assert self.go.wait(10), "the test never let the write through"
        return self.real(fd, views, offset)


def test_a_step_does_not_wait_for_its_frame_to_be_written(monkeypatch):
    """The write goes to the store's writer thread: append returns while the disk is still busy
    with the frame, which is served from memory meanwhile, then read back from the file."""
    disk = Held(monkeypatch)
    store, frames = FrameStore(budget=1), [_frame(i) for i in range(3)]
    for f in frames:
        store.append(f)                             # would hang here if the write were in append
    assert len(store) == 3 and store[0] == frames[0] and store._spans[0] is None
    disk.go.set()
    written(store)
    assert all(span is not None for span in store._spans) and not store._unwritten
    store._recent.clear()
    assert list(store) == frames                    # every one from the file now
    store.close()


def test_a_writer_behind_by_the_waiting_budget_holds_the_step_back(monkeypatch):
    """Frames waiting for the writer count against the waiting budget: past it, append waits
    for the disk instead of holding more in memory (and instead of refusing the frame)."""
    disk = Held(monkeypatch)
    one = len(_frame(0).to_bytes())
    store, frames = FrameStore(budget=1, waiting_budget=2 * one), [_frame(i) for i in range(4)]
    store.append(frames[0])
    store.append(frames[1])
    third = threading.Thread(target=store.append, args=(frames[2],))
    third.start()
    third.join(0.3)
    assert third.is_alive() and len(store) == 2      # waiting for the disk
    disk.go.set()
    third.join(10)
    store.append(frames[3])
    written(store)
    assert list(store) == frames and store.problem is None
    store.close()
