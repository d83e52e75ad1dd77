"""Opening a file for the app, in the loading worker: a scenario seen before opens on its cached
frames (no torch), otherwise as a session that keeps its frames in the cache for next time; a
trace opens as a replay. Whatever goes wrong becomes the lines the error dialog shows."""
from __future__ import annotations

import time
from pathlib import Path


class Unopened(Exception):
    """The file could not be opened; `lines` say why (located problems, one a line)."""

    def __init__(self, lines: list[str]):
        super().__init__(lines[0])
        self.lines = lines


def open_for_app(path: str, salvage: bool, stage) -> object:
    """The cursor of `path`; `stage(text)` reports the slow stages (the loading spinner shows them)."""
    from lineage.playback.runners import MemoryRefused
    from lineage.playback.trace import TraceError
    from lineage.scenario.problems import ScenarioError
    name = Path(path).name
    try:
        from lineage.playback.session import open_path
        cursor = open_path(path, salvage=salvage, make=lambda sc: _scenario_cursor(sc, name, stage))
        if cursor.total < 1:
            raise TraceError(f"{path}: nothing to show (0 steps)")
    except ScenarioError as e:
        raise Unopened(e.lines()) from None
    except MemoryRefused as e:             # the one line: what the input needs, what is free
        raise Unopened([str(e)]) from None
    except (TraceError, OSError) as e:
        from lineage.playback.trace import SALVAGE_HINT    # the app has no --salvage: name the command
        import shlex
        raise Unopened([str(e).replace(SALVAGE_HINT, f"(lineage run {shlex.quote(path)} --salvage reads them)")]) from None
    except Exception as e:  # whatever else a file can provoke, the app keeps what it had
        raise Unopened([f"{path}: {type(e).__name__}: {e}"]) from None
    return cursor


def _scenario_cursor(sc, name: str, stage):
    from lineage.playback.cache import caching_session, open_scenario
    from lineage.playback.session import reporting_prefill
    cursor = open_scenario(sc)
    if cursor is None:
        # the one long wait of a first launch (about a second, more on a busy machine)
        stage(f"{name}: starting PyTorch")
        import torch  # noqa: F401
        stage(f"{name}: building the model")
        with reporting_prefill(prefill_progress(stage)):   # a long input: how far, how fast
            cursor = caching_session(sc)
    return cursor


def prefill_progress(say, clock=time.monotonic):
    """A session's prefill progress (model label, tokens done, tokens in all) as the lines
    `say(text)` shows: 'kimi: reading the prompt, 40,960 of 131,072 tokens (12,300 tokens/s)'."""
    started: dict[str, float] = {}

    def report(label: str, done: int, total: int) -> None:
        now = clock()
        t0 = started.setdefault(label, now)
        if done <= 0 or now <= t0:
            say(f"{label}: reading the prompt, {total:,} tokens")
            return
        say(f"{label}: reading the prompt, {done:,} of {total:,} tokens ({done / (now - t0):,.0f} tokens/s)")
    return report
