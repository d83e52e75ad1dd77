"""Opening input files without trusting them: only regular files, read with a bound.

A scenario or trace path may name anything: a FIFO (a plain open() would block until a
writer appears), /dev/zero or /dev/urandom (a plain read() never ends), a directory. We open
with O_NONBLOCK, so even a FIFO returns at once, then ask the open descriptor (not the path,
which could be swapped in between) what it is, and refuse everything but a regular file.
"""
from __future__ import annotations

import os
import stat
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
    file: with `overwrite`, an atomic rename over `path`; without, a hard link that fails (with
    FileExistsError, `partial` kept) rather than replace a file made meanwhile."""
    if overwrite:
        os.replace(partial, path)
        return
    try:
        os.link(partial, path)
    except FileExistsError:
        raise
    except OSError:                           # a file system without hard links
        if Path(path).exists():
            raise FileExistsError(0, "exists", str(path)) from None
        os.replace(partial, path)
        return
    os.unlink(partial)
