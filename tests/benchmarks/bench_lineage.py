"""Benchmarks of the lineage core (numbers go to BENCHMARKS.md with machine and date).

    python -m tests.benchmarks.bench_lineage            # the CPU ones: step and chunk
    python -m tests.benchmarks.bench_lineage step       # k3-mini one-token step, observations on vs off
    python -m tests.benchmarks.bench_lineage chunk      # chunked vs recurrent kda at T = 4096
    python -m tests.benchmarks.bench_lineage gpu        # k3-mini on CUDA: reference vs Triton backend
    python -m tests.benchmarks.bench_lineage gpu-compiled   # only the compiled + captured step on the Triton backend
    python -m tests.benchmarks.bench_lineage gpu-session    # the tour through Session: eager vs CUDA graph
    python -m tests.benchmarks.bench_lineage gpu-eager      # the eager observed step: reference vs Triton backend

Timed with tests/benchmarks/timing.py.
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time

import torch

from lineage import ops
from lineage.observed import StepObs
from lineage.model import LM
from lineage.presets import get_preset
from tests.benchmarks import timing


def bench_step(steps: int = 300, prefill: int = 64) -> dict:
    """Median wall time of one k3-mini step (B = 1, fp32, inference mode), observations on and off,
    interleaved in rounds so both see the same cache lengths and machine state."""
    torch.manual_seed(0)
    model = LM(get_preset("k3-mini")).eval()
    ids = torch.randint(0, 256, (1, prefill + steps))
    res = {True: [], False: []}
    with torch.inference_mode():
        _, start = model(ids[:, :prefill])
        for _ in range(3):
            for observe in (False, True):
                toks = iter(ids[0, prefill:prefill + steps // 3])
                box = [start]                   # the state, from the same prefill each round

                def step():
                    _, box[0] = model.step(next(toks)[None], box[0], {} if observe else None)
                res[observe] += timing.each(step, steps // 3, warmup=0)
    on, off = statistics.median(res[True]) * 1e3, statistics.median(res[False]) * 1e3
    return {"k3-mini step, all observations (ms)": on, "k3-mini step, no observations (ms)": off,
            "observation overhead (on / off)": on / off}


def bench_chunk(T: int = 4096, B: int = 1, H: int = 4, K: int = 64, reps: int = 3) -> dict:
    """ops.kda chunked (C = 64) against the token recurrence, fp32, same inputs."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, T, H, K, generator=g)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=g), dim=-1)
    v = torch.randn(B, T, H, K, generator=g)
    gate = -5 * torch.rand(B, T, H, K, generator=g)
    beta = torch.rand(B, T, H, generator=g)
    with torch.inference_mode():
        rec = timing.median_each(lambda: ops.kda(q, k, v, gate, beta), reps, warmup=1) * 1e3
        chk = timing.median_each(lambda: ops.kda(q, k, v, gate, beta, chunk_size=64), reps, warmup=1) * 1e3
    return {f"kda recurrent, B={B} T={T} H={H} K=V={K} (ms)": rec,
            f"kda chunked C=64, same shape (ms)": chk,
            "speed-up chunked / recurrent": rec / chk}


def bench_gpu(steps: int = 200, prefill: int = 64, variants=None) -> dict:
    """k3-mini on one CUDA device, B = 1, fp32: the observed step the app makes and the bare
    step on the reference and on the Triton backend, a 4096-token prefill on both backends,
    and the observed step captured in a CUDA graph for each (backend, torch.compile) pair of
    `variants` (default: all four), with its logits checked against the eager step. Given
    `variants`, only those graph rows run."""
    from lineage.backend import set_backend
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = LM(get_preset("k3-mini")).to(dev).eval()
    ids = torch.randint(0, 256, (1, 4096), device=dev)
    out = {"device": torch.cuda.get_device_name(0)}

    def timed(fn, reps):            # ms, wall time until the GPU is done
        return timing.median_each(fn, reps, warmup=5) * 1e3

    with torch.inference_mode():
        for backend in () if variants else ("reference", "triton"):
            set_backend(model, backend)
            _, start = model(ids[:, :prefill])
            st = [start]
            tok = ids[:, prefill]

            def step(observe):
                _, st[0] = model.step(tok, st[0], {} if observe else None)
            out[f"k3-mini step, all observations, {backend} (ms)"] = timed(lambda: step(True), steps)
            out[f"k3-mini step, no observations, {backend} (ms)"] = timed(lambda: step(False), steps)
            out[f"k3-mini prefill T=4096, {backend} (ms)"] = timed(lambda: model(ids), 5)
        # the whole step in one CUDA graph (static MLA cache), with all observations
        from lineage.graph_step import GraphStep
        from torch._dynamo.utils import counters
        counters.clear()
        for backend, compiled in variants or (("reference", False), ("triton", False), ("reference", True),
                                              ("triton", True)):
            set_backend(model, backend)
            _, start = model(ids[:, :prefill])
            t0 = time.perf_counter()
            try:
                stepper = GraphStep(model, start, capacity=prefill + 8 * steps + 64, observe=True, compile=compiled)
            except Exception as e:  # report and go on: the other rows still stand
                out[f"graph capture failed ({backend}, compile={compiled})"] = f"{type(e).__name__}: {str(e)[:200]}"
                continue
            if compiled:
                backend = f"{backend} + torch.compile"
                out[f"  compile + capture time ({backend}) (s)"] = time.perf_counter() - t0
                # 0 means the compiler traced the whole step, our kda_step op included
                out[f"  graph breaks while compiling ({backend})"] = str(sum(counters["graph_break"].values()))
                counters.clear()
            eager = start
            worst = 0.0
            for t in range(8):                      # the graph gives the eager step's answer
                tok = ids[:, prefill + t]
                a, eager = model.step(tok, eager, StepObs())
                b, _ = stepper.step(int(tok))
                worst = max(worst, float((b - a).abs().max() / a.abs().max()))
            tok0 = int(ids[0, prefill])
            out[f"k3-mini step in a CUDA graph, all observations, {backend} (ms)"] = timed(
                lambda: stepper.step(tok0), steps)
            out[f"  graph vs eager logits, max rel. difference over 8 steps ({backend})"] = worst
    return out


def bench_gpu_eager(steps: int = 100, prefill: int = 64, rounds: int = 4) -> dict:
    """k3-mini's observed eager step (B = 1, fp32) on CUDA, reference against Triton backend,
    in alternating rounds from the same state; then where one Triton-backend step spends its
    host time (torch profiler, top operations by self CPU time)."""
    from lineage.backend import set_backend
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = LM(get_preset("k3-mini")).to(dev).eval()
    ids = torch.randint(0, 256, (1, prefill + 1), device=dev)
    out, times = {}, {"reference": [], "triton": []}
    with torch.inference_mode():
        for _ in range(rounds):
            for name in times:
                set_backend(model, name)
                _, start = model(ids[:, :prefill])
                tok = ids[:, prefill]
                times[name].append(timing.median_each(lambda: model.step(tok, start, StepObs()), steps, warmup=5) * 1e3)
        for name, ts in times.items():
            out[f"k3-mini step, all observations, eager, {name} (ms)"] = statistics.median(ts)
            out[f"  rounds ({name})"] = ", ".join(f"{t:.2f}" for t in ts)
        set_backend(model, "triton")
        _, start = model(ids[:, :prefill])
        for _ in range(5):
            model.step(ids[:, prefill], start, StepObs())
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(10):
                model.step(ids[:, prefill], start, StepObs())
            torch.cuda.synchronize()
        out["profile of 10 triton-backend steps (host)"] = "\n" + prof.key_averages().table(
            sort_by="self_cpu_time_total", row_limit=12)
    return out


def bench_gpu_session(steps: int = 100) -> dict:
    """What the app and `lineage record` do on a GPU: Session steps of the tour (k3-mini, all
    observations, frames made into numpy), eager (LINEAGE_GRAPH=0) against the CUDA-graph step,
    with the frames of both compared."""
    from pathlib import Path

    import numpy as np

    from lineage.scenario import load
    from lineage.playback.session import Session
    tour = Path(__file__).resolve().parents[2] / "lineage" / "scenarios" / "tour.yaml"
    out, sessions = {}, {}
    for mode in ("0", "auto"):
        os.environ["LINEAGE_GRAPH"] = mode
        s = Session(load(tour), device="cuda")
        s.frame(4)                                   # the graph is captured after the first step
        (t,) = timing.each(lambda: s.frame(4 + steps), reps=1, warmup=0)
        out[f"tour frame on CUDA, LINEAGE_GRAPH={mode} (ms per frame)"] = t / steps * 1e3
        sessions[mode] = s
    worst = 0.0
    for i in (0, 1, 2, steps // 2, 4 + steps):
        fa, fb = sessions["0"].frame(i), sessions["auto"].frame(i)
        for k, x in fa.arrays.items():
            x, y = x.astype(np.float64), fb.arrays[k].astype(np.float64)
            if x.shape != y.shape:
                raise AssertionError(f"frame {i} {k}: {x.shape} vs {y.shape}")
            worst = max(worst, float(np.abs(x - y).max() / max(np.abs(x).max(), 1e-6)))
    out["  graph vs eager frames, max relative difference"] = worst
    return out


def machine() -> str:
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), Python {platform.python_version()}")


def main(argv: list[str] | None = None) -> int:
    which = (argv if argv is not None else sys.argv[1:]) or ["step", "chunk"]
    if which[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    print(f"# {time.strftime('%Y-%m-%d')} {machine()}")
    for name in which:
        res = {"step": bench_step, "chunk": bench_chunk, "gpu": bench_gpu,
               "gpu-compiled": lambda: bench_gpu(variants=(("triton", True),)),
               "gpu-session": bench_gpu_session, "gpu-eager": bench_gpu_eager}[name]()
        for key, val in res.items():
            if isinstance(val, float):
                print(f"{key:<52} {val:10.2e}" if "difference" in key else f"{key:<52} {val:10.3f}")
            else:
                print(f"{key:<52} {val}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
