"""Where our observed Kimi Linear step spends its time, and whether bf16 explains the prefill
disagreement with transformers (issue 13's open points). On a GPU; --smoke runs it on the CPU.

    python -m tests.benchmarks.profile_pretrained --layers 4 > profile.txt

1. Our step as the app runs it (a Session on the default scenario of 2's bfloat16 checkpoint):
   ms per frame, then the captured graph's replay alone, so frame time = replay + host work; a torch.profiler
   table of one replay's kernels (count and time) and cProfile's view of the host part.
2. Prefill logits against transformers on the same weights, in float32 and bfloat16:
   if float32 agrees to ~1e-5 and bfloat16 does not, the bf16 gap is rounding (amplified by
   top-k choices flipping near ties), not a mapping error.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import tempfile
import time
from pathlib import Path

import torch

from .bench_pretrained import kimi_config, random_weights


DEV = "cuda"
SMOKE = False       # --smoke: a tiny width on the CPU, to check this script runs
EXPERTS = None      # --experts: routed experts (None: as published)


def checkpoint(layers: int, dtype: torch.dtype) -> tuple[Path, object]:
    from transformers import KimiLinearForCausalLM
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)
    with torch.device(DEV):
        ref = KimiLinearForCausalLM(kimi_config(layers, smoke=SMOKE, experts=EXPERTS))
    torch.set_default_dtype(torch.float32)
    random_weights(ref)
    ref.eval()
    folder = Path(tempfile.mkdtemp(prefix="kimi-prof-"))
    ref.save_pretrained(str(folder), max_shard_size="4GB")
    return folder, ref


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def ms(times: list[float]) -> str:
    return f"median {statistics.median(times) * 1e3:.2f} ms (min {min(times) * 1e3:.2f}, max {max(times) * 1e3:.2f})"


def profile_step(folder: Path, vocab: int, steps: int) -> None:
    from lineage.playback.session import Session
    from lineage.families.scenario import checkpoint_scenario
    from lineage.scenario import loads
    dtype = torch.float32 if SMOKE else torch.bfloat16
    # 32 prefill, the frames timed here, and room for the 21 bare replays below: each advances the
    # static caches' device-side position, which the session does not see
    ids = torch.randint(3, vocab, (32 + steps + 40,), generator=torch.Generator().manual_seed(1)).tolist()
    text = checkpoint_scenario(folder, ids=ids, dtype=str(dtype).split(".")[-1], device=DEV)
    text = text.replace("mode: greedy", "mode: teacher\n  prefill: 32")
    s = Session(loads(text, "prof.yaml", folder))
    print("backend", s.info["backend"], "watch", s.info["models"][0].get("watch"), flush=True)
    for i in range(5):
        s.frame(i)
    frame_t = []
    for i in range(5, 5 + steps // 2):
        sync()
        t0 = time.perf_counter()
        s.frame(i)
        frame_t.append(time.perf_counter() - t0)
    print("frame (replay + host):", ms(frame_t), flush=True)
    stepped = s.runner.models[0]                # the model's SteppedModel holds its captured graph
    stepper = stepped.stepper
    print("stepper:", type(stepper).__name__, "graph mode", stepped.graph_mode, flush=True)
    if stepper is None:
        s.close()
        return
    replay_t = []
    for _ in range(20):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        stepper.graph.replay()
        torch.cuda.synchronize()
        replay_t.append(time.perf_counter() - t0)
    print("graph replay alone:", ms(replay_t), flush=True)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        stepper.graph.replay()
        torch.cuda.synchronize()
    try:
        kernels = [e for e in p.events() if e.device_type.name == "CUDA"]
        print("kernels in one replay:", len(kernels), flush=True)
    except AttributeError as e:
        print("kernel count unavailable:", e)
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            print(p.key_averages().table(sort_by=key, row_limit=30), flush=True)
            break
        except (KeyError, AttributeError, ValueError) as e:
            print("sort by", key, "failed:", e)
    # the host part: one frame under cProfile
    pr = cProfile.Profile()
    pr.enable()
    for i in range(5 + steps // 2, 5 + steps // 2 + 5):
        s.frame(i)
    pr.disable()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("cumulative").print_stats(30)
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue(), flush=True)
    phases(s, range(5 + steps // 2 + 5, 5 + steps // 2 + 15))
    s.close()


def phases(s, frames) -> None:
    """A frame's time split where the host waits: launching the replay, waiting for it (a sync
    added here, which to_host would otherwise do), the observations to the host (to_host: the
    range checks, casts, packing and copies), the fields around them (lm_fields less to_host),
    and the rest of Session.frame (the token's text, the Frame, the store)."""
    from lineage import graph_step
    from lineage.playback import host_copy, observe
    took: dict = {}

    def timed(name, fn, then=None):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            out = fn(*a, **kw)
            t1 = time.perf_counter()
            took.setdefault(name, []).append(t1 - t0)
            if then is not None:
                then()
                took.setdefault(name + " wait", []).append(time.perf_counter() - t1)
            return out
        return wrapper
    step, fields, to_host = graph_step.GraphStep.step, observe.lm_fields, host_copy.to_host
    graph_step.GraphStep.step = timed("replay launch", step, sync)
    host_copy.to_host = timed("to_host", to_host)
    observe.lm_fields = timed("lm_fields", fields)
    try:
        for i in frames:
            sync()
            t0 = time.perf_counter()
            s.frame(i)
            took.setdefault("frame", []).append(time.perf_counter() - t0)
    finally:
        graph_step.GraphStep.step, host_copy.to_host, observe.lm_fields = step, to_host, fields
    for name, ts in took.items():
        print(f"phase {name}: {ms(ts)}", flush=True)


def agreement(layers: int) -> tuple[Path, int]:
    """Prefill logits against transformers in each dtype; returns the last checkpoint written
    (bfloat16 on a GPU) and its vocabulary, for the step profile."""
    import lineage
    for dtype in (torch.float32,) if SMOKE else (torch.float32, torch.bfloat16):      # (transformers has no bf16 KDA on the CPU)
        folder, ref = checkpoint(layers, dtype)
        ours, _ = lineage.load_pretrained(folder, device=DEV, dtype=str(dtype).split(".")[-1])
        from lineage.backend import resolve, set_backend
        set_backend(ours, resolve(torch.device(DEV))[0])
        ids = torch.randint(3, ref.config.vocab_size, (1, 32), generator=torch.Generator().manual_seed(1)).to(DEV)
        with torch.inference_mode():
            a = ref(ids, use_cache=False).logits.float()
            b, _ = ours(ids)
            b = b.float()
            # which experts each picked, layer by layer, is not visible here; the logits are
            rel = float((a - b).norm() / a.norm())
            top_same = float((a.argmax(-1) == b.argmax(-1)).float().mean())
        print(f"{layers} layers {dtype}: prefill logits relative error {rel:.3g}, same argmax {top_same:.0%}", flush=True)
        vocab = ref.config.vocab_size
        del ref, ours
        sync()
    return folder, vocab


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4, help="4: KDA, a dense layer, MoE and MLA")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--smoke", action="store_true", help="a tiny width on the CPU: checks the script runs")
    ap.add_argument("--experts", type=int, default=None,
                    help="routed experts (default: as published); 64 fits all 27 layers in a quick save")
    ap.add_argument("--step-only", action="store_true", help="skip the prefill agreement (part 2): profile the step only")
    args = ap.parse_args()
    global DEV, SMOKE, EXPERTS
    EXPERTS = args.experts
    if args.smoke:
        DEV, SMOKE = "cpu", True
    name = torch.cuda.get_device_name() if DEV == "cuda" else "cpu"
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), name, torch.__version__, flush=True)
    if args.step_only:
        dtype = torch.float32 if SMOKE else torch.bfloat16
        folder, ref = checkpoint(args.layers, dtype)
        vocab = ref.config.vocab_size
        del ref
        sync()
    else:
        folder, vocab = agreement(args.layers)
    profile_step(folder, vocab, args.steps)


if __name__ == "__main__":
    main()
