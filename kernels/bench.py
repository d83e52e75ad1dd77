"""Benchmark of the kernels against eager PyTorch, torch.compile and flash-linear-attention.

    python -m kernels.bench              # on a CUDA machine (the H200 of BENCHMARKS.md)
    python -m kernels.bench --smoke      # tiny shapes on the CPU under TRITON_INTERPRET=1

Everything is measured in one run. Times are medians over repeats of back-to-back calls timed
with CUDA events (host overhead included, as a decoding loop sees it); the one-token step is
also timed replayed from a CUDA graph (GPU time alone). Eager PyTorch is the readable
reference ``lineage.ops`` (the only place in ``kernels`` that imports project code: the
kernels themselves never do). flash-linear-attention (``fla.ops.kda``) is optional and
skipped when it is not importable. Accuracy: bf16 inputs against the fp32 reference on the
same (bf16-rounded) inputs, relative RMS error, and no NaN at g = 0 and g = -5.
Writes a markdown table to stdout and, when $OUT is set, JSON to $OUT/kernels_bench.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

COPY_TBS = 4.14        # measured device copy ceiling (bytes read + written), H200
MATMUL_TFS = 697.0     # measured bf16 8192^3 matmul ceiling, H200

RESULTS: dict = {"rows": [], "accuracy": [], "sweeps": [], "profiles": [], "errors": []}


def save():
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "kernels_bench.json"), "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)


def log(*a):
    print(*a, flush=True)


def section(fn):
    """Run one part of the benchmark; a failure is recorded and the rest still runs."""
    def run(*a, **kw):
        t0 = time.time()
        try:
            fn(*a, **kw)
        except Exception as e:  # noqa: BLE001 - a benchmark keeps going
            log(f"!! {fn.__name__} failed: {e!r}")
            traceback.print_exc()
            RESULTS["errors"].append({"section": fn.__name__, "error": repr(e), "trace": traceback.format_exc()})
        log(f"-- {fn.__name__} took {time.time() - t0:.1f} s")
        save()
    return run


class Timer:
    def __init__(self, device):
        import torch
        self.torch, self.cuda = torch, device == "cuda"

    def __call__(self, fn, calls=20, repeats=7, warmup=3) -> float:
        """Median seconds per call over `repeats` runs of `calls` back-to-back calls."""
        torch = self.torch
        for _ in range(warmup):
            fn()
        if self.cuda:         # then keep it busy ~0.2 s: clocks (memory ones too) settle
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.2:
                for _ in range(calls):
                    fn()
                torch.cuda.synchronize()
        if not self.cuda:
            times = []
            for _ in range(max(1, repeats // 3)):
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
            return statistics.median(times)
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / calls)
        return statistics.median(times)

    def graph(self, fn, calls=100, repeats=7) -> float | None:
        """Median seconds per call, `calls` calls captured in one CUDA graph and replayed."""
        if not self.cuda:
            return None
        torch = self.torch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        return self(g.replay, calls=1, repeats=repeats) / calls


def row(op, shape, impl, seconds, *, bytes_=None, flops=None, note=""):
    r = {"op": op, "shape": shape, "impl": impl, "median_us": None if seconds is None else seconds * 1e6, "note": note}
    if seconds:
        if bytes_:
            r["TB/s"] = bytes_ / seconds / 1e12
            r["of_copy_ceiling"] = r["TB/s"] / COPY_TBS
        if flops:
            r["TFLOP/s"] = flops / seconds / 1e12
            r["of_matmul_ceiling"] = r["TFLOP/s"] / MATMUL_TFS
    RESULTS["rows"].append(r)
    achieved = ""
    if "TB/s" in r:
        achieved += f"{r['TB/s']:.2f} TB/s ({100 * r['of_copy_ceiling']:.0f}% of copy) "
    if "TFLOP/s" in r:
        achieved += f"{r['TFLOP/s']:.1f} TFLOP/s ({100 * r['of_matmul_ceiling']:.1f}% of bf16 mm)"
    us = "skipped" if seconds is None else f"{seconds * 1e6:.1f} us"
    log(f"   {op:22s} {shape:34s} {impl:28s} {us:>12s}  {achieved} {note}")
    return seconds


def add_speedups(r: dict, ours: float, base: dict) -> None:
    """Baseline time / our time for each named baseline, into our row `r`."""
    r.update({f"speedup_vs_{n}": t / ours for n, t in base.items() if t})


def rel_rms(a, b) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def try_fla():
    try:
        from fla.ops.kda import chunk_kda, fused_recurrent_kda
        return chunk_kda, fused_recurrent_kda
    except Exception as e:  # noqa: BLE001
        log(f"   flash-linear-attention not importable ({e!r}): its columns are skipped")
        return None


# ------------------------------------------------------------------------------ inputs

def delta_inputs(torch, B, T, H, K, V, dtype, device, g_mode="random", per_channel=True, seed=0):
    import torch.nn.functional as F
    gen = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(B, T, H, K, device=device, generator=gen)
    k = F.normalize(torch.randn(B, T, H, K, device=device, generator=gen), dim=-1)
    v = torch.randn(B, T, H, V, device=device, generator=gen)
    beta = torch.rand(B, T, H, device=device, generator=gen)
    shape = (B, T, H, K) if per_channel else (B, T, H)
    if g_mode == "random":    # the bounded K3 form: g = -5 sigmoid(.)
        g = -5 * torch.sigmoid(torch.randn(shape, device=device, generator=gen) * 2)
    else:
        g = torch.full(shape, {"zero": 0.0, "min": -5.0}[g_mode], device=device)
    return [x.to(dtype) for x in (q, k, v, g, beta)]


# ------------------------------------------------------------------------------ parts

@section
def bench_step(ctx, B):
    torch, kernels, ops, timer = ctx["torch"], ctx["kernels"], ctx["ops"], ctx["timer"]
    H, K, V = ctx["H"], ctx["K"], ctx["V"]
    dev, dt = ctx["device"], ctx["dtype"]
    q, k, v, g, beta = (x[:, 0].contiguous() for x in delta_inputs(torch, B, 1, H, K, V, dt, dev))
    S = torch.randn(B, H, K, V, device=dev) * 0.1
    shape = f"B={B} H={H} K={K} V={V} {str(dt)[6:]}"
    nbytes = 2 * S.numel() * 4 + (3 * B * H * K + 2 * B * H * V) * q.element_size() + B * H * beta.element_size()

    from kernels import native
    from kernels import step as kstep
    from kernels.step import _kda_step_kernel, _step_config
    cfg = _step_config(B * H, K, V)
    base = {}

    def ops_step(q, k, v, g, beta, S):
        return ops.kda(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None], initial_state=S)[0]

    base["eager"] = row("kda_step", shape, "eager lineage.ops", timer(lambda: ops_step(q, k, v, g, beta, S), calls=10),
                        bytes_=nbytes)
    if ctx["compile"]:
        compiled = torch.compile(ops_step)
        base["compile"] = row("kda_step", shape, "torch.compile(lineage.ops)",
                              timer(lambda: compiled(q, k, v, g, beta, S), calls=20, warmup=5), bytes_=nbytes)
    # Ours (through the C++ host path and through the Python launcher) and fla are timed in
    # alternating rounds and each reported as the median over the rounds: a kernel timed first
    # in a run came out up to 13% slower than the same kernel timed later, so a single
    # back-to-back pair would favour whichever ran second.
    ours_t, py_t, graph_t, fla_t = [], [], [], []
    if ctx["fla"]:
        fused_recurrent_kda = ctx["fla"][1]
        qf, kf, vf, gf, bf = (x[:, None] for x in (q, k, v, g, beta))
    native_ok = ctx["native"] == "ready"
    for _ in range(ctx["rounds"]):
        if native_ok:
            use_launcher("native", lambda: kernels.kda_step(q, k, v, g, beta, S))
            ours_t.append(timer(lambda: kernels.kda_step(q, k, v, g, beta, S), calls=50))
        use_launcher("python", lambda: kernels.kda_step(q, k, v, g, beta, S))
        py_t.append(timer(lambda: kernels.kda_step(q, k, v, g, beta, S), calls=50))
        graph_t.append(timer.graph(lambda: kernels.kda_step(q, k, v, g, beta, S)))
        if ctx["fla"]:
            fla_t.append(timer(lambda: fused_recurrent_kda(qf, kf, vf, gf, bf, initial_state=S,
                                                           output_final_state=True), calls=50))
    use_launcher(None, lambda: kernels.kda_step(q, k, v, g, beta, S))
    rounds = lambda ts: ", ".join(f"{t * 1e6:.1f}" for t in ts)  # noqa: E731
    rows_ours = []
    if ours_t:
        ours = row("kda_step", shape, f"triton {cfg}, C++ host path", statistics.median(ours_t), bytes_=nbytes,
                   note=f"rounds (us): {rounds(ours_t)}")
        rows_ours.append((RESULTS["rows"][-1], ours))
    py = row("kda_step", shape, f"triton {cfg}, Python launcher", statistics.median(py_t), bytes_=nbytes,
             note=f"rounds (us): {rounds(py_t)}" + ("" if native_ok else f"; C++ path: {ctx['native']}"))
    rows_ours.append((RESULTS["rows"][-1], py))
    if graph_t[0] is not None:
        row("kda_step", shape, "triton, CUDA graph replay", statistics.median(graph_t), bytes_=nbytes,
            note=f"rounds (us): {rounds(graph_t)}")
    if fla_t:
        base["fla"] = row("kda_step", shape, "fla fused_recurrent_kda", statistics.median(fla_t), bytes_=nbytes,
                          note=f"rounds (us): {rounds(fla_t)}")
    if ours_t:
        base["python launcher"] = py
    for r, t in rows_ours:
        add_speedups(r, t, base)
    if ctx["device"] == "cuda" and B == 1:
        # Host time per call at batch 1 (the GPU needs ~2 us), wall clock over many calls:
        # the whole kda_step, Triton's generic launch of the same kernel, and the parts.
        o = torch.empty_like(v)
        BK, BV, warps = cfg
        grid = (B * H, -(-V // BV))
        parts = {}
        if native_ok:
            parts["kda_step, C++ host path"] = lambda: kernels.kda_step(q, k, v, g, beta, S)
            cpp_step = native.module().step
            parts["C++ step() alone"] = lambda: cpp_step(q, k, v, g, beta, S, None, None)
        parts.update({
            "kda_step, Python launcher": lambda: kernels.kda_step(q, k, v, g, beta, S),
            "Triton generic launch alone": lambda: _kda_step_kernel[grid](q, k, v, g, beta, S, o, o, K ** -0.5, K, V,
                                                                          BK, BV, 2, False, num_warps=warps),
            "torch.empty_like(v) alone": lambda: torch.empty_like(v),
        })
        # the floor: the direct launch with its arguments prepared once (no checks, no allocation)
        use_launcher("python", lambda: kernels.kda_step(q, k, v, g, beta, S))
        plan = next((p for p in kstep._PLANS.values() if p[kstep._DIRECT]), None)
        if plan is not None:
            launch, head, _ = plan[kstep._DIRECT]
            args = (*head, q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(), S.data_ptr(),
                    o.data_ptr(), o.data_ptr(), K ** -0.5, K, V, BK, BV, 2, False)
            stream = torch.cuda.current_stream().cuda_stream
            parts["direct launch alone (prepared args)"] = lambda: launch(grid[0], grid[1], 1, stream, *args)
        for name, fn in parts.items():
            use_launcher("native" if name.startswith(("kda_step, C++", "C++")) else "python",
                         lambda: kernels.kda_step(q, k, v, g, beta, S))
            for _ in range(200):
                fn()
            torch.cuda.synchronize()
            per = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(4000):
                    fn()
                per.append((time.perf_counter() - t0) / 4000)
                torch.cuda.synchronize()
            RESULTS["sweeps"].append({"op": "kda_step host", "shape": shape, "part": name,
                                      "us": [p * 1e6 for p in per]})
            log(f"   host {name:32s} {statistics.median(per) * 1e6:6.2f} us per call (5 x 4000 calls: "
                f"{rounds(per)})")
    if ctx["sweep"]:
        for BV in (16, 32, 64, 128):
            for warps in (2, 4, 8):
                cfg = (max(16, K), BV, warps)
                try:
                    t = timer(lambda: kernels.kda_step(q, k, v, g, beta, S, config=cfg), calls=50)
                    gt = timer.graph(lambda: kernels.kda_step(q, k, v, g, beta, S, config=cfg))
                    RESULTS["sweeps"].append({"op": "kda_step", "shape": shape, "config": cfg, "us": t * 1e6,
                                              "graph_us": gt and gt * 1e6, "TB/s": nbytes / (gt or t) / 1e12})
                    graph_us = "-" if gt is None else f"{gt * 1e6:.1f}"
                    log(f"   sweep kda_step {shape} {cfg}: {t * 1e6:.1f} us, graph {graph_us} us,"
                        f" {nbytes / (gt or t) / 1e12:.2f} TB/s")
                except Exception as e:  # noqa: BLE001
                    log(f"   sweep kda_step {cfg} failed: {e!r}")
    use_launcher(None, lambda: kernels.kda_step(q, k, v, g, beta, S))


def use_launcher(path, call):
    """Makes kda_step take the C++ host path ("native"), the Python launcher ("python") or the
    default (None: as LINEAGE_NATIVE was), from fresh plans, and makes the plan with `call`."""
    from kernels import step as kstep
    if path is None:
        os.environ.pop("LINEAGE_NATIVE", None)
        if ORIGINAL_NATIVE is not None:
            os.environ["LINEAGE_NATIVE"] = ORIGINAL_NATIVE
    else:
        os.environ["LINEAGE_NATIVE"] = "1" if path == "native" else "0"
    kstep._reset()
    for _ in range(2):                      # the first call plans, the second takes the direct launch
        call()
    if path == "native" and kstep._native_step is None:
        raise RuntimeError("the C++ host path did not take the plan")


ORIGINAL_NATIVE = os.environ.get("LINEAGE_NATIVE")


def time_kda_options(timer, xs, o_ref, options: dict) -> tuple[float, float]:
    """Chunked kda on xs = (q, k, v, g, beta) with `chunk_delta` options: (median seconds,
    relative RMS error of o against o_ref)."""
    from kernels import chunk_delta

    def fn():
        return chunk_delta._chunk_delta(*xs, None, None, 64, 2, "kda", options=options)
    return timer(fn, calls=5), rel_rms(fn()[0], o_ref)


def chunk_flops(B, T, H, K, V, C=64):
    NT = -(-T // C)
    per_chunk = 2 * 2 * C * C * K + 2 * C * C * (K + V) + 3 * 2 * C * K * V + 2 * C * C * V
    return B * H * NT * per_chunk


@section
def bench_chunk(ctx):
    torch, kernels, ops, timer = ctx["torch"], ctx["kernels"], ctx["ops"], ctx["timer"]
    B, T, H, K, V = ctx["chunk_shape"]
    dev, dt = ctx["device"], ctx["dtype"]
    q, k, v, g, beta = delta_inputs(torch, B, T, H, K, V, dt, dev)
    shape = f"B={B} T={T} H={H} K={K} V={V} {str(dt)[6:]}"
    flops = chunk_flops(B, T, H, K, V)
    nbytes = (q.numel() * 3 + v.numel() * 2) * q.element_size()

    o, S = kernels.kda(q, k, v, g, beta)
    base = {}
    f32 = [x.float() for x in (q, k, v, g, beta)]
    base["eager"] = row("kda (chunked)", shape, "eager lineage.ops (fp32)",
                        timer(lambda: ops.kda(*f32, chunk_size=64), calls=1, repeats=3, warmup=1), flops=flops)
    o_ref, S_ref = ops.kda(*f32, chunk_size=64)
    acc = {"op": "kda", "shape": shape, "g": "random", "o_rel_rms": rel_rms(o, o_ref), "S_rel_rms": rel_rms(S, S_ref),
           "nan": bool(torch.isnan(o).any() or torch.isnan(S).any())}
    RESULTS["accuracy"].append(acc)
    log(f"   accuracy at the benchmark shape: {acc}")
    fla_o = None
    # ours and fla in alternating rounds, each reported as the median of its rounds (see bench_step)
    ours_t, fla_t = [], []
    if ctx["fla"]:
        chunk_kda = ctx["fla"][0]
        fla_call = lambda: chunk_kda(q, k, v, g, beta, output_final_state=True)  # noqa: E731
        fla_call()      # autotune outside the timing
    for _ in range(ctx["rounds"]):
        ours_t.append(timer(lambda: kernels.kda(q, k, v, g, beta), calls=5))
        if ctx["fla"]:
            fla_t.append(timer(fla_call, calls=5))
    rounds = lambda ts: ", ".join(f"{t * 1e6:.0f}" for t in ts)  # noqa: E731
    ours = row("kda (chunked)", shape, "triton", statistics.median(ours_t), flops=flops, bytes_=nbytes,
               note=f"rounds (us): {rounds(ours_t)}")
    ours_row = RESULTS["rows"][-1]
    if ctx["fla"]:
        base["fla"] = row("kda (chunked)", shape, "fla chunk_kda", statistics.median(fla_t), flops=flops,
                          bytes_=nbytes, note=f"rounds (us): {rounds(fla_t)}")
        fla_o = fla_call()[0]
        log(f"   fla chunk_kda bf16 error vs the same fp32 reference: {rel_rms(fla_o, o_ref):.2e}")
        RESULTS["accuracy"].append({"op": "fla chunk_kda", "shape": shape, "o_rel_rms": rel_rms(fla_o, o_ref)})
    add_speedups(ours_row, ours, base)
    save()

    # where the time goes, kernel by kernel
    if ctx["device"] == "cuda":
        from torch.profiler import ProfilerActivity, profile
        for name, fn in [("triton", lambda: kernels.kda(q, k, v, g, beta))] + (
                [("fla", fla_call)] if ctx["fla"] else []):
            fn()                # compile outside the profile
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
            kern = []
            for e in prof.key_averages():
                t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
                if t:
                    kern.append({"kernel": e.key[:80], "us_per_call": t / 3, "count": e.count / 3})
            kern.sort(key=lambda x: -x["us_per_call"])
            RESULTS["profiles"].append({"impl": name, "shape": shape, "kernels": kern})
            log(f"   profile {name}: " + "; ".join(f"{x['kernel'][:40]} {x['us_per_call']:.0f} us" for x in kern[:8]))

    if ctx["sweep"]:
        variants = [{}, {"x": torch.float32}, {"inter": torch.float32, "dot": torch.float32}]
        # the state pass: state = (BV, warps, stages) of the sequential kernel (default (64, 4, 3)),
        # out = (BK, BV, warps, stages) of the output kernel (default (64, 128, 4, 2))
        variants += [{"state": c} for c in ((32, 4, 2), (64, 4, 2), (64, 4, 4))] + \
            [{"out": c} for c in ((64, 64, 4, 2), (64, 128, 8, 3), (128, 128, 4, 2))] + \
            [{"cumsum": c} for c in ((128, 8), (256, 4))]
        # the score kernels (defaults (32, 1) and (4, 2)): split_inter = (BK, num_warps) of the
        # blocks below the diagonal, diag_token = (heads a program, num_warps) of the diagonal blocks
        variants += [{"split_inter": c} for c in ((64, 1), (32, 2), (32, 4), (16, 1))] + \
            [{"diag_token": c} for c in ((2, 1), (4, 2), (8, 2), (16, 4))]
        variants += [{"solve": w} for w in (2, 4)] + [{"apply": w} for w in (1, 2, 8)]
        for opt in variants:
            name = {key: str(val) for key, val in opt.items()}
            try:
                t, err = time_kda_options(timer, (q, k, v, g, beta), o_ref, opt)
                RESULTS["sweeps"].append({"op": "kda (chunked)", "shape": shape, "options": name, "us": t * 1e6,
                                          "o_rel_rms": err, "vs_fla": base.get("fla", 0) / t})
                log(f"   sweep kda {name}: {t * 1e6:.0f} us, error {err:.2e}, vs fla {base.get('fla', 0) / t:.2f}x")
            except Exception as e:  # noqa: BLE001
                log(f"   sweep kda {name} failed: {str(e)[:200]}")
    if ctx["compile"] and ctx["compile_chunked"]:
        compiled = torch.compile(ops.kda)
        t0 = time.time()
        compiled(*f32, chunk_size=64)
        log(f"   torch.compile of the chunked reference took {time.time() - t0:.0f} s")
        base["compile"] = row("kda (chunked)", shape, "torch.compile(lineage.ops) fp32",
                              timer(lambda: compiled(*f32, chunk_size=64), calls=1, repeats=3), flops=flops)
        add_speedups(ours_row, ours, base)


@section
def bench_situ(ctx, linear_beta):
    torch, kernels, ops, timer = ctx["torch"], ctx["kernels"], ctx["ops"], ctx["timer"]
    M, F = ctx["situ_shape"]
    x = torch.randn(M, 2 * F, device=ctx["device"], dtype=ctx["dtype"]) * 3
    shape = f"{M}x{F} out {str(x.dtype)[6:]}" + ("" if linear_beta is None else f" lb={linear_beta}")
    nbytes = x.numel() * x.element_size() * 3 // 2
    ours = timer(lambda: kernels.situ_glu(x, 4.0, linear_beta), calls=20)
    row("situ_glu", shape, "triton", ours, bytes_=nbytes)
    ours_row = RESULTS["rows"][-1]
    base = {"eager": row("situ_glu", shape, "eager lineage.ops",
                         timer(lambda: ops.situ_glu(x, 4.0, linear_beta), calls=10), bytes_=nbytes)}
    if ctx["compile"]:
        compiled = torch.compile(ops.situ_glu)
        base["compile"] = row("situ_glu", shape, "torch.compile(lineage.ops)",
                              timer(lambda: compiled(x, 4.0, linear_beta), calls=20, warmup=5), bytes_=nbytes)
    add_speedups(ours_row, ours, base)
    y, y_ref = kernels.situ_glu(x, 4.0, linear_beta), ops.situ_glu(x.float(), 4.0, linear_beta)
    acc = {"op": "situ_glu", "shape": shape, "o_rel_rms": rel_rms(y, y_ref), "nan": bool(torch.isnan(y).any())}
    RESULTS["accuracy"].append(acc)
    log(f"   accuracy: {acc}")
    if ctx["sweep"] and linear_beta is None:
        for cfg in ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16), (512, 2)):
            t = timer(lambda: kernels.situ_glu(x, 4.0, None, config=cfg), calls=20)
            RESULTS["sweeps"].append({"op": "situ_glu", "shape": shape, "config": cfg, "us": t * 1e6,
                                      "TB/s": nbytes / t / 1e12})
            log(f"   sweep situ {cfg}: {t * 1e6:.1f} us {nbytes / t / 1e12:.2f} TB/s")


@section
def check_accuracy(ctx):
    """bf16 kernels against the fp32 reference (same bf16-rounded inputs), gate extremes included."""
    torch, kernels, ops = ctx["torch"], ctx["kernels"], ctx["ops"]
    B, T, H, K, V = ctx["acc_shape"]
    dev = ctx["device"]
    for op in ("kda", "gated_delta_rule", "delta_rule"):
        for g_mode in ("random", "zero", "min"):
            if op == "delta_rule" and g_mode != "random":
                continue
            q, k, v, g, beta = delta_inputs(torch, B, T, H, K, V, ctx["dtype"], dev, g_mode, op == "kda", seed=1)
            S0 = torch.randn(B, H, K, V, device=dev) * 0.1
            gates = () if op == "delta_rule" else (g,)
            o, S = getattr(kernels, op)(q, k, v, *gates, beta, initial_state=S0)
            o_ref, S_ref = getattr(ops, op)(*(x.float() for x in (q, k, v, *gates, beta)), initial_state=S0,
                                            chunk_size=64)
            acc = {"op": op, "shape": f"B={B} T={T} H={H} K={K} V={V}", "g": g_mode,
                   "o_rel_rms": rel_rms(o, o_ref), "S_rel_rms": rel_rms(S, S_ref),
                   "nan": bool(torch.isnan(o).any() or torch.isnan(S).any())}
            acc["pass"] = acc["o_rel_rms"] < 5e-3 and not acc["nan"]
            RESULTS["accuracy"].append(acc)
            log(f"   {acc}")
    # other head sizes (each is its own compile: resources, masks), fp32 inputs too
    for K_, V_, dt in ((32, 48, torch.float32), (64, 64, ctx["dtype"]), (256, 256, ctx["dtype"])):
        q, k, v, g, beta = delta_inputs(torch, 1, 200, 4, K_, V_, dt, dev, seed=3)
        S0 = torch.randn(1, 4, K_, V_, device=dev) * 0.1
        o, S = kernels.kda(q, k, v, g, beta, initial_state=S0)
        o_ref, S_ref = ops.kda(*(x.float() for x in (q, k, v, g, beta)), initial_state=S0, chunk_size=64)
        acc = {"op": "kda", "shape": f"B=1 T=200 H=4 K={K_} V={V_} {str(dt)[6:]}", "g": "random",
               "o_rel_rms": rel_rms(o, o_ref), "S_rel_rms": rel_rms(S, S_ref), "nan": bool(torch.isnan(o).any())}
        acc["pass"] = acc["o_rel_rms"] < (5e-3 if dt != torch.float32 else 1e-4) and not acc["nan"]
        RESULTS["accuracy"].append(acc)
        log(f"   {acc}")
    # the step, a few tokens, against the recurrence
    q, k, v, g, beta = delta_inputs(torch, B, 8, H, K, V, ctx["dtype"], dev, seed=2)
    S0 = torch.randn(B, H, K, V, device=dev) * 0.1
    o_ref, S_ref = ops.kda(*(x.float() for x in (q, k, v, g, beta)), initial_state=S0)
    state, outs = S0.clone(), []
    for t in range(8):
        outs.append(kernels.kda_step(*(x[:, t].contiguous() for x in (q, k, v, g, beta)), state))
    acc = {"op": "kda_step x8", "o_rel_rms": rel_rms(torch.stack(outs, 1), o_ref), "S_rel_rms": rel_rms(state, S_ref)}
    acc["pass"] = acc["o_rel_rms"] < 5e-3
    RESULTS["accuracy"].append(acc)
    log(f"   {acc}")


def print_table():
    log("\n| op | shape | impl | median | achieved | vs eager | vs torch.compile | vs fla | vs Python launcher |")
    log("|---|---|---|---|---|---|---|---|---|")
    for r in RESULTS["rows"]:
        med = "skipped" if r["median_us"] is None else (f"{r['median_us']:.1f} us" if r["median_us"] < 1e4
                                                         else f"{r['median_us'] / 1e3:.2f} ms")
        ach = []
        if "TB/s" in r:
            ach.append(f"{r['TB/s']:.2f} TB/s ({100 * r['of_copy_ceiling']:.0f}% of 4.14)")
        if "TFLOP/s" in r:
            ach.append(f"{r['TFLOP/s']:.1f} TFLOP/s ({100 * r['of_matmul_ceiling']:.1f}% of 697)")
        sp = [f"{r[k]:.2f}x" if k in r else "" for k in ("speedup_vs_eager", "speedup_vs_compile", "speedup_vs_fla",
                                                          "speedup_vs_python launcher")]
        log(f"| {r['op']} | {r['shape']} | {r['impl']} | {med} | {'; '.join(ach)} | " + " | ".join(sp) + " |")
    log("\nratios are baseline time / triton time (above 1: the kernel is faster)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU under TRITON_INTERPRET=1")
    ap.add_argument("--sweep", action="store_true", help="also time alternative tile configurations")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baselines")
    ap.add_argument("--compile-chunked", action="store_true",
                    help="also torch.compile the chunked reference (its Python chunk loop unrolls: slow to compile)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of ours and fla (kda_step and chunked kda)")
    ap.add_argument("--only", default="step,chunk,situ,accuracy", help="comma list of parts to run")
    ap.add_argument("--no-fla", action="store_true",
                    help="do not import or run fla (time our kernels in a process where no fla kernel ran)")
    args = ap.parse_args(argv)
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"      # before triton is imported
    import torch
    import triton

    import kernels
    from lineage import ops     # the readable references; only the benchmark imports them

    device = "cpu" if args.smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --smoke for the CPU interpreter")
    ctx = {"torch": torch, "kernels": kernels, "ops": ops, "timer": Timer(device), "device": device,
           "dtype": torch.float32 if args.smoke else torch.bfloat16,
           "compile": not args.no_compile and not args.smoke, "compile_chunked": args.compile_chunked,
           "sweep": args.sweep, "fla": None if args.smoke or args.no_fla else try_fla(), "rounds": args.rounds}
    if args.smoke:
        ctx.update(H=2, K=32, V=32, chunk_shape=(1, 130, 2, 32, 32), situ_shape=(8, 64), acc_shape=(1, 70, 2, 32, 32))
        step_batches = (1, 3)
    else:
        ctx.update(H=16, K=128, V=128, chunk_shape=(4, 4096, 16, 128, 128), situ_shape=(16384, 4096),
                   acc_shape=(2, 1000, 16, 128, 128))
        step_batches = (1, 256)
    RESULTS["env"] = {"torch": torch.__version__, "triton": triton.__version__, "device": (
        torch.cuda.get_device_name() if device == "cuda" else "cpu (TRITON_INTERPRET=1)"),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"), "fla": bool(ctx["fla"]), "argv": sys.argv[1:]}
    log(f"env: {RESULTS['env']}")
    ctx["native"] = "off (CPU interpreter)"
    if device == "cuda":     # the C++ host path of kda_step: build it (or take torch's cache) now
        from kernels import native
        t0 = time.time()
        native.load()
        ctx["native"] = native.status()
        RESULTS["env"]["native"] = f"{ctx['native']} ({time.time() - t0:.1f} s to build or load)"
        log(f"C++ host path of kda_step: {RESULTS['env']['native']}")
    if device == "cuda":     # bring the clocks up before the first timing
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        t0 = time.time()
        while time.time() - t0 < 2.0:
            a @ a
        torch.cuda.synchronize()
    parts = set(args.only.split(","))
    if "step" in parts:
        for B in step_batches:
            bench_step(ctx, B)
    if "situ" in parts:
        bench_situ(ctx, None)
        bench_situ(ctx, 25.0)
    if "accuracy" in parts:
        check_accuracy(ctx)
    if "chunk" in parts:
        bench_chunk(ctx)
    print_table()
    save()
    return 1 if RESULTS["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
