"""CPU benchmarks of the lineage core (numbers go to BENCHMARKS.md with machine and date).

    python -m lineage.bench            # all
    python -m lineage.bench step       # k3-mini one-token step, observations on vs off
    python -m lineage.bench chunk      # chunked vs recurrent kda at T = 4096
    python -m lineage.bench gpu        # k3-mini on CUDA: reference vs Triton backend
    python -m lineage.bench gpu-compiled   # only the compiled + captured step on the Triton backend
    python -m lineage.bench gpu-session    # the tour through Session: eager vs CUDA graph
    python -m lineage.bench gpu-eager      # the eager step: reference, Triton with and without the C++ launcher
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time

import torch

from .model import LM
from .presets import get_preset
from . import ops


def _median_ms(fn, reps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


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
                st = start
                for t in range(steps // 3):
                    tok = ids[:, prefill + t]
                    t0 = time.perf_counter()
                    _, st = model.step(tok, st, {} if observe else None)
                    res[observe].append(time.perf_counter() - t0)
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
        rec = _median_ms(lambda: ops.kda(q, k, v, gate, beta), reps, warmup=1)
        chk = _median_ms(lambda: ops.kda(q, k, v, gate, beta, chunk_size=64), reps, warmup=1)
    return {f"kda recurrent, B={B} T={T} H={H} K=V={K} (ms)": rec,
            f"kda chunked C=64, same shape (ms)": chk,
            "speed-up chunked / recurrent": rec / chk}


def bench_gpu(steps: int = 200, prefill: int = 64, variants=None) -> dict:
    """k3-mini on one CUDA device, B = 1, fp32: the observed step the app makes and the bare
    step on the reference and on the Triton backend, a 4096-token prefill on both backends,
    and the observed step captured in a CUDA graph for each (backend, torch.compile) pair of
    `variants` (default: all four), with its logits checked against the eager step. Given
    `variants`, only those graph rows run."""
    from .backend import set_backend
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = LM(get_preset("k3-mini")).to(dev).eval()
    ids = torch.randint(0, 256, (1, 4096), device=dev)
    out = {"device": torch.cuda.get_device_name(0)}

    def timed(fn, reps):
        def synced():               # wall time until the GPU is done
            fn()
            torch.cuda.synchronize()
        return _median_ms(synced, reps, warmup=5)

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
        from .graph_step import GraphStep
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
                a, eager = model.step(tok, eager, {})
                b, _ = stepper.step(int(tok))
                worst = max(worst, float((b - a).abs().max() / a.abs().max()))
            tok0 = int(ids[0, prefill])
            out[f"k3-mini step in a CUDA graph, all observations, {backend} (ms)"] = timed(
                lambda: stepper.step(tok0), steps)
            out[f"  graph vs eager logits, max rel. difference over 8 steps ({backend})"] = worst
    return out


def bench_gpu_eager(steps: int = 100, prefill: int = 64, rounds: int = 4) -> dict:
    """k3-mini's observed eager step (B = 1, fp32) on CUDA: the reference backend, and the
    Triton backend with kda_step's C++ host path on and off (LINEAGE_NATIVE=1 / 0), in
    alternating rounds from the same state; then where one Triton-backend step spends its host
    time (torch profiler, top operations by self CPU time)."""
    from kernels import native
    from kernels import step as kstep
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = LM(get_preset("k3-mini")).to(dev).eval()
    ids = torch.randint(0, 256, (1, prefill + 1), device=dev)
    before = os.environ.get("LINEAGE_NATIVE")
    native.load()
    out = {"C++ host path": native.status()}
    times: dict = {"reference": [], "triton, Python launcher": []}
    if native.status() == "ready":
        times["triton, C++ host path"] = []
    try:
        _eager_rounds(model, ids, prefill, steps, rounds, times, out)
    finally:
        os.environ.pop("LINEAGE_NATIVE", None)
        if before is not None:
            os.environ["LINEAGE_NATIVE"] = before
        kstep._reset()
    return out


def _eager_rounds(model, ids, prefill, steps, rounds, times, out) -> None:
    from kernels import step as kstep
    from .backend import set_backend
    with torch.inference_mode():
        for _ in range(rounds):
            for name in times:
                set_backend(model, name.split(",")[0])
                os.environ["LINEAGE_NATIVE"] = "0" if "Python" in name else "1"
                kstep._reset()
                _, start = model(ids[:, :prefill])
                tok = ids[:, prefill]

                def synced():
                    model.step(tok, start, {})
                    torch.cuda.synchronize()
                times[name].append(_median_ms(synced, steps, warmup=5))
                if "C++" in name and kstep._native_step is None:
                    raise RuntimeError("the C++ host path took no kda_step call of the model")
        for name, ts in times.items():
            out[f"k3-mini step, all observations, eager, {name} (ms)"] = statistics.median(ts)
            out[f"  rounds ({name})"] = ", ".join(f"{t:.2f}" for t in ts)
        set_backend(model, "triton")
        os.environ["LINEAGE_NATIVE"] = "1" if "triton, C++ host path" in times else "0"
        kstep._reset()
        _, start = model(ids[:, :prefill])
        for _ in range(5):
            model.step(ids[:, prefill], start, {})
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(10):
                model.step(ids[:, prefill], start, {})
            torch.cuda.synchronize()
        out["profile of 10 triton-backend steps (host)"] = "\n" + prof.key_averages().table(
            sort_by="self_cpu_time_total", row_limit=12)


def bench_gpu_session(steps: int = 100) -> dict:
    """What the app and `lineage record` do on a GPU: Session steps of the tour (k3-mini, all
    observations, frames made into numpy), eager (LINEAGE_GRAPH=0) against the CUDA-graph step,
    with the frames of both compared."""
    import os
    import numpy as np
    from .scenario import load
    from .playback.session import Session
    from pathlib import Path
    tour = Path(__file__).resolve().parent.parent / "scenarios" / "tour.yaml"
    out, sessions = {}, {}
    for mode in ("0", "auto"):
        os.environ["LINEAGE_GRAPH"] = mode
        s = Session(load(tour), device="cuda")
        s.frame(4)                                   # the graph is captured after the first step
        t0 = time.perf_counter()
        s.frame(4 + steps)
        out[f"tour frame on CUDA, LINEAGE_GRAPH={mode} (ms per frame)"] = (time.perf_counter() - t0) / steps * 1e3
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
