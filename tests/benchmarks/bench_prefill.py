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
    python -m tests.benchmarks.bench_prefill --check-estimate          # CPU: activation_bytes vs peak RSS

Writes one JSON line per measurement (a run cut short still reports what it reached).

`--check-estimate` is the budget's side: the memory `validate` counts for a prefill (the models'
cache and state, `arithmetic.model_memory`, plus its transient `prefill.activation_bytes`) against
the peak RSS a CPU prefill of random float32 weights reaches above where it started, each case in
a fresh process (an allocator that kept the pages of an earlier case would hide this one's)."""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
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


# one CPU prefill in a fresh process: its RSS before, the peak during (VmHWM, reset to the current
# RSS by clear_refs 5 once the model and the ids exist), seconds. argv: preset name or checkpoint
# folder (its config.json only: random weights), tokens
ESTIMATE_CHILD = """
import gc, json, sys, time
import torch
from lineage.model import LM
from lineage.prefill import prefill
from pathlib import Path
def status(key):
    return int([l.split()[1] for l in open("/proc/self/status") if l.startswith(key)][0]) * 1024
name, tokens = sys.argv[1], int(sys.argv[2])
if Path(name).is_dir():
    from lineage.families import read_model_config
    cfg = read_model_config(name)[0]
else:
    from lineage.presets import get_preset
    cfg = get_preset(name)
torch.manual_seed(0)
model = LM(cfg).eval()
ids = torch.randint(0, cfg.vocab_size, (1, tokens))
gc.collect()
open("/proc/self/clear_refs", "w").write("5")
before = status("VmRSS")
t = time.perf_counter()
logits, state = prefill(model, ids)
print(json.dumps({"before": before, "peak": status("VmHWM"), "s": time.perf_counter() - t,
                  "threads": torch.get_num_threads()}))
"""


def check_estimate(lengths: list[int]) -> int:
    """Budget (kept + activation_bytes) against the measured peak RSS growth of a CPU prefill,
    for k3-mini-like presets and a Kimi Linear checkpoint config (bench_pretrained's CPU width)."""
    from lineage.families import read_model_config
    with tempfile.TemporaryDirectory(prefix="kimi-config-") as folder:     # a config.json alone: no weights
        kimi_config(8, smoke=False, mid=True).to_json_file(str(Path(folder) / "config.json"))
        return _check_estimate(lengths, read_model_config(folder)[0], folder)


def _check_estimate(lengths: list[int], kimi, folder: str) -> int:
    """The cases, each length in its own process; `kimi` is the config the child reads from `folder`.
    Exit 1 when any measured peak is above its estimate."""
    from lineage.arithmetic import model_memory
    from lineage.prefill import activation_bytes
    from lineage.presets import get_preset
    root = Path(__file__).resolve().parents[2]
    cases = {"k3-mini": get_preset("k3-mini"), "tiny-hybrid": get_preset("tiny-hybrid"),
             "tiny-softmax": get_preset("tiny-softmax"), "kimi_linear 8 layers, 576 wide": kimi}
    names = {"kimi_linear 8 layers, 576 wide": folder}
    out: list = []
    report(out, check="activation_bytes against a CPU prefill's peak RSS growth", host=os.uname().nodename,
           cores=os.cpu_count(), torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    worst = 0.0
    for case, cfg in cases.items():
        for n in lengths:
            if cfg.n_positions and n > cfg.n_positions:      # a learned position table ends there
                continue
            r = subprocess.run([sys.executable, "-c", ESTIMATE_CHILD, names.get(case, case), str(n)],
                               capture_output=True, text=True, cwd=root, env=dict(os.environ, PYTHONPATH=str(root)))
            if r.returncode:
                report(out, case=case, tokens=n, failed=(r.stderr.strip().splitlines() or ["?"])[-1][:200])
                continue
            m = json.loads(r.stdout.strip().splitlines()[-1])
            kept = model_memory(cfg, n, cache_dtype_bytes=4, state_dtype_bytes=4)["total_bytes"]
            act = activation_bytes(cfg, n, 4, "cpu")
            grown = m["peak"] - m["before"]
            worst = max(worst, grown / (kept + act))
            report(out, case=case, tokens=n, seconds=round(m["s"], 2), threads=m["threads"],
                   measured_mib=round(grown / 2**20, 1), kept_mib=round(kept / 2**20, 1),
                   activation_estimate_mib=round(act / 2**20, 1),
                   estimate_over_measured=round((kept + act) / grown, 2),
                   activation_estimate_over_measured_transient=round(act / max(grown - kept, 1), 2))
    report(out, worst_measured_over_estimate=round(worst, 2))
    return 0 if worst <= 1 else 1


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
    ap.add_argument("--check-estimate", action="store_true",
                    help="CPU: lineage.prefill.activation_bytes against the measured peak RSS growth of a prefill "
                         "(--lengths default 4096,16384: one chunk, then four)")
    args = ap.parse_args()
    if args.check_estimate:
        given = "--lengths" in sys.argv
        return check_estimate([int(n) for n in args.lengths.split(",")] if given else [4096, 16384])
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
