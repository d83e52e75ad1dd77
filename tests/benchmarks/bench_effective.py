"""What the attention panel's recurrent rows cost: Kimi Linear at its published width (random
bf16 weights), observed decode through the app's Session with the default panels against the same
checkpoint with an attention panel on its first KDA layer as well (its effective attention over a
window of the last W = 256 positions, lineage.playback.effective), interleaved in blocks in one run
so that clock drift falls on both; and Window.step alone at that width (H = 32, K = V = 128).

    python -m tests.benchmarks.bench_effective --layers 8 --experts 32     # one H100
    python -m tests.benchmarks.bench_effective --smoke                     # CPU, a tiny width

Writes one JSON line per phase, and $OUT/bench_effective.json when OUT is set.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from tests.benchmarks.bench_pretrained import kimi_config, random_weights, sync

BLOCK = 16


def report(out: dict, **kw) -> None:
    out.update(kw)
    print(json.dumps(kw), flush=True)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "bench_effective.json").write_text(json.dumps(out, indent=1))


def window_step_ms(dev, H: int, K: int, V: int, size: int, reps: int = 200) -> float:
    """Window.step on a full window (size writes held), delta rule with per-channel decay, per call."""
    from lineage.observed import StateObs
    from lineage.playback.effective import Window
    g = torch.Generator(device=dev).manual_seed(0)

    def obs():
        r = lambda *s: torch.randn(*s, device=dev, generator=g)         # noqa: E731
        k = torch.nn.functional.normalize(r(1, H, K), dim=-1)
        return StateObs(S=r(1, H, K, V), dS=r(1, H, K, V), k=k, v=r(1, H, V), read=r(1, H, V),
                        beta=torch.rand(1, H, device=dev, generator=g), alpha=torch.rand(1, H, K, device=dev, generator=g),
                        state_bytes=0, q=r(1, H, K), corrects=True)
    win, steps = Window(size), [obs() for _ in range(8)]
    for i in range(size + 8):                   # fill the window, then warm up
        win.step(steps[i % 8])
    sync(dev)
    t0 = time.perf_counter()
    for i in range(reps):
        row, shares, before = win.step(steps[i % 8])
    before.sum().item()                         # the frame copies them to the host
    sync(dev)
    return (time.perf_counter() - t0) / reps * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--prefill", type=int, default=300, help="past W = 256, so the window is full from step 1")
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--smoke", action="store_true", help="a tiny width in float32 on the CPU")
    args = ap.parse_args()
    from transformers import KimiLinearForCausalLM
    from lineage.playback.effective import WINDOW
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    out: dict = {}
    report(out, device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", torch=torch.__version__,
           layers=args.layers, experts=args.experts, window=WINDOW, date=time.strftime("%Y-%m-%d"))
    cfg = kimi_config(args.layers, args.smoke, experts=None if args.smoke else args.experts)
    H, K = cfg.linear_num_heads, cfg.linear_head_dim
    report(out, window_step_ms=window_step_ms(dev, H, K, K, WINDOW), heads=H, head_dim=K)

    dtype = "float32" if args.smoke else "bfloat16"
    torch.manual_seed(0)
    torch.set_default_dtype(getattr(torch, dtype))
    with torch.device(dev):
        ref = KimiLinearForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    random_weights(ref)
    folder = Path(tempfile.mkdtemp(prefix="kimi-"))
    ref.save_pretrained(str(folder), max_shard_size="4GB")
    del ref
    if dev.type == "cuda":
        torch.cuda.empty_cache()

    import yaml
    from lineage.families.scenario import checkpoint_scenario
    from lineage.playback.session import Session
    from lineage.scenario import loads
    ids = torch.randint(3, cfg.vocab_size, (args.prefill + args.steps,), generator=torch.Generator().manual_seed(1))
    base = yaml.safe_load(checkpoint_scenario(folder, ids=[int(x) for x in ids], dtype=dtype,
                                              device="cuda" if dev.type == "cuda" else "cpu", prefill=args.prefill))
    base["decoding"]["mode"] = "teacher"
    kda = next(i for i, t in enumerate(cfg.layer_types) if t == "linear_attention")
    rows = {**base, "panels": base["panels"] + [{"kind": "attention", "layer": kda}]}
    sessions = {}
    for name, sc in (("default panels", base), ("with KDA attention rows", rows)):
        t0 = time.perf_counter()
        sessions[name] = Session(loads(yaml.safe_dump(sc), f"{name}.yaml", folder))
        report(out, **{f"open_s[{name}]": time.perf_counter() - t0,
                       f"watch[{name}]": sessions[name].info["models"][0].get("watch")})
    times = {name: [] for name in sessions}
    nbytes = {name: [] for name in sessions}
    n = min(args.steps, *(s.total for s in sessions.values()))
    with torch.inference_mode():
        for start in range(0, n, BLOCK):
            for name, s in sessions.items():            # each block: both, one after the other
                for i in range(start, min(start + BLOCK, n)):
                    t0 = time.perf_counter()
                    f = s.frame(i)
                    times[name].append(time.perf_counter() - t0)
                    nbytes[name].append(f.nbytes)
    f = sessions["with KDA attention rows"].frame(n - 1)
    a = f.attention(0, kda)
    report(out, rows_shape=list(a.weights.shape), rows_before_share_median=float(statistics.median(a.before)))
    ms = {name: statistics.median(t[BLOCK:]) * 1e3 for name, t in times.items()}   # the first block: capture, warm-up
    for name in sessions:
        report(out, **{f"ms_per_token[{name}]": ms[name], f"frame_bytes[{name}]": statistics.median(nbytes[name])})
    report(out, rows_over_default=ms["with KDA attention rows"] / ms["default panels"])
    for s in sessions.values():
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
