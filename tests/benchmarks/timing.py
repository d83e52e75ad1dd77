"""The one clock of the benchmarks (the numbers go to BENCHMARKS.md).

- ``gpu(fn)``: device-bound work, the median of ``triton.testing.do_bench`` (CUDA events
  around each call, L2 flushed in between): what the GPU spends on one call.
- ``wall(fn)``: launch-bound work and anything on the CPU, ``torch.utils.benchmark.Timer``
  over back-to-back calls (CUDA synchronized at the ends of each block): what a caller's loop
  sees per call, the host's launch overhead included.
- ``each(fn, reps)``: the seconds of single calls, for calls that must be timed one at a time
  (a step whose cache grows between calls, a prefill of seconds).
- ``graph(fn)``: GPU seconds per call of ``fn`` captured many times in one CUDA graph.

Without CUDA (or under TRITON_INTERPRET=1, the ``--smoke`` runs) ``gpu`` is ``wall``.
"""
from __future__ import annotations

import os
import statistics
import time

import torch


def _on_gpu() -> bool:
    return torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"


def wall(fn, min_run_time: float = 0.5) -> float:
    """Median seconds per call of fn(), back to back."""
    from torch.utils.benchmark import Timer
    fn()                                                 # first-call work (compiles) outside the timing
    return Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time).median


def gpu(fn, rep_ms: int = 200) -> float:
    """Median GPU seconds of one call of fn()."""
    if not _on_gpu():
        return wall(fn)
    from triton.testing import do_bench
    return do_bench(fn, warmup=25, rep=rep_ms, return_mode="median") / 1e3


def each(fn, reps: int, warmup: int = 3) -> list[float]:
    """Seconds of each of `reps` single calls of fn(), the GPU's work included."""
    sync = torch.cuda.synchronize if _on_gpu() else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return times


def median_each(fn, reps: int, warmup: int = 3) -> float:
    return statistics.median(each(fn, reps, warmup))


def graph(fn, calls: int = 100) -> float | None:
    """GPU seconds per call of fn(), `calls` calls captured in one CUDA graph and replayed;
    None without CUDA."""
    if not _on_gpu():
        return None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                           # warm up (compiles, allocator) off the capture
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return gpu(g.replay) / calls
