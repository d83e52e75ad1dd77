"""Time chunked-kda option variants, one process for all of them, on the benchmark shape.

    python -m tests.benchmarks.kernel_variants '{}' '{"solve": 2}' '{"diag_token": [4, 2]}' ...

Each argument is a JSON dict of `kernels.kda` options (tuples as lists, dtypes by
name: "inter", "x" and "dot": "float32" means torch.float32). Prints the
median GPU time (tests/benchmarks/timing.py) and the relative RMS error against the fp32
reference. Stops at the first failure: a kernel fault poisons the CUDA context, so run a
suspect variant in its own process. The benchmark's --sweep covers the tuned set; this is for
quick what-ifs during kernel work.
"""
from __future__ import annotations

import json
import sys


def main(argv=None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    import torch

    from lineage import ops
    from tests.benchmarks.bench_kernels import delta_inputs, time_kda_options
    xs = delta_inputs(torch, 4, 4096, 16, 128, 128, torch.bfloat16, "cuda")     # the benchmark's shape
    ref = ops.kda(*[x.float() for x in xs])[0]
    for arg in args or ["{}"]:
        opt = {key: tuple(val) if isinstance(val, list) else val for key, val in json.loads(arg).items()}
        for key in ("inter", "x", "dot"):
            if key in opt:
                opt[key] = getattr(torch, opt[key])
        try:
            t, err = time_kda_options(xs, ref, opt)
            print(f"{arg}: {t * 1e6:.0f} us, error {err:.2e}", flush=True)
        except Exception as e:  # noqa: BLE001 - report and stop: the context may be gone
            print(f"{arg}: FAILED {str(e)[:200]}", flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
