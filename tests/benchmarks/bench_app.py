"""Measure the app from outside, in a pseudo-terminal, as a user's terminal would see it.

    python -m tests.benchmarks.bench_app [--size 160 50] [--steps 200] [SCENARIO]
    python -m tests.benchmarks.bench_app --goto 900 [--size 160 50] [SCENARIO]

Reports: time to the first paint and to the first model frame after launch, autoplay speed at
"max" with every panel live, bytes written to the terminal per step, and resident memory.
With --goto N: the time from `g N enter` (pressed once the first frame is up) until the counter
shows step N, and the first progress line the timeline showed meanwhile (if any).
With --quit S: play for S seconds, press `q`, and time until the process has gone, with its exit
code and what it left in the trace cache (a fresh folder: one entry, no partial, is right).
The app reads and writes the trace cache (lineage/playback/cache.py): run with
LINEAGE_CACHE_DIR=off to measure a first launch, or with a directory holding an entry to
measure a scenario opened before.
These are moments seen in the app's output stream (time.perf_counter at each), not timings of
a function, so this script keeps its own clock rather than tests/benchmarks/timing.py.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

STEP = re.compile(rb"step (\d+) / ([1-9]\d*)")


def _read(fd: int, timeout: float) -> bytes:
    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        return b""
    try:
        return os.read(fd, 1 << 16)
    except OSError:
        return b""


def _rss_mb(pid: int) -> float:
    total = 0
    try:   # the app and any children it spawned
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    except OSError:
        pass
    return total / 1024


def _launch(scenario: str | None, cols: int, rows: int):
    argv = [sys.executable, "-m", "lineage.cli.main"] + (["run", scenario] if scenario else [])
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(TERM="xterm-256color", COLORTERM="truecolor", COLUMNS=str(cols), LINES=str(rows))
        os.execv(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return pid, fd


def _until(fd: int, pattern: re.Pattern, timeout: float) -> tuple[float | None, bytes]:
    """Read until `pattern` shows up in the output: (seconds it took, all that was read)."""
    t0, buf = time.perf_counter(), b""
    while time.perf_counter() - t0 < timeout:
        chunk = _read(fd, 0.02)
        buf += chunk
        if chunk and pattern.search(buf, max(0, len(buf) - len(chunk) - 64)):
            return time.perf_counter() - t0, buf
    return None, buf


def measure_goto(scenario: str | None, cols: int, rows: int, step: int) -> dict:
    """`g STEP enter` on a freshly opened app: seconds until the counter reads that step."""
    out = {"size": f"{cols}x{rows}"}
    t0 = time.perf_counter()
    pid, fd = _launch(scenario, cols, rows)
    first, _ = _until(fd, STEP, 120)
    out["first model frame (s)"] = first and time.perf_counter() - t0
    _until(fd, re.compile(rb"$^"), 1.0)               # drain the first frame's repaint
    for key in b"g":
        os.write(fd, bytes([key]))
    time.sleep(0.3)                                   # the dialog opens
    os.write(fd, str(step).encode())
    t_press = time.perf_counter()
    os.write(fd, b"\r")
    took, seen = _until(fd, re.compile(rb"step %d / " % step), 300)
    out[f"g {step} until shown (s)"] = took and time.perf_counter() - t_press
    progress = re.search(rb"computing (\d+) / (\d+)", seen)
    out["progress shown"] = progress.group(0).decode() if progress else "none"
    os.write(fd, b"q")
    time.sleep(0.5)
    try:
        os.kill(pid, 9)
    except OSError:
        pass
    return out


def measure_quit(scenario: str | None, cols: int, rows: int, play: float) -> dict:
    """Play for `play` seconds, press q: seconds until the app has exited, and what it published."""
    out = {"size": f"{cols}x{rows}"}
    with tempfile.TemporaryDirectory() as cache:
        before = os.environ.get("LINEAGE_CACHE_DIR")
        os.environ["LINEAGE_CACHE_DIR"] = cache           # the child inherits it
        pid, fd = _launch(scenario, cols, rows)
        if before is None:
            del os.environ["LINEAGE_CACHE_DIR"]
        else:
            os.environ["LINEAGE_CACHE_DIR"] = before
        first, _ = _until(fd, STEP, 120)
        out["first model frame (s)"] = first
        _until(fd, re.compile(rb"$^"), 1.0)
        os.write(fd, b" ")
        _until(fd, re.compile(rb"$^"), play)
        os.write(fd, b"q")
        t_q, status = time.perf_counter(), None
        while time.perf_counter() - t_q < 60:
            _read(fd, 0.02)                               # keep the pty drained: a full one blocks the app
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        out["q until exited (s)"] = time.perf_counter() - t_q
        out["exit code"] = os.waitstatus_to_exitcode(status) if status is not None else "killed after 60 s"
        where = Path(cache) / "lineage-trace-cache"
        out["cache entries"] = len(list(where.glob("*.trace")))
        out["partials left"] = len(list(where.glob("*.partial")))
    return out


def measure(scenario: str | None, cols: int, rows: int, steps: int) -> dict:
    t0 = time.perf_counter()
    pid, fd = _launch(scenario, cols, rows)
    out = {"size": f"{cols}x{rows}"}
    buf = b""
    first_paint = first_frame = None
    deadline = time.perf_counter() + 120
    while time.perf_counter() < deadline and first_frame is None:
        chunk = _read(fd, 0.05)
        now = time.perf_counter()
        if chunk:
            buf += chunk
            if first_paint is None and (b"lineage" in buf or b"opening" in buf or b"\x1b[" in buf and len(buf) > 2000):
                first_paint = now - t0
            if STEP.search(buf):
                first_frame = now - t0
    out["first paint (s)"] = first_paint
    out["first model frame (s)"] = first_frame
    # drain, then go to max speed and play
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:
        _read(fd, 0.05)
    for key in b"+++++":
        os.write(fd, bytes([key]))
        time.sleep(0.05)
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:
        _read(fd, 0.05)
    os.write(fd, b" ")
    t_play = time.perf_counter()
    stream = b""
    marks = []                      # (byte offset, step, time) of each new counter value
    rss_by_step = []                # (step, resident MB) every 500 steps: does memory level off?
    while time.perf_counter() - t_play < max(120, steps / 10):
        chunk = _read(fd, 0.2)
        if not chunk:
            continue
        base = len(stream)
        stream += chunk
        now = time.perf_counter()
        for m in STEP.finditer(stream, max(0, base - 32)):
            s = int(m.group(1))
            if not marks or s > marks[-1][1]:
                if not marks or s // 500 > marks[-1][1] // 500:
                    rss_by_step.append((s, round(_rss_mb(pid))))
                marks.append((m.start(), s, now))
        if marks and marks[-1][1] - marks[0][1] >= steps:
            break
    out["rss (MB)"] = _rss_mb(pid)
    if len(rss_by_step) > 2:
        out["rss by step (MB)"] = " ".join(f"{s}:{mb}" for s, mb in rss_by_step)
    os.write(fd, b" q")
    time.sleep(0.5)
    try:
        os.kill(pid, 9)
    except OSError:
        pass
    if len(marks) > 2:
        (b0, s0, t0_), (b1, s1, t1) = marks[0], marks[-1]
        n = s1 - s0
        out["autoplay steps"] = n
        out["autoplay steps/s (max speed)"] = n / (t1 - t0_)
        out["bytes per step (mean)"] = (b1 - b0) / n
        # bytes between one counter value and the next, per step it advanced
        per = sorted((b - a) / (sb - sa) for (a, sa, _), (b, sb, _) in zip(marks, marks[1:]))
        out["bytes per step (median)"] = per[len(per) // 2]
        out["repaints/s (counter changes seen)"] = (len(marks) - 1) / (t1 - t0_)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("scenario", nargs="?")
    p.add_argument("--size", type=int, nargs=2, default=[160, 50])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--goto", type=int, default=None, metavar="N", help="time `g N` instead of autoplay")
    p.add_argument("--quit", type=float, default=None, metavar="S", help="play S seconds, then time `q`")
    a = p.parse_args(argv)
    if a.quit is not None:
        res = measure_quit(a.scenario, a.size[0], a.size[1], a.quit)
    elif a.goto is not None:
        res = measure_goto(a.scenario, a.size[0], a.size[1], a.goto)
    else:
        res = measure(a.scenario, a.size[0], a.size[1], a.steps)
    print(f"# {time.strftime('%Y-%m-%d')} {os.cpu_count()} cores, terminal {res['size']}")
    for k, v in res.items():
        print(f"{k:<32} {v:.3f}" if isinstance(v, float) else f"{k:<32} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
