"""Sessions: a scenario's models stepped one token at a time, each step turned into a Frame.

`Session` runs a scenario (torch); `Replay` reads a trace (no torch). Both are `Cursor`s:
next, previous, jump, reset over frames. Going back, or forward to a step already made, reads
the recorded frame and never recomputes; going forward past the last made frame steps the
models. A session is deterministic for a given scenario: the same file gives the same frames.
A long way forward can report its progress and be stopped between two steps (`frame`'s
`progress` and `stop`); the frames made until then are kept. A frame made but not kept (the frame
store refused it) ends the stepping: making it again would feed the models its token twice, so
the steps after it raise the same error, and the frames kept stay readable.

A long input is read at once before the first frame (`decoding.prefill` tokens, in chunks):
`prefill_progress`, or `reporting_prefill` around whatever makes the session, hears how far.

A session's frames also go to its `writer`, if any (`record_to` a trace, or the trace cache's
entry through `record_into`): a writer's error reaches the caller of `frame`, so a writer that
must never stop the session (the cache's) catches its own.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
from pathlib import Path

from ..figures import figure_row, figure_steps
from ..scenario.checks import total_steps
from ..scenario.schema import Scenario
from ..files import open_regular
from . import observe
from .frame import Frame
from .runners import make_runner
from .store import FrameStore
from .trace import MAGIC, TraceReader, TraceWriter, info_configs


class Stopped(Exception):
    """`frame(i)` gave up before step i was made because its `stop()` said so."""


class Cursor:
    """Stepping over frames 0..total-1. Subclasses provide `_make(i)` for frames not yet held."""

    total: int = 0
    info: dict

    def __init__(self):
        self.index = 0

    @functools.cached_property
    def configs(self) -> list:
        """Each model's ModelConfig rebuilt from `info` (None for a toy memory), once per cursor:
        what panels read, never the info's plain dicts. A cursor over a reader sets it from there."""
        return info_configs(self.info)

    def model_config(self, m: int):
        return self.configs[m]

    def frame(self, i: int, progress=None, stop=None) -> Frame:
        """Frame i. Where frames must be made first, `progress(made, needed)` is called after
        each one and `stop()` before each: when it holds, Stopped is raised (what was made stays)."""
        raise NotImplementedError

    @property
    def made(self) -> int:
        """How many frames can be read without computing."""
        return self.total

    def current(self) -> Frame:
        return self.frame(self.index)

    def jump(self, i: int) -> Frame:
        self.index = max(0, min(int(i), self.total - 1))
        return self.current()

    def next(self) -> Frame:
        return self.jump(self.index + 1)

    def prev(self) -> Frame:
        return self.jump(self.index - 1)

    def reset(self) -> Frame:
        return self.jump(0)

    def end(self) -> Frame:
        return self.jump(self.total - 1)

    def close(self) -> None:
        pass


def caption_info(c) -> dict:
    """A caption as sessions and traces carry it: 0-based steps (`at`, `until`, `shot`), the
    form traces have always held, so old traces replay as they were; `panels` all the kinds it
    names (`panel` the first, all that older readers know)."""
    return {"at": c.at, "until": c.until, "shot": c.shot, "panel": c.panel, "panels": list(c.panels),
            "text": c.text}


def caption_at(captions: list[dict], i: int) -> dict | None:
    """The caption shown at 0-based step i (as `caption_info` gives them): the one started last
    whose `until` has not passed."""
    shown = None
    for c in sorted(captions, key=lambda c: c["at"]):
        if c["at"] <= i and (c.get("until") is None or i <= c["until"]):
            shown = c
    return shown


def _caption(sc: Scenario, i: int) -> str | None:
    c = caption_at([caption_info(c) for c in sc.captions], i)
    return None if c is None else c["text"]


_PREFILL_PROGRESS: contextvars.ContextVar = contextvars.ContextVar("prefill_progress", default=None)


@contextlib.contextmanager
def reporting_prefill(progress):
    """Sessions made inside (in this thread) report their prefill: `progress(model label, tokens
    done, tokens in all)`, at 0 and after each chunk. For the makers that build a Session
    without asking how (the trace cache's); a Session's own `prefill_progress` comes first."""
    token = _PREFILL_PROGRESS.set(progress)
    try:
        yield
    finally:
        _PREFILL_PROGRESS.reset(token)


class Session(Cursor):
    def __init__(self, sc: Scenario, device: str | None = None, writer: TraceWriter | None = None,
                 prefill_progress=None):
        super().__init__()
        self.sc = sc
        self._lock = threading.Lock()
        self._closed = False
        self.frames = FrameStore()         # every frame made, the newest in memory, the rest on disk
        self.writer = writer
        self._lost: Exception | None = None      # why a frame made was not kept: no more stepping
        self.total = total_steps(sc) or 0
        self.notes: list[str] = []
        self.runner = make_runner(sc, device or sc.device, self.notes, prefill_progress or _PREFILL_PROGRESS.get())
        self.info = {"title": sc.title, "description": sc.description, "steps": self.total,
                     "models": self.runner.info_models, "panels": [p.model_dump() for p in sc.panels],
                     "captions": [caption_info(c) for c in sc.captions],
                     "figure": sc.figure.model_dump() if sc.figure is not None else None,
                     "device": self.runner.device, "dtype": sc.dtype, "backend": self.runner.backend,
                     "decoding": sc.decoding.model_dump(), "notes": self.notes}
        self.configs = info_configs(self.info)       # the same objects a replay of its trace rebuilds

    @property
    def made(self) -> int:
        return len(self.frames)

    def frame(self, i: int, progress=None, stop=None) -> Frame:
        if not 0 <= i < self.total:
            raise IndexError(f"step {i} out of range (0-{self.total - 1})")
        if i < len(self.frames):
            return self.frames[i]
        # one stepping thread at a time: a second caller waits, then reads what the first made
        # (two threads stepping at once would feed the model the same token twice)
        with self._lock:
            while len(self.frames) <= i:
                if self._closed or (stop is not None and stop()):
                    raise Stopped(f"stopped at step {len(self.frames) + 1} on the way to {i + 1}")
                if self._lost is not None:
                    raise OSError(f"step {len(self.frames) + 1} cannot be made: "
                                  f"{getattr(self._lost, 'strerror', None) or self._lost}")
                f = self._make(len(self.frames))
                try:
                    self.frames.append(f)
                except OSError as e:
                    self._lost = e
                    raise
                if self.writer is not None:
                    self.writer.write(f)
                if progress is not None:
                    progress(len(self.frames), i + 1)
        return self.frames[i]

    def _make(self, i: int) -> Frame:
        sc = self.sc
        # a figure's slider follows the steps (held at its last setting)
        row = figure_row(sc.figure, min(i, figure_steps(sc.figure) - 1)) if sc.figure is not None else None
        meta = observe.step_meta(_caption(sc, i), row)
        fields, arrays = self.runner.step(i)
        meta.update(fields)
        return Frame(i, meta, arrays)

    def record_to(self, path: str | Path, overwrite: bool = False) -> TraceWriter:
        """Write every frame made from now on (and those already made) to a trace file."""
        return self.record_into(TraceWriter(path, self.sc.text or "", self.info, overwrite=overwrite))

    def record_into(self, writer: TraceWriter) -> TraceWriter:
        """Give every frame made from now on (and those already made) to `writer`."""
        with self._lock:                  # not while a worker steps: no frame missed or written twice
            self.writer = writer
            for f in self.frames:
                writer.write(f)
        return writer

    def record_all(self, steps: int | None = None, progress=None) -> None:
        n = self.total if steps is None else min(steps, self.total)
        if n > 0:
            self.frame(n - 1, progress=progress)

    def close(self) -> None:
        # the frame store is left to the garbage collector (its file is already unlinked): a
        # worker of a session being replaced may still read a frame meanwhile. One making
        # frames stops before its next step, so the writer is closed after at most one step
        self._closed = True
        if self.writer is not None:
            with self._lock:
                self.writer.close()


class Replay(Cursor):
    """Frames from a trace file; needs neither torch nor a GPU."""

    def __init__(self, path: str | Path, salvage: bool = False):
        super().__init__()
        self.reader = TraceReader(path, salvage=salvage)
        self.info, self.configs = self.reader.info, self.reader.configs
        self.total = len(self.reader)
        self.scenario_text = self.reader.scenario_text
        self._cache: dict[int, Frame] = {}
        self._lock = threading.Lock()

    def frame(self, i: int, progress=None, stop=None) -> Frame:
        f = self._cache.get(i)
        if f is None:
            with self._lock:                    # one file handle: seek and read must not interleave
                if len(self._cache) > 256:      # keep memory flat on long traces
                    self._cache.clear()
                f = self._cache[i] = self.reader.frame(i)
        return f

    def close(self) -> None:
        self.reader.close()


def is_trace(path: str | Path) -> bool:
    try:
        with open_regular(path) as f:     # a FIFO or device is no trace (and must not block us)
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def open_path(path: str | Path, device: str | None = None, salvage: bool = False, make=None) -> Cursor:
    """A Session for a scenario file or a Replay for a trace (by its magic bytes). `make(sc)`:
    how a loaded scenario becomes a cursor instead (the app's reads the trace cache first)."""
    if is_trace(path):
        return Replay(path, salvage=salvage)
    from ..scenario import load
    sc = load(path)
    return make(sc) if make is not None else Session(sc, device=device)
