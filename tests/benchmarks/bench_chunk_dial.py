"""Figure 4's measured half: the chunked delta rule's time against chunk size, one run.

    python -m tests.benchmarks.bench_chunk_dial [--smoke]   # CUDA; --smoke: tiny, on the CPU

Times lineage.ops.delta_rule (fp32) at fig4's chunk sizes, the token recurrence and the Triton
kernel (chunk 64 only): the median of single synchronised calls. Baseline: the op at C = 64.
JSON to $OUT/chunk_dial.json when $OUT is set.
"""
import argparse
import datetime
import json
import os
import time

import torch

from lineage import ops
from lineage.arithmetic import chunk_flops
from tests.benchmarks import timing


def main(argv=None):
    ap = argparse.ArgumentParser(epilog="python -m tests.benchmarks.bench_chunk_dial")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU")
    ap.add_argument("--budget", type=float, default=3.0, help="seconds of calls per point")
    a = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not a.smoke
    L, d, H = (8192, 128, 16) if cuda else (256, 16, 2)
    g = torch.Generator().manual_seed(0)
    q, k = (torch.nn.functional.normalize(torch.randn(1, L, H, d, generator=g), dim=-1) for _ in "qk")
    v, beta = torch.randn(1, L, H, d, generator=g), torch.rand(1, L, H, generator=g)
    q, k, v, beta = (x.to("cuda" if cuda else "cpu") for x in (q, k, v, beta))
    meta = {"machine": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "B": 1, "T": L, "H": H, "K": d, "V": d, "dtype": "float32", "rows": []}

    def point(name, C, fn):
        t0 = time.perf_counter()
        fn()                                            # warm-up, and how long one call takes
        if cuda:
            torch.cuda.synchronize()
        reps = max(1, min(20, int(a.budget / (time.perf_counter() - t0))))
        ms = timing.median_each(fn, reps, warmup=0) * 1e3
        meta["rows"].append({"impl": name, "chunk": C, "ms": ms, "flops": chunk_flops(L, d, C) if C else None})
        print(f"{name:<12} C={C}  {ms:.2f} ms ({reps} calls)", flush=True)
        if os.environ.get("OUT"):                       # after every point: a cut run keeps what it had
            json.dump(meta, open(os.path.join(os.environ["OUT"], "chunk_dial.json"), "w"), indent=1)

    point("recurrence", None, lambda: ops.delta_rule(q, k, v, beta))
    for C in [1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192] if cuda else [1, 16, 64, 256]:
        point("lineage.ops", C, lambda C=C: ops.delta_rule(q, k, v, beta, chunk_size=C))
    if cuda:
        from lineage.ops import kernels
        point("triton", 64, lambda: kernels.delta_rule(q, k, v, beta))
    base = next(r["ms"] for r in meta["rows"] if r["chunk"] == 64)
    print(meta["machine"], meta["torch"], meta["date"], [(r["chunk"], round(r["ms"] / base, 2)) for r in meta["rows"]])


if __name__ == "__main__":
    main()
