"""The first populated frame of `lineage run`, timed from outside in a pseudo-terminal.

    python -m tests.benchmarks.bench_first_frame [--runs 5] [--size 160 50] [--base REV] [SCENARIO]

Each run starts a fresh `python -m lineage.cli.main run SCENARIO` in a pty, presses nothing, and stops
the clock when the output holds both the timeline's "step N / M" counter (written only once a
frame is shown) and the state panel's title ("state · ", set when it draws data). Three
conditions, interleaved run by run: `cold` (an empty cache directory: the first launch of a
scenario, PyTorch imported and the model built), `cache off` (LINEAGE_CACHE_DIR=off: the same
with the trace cache switched off) and `cached` (a cache directory primed by one launch before
the runs: a scenario opened before). With --base REV the same runs time that commit too, checked out
with `git worktree add` in a temporary directory, in the same session, so load hits both alike.
Prints the median and range of each.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

from .bench_app import _read

STEP = re.compile(rb"step (\d+) / ([1-9]\d*)")
TITLE = "state · ".encode()
ROOT = Path(__file__).resolve().parents[2]


def _launch(code: Path, scenario: str, cols: int, rows: int, cache: str):
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(code)
        os.environ.update(TERM="xterm-256color", COLORTERM="truecolor", COLUMNS=str(cols), LINES=str(rows),
                          PYTHONPATH=str(code), LINEAGE_CACHE_DIR=cache)
        os.execv(sys.executable, [sys.executable, "-m", "lineage.cli.main", "run", scenario])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return pid, fd


def _quit(pid: int, fd: int) -> None:
    """q, and wait for the app to exit (a cached session publishes its entry on the way out)."""
    os.write(fd, b"q")
    end = time.perf_counter() + 20
    while time.perf_counter() < end:
        _read(fd, 0.05)
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(fd)


def first_frame(code: Path, scenario: str, cols: int, rows: int, cache: str, timeout: float = 60) -> float | None:
    """Seconds from launch until the counter and a populated panel title are on screen."""
    t0 = time.perf_counter()
    pid, fd = _launch(code, scenario, cols, rows, cache)
    buf, took = b"", None
    while time.perf_counter() - t0 < timeout:
        chunk = _read(fd, 0.01)
        if chunk:
            buf += chunk
            if STEP.search(buf) and TITLE in buf:
                took = time.perf_counter() - t0
                break
    _quit(pid, fd)
    return took


def _checkout(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev],
                   check=True, capture_output=True)
    return where


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("scenario", nargs="?", default="tour")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--size", type=int, nargs=2, default=[160, 50])
    p.add_argument("--base", metavar="REV", help="also time this commit, interleaved")
    a = p.parse_args(argv)
    cols, rows = a.size
    tmp = Path(tempfile.mkdtemp(prefix="lineage-ff-"))
    codes = {"this": ROOT}
    try:
        if a.base:
            codes[a.base] = _checkout(a.base, tmp / "base")
        caches = {}
        for name, code in codes.items():        # one launch each primes its own cache entry
            caches[name] = str(tmp / f"cache-{len(caches)}")
            first_frame(code, a.scenario, cols, rows, caches[name])
        times: dict[tuple[str, str], list[float]] = {}
        for run in range(a.runs):
            for name, code in codes.items():
                empty = tmp / f"empty-{name.replace('/', '_')}-{run}"       # a first launch: nothing cached yet
                for cond, cache in (("cold", str(empty)), ("cache off", "off"), ("cached", caches[name])):
                    t = first_frame(code, a.scenario, cols, rows, cache)
                    times.setdefault((name, cond), []).append(float("nan") if t is None else t)
        load = os.getloadavg()
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
              f"load {load[0]:.1f} {load[1]:.1f}, terminal {cols}x{rows}, {a.scenario}, {a.runs} runs")
        for (name, cond), ts in times.items():
            print(f"{name:<10} {cond:<10} median {statistics.median(ts):.2f} s  range {min(ts):.2f} - {max(ts):.2f} s"
                  f"  ({', '.join(f'{t:.2f}' for t in ts)})")
    finally:
        if a.base:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp / "base")],
                           capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
