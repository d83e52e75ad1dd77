"""How fast and how small a hostile trace is refused: each file of
tests/lineage/playback/test_trace_hostile.py given to `lineage validate` in a fresh process,
timed from outside with its peak memory.

    python tests/benchmarks/hostile_traces.py [--code DIR]   # a table for BENCHMARKS.md

--code DIR runs another checkout's `lineage` on the same files (the baseline: the code before
the trace reader's bounds), each child capped at 60 s.
"""
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.lineage.playback.test_trace_hostile import _hostile  # noqa: E402  (the same files the tests check)

# peak memory from VmHWM: getrusage's ru_maxrss survives exec and would report the parent's size
CHILD = ("import sys, time; t = time.perf_counter(); from lineage.cli.main import main; rc = main(['validate', sys.argv[1]]); "
         "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]; "
         "print(rc, time.perf_counter() - t, hwm, file=sys.stderr)")


def main() -> None:
    import argparse
    p = argparse.ArgumentParser(description="hostile traces refused: time and peak memory of `lineage validate` "
                                "(python -m tests.benchmarks.hostile_traces)")
    p.add_argument("--code", type=Path, default=ROOT, help="another checkout to run (the baseline)")
    code = p.parse_args().code
    print(f"code: {code}")
    print(f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(f"| file | exit | in-process s | peak RSS MB |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for name, data in _hostile().items():
            path = Path(d) / f"{name}.trace"
            path.write_bytes(data)
            try:
                out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True,
                                     env=dict(os.environ, PYTHONPATH=str(code)), cwd=code, timeout=60)
            except subprocess.TimeoutExpired:
                print(f"| {name} | killed at 60 s | | |")
                continue
            if out.returncode != 0 and "Traceback" in out.stderr:
                print(f"| {name} | traceback ({out.stderr.strip().splitlines()[-1][:60]}) | | |")
                continue
            rc, secs, rss = out.stderr.split()[-3:]
            print(f"| {name} | {rc} | {float(secs):.3f} | {int(rss) / 1024:.0f} |")


if __name__ == "__main__":
    main()
