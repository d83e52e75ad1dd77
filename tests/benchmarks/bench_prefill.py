"""Prefill of a long prompt: Kimi Linear at its published width and depth (27 layers; routed
experts cut to 64 so that both models fit one H200: a token reads the published active weights),
random bf16 weights saved once and loaded by both. Ours is what the app runs (lineage.prefill:
chunks of 16,384 tokens on CUDA, Triton KDA, fused attention, grouped experts); the baseline is
transformers' forward on the same weights in the same run (fla's kernels when fla is installed),
asked for the last position's logits only (logits_to_keep=1), as ours computes. The two
alternate, length by length, so drift of the clocks falls on both. An implementation that runs
out of memory at a length says so and is not tried longer.

    python -m tests.benchmarks.bench_prefill                           # H200: 1K, 8K, 32K, 128K
    python -m tests.benchmarks.bench_prefill --lengths 1024,8192 --profile
    python -m tests.benchmarks.bench_prefill --smoke                   # CPU, a tiny width: the script runs

Writes one JSON line per measurement (a run cut short still reports what it reached)."""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from .bench_pretrained import kimi_config, random_weights, sync


def report(out: list, **kw) -> None:
    out.append(kw)
    print(json.dumps(kw), flush=True)
    if dest := os.environ.get("OUT"):
        Path(dest, "bench_prefill.json").write_text(json.dumps(out, indent=1))


def timed(fn, dev) -> tuple[float | None, float | None, str | None]:
    """(seconds, peak GiB over what was allocated before, None) or (None, None, why)."""
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    sync(dev)
    t0 = time.perf_counter()
    try:
        fn()
        sync(dev)
    except torch.OutOfMemoryError as e:
        return None, None, "out of memory: " + str(e).split(".")[0]
    dt = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated() - base) / 2**30 if dev.type == "cuda" else None
    return dt, peak, None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=27)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--lengths", default="1024,8192,32768,131072")
    ap.add_argument("--rounds", type=int, default=3, help="timed runs of each at each length (after one warm-up)")
    ap.add_argument("--profile", action="store_true", help="also print our prefill's top CUDA kernels (lengths up to 32K)")
    ap.add_argument("--chunks", default="16384",
                    help="our chunk sizes to time, comma-separated; 'whole' reads the prompt in one pass")
    ap.add_argument("--fp32", action="store_true",
                    help="also load transformers in float32 to say how far each bf16 prefill is from it")
    ap.add_argument("--smoke", action="store_true", help="a tiny width in float32 on the CPU")
    args = ap.parse_args()
    from transformers import KimiLinearForCausalLM
    import lineage
    from lineage.backend import resolve, set_backend
    from lineage.prefill import prefill
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    lengths = [int(n) for n in args.lengths.split(",")] if not args.smoke else [64, 256]
    out: list = []
    try:
        import fla  # noqa: F401
        has_fla = True
    except ImportError:
        has_fla = False
    report(out, device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", torch=torch.__version__,
           fla=has_fla, layers=args.layers, experts=args.experts, date=time.strftime("%Y-%m-%d"))

    cfg = kimi_config(args.layers, args.smoke, experts=None if args.smoke else args.experts)
    dtype = torch.float32 if args.smoke else torch.bfloat16
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)
    with torch.device(dev):
        ref = KimiLinearForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    random_weights(ref)
    ref.eval()
    folder = Path(tempfile.mkdtemp(prefix="kimi-prefill-"))
    ref.save_pretrained(str(folder), max_shard_size="4GB")
    ours, _ = lineage.load_pretrained(folder, device=dev, dtype="float32" if args.smoke else "bfloat16")
    backend = resolve(dev)[0]
    set_backend(ours, backend)
    report(out, backend=backend, params=sum(p.numel() for p in ours.parameters()))

    ids = torch.randint(3, cfg.vocab_size, (1, max(lengths)), generator=torch.Generator().manual_seed(1)).to(dev)
    chunks = [c if c == "whole" else int(c) for c in args.chunks.split(",")]
    # agreement at the shortest length: the same last logits. Two bf16 runs of random weights 27
    # layers deep differ a lot; --fp32 says how far each is from transformers in float32
    with torch.inference_mode():
        n = lengths[0]
        a = ref(ids[:, :n], logits_to_keep=1).logits[0, -1].float()
        b = prefill(ours, ids[:, :n])[0][0].float()
        row = {"length": n, "last_logits_rel_err": float((a - b).norm() / a.norm())}
        if args.fp32:
            full = KimiLinearForCausalLM.from_pretrained(str(folder), dtype=torch.float32).to(dev).eval()
            f = full(ids[:, :n], logits_to_keep=1).logits[0, -1].float()
            row.update(ours_bf16_vs_fp32=float((b - f).norm() / f.norm()),
                       transformers_bf16_vs_fp32=float((a - f).norm() / f.norm()))
            del full
            gc.collect()
            torch.cuda.empty_cache() if dev.type == "cuda" else None
        report(out, **row)

    def ours_at(c):
        return lambda n: prefill(ours, ids[:, :n], chunk=n if c == "whole" else c)
    runs = {f"ours@{c}": ours_at(c) for c in chunks}
    runs["transformers"] = lambda n: ref(ids[:, :n], logits_to_keep=1, use_cache=True)
    failed = {who: False for who in runs}
    for n in lengths:
        times: dict = {who: [] for who in runs}
        peaks: dict = {}
        for r in range(args.rounds + 1):                    # round 0 warms up (compiles, autotunes)
            for who in runs:
                if failed[who]:
                    continue
                with torch.inference_mode():
                    dt, peak, why = timed(lambda: runs[who](n), dev)
                if why:
                    failed[who] = True
                    report(out, length=n, who=who, failed=why)
                    continue
                if r:
                    times[who].append(dt)
                    peaks[who] = peak
        row = {"length": n}
        for who in times:
            if times[who]:
                med = statistics.median(times[who])
                row[f"{who}_s"] = round(med, 4)
                row[f"{who}_tokens_per_s"] = round(n / med)
                row[f"{who}_peak_gib"] = None if peaks[who] is None else round(peaks[who], 2)
        for who in runs:
            if who != "transformers" and times[who] and times["transformers"]:
                row[f"{who}_speedup_vs_transformers"] = round(
                    statistics.median(times["transformers"]) / statistics.median(times[who]), 3)
        report(out, **row)
        if args.profile and n <= 32768 and dev.type == "cuda":
            from torch.profiler import ProfilerActivity, profile
            for who in runs:
                if who == "transformers" or failed[who]:
                    continue
                with torch.inference_mode(), profile(activities=[ProfilerActivity.CUDA]) as p:
                    runs[who](n)
                    sync(dev)
                print(f"{who} at {n}:", flush=True)
                print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
