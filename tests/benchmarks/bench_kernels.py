"""Benchmark of the kernels against eager PyTorch, torch.compile and flash-linear-attention.

    python -m tests.benchmarks.bench_kernels            # on a CUDA machine (the H200 of BENCHMARKS.md)
    python -m tests.benchmarks.bench_kernels --smoke    # tiny shapes on the CPU under TRITON_INTERPRET=1

Everything is measured in one run, with the clocks of ``tests/benchmarks/timing.py``: the
launch-bound one-token step at batch 1 (and its baselines) by wall clock over back-to-back
calls, as a decoding loop sees it; device-bound work by ``triton.testing.do_bench``; the
one-token step also replayed from a CUDA graph (GPU time alone). Eager PyTorch is the readable
reference ``lineage.ops``. flash-linear-attention (``fla.ops.kda``) is optional and skipped
when it is not importable. Accuracy: bf16 inputs against the fp32 reference on the same
(bf16-rounded) inputs, relative RMS error, and no NaN at g = 0 and g = -5.
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

from tests.benchmarks import timing

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
    torch, kernels, ops = ctx["torch"], ctx["kernels"], ctx["ops"]
    H, K, V = ctx["H"], ctx["K"], ctx["V"]
    dev, dt = ctx["device"], ctx["dtype"]
    q, k, v, g, beta = (x[:, 0].contiguous() for x in delta_inputs(torch, B, 1, H, K, V, dt, dev))
    S = torch.randn(B, H, K, V, device=dev) * 0.1
    shape = f"B={B} H={H} K={K} V={V} {str(dt)[6:]}"
    nbytes = 2 * S.numel() * 4 + (3 * B * H * K + 2 * B * H * V) * q.element_size() + B * H * beta.element_size()
    # batch 1 is launch bound (the kernel is ~2 us of GPU time): what a decoding loop sees is
    # the wall clock of back-to-back calls; at large batch the kernel is a copy of the state
    clock = timing.wall if B == 1 else timing.gpu
    base = {}

    def ops_step(q, k, v, g, beta, S):
        return ops.kda(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None], initial_state=S)[0]

    base["eager"] = row("kda_step", shape, "eager lineage.ops", clock(lambda: ops_step(q, k, v, g, beta, S)),
                        bytes_=nbytes)
    if ctx["compile"]:
        compiled = torch.compile(ops_step)
        base["compile"] = row("kda_step", shape, "torch.compile(lineage.ops)",
                              clock(lambda: compiled(q, k, v, g, beta, S)), bytes_=nbytes)
    # Ours and fla are timed in alternating rounds and each reported as the median over the
    # rounds: a kernel timed first in a run came out up to 13% slower than the same kernel
    # timed later, so a single back-to-back pair would favour whichever ran second.
    ours_t, graph_t, fla_t = [], [], []
    if ctx["fla"]:
        fused_recurrent_kda = ctx["fla"][1]
        qf, kf, vf, gf, bf = (x[:, None] for x in (q, k, v, g, beta))
    for _ in range(ctx["rounds"]):
        ours_t.append(clock(lambda: kernels.kda_step(q, k, v, g, beta, S)))
        graph_t.append(timing.graph(lambda: kernels.kda_step(q, k, v, g, beta, S)))
        if ctx["fla"]:
            fla_t.append(clock(lambda: fused_recurrent_kda(qf, kf, vf, gf, bf, initial_state=S,
                                                           output_final_state=True)))
    rounds = lambda ts: ", ".join(f"{t * 1e6:.1f}" for t in ts)  # noqa: E731
    ours = row("kda_step", shape, "triton", statistics.median(ours_t), bytes_=nbytes,
               note=f"rounds (us): {rounds(ours_t)}")
    ours_row = RESULTS["rows"][-1]
    if graph_t[0] is not None:
        row("kda_step", shape, "triton, CUDA graph replay", statistics.median(graph_t), bytes_=nbytes,
            note=f"rounds (us): {rounds(graph_t)}")
    if fla_t:
        base["fla"] = row("kda_step", shape, "fla fused_recurrent_kda", statistics.median(fla_t), bytes_=nbytes,
                          note=f"rounds (us): {rounds(fla_t)}")
    add_speedups(ours_row, ours, base)
    if B == 1:
        # the floor under a call: allocating o alone
        row("kda_step", shape, "torch.empty_like(v) alone", timing.wall(lambda: torch.empty_like(v)))
    if ctx["sweep"]:
        for BV in (16, 32, 64, 128):
            for warps in (2, 4, 8):
                cfg = (max(16, K), BV, warps)
                try:
                    t = clock(lambda: kernels.kda_step(q, k, v, g, beta, S, config=cfg))
                    gt = timing.graph(lambda: kernels.kda_step(q, k, v, g, beta, S, config=cfg))
                    RESULTS["sweeps"].append({"op": "kda_step", "shape": shape, "config": cfg, "us": t * 1e6,
                                              "graph_us": gt and gt * 1e6, "TB/s": nbytes / (gt or t) / 1e12})
                    graph_us = "-" if gt is None else f"{gt * 1e6:.1f}"
                    log(f"   sweep kda_step {shape} {cfg}: {t * 1e6:.1f} us, graph {graph_us} us,"
                        f" {nbytes / (gt or t) / 1e12:.2f} TB/s")
                except Exception as e:  # noqa: BLE001
                    log(f"   sweep kda_step {cfg} failed: {e!r}")


def time_kda_options(xs, o_ref, options: dict) -> tuple[float, float]:
    """Chunked kda on xs = (q, k, v, g, beta) with `kernels.kda` options: (median GPU
    seconds, relative RMS error of o against o_ref)."""
    from lineage.ops import kernels

    def fn():
        return kernels.kda(*xs, options=options)
    return timing.gpu(fn), rel_rms(fn()[0], o_ref)


def chunk_flops(B, T, H, K, V, C=64):
    NT = -(-T // C)
    per_chunk = 2 * 2 * C * C * K + 2 * C * C * (K + V) + 3 * 2 * C * K * V + 2 * C * C * V
    return B * H * NT * per_chunk


@section
def bench_chunk(ctx):
    torch, kernels, ops = ctx["torch"], ctx["kernels"], ctx["ops"]
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
                        timing.median_each(lambda: ops.kda(*f32, chunk_size=64), reps=3, warmup=1), flops=flops)
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
        ours_t.append(timing.gpu(lambda: kernels.kda(q, k, v, g, beta)))
        if ctx["fla"]:
            fla_t.append(timing.gpu(fla_call))
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
                t, err = time_kda_options((q, k, v, g, beta), o_ref, opt)
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
                              timing.median_each(lambda: compiled(*f32, chunk_size=64), reps=3), flops=flops)
        add_speedups(ours_row, ours, base)


@section
def bench_situ(ctx, linear_beta):
    torch, kernels, ops = ctx["torch"], ctx["kernels"], ctx["ops"]
    M, F = ctx["situ_shape"]
    x = torch.randn(M, 2 * F, device=ctx["device"], dtype=ctx["dtype"]) * 3
    shape = f"{M}x{F} out {str(x.dtype)[6:]}" + ("" if linear_beta is None else f" lb={linear_beta}")
    nbytes = x.numel() * x.element_size() * 3 // 2
    ours = timing.gpu(lambda: kernels.situ_glu(x, 4.0, linear_beta))
    row("situ_glu", shape, "triton", ours, bytes_=nbytes)
    ours_row = RESULTS["rows"][-1]
    base = {"eager": row("situ_glu", shape, "eager lineage.ops",
                         timing.gpu(lambda: ops.situ_glu(x, 4.0, linear_beta)), bytes_=nbytes)}
    if ctx["compile"]:
        compiled = torch.compile(ops.situ_glu)
        base["compile"] = row("situ_glu", shape, "torch.compile(lineage.ops)",
                              timing.gpu(lambda: compiled(x, 4.0, linear_beta)), bytes_=nbytes)
    add_speedups(ours_row, ours, base)
    y, y_ref = kernels.situ_glu(x, 4.0, linear_beta), ops.situ_glu(x.float(), 4.0, linear_beta)
    acc = {"op": "situ_glu", "shape": shape, "o_rel_rms": rel_rms(y, y_ref), "nan": bool(torch.isnan(y).any())}
    RESULTS["accuracy"].append(acc)
    log(f"   accuracy: {acc}")
    if ctx["sweep"] and linear_beta is None:
        for cfg in ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16), (512, 2)):
            t = timing.gpu(lambda: kernels.situ_glu(x, 4.0, None, config=cfg))
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
    log("\n| op | shape | impl | median | achieved | vs eager | vs torch.compile | vs fla |")
    log("|---|---|---|---|---|---|---|---|")
    for r in RESULTS["rows"]:
        med = "skipped" if r["median_us"] is None else (f"{r['median_us']:.1f} us" if r["median_us"] < 1e4
                                                         else f"{r['median_us'] / 1e3:.2f} ms")
        ach = []
        if "TB/s" in r:
            ach.append(f"{r['TB/s']:.2f} TB/s ({100 * r['of_copy_ceiling']:.0f}% of 4.14)")
        if "TFLOP/s" in r:
            ach.append(f"{r['TFLOP/s']:.1f} TFLOP/s ({100 * r['of_matmul_ceiling']:.1f}% of 697)")
        sp = [f"{r[k]:.2f}x" if k in r else "" for k in ("speedup_vs_eager", "speedup_vs_compile", "speedup_vs_fla")]
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

    from lineage.ops import kernels
    from lineage import ops     # the readable references

    device = "cpu" if args.smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --smoke for the CPU interpreter")
    ctx = {"torch": torch, "kernels": kernels, "ops": ops, "device": device,
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
