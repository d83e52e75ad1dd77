"""Time chunked-kda option variants, one process for all of them, on the benchmark shape.

    python -m kernels.variants '{}' '{"solve": 2}' '{"scores_impl": "rows"}' ...

Each argument is a JSON dict of `chunk_delta._chunk_delta` options (tuples as lists, dtypes by
name: "dot": "float32" means tl.float32, "inter": "float32" means torch.float32). Prints the
median of 7 timings of 5 back-to-back calls and the relative RMS error against the fp32
reference. Stops at the first failure: a kernel fault poisons the CUDA context, so run a
suspect variant in its own process. The benchmark's --sweep covers the tuned set; this is for
quick what-ifs during kernel work.
"""
from __future__ import annotations

import json
import statistics
import sys


def main(argv=None) -> int:
    import torch
    import torch.nn.functional as F
    import triton.language as tl

    from kernels import chunk_delta
    from lineage import ops
    B, T, H, K, V = 4, 4096, 16, 128, 128
    torch.manual_seed(0)
    dev = "cuda"
    q = torch.randn(B, T, H, K, device=dev)
    k = F.normalize(torch.randn(B, T, H, K, device=dev), dim=-1)
    v = torch.randn(B, T, H, V, device=dev)
    beta = torch.rand(B, T, H, device=dev)
    g = -5 * torch.sigmoid(2 * torch.randn(B, T, H, K, device=dev))
    xs = [x.to(torch.bfloat16) for x in (q, k, v, g, beta)]
    ref = ops.kda(*[x.float() for x in xs])[0]
    for arg in (argv if argv is not None else sys.argv[1:]) or ["{}"]:
        opt = {key: tuple(val) if isinstance(val, list) else val for key, val in json.loads(arg).items()}
        if "dot" in opt:
            opt["dot"] = getattr(tl, opt["dot"])
        if "inter" in opt:
            opt["inter"] = getattr(torch, opt["inter"])
        try:
            def fn():
                return chunk_delta._chunk_delta(*xs, None, None, 64, 2, "kda", options=opt)
            o = fn()[0]
            torch.cuda.synchronize()
            err = ((o.float() - ref).norm() / ref.norm()).item()
            for _ in range(3):
                fn()
            times = []
            for _ in range(7):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(5):
                    fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) / 5 * 1e3)
            print(f"{arg}: {statistics.median(times):.0f} us, error {err:.2e}", flush=True)
        except Exception as e:  # noqa: BLE001 - report and stop: the context may be gone
            print(f"{arg}: FAILED {str(e)[:200]}", flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
