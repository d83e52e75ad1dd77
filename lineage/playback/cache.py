"""Recorded traces kept between runs, so `lineage snapshot SCENARIO --step N` does not make the
N steps before it again each time (300 steps of the tour: 2-3 s, and the PyTorch import).

An entry is a trace file in the cache's own folder, named by a key over everything the frames
depend on: the scenario's text, the directory it is read from, the contents of its input file
(`input: {file: ...}`: edited, the same YAML makes other frames), the size and time of any
checkpoint it names, the source of the code that makes frames (lineage/ but its app and command line), and the
settings that choose device and backend. An entry is read as a stranger's trace would be (the
trace reader checks every record it reads), then held to the scenario: its header must carry the
same scenario text, every frame up to the one asked for must pass its checksum, and that frame
must read back as that step. An entry that fails any of this is deleted and made again, never trusted.

The cache deletes only what it made. The directory the user names (LINEAGE_CACHE_DIR, or the
user cache directory) may hold anything, so the cache keeps to a folder of its own inside it,
`lineage-trace-cache/`, made by it (mode 0700) with a CACHEDIR.TAG (bford.info/cachedir: backup
tools skip it), and lists and deletes only files of its own exact names there: entries
`<key>.trace` and partials `<key>.<host>-<pid>-<n>.partial`. A folder of that name without the tag
is not used, and nothing in it is touched. A partial is what a run that was killed left: it goes
as soon as the process that wrote it is gone (same host, its pid not alive), or after a day.
Nothing is ever read or written through a symbolic link, and every file is created exclusively.

The folder and the directory above it must be the user's and writable by nobody else, or another
local user could plant frames: otherwise the cache is not used, and `cache_problem()` says why in
one line (the app shows it in its status line, `snapshot` on stderr). A cache that cannot be
written (a full disk, its folder removed while the app runs) never stops a session: the entry is
abandoned, its partial deleted, and a note says so.

An entry that outgrows the whole budget (BUDGET) while it is written is abandoned the same way,
with one note: kept, it would only be evicted whole by the next write.

The app uses the same entries (`open_scenario`): a scenario seen before opens on its cached
frames without waiting for PyTorch, and a session's frames are kept as it makes them.
"""
from __future__ import annotations

import itertools
import os
import re
import stat
import threading
import time
from pathlib import Path

from ..arithmetic import fmt_bytes
from ..files import _DAY, _HOST, _writing, writer_alive
from ..files import publish as publish_file
from ..files import read_regular, write_new
from ..scenario.checks import total_steps
from ..scenario.schema import Scenario
from .cache_key import key
from .session import Cursor, Replay, Session, Stopped
from .trace import TraceError, TraceWriter

BUDGET = 1 << 30              # bytes of entries kept; the oldest go first
ENV = "LINEAGE_CACHE_DIR"     # where the cache's folder goes; empty or "off": no cache
FOLDER = "lineage-trace-cache"    # the cache's own folder in that directory: it deletes only in here
TAG = "CACHEDIR.TAG"
_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
_TAG_TEXT = (_SIGNATURE + "\n# This file is a cache directory tag created by lineage (its trace cache).\n"
             "# For information about cache directory tags, see https://bford.info/cachedir/\n")
_ENTRY = re.compile(r"[0-9a-f]{32}\.trace")
_PARTIAL = re.compile(r"[0-9a-f]{32}\.([0-9a-f]{8})-([0-9]{1,10})-[0-9]{1,10}\.partial")
_SEQ = itertools.count()      # partials of one process differ too (the app may hold two sessions of a scenario)


def cache_dir() -> Path | None:
    """The directory the user chose for the cache (the cache itself keeps to FOLDER in it), or
    None when the cache is off."""
    where = os.environ.get(ENV)
    if where is not None:
        return None if where in ("", "off") else Path(where)
    import platformdirs
    return Path(platformdirs.user_cache_dir("lineage")) / "traces"


def cache_problem() -> str | None:
    """One line saying why the trace cache is not used (its directory is another user's or
    writable by others, its folder was not made by lineage, it cannot be made); None when it may
    be used or is off. Makes the cache's folder if need be. What a run could not keep is said in
    the notes `record_into_cache` is given and the entry's `problem`, not here: no state is kept
    between runs of one process."""
    return _folder(create=True)[1]


def _folder(create: bool) -> tuple[Path | None, str | None]:
    """(the cache's own folder, None) when it may be used; (None, why not) when it may not;
    (None, None) when the cache is off or (without `create`) not made yet."""
    base = cache_dir()
    if base is None:
        return None, None
    sub = base / FOLDER
    try:
        if create:
            base.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            st = os.stat(base)            # the user's directory may be a link (onto scratch space, say)
        except FileNotFoundError:
            return None, None
        why = "is not a directory" if not stat.S_ISDIR(st.st_mode) else _unsafe(base, st)
        if why is not None:
            return None, f"trace cache not used: {base} {why}"
        try:
            st = os.lstat(sub)
        except FileNotFoundError:
            if not create:
                return None, None
            try:
                os.mkdir(sub, 0o700)
            except FileExistsError:      # another run made it meanwhile
                pass
            st = os.lstat(sub)
        why = "is not a directory lineage made" if not stat.S_ISDIR(st.st_mode) else _unsafe(sub, st)
        if why is None and not _tagged(sub):
            if create and not os.listdir(sub):           # ours, just made (or a run died before tagging it)
                try:
                    write_new(sub / TAG, _TAG_TEXT, mode=0o600)
                except FileExistsError:
                    pass
            if not _tagged(sub):
                why = f"has no {TAG}: lineage did not make it, so it is left alone"
        if why is not None:
            return None, f"trace cache not used: {sub} {why}"
    except OSError as e:
        return None, f"trace cache not used: {e.filename or base}: {e.strerror or e}"
    return sub, None


def _uid() -> int | None:
    return os.getuid() if hasattr(os, "getuid") else None


def _unsafe(path: Path, st: os.stat_result) -> str | None:
    """Why a directory of the cache lets another user plant or change files, or None."""
    uid = _uid()
    if uid is None:                   # not POSIX: no owners or mode bits to go by
        return None
    if st.st_uid != uid:
        return f"belongs to user id {st.st_uid}, not to you ({uid})"
    loose = st.st_mode & 0o022
    if loose:
        who = "its group and others" if loose == 0o022 else "its group" if loose == 0o020 else "others"
        return f"is writable by {who} (chmod go-w {path})"
    return None


def _own_file(st: os.stat_result) -> bool:
    """A regular file (not a link) of the user's: the only kind the cache reads or deletes."""
    uid = _uid()
    return stat.S_ISREG(st.st_mode) and (uid is None or st.st_uid == uid)


def _tagged(sub: Path) -> bool:
    try:
        if not _own_file(os.lstat(sub / TAG)):
            return False
        return read_regular(sub / TAG, 4096).startswith(_SIGNATURE.encode())
    except OSError:
        return False


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
    """A session whose frames also go to a cache entry, published when it is closed; what the
    cache could not do is one of its notes (the app's status line shows them)."""

    def __init__(self, sc: Scenario):
        super().__init__(sc)
        self._publish = record_into_cache(self, self.notes)

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
    checked; None when there is none or the cache may not be used (a bad entry is deleted on
    the way; a link or another user's file at its name is neither read nor deleted)."""
    where, _ = _folder(create=False)
    if where is None or (steps is not None and steps < 1):
        return None
    path = where / f"{key(sc)}.trace"
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not _own_file(st):
        return None
    try:
        replay = Replay(path)
    except (TraceError, OSError):
        _delete(path)
        return None
    n = replay.total if steps is None else steps
    try:
        opened = replay.reader.file_stat()
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            replay.close()             # swapped since we looked: not the file we checked
            return None
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
    try:
        os.utime(path, follow_symlinks=False)     # recently used: the budget removes others first
    except (OSError, NotImplementedError):
        pass
    return Held(replay, total_steps(sc) or replay.total)


def record_into_cache(session: Session, notes: list | None = None):
    """From now on the session's frames also go to a new cache entry. Returns the function to
    call once the session is closed (it makes the entry the scenario's; its `problem` says why,
    if it could not), or None when there is no cache or it may not be used (`cache_problem()`
    says why; the snapshot is made all the same). `notes`: where to add a line about what the
    cache could not do (the app passes the session's own). Each process writes a file of its
    own, so two snapshots of one scenario never collide."""
    where, problem = _folder(create=True)
    if where is None:
        if problem is not None and notes is not None:
            notes.append(problem)
        return None
    _tidy(where)
    try:
        entry = _Entry(session, where, notes)
    except OSError as e:               # not even its header could be written
        _failed(f"trace cache: this run's frames are not kept ({e.strerror or e})", notes)
        return None
    session.record_into(entry)
    return entry


def _failed(note: str, notes: list | None) -> None:
    if notes is not None and note not in notes:
        notes.append(note)


class _Entry(TraceWriter):
    """A cache entry being written: the session's trace, in a partial named by this process,
    that never raises. A failed write (a full disk) abandons it: the partial is deleted at once,
    later frames are not written, and the session steps on. Called, it publishes the entry."""

    def __init__(self, session: Session, where: Path, notes: list | None):
        name = key(session.sc)
        self.where, self.notes, self.problem, self.abandoned = where, notes, None, False
        partial = where / f"{name}.{_HOST}-{os.getpid()}-{next(_SEQ)}.partial"
        _writing.add(partial.name)
        try:
            super().__init__(where / f"{name}.trace", session.sc.text or "", session.info, overwrite=True,
                             partial=partial, mode=0o600)
        except BaseException:
            _writing.discard(partial.name)
            raise

    def write(self, frame) -> None:
        if not self.abandoned:
            try:
                super().write(frame)
            except (OSError, ValueError) as e:
                self._abandon(e)
                return
            if self._end > BUDGET:
                self._too_big()

    def _too_big(self) -> None:
        """An entry past the whole budget would be published only to be evicted whole by the
        next write (a 1.42 GB one was): stop now, drop what was written, and say so once. The
        newest entry goes last, so one within the budget always survives the next tidy."""
        self._abandon(None)
        self.problem = (f"trace cache: this run's frames are not kept (by step {self.frames:,} they pass the "
                        f"cache's {fmt_bytes(BUDGET)} budget)")
        _failed(self.problem, self.notes)

    def close(self) -> None:
        """The footer, and the file closed (not published: calling the entry does that)."""
        if not self.abandoned:
            try:
                super().close()
            except OSError as e:
                self._abandon(e)

    def _publish(self) -> None:
        pass

    def _abandon(self, e: Exception | None) -> None:
        """Stop writing and delete the partial; `e`, the failed write (None: the caller says why)."""
        self.abandoned = True
        try:
            self._f.close()
        except OSError:
            pass
        self._drop()
        if e is None:
            return
        gone = not os.path.isdir(self.where)
        self.problem = "trace cache: this run's frames are not kept (" + \
            ("its folder was removed)" if gone else f"{getattr(e, 'strerror', None) or e})")
        _failed(self.problem, self.notes)

    def __call__(self) -> None:
        """Make the entry the scenario's, unless the one there holds as many frames or more, or
        is not the cache's (a link, another user's file: left as it is)."""
        self.close()
        if self.abandoned:
            return
        if self.frames == 0:           # closed before its first step (q while opening): nothing to keep
            self._drop()
            return
        try:
            try:
                there = os.lstat(self.path)
            except FileNotFoundError:
                publish_file(self.partial, self.path)
            else:
                if not _own_file(there):
                    self._drop()
                    self.problem = f"trace cache: {self.path} is not an entry lineage made; left as it is"
                    _failed(self.problem, self.notes)
                    return
                if there.st_size >= os.lstat(self.partial).st_size:
                    self._drop()               # the entry there holds as many frames or more: keep it
                else:
                    publish_file(self.partial, self.path, overwrite=True)
        except FileExistsError:                # another run's entry appeared meanwhile: it stays
            self._drop()
            return
        except OSError as e:                   # the folder removed meanwhile, a full disk: no entry
            self._abandon(e)
            return
        _writing.discard(self.partial.name)

    def _drop(self) -> None:
        _delete(self.partial)
        _writing.discard(self.partial.name)


def _tidy(where: Path) -> None:
    """In the cache's own folder: drop the partials of runs that are gone (at once when they ran
    on this host, else after a day) and the oldest entries beyond the budget. Nothing but files
    of the cache's own names is looked at, and no link is followed."""
    now = time.time()
    entries = []
    try:
        with os.scandir(where) as it:
            listing = list(it)
    except OSError:
        return
    for f in listing:
        partial = _PARTIAL.fullmatch(f.name)
        if partial is None and _ENTRY.fullmatch(f.name) is None:
            continue
        try:
            st = f.stat(follow_symlinks=False)
        except OSError:
            continue
        if not _own_file(st):
            continue
        if partial is None:
            entries.append((st.st_mtime, st.st_size, Path(f.path)))
        elif now - st.st_mtime > _DAY or (partial[1] == _HOST and not writer_alive(int(partial[2]), f.name)):
            _delete(Path(f.path))
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
