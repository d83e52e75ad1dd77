"""A scenario's first frame made in a helper process while the app starts.

Importing PyTorch takes about a second and holds the interpreter lock, so in the app's own
process it adds to everything else the first frame waits for (Python, Textual, the screen).
`lineage run` therefore starts this module in a child process at launch: on the machine's other
core it loads the scenario, imports torch, makes the first frame and publishes it as an entry of
the trace cache (lineage/playback/cache.py), while the parent paints its screen. The app's
loading worker, finding no entry of its own, waits for the child (`take`) and opens the entry
as it opens any cached scenario, with no torch; the app's own session is made afterwards for
the steps past it.

The child does nothing (and says `skip`) when the cache is off, the scenario has an entry
already, it names a checkpoint directory (a real model: loading it twice would double the
memory it takes), or it may run on a GPU (two CUDA contexts cost more than they save).

    python -m lineage.playback.prefetch SCENARIO   # prints `go` or `skip`, then `done`
"""
from __future__ import annotations

import atexit
import os
import select
import subprocess
import sys
import time
from pathlib import Path

STEPS = 1              # frames the child makes: the first one is what the launch waits for
WAIT = 20.0            # seconds the app waits for the child before making the frame itself

_started: dict[str, subprocess.Popen] = {}


def start(path: str) -> None:
    """Start the child for the scenario at `path` (nothing for a trace or a directory)."""
    if Path(path).suffix.lower() not in (".yaml", ".yml") or os.environ.get("LINEAGE_CACHE_DIR") in ("", "off"):
        return
    try:
        child = subprocess.Popen([sys.executable, "-m", "lineage.playback.prefetch", path],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 start_new_session=True)     # off the terminal: the app owns it
    except OSError:
        return
    _started[str(Path(path).resolve())] = child
    atexit.register(_end, child)


def _end(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.kill()
        child.wait()


def _line(child: subprocess.Popen, until: float) -> str:
    """The child's next line of output ('' at its end or when `until` passes)."""
    r, _, _ = select.select([child.stdout], [], [], max(0.0, until - time.monotonic()))
    return child.stdout.readline().decode(errors="replace").strip() if r else ""


def take(path: str) -> bool:
    """Wait for the child started for `path`, if any: True when it published the first frame
    (the cache now has an entry for the scenario), False when there is none to wait for."""
    child = _started.pop(str(Path(path).resolve()), None)
    if child is None:
        return False
    until = time.monotonic() + WAIT
    try:
        if _line(child, until) != "go":
            return False
        return _line(child, until) == "done"
    finally:
        _end(child)
        child.stdout.close()


def _worth_it(sc) -> bool:
    from .cache import _checkpoints, cache_dir, key
    where = cache_dir()
    if where is None or (where / f"{key(sc)}.trace").is_file():
        return False
    base = sc.base_dir or Path(".")
    if any((base / c).is_dir() for c in _checkpoints(sc.model_dump())):
        return False
    # "auto" takes a GPU when there is one; without torch, a driver's device node says so
    return sc.device == "cpu" or (sc.device == "auto" and not Path("/dev/nvidiactl").exists())


def main(argv: list[str]) -> int:
    from ..scenario import load
    try:
        sc = load(argv[0])
        worth = _worth_it(sc)
    except Exception:  # noqa: BLE001  the app reports a bad scenario itself, in its own words
        worth = False
    print("go" if worth else "skip", flush=True)
    if not worth:
        return 0
    from .cache import Caching
    session = Caching(sc)
    session.frame(min(STEPS, session.total) - 1)
    session.close()                        # publishes the entry
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
