"""Files without surprises: inputs opened only when regular and read with a bound; outputs
written whole or not at all, never through a symbolic link, never over a file without leave.

A scenario or trace path may name anything: a FIFO (a plain open() would block until a
writer appears), /dev/zero or /dev/urandom (a plain read() never ends), a directory. We open
with O_NONBLOCK, so even a FIFO returns at once, then ask the open descriptor (not the path,
which could be swapped in between) what it is, and refuse everything but a regular file.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import socket
import stat
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

_KINDS = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket")]


def kind_of(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def replace_problem(path: str | Path) -> str | None:
    """Why `path`, where something is, must not be replaced even with --force, or None (nothing
    there, a regular file, or a symbolic link, which is replaced and its target left untouched).
    A writer makes a regular file: put in place of /dev/null (as root), a FIFO or a socket, it
    would silently break whatever reads or serves there, so those are never replaced."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    return f"is {kind_of(mode)}; lineage replaces only regular files (choose another name)"


def open_regular(path: str | Path) -> BinaryIO:
    """The file opened for binary reading, or OSError (strerror says why) for anything that
    is not a regular file. Never blocks."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(0, f"{kind_of(mode)}, not a regular file: refused without reading", str(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | Path, limit: int) -> bytes:
    """The whole of a regular file of at most `limit` bytes. The bound holds while reading
    too, so a file that grows after the size check cannot push us past it."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise OSError(0, f"file is {size:,} bytes (limit {limit:,})", str(path))
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(0, f"file grew past {limit:,} bytes while being read", str(path))
    return data


def publish(partial: str | Path, path: str | Path, overwrite: bool = False) -> None:
    """Make a finished temporary file the real one in one step, so a reader never sees half a
    file: with `overwrite`, an atomic rename over `path` (a symbolic link there is replaced, its
    target untouched; a device, FIFO or socket is not: FileExistsError, `partial` kept); without,
    a hard link that fails (with FileExistsError, `partial` kept) rather than replace a file, or
    a link, made meanwhile. A file system without hard links (some FUSE and SMB mounts) gets a
    rename that never replaces: `_move_new`."""
    if overwrite:
        problem = replace_problem(path)       # checked at the last moment: a FIFO made since output_problem
        if problem is not None:               # as a file there without overwrite: `partial` kept
            raise FileExistsError(0, problem, str(path))
        os.replace(partial, path)
        return
    try:
        os.link(partial, path, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:                           # a file system without hard links
        _move_new(partial, path)
        return
    os.unlink(partial)


def _move_new(partial: str | Path, path: str | Path) -> None:
    """Rename `partial` to `path` unless something is there (FileExistsError, `partial` kept),
    and never replace what appears meanwhile: checking first and then renaming would replace a
    file made in between. renameat2(RENAME_NOREPLACE) where the system and file system have it;
    else the name is taken first, exclusively (an empty file, which only this rename replaces:
    another writer's exclusive link or create then fails), and the rename replaces that."""
    if _rename_noreplace(partial, path):
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)          # FileExistsError where anything is there, a link included
    try:
        mine = os.fstat(fd)
    finally:
        os.close(fd)
    try:
        os.replace(partial, path)
    except BaseException:
        try:                                  # the name taken back, if it is still this placeholder
            st = os.lstat(path)
            if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
                os.unlink(path)
        except OSError:
            pass
        raise


def _rename_noreplace(src: str | Path, dst: str | Path) -> bool:
    """Linux's renameat2(src, dst, RENAME_NOREPLACE): True once renamed, FileExistsError where
    dst exists, False where the system or the file system has no such rename."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes                             # here: only a file system without hard links comes here
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):         # a C library older than glibc 2.28
        return False
    AT_FDCWD, RENAME_NOREPLACE = -100, 1
    if fn(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(dst))     # EEXIST: a FileExistsError


# -- writing: every command that makes a file goes through these ------------------------------

_NAME_MAX = 255


def name_max(directory: str | Path) -> int:
    """The longest file name (in bytes) the file system under `directory` takes."""
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return _NAME_MAX


def output_problem(out: str | Path, inputs=(), force: bool = False) -> str | None:
    """Why a command must not start writing `out`, or None. The rules every writer keeps: no
    symbolic link is written through (not even a dangling one), no directory, no input taken
    as output, and an existing file is replaced only with `force`. Checked before any work."""
    try:
        return _output_problem(Path(out), inputs, force)
    except OSError as e:                   # a path the system cannot even look up (ELOOP, ENAMETOOLONG)
        return e.strerror or str(e)


def _output_problem(out: Path, inputs, force: bool) -> str | None:
    parent = out.parent
    if not parent.is_dir():
        return f"no such directory: {parent}"
    size, limit = len(os.fsencode(out.name)), name_max(parent)
    if size > limit:                       # asked first: every other question about it raises
        return f"the file name is {size} bytes; this file system takes at most {limit}"
    if out.is_symlink():
        return "is a symbolic link; lineage never writes through one (remove it or choose another name)"
    if out.is_dir():
        return "is a directory (give a file name)"
    special = replace_problem(out)         # a device, FIFO or socket: not even with force
    if special is not None:
        return special
    if out.exists():
        for src in inputs:
            try:
                if os.path.samefile(out, src):
                    return "is the input file; choose another name"
            except OSError:
                pass
        if not force:
            return "exists (--force replaces it)"
    return None


# A partial is named `.lineage-<host>-<pid>-<random>.partial`: a writer killed outright (kill -9,
# the OOM killer, a lost SSH session's SIGKILL) leaves it, and the next writer into that folder
# removes it once its writer is surely gone: same host and that pid not alive, or a day old (a
# file system shared with another host, whose pids mean nothing here; and the names made before
# the pid was in them). Only regular files of these exact names that are the user's own go.
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_PARTIAL = re.compile(r"\.lineage-([0-9a-f]{8})-([0-9]{1,10})-[0-9a-f]{12}\.partial")
_UNNAMED_PARTIAL = re.compile(r"\.lineage-[0-9a-f]{12}\.partial")     # no host or pid: by age alone
_DAY = 86400
_writing: set[str] = set()      # this process's partials now (a container's next run often has its pid)
_tidied: set[tuple[int, int]] = set()       # (st_dev, st_ino) of folders already tidied: once each


def create_partial(directory: str | Path, mode: int = 0o666) -> tuple[int, Path]:
    """A new, empty, hidden temporary file in `directory` (the file system its output will be
    renamed onto): created exclusively and never through a symbolic link. (fd, path). Its name
    carries this host and pid, so that once this process is gone a later writer removes it."""
    tidy_partials(directory)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = f".lineage-{_HOST}-{os.getpid()}-{secrets.token_hex(6)}.partial"
        try:
            fd = os.open(Path(directory) / name, flags, mode)
        except FileExistsError:
            continue
        _writing.add(name)
        return fd, Path(directory) / name
    raise FileExistsError(0, "no free temporary name", str(directory))


def tidy_partials(directory: str | Path) -> None:
    """Remove the partials in `directory` that dead writers left (the rule above), once per
    folder per process. Never raises: a folder that cannot be listed is left as it is."""
    try:
        st = os.stat(directory)
        if (st.st_dev, st.st_ino) in _tidied:
            return
        _tidied.add((st.st_dev, st.st_ino))
        with os.scandir(directory) as it:
            listing = [f for f in it if f.name.startswith(".lineage-")]
    except OSError:
        return
    now, me = time.time(), os.geteuid() if hasattr(os, "geteuid") else None
    for f in listing:
        named = _PARTIAL.fullmatch(f.name)
        if named is None and _UNNAMED_PARTIAL.fullmatch(f.name) is None:
            continue
        try:
            st = f.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or (me is not None and st.st_uid != me):
            continue
        here = named is not None and named[1] == _HOST
        if (here and not writer_alive(int(named[2]), f.name)) or (not here and now - st.st_mtime > _DAY):
            _remove(Path(f.path))


def writer_alive(pid: int, name: str) -> bool:
    """Whether the process of this host that named a partial `name` with `pid` may still be
    writing it (the trace cache's partials too: both add the names they write to _writing)."""
    if pid == os.getpid():
        return name in _writing        # or an earlier process that had our pid left it
    return process_alive(pid)


def process_alive(pid: int) -> bool:
    """Whether a process of this host with this pid may be running (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, ValueError):       # no such pid can exist
        return False
    except OSError:                           # another user's process (EPERM): alive
        return True
    return True


@contextmanager
def new_file(path: str | Path, force: bool = False, mode: int = 0o666):
    """Write a file that appears whole or not at all: the body writes into a fresh temporary
    file beside `path` (yielded, binary); on success it is published as `path` (replacing a
    file there only with `force`; FileExistsError otherwise), on any failure it is removed, so
    a full disk leaves nothing behind. A symbolic link at `path` is replaced, never followed."""
    path = Path(path)
    fd, partial = create_partial(path.parent, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        publish(partial, path, overwrite=force)
    except FileExistsError:
        _remove(partial)
        raise FileExistsError(0, replace_problem(path) or "exists (--force replaces it)", str(path)) from None
    except BaseException:
        _remove(partial)
        raise
    finally:
        _writing.discard(partial.name)


def write_new(path: str | Path, data: bytes | str, force: bool = False, mode: int = 0o666) -> None:
    """`data` (text is written as UTF-8) as the file `path`, by the rules of new_file."""
    with new_file(path, force, mode) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
