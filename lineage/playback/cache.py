"""Recorded traces kept between runs, so `lineage snapshot SCENARIO --step N` does not make the
N steps before it again each time (300 steps of the tour: 2-3 s, and the PyTorch import).

An entry is a trace file in the user's cache directory, named by a key over everything the
frames depend on: the scenario's text, the directory it is read from and the size and time of
any checkpoint it names, the source of the code that makes frames (lineage/ and kernels/), and
the settings that choose device and backend. An entry is read as a stranger's trace would be
(the trace reader checks every record it reads), then held to the scenario: its header must
carry the same scenario text, every frame up to the one asked for must pass its checksum, and
that frame must read back as that step. An entry that fails any of this is deleted and made again, never trusted.

The app uses the same entries (`open_scenario`): a scenario seen before opens on its cached
frames without waiting for PyTorch, and a session's frames are kept as it makes them.
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from ..scenario.checks import total_steps
from ..scenario.schema import Scenario
from .session import Cursor, Replay, Session, Stopped
from .trace import TraceError

BUDGET = 1 << 30              # bytes of entries kept; the oldest go first
ENV = "LINEAGE_CACHE_DIR"     # where entries go; empty or "off": no cache
_SETTINGS = ("LINEAGE_BACKEND", "LINEAGE_GRAPH", "CUDA_VISIBLE_DEVICES")


def cache_dir() -> Path | None:
    where = os.environ.get(ENV)
    if where is not None:
        return None if where in ("", "off") else Path(where)
    import platformdirs
    return Path(platformdirs.user_cache_dir("lineage")) / "traces"


def _code_digest() -> str:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]
    for folder in ("lineage", "kernels"):
        for f in sorted((root / folder).rglob("*.py")):
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _checkpoints(tree) -> list[str]:
    """Every weights file or checkpoint directory (`pretrained`) the scenario names."""
    if isinstance(tree, dict):
        return [v for k, v in tree.items() if k in ("checkpoint", "pretrained") and isinstance(v, str)] + \
               [c for v in tree.values() for c in _checkpoints(v)]
    if isinstance(tree, list):
        return [c for v in tree for c in _checkpoints(v)]
    return []


def key(sc: Scenario) -> str:
    h = hashlib.sha256()
    base = sc.base_dir
    h.update((sc.text or "").encode() + b"\0" + str(base).encode() + b"\0" + _code_digest().encode())
    for name in _checkpoints(sc.model_dump()):
        path = Path(name) if Path(name).is_absolute() or base is None else base / name
        try:                   # a checkpoint directory: each of its files (config, shards, tokenizer)
            files = sorted(path.iterdir()) if path.is_dir() else [path]
            for f in files:
                st = f.stat()
                h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}".encode())
        except OSError:
            h.update(f"{path}:missing".encode())
    for name in _SETTINGS:
        h.update(f"{name}={os.environ.get(name, '')}".encode())
    return h.hexdigest()[:32]


class Held(Cursor):
    """The frames of a cache entry, counted against the scenario's steps (the entry may hold
    fewer); no torch."""

    def __init__(self, replay: Replay, total: int):
        super().__init__()
        self.replay, self.total, self.info, self.configs = replay, total, replay.info, replay.configs

    @property
    def made(self) -> int:
        return len(self.replay.reader)

    def frame(self, i: int, progress=None, stop=None):
        if not 0 <= i < self.made:
            raise IndexError(f"step {i + 1} is not in the cached trace ({self.made} steps)")
        return self.replay.frame(i)

    def close(self) -> None:
        self.replay.close()


class Warm(Cursor):
    """The app's cursor on a scenario with a cache entry: the entry's frames while they last,
    checked as they are read; past them (or at the first frame that does not read back), a
    session, made when first needed, that starts from step 1 and keeps its frames too."""

    def __init__(self, held: Held, sc: Scenario):
        super().__init__()
        self.held, self.sc = held, sc
        self.total, self.info, self.configs = held.total, held.info, held.configs
        self.session: Session | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def made(self) -> int:
        return max(self.held.made if self.held else 0, self.session.made if self.session else 0)

    def frame(self, i: int, progress=None, stop=None):
        held = self.held
        if held is not None and i < held.made:
            try:
                return held.frame(i)
            except (TraceError, OSError, ValueError):     # found bad only now: drop it, compute instead
                if self._closed:       # the file was closed under a late reader: the entry is fine
                    raise Stopped("closed") from None
                self.held = None
                held.close()
                _delete(held.replay.reader.path)
        with self._lock:                                  # one session, however many workers ask
            if self._closed:
                raise Stopped("closed")
            if self.session is None:
                self.session = caching_session(self.sc)
        return self.session.frame(i, progress, stop)

    def close(self) -> None:
        self._closed = True
        if self.held is not None:
            self.held.close()
        with self._lock:
            if self.session is not None:
                self.session.close()


class Caching(Session):
    """A session whose frames also go to a cache entry, published when it is closed."""

    def __init__(self, sc: Scenario):
        super().__init__(sc)
        self._publish = record_into_cache(self)

    def close(self) -> None:
        super().close()
        if self._publish is not None:
            self._publish()
            self._publish = None


def caching_session(sc: Scenario) -> Session:
    return Caching(sc) if cache_dir() is not None else Session(sc)


def open_scenario(sc: Scenario) -> Cursor | None:
    """The app's cursor on `sc` when the cache has an entry for it (no torch), else None."""
    try:
        held = lookup(sc)              # every frame it holds checked now, off the UI thread
    except OSError:                    # an unreadable cache is no cache
        return None
    return None if held is None else Warm(held, sc)


def lookup(sc: Scenario, steps: int | None = None) -> Held | None:
    """The cache entry holding the first `steps` frames of `sc` (None: whatever it holds),
    checked; None when there is none (a bad entry is deleted on the way)."""
    where = cache_dir()
    if where is None or (steps is not None and steps < 1):
        return None
    path = where / f"{key(sc)}.trace"
    if not path.is_file():
        return None
    try:
        replay = Replay(path)
    except (TraceError, OSError):
        _delete(path)
        return None
    n = replay.total if steps is None else steps
    try:
        if replay.scenario_text != sc.text:
            raise TraceError(f"{path}: the trace of another scenario")
        if replay.total < max(n, 1):
            replay.close()             # a shorter run of this scenario: a longer one will replace it
            return None
        # every frame's checksum (what the panels look back at too), the last one read in full
        replay.reader.verify(n)
        if replay.frame(n - 1).step != n - 1:
            raise TraceError(f"{path}: frame {n - 1} is not step {n}")
    except (TraceError, OSError, ValueError):
        replay.close()
        _delete(path)
        return None
    os.utime(path)                     # recently used: the budget removes others first
    return Held(replay, total_steps(sc) or replay.total)


def record_into_cache(session: Session):
    """From now on the session's frames also go to a new cache entry. Returns the function to
    call once the session is closed (it makes the entry the scenario's), or None when there is
    no cache or it cannot be written (the snapshot is made all the same). Each process writes
    a file of its own, so two snapshots of one scenario never collide."""
    where = cache_dir()
    if where is None:
        return None
    try:
        where.mkdir(parents=True, exist_ok=True)
        _tidy(where)
        name = key(session.sc)
        own = where / f"{name}.{os.getpid()}.tmp"
        session.record_to(own, overwrite=True)
    except OSError:
        return None

    def publish() -> None:
        path = where / f"{name}.trace"
        try:
            if path.exists() and path.stat().st_size >= own.stat().st_size:
                _delete(own)           # the entry there holds as many frames or more: keep it
            else:
                os.replace(own, path)
        except OSError:
            _delete(own)
    return publish


def _tidy(where: Path) -> None:
    """Drop what a killed run left (a day old) and the oldest entries beyond the budget."""
    now = time.time()
    for f in where.glob("*.tmp*"):
        try:
            if now - f.stat().st_mtime > 86400:
                f.unlink()
        except OSError:
            pass
    entries = []
    for f in where.glob("*.trace"):
        try:
            st = f.stat()
            entries.append((st.st_mtime, st.st_size, f))
        except OSError:
            pass
    total = sum(size for _, size, _ in entries)
    for _, size, f in sorted(entries):
        if total <= BUDGET:
            break
        _delete(f)
        total -= size


def _delete(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
