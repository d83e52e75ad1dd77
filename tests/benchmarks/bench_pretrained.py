"""Kimi Linear at its published width, random bf16 weights: load time from safetensors on local
disk, ms per token of our observed step (the app's Session: all default panels, CUDA graph,
frames built) against transformers' own forward with its cache on the same weights, in the same
run (with fla installed, transformers uses fla's kernels), and peak GPU memory.

    python -m tests.benchmarks.bench_pretrained --layers 8        # H200 (both models must fit)
    python -m tests.benchmarks.bench_pretrained --smoke           # CPU, a tiny width: the script runs
    python -m tests.benchmarks.bench_pretrained --mid             # CPU, a quarter width, float32

Writes one JSON line per phase (so a run cut short still reports what it reached).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

MLA_AT = (4, 8, 12, 16, 20, 24, 27)          # 1-based, as published


def report(out: dict, **kw) -> None:
    out.update(kw)
    print(json.dumps(kw), flush=True)
    dest = os.environ.get("OUT")
    if dest:
        Path(dest, "bench_pretrained.json").write_text(json.dumps(out, indent=1))


def kimi_config(layers: int, smoke: bool, mid: bool = False, experts: int | None = None):
    from transformers import KimiLinearConfig
    types = ["full_attention" if i + 1 in MLA_AT else "linear_attention" for i in range(layers)]
    if mid:      # a CPU-sized Kimi Linear: the published layout at a quarter width, 64 experts
        width = dict(vocab_size=32000, hidden_size=576, intermediate_size=2304, moe_intermediate_size=256,
                     num_attention_heads=8, kv_lora_rank=128, qk_nope_head_dim=32, qk_rope_head_dim=16,
                     v_head_dim=32, num_local_experts=64, num_experts_per_tok=8, linear_head_dim=64,
                     linear_num_heads=8)
    elif smoke:
        width = dict(vocab_size=512, hidden_size=64, intermediate_size=96, moe_intermediate_size=16,
                     num_attention_heads=4, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8,
                     num_local_experts=16, num_experts_per_tok=4, linear_head_dim=16, linear_num_heads=4)
    else:   # published (FACTS.md section 3)
        width = dict(vocab_size=163840, hidden_size=2304, intermediate_size=9216, moe_intermediate_size=1024,
                     num_attention_heads=32, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                     v_head_dim=128, num_local_experts=256, num_experts_per_tok=8, linear_head_dim=128,
                     linear_num_heads=32)
    if experts is not None:     # fewer routed experts: a token still reads the published active weights
        width["num_local_experts"] = experts
    return KimiLinearConfig(num_hidden_layers=layers, layer_types=types, routed_scaling_factor=2.446,
                            rms_norm_eps=1e-5, pad_token_id=0, bos_token_id=1, eos_token_id=2, **width)


@torch.no_grad()
def random_weights(model) -> None:
    """Finite weights of a trained model's scale: projections N(0, 0.02), norms 1, decays as
    published (A_log = log U(1, 16), dt_bias from dt in [1e-3, 1e-1])."""
    for name, p in model.named_parameters():
        if name.endswith("A_log"):
            p.copy_(torch.empty(p.shape, device=p.device).uniform_(1, 16).log())
        elif name.endswith("dt_bias"):
            dt = torch.exp(torch.empty(p.shape, device=p.device).uniform_(math.log(1e-3), math.log(1e-1)))
            p.copy_(dt + torch.log(-torch.expm1(-dt)))
        elif p.dim() == 1:
            p.fill_(1.0)
        else:
            p.normal_(0.0, 0.02)
    for m in model.modules():
        if hasattr(m, "e_score_correction_bias"):
            m.e_score_correction_bias.zero_()


def sync(dev) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


BLOCK = 8            # tokens per turn when the two decoders alternate


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--prefill", type=int, default=32)
    ap.add_argument("--steps", type=int, default=96)
    ap.add_argument("--experts", type=int, default=None, help="routed experts (default: as published, 256)")
    ap.add_argument("--smoke", action="store_true", help="a tiny width in float32 on the CPU")
    ap.add_argument("--mid", action="store_true", help="a quarter width in float32 on the CPU")
    ap.add_argument("--dir", default=None, help="where to write the checkpoint (default: a temporary folder)")
    args = ap.parse_args()
    from transformers import KimiLinearForCausalLM
    args.smoke = args.smoke or args.mid
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    out: dict = {}
    try:
        import fla  # noqa: F401
        has_fla = True
    except ImportError:
        has_fla = False
    report(out, device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", torch=torch.__version__,
           fla=has_fla, layers=args.layers, date=time.strftime("%Y-%m-%d"))

    # -- transformers' model, random bf16 weights, saved as safetensors on local disk -----------
    cfg = kimi_config(args.layers, args.smoke, args.mid, args.experts)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    dtype = "float32" if args.smoke else "bfloat16"
    torch.set_default_dtype(getattr(torch, dtype))
    with torch.device(dev):
        ref = KimiLinearForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    random_weights(ref)
    ref.eval()
    sync(dev)
    n_params = sum(p.numel() for p in ref.parameters())
    report(out, params=n_params, hf_build_s=time.perf_counter() - t0)
    folder = Path(args.dir or tempfile.mkdtemp(prefix="kimi-"))
    t0 = time.perf_counter()
    ref.save_pretrained(str(folder), max_shard_size="4GB")
    report(out, save_s=time.perf_counter() - t0, shards=len(list(folder.glob("*.safetensors"))),
           checkpoint_bytes=sum(f.stat().st_size for f in folder.glob("*.safetensors")))

    # -- ours: load time, memory ---------------------------------------------------------------
    import lineage
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    ours, _ = lineage.load_pretrained(folder, device=dev, dtype=dtype)
    sync(dev)
    load_s = time.perf_counter() - t0
    from lineage.backend import resolve, set_backend
    set_backend(ours, resolve(dev)[0])          # as the app does: Triton kernels on CUDA
    mem = {}
    if dev.type == "cuda":
        mem = dict(ours_weights_gib=(torch.cuda.memory_allocated() - base) / 2**30,
                   ours_load_peak_over_weights_gib=(torch.cuda.max_memory_allocated() - torch.cuda.memory_allocated()) / 2**30)
    report(out, load_s=load_s, load_gb_per_s=out["checkpoint_bytes"] / load_s / 1e9, **mem)
    # the baseline: transformers' own loader on the same files, to the same device and dtype
    sync(dev)
    t0 = time.perf_counter()
    where = {"device_map": str(dev)} if dev.type == "cuda" else {}      # (a device map needs accelerate)
    again = KimiLinearForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dtype), **where)
    sync(dev)
    report(out, hf_from_pretrained_s=time.perf_counter() - t0)
    del again
    if dev.type == "cuda":
        torch.cuda.empty_cache()

    ids = torch.randint(3, cfg.vocab_size, (1, args.prefill + args.steps), generator=torch.Generator().manual_seed(1))
    ids_d = ids.to(dev)
    # -- agreement at bf16 over the prefill (sanity; the fp32 proof is the test suite) ---------
    with torch.inference_mode():
        # the last 64 positions only: at a 32K prefill all logits in fp32 are 20 GiB (an OOM on
        # an H200 holding both models); the last rows have read the whole prefill, so they say most
        keep = min(64, args.prefill)
        a = ref(ids_d[:, :args.prefill], logits_to_keep=keep).logits.float()
        b, _ = ours(ids_d[:, :args.prefill])
        b = b[:, -keep:].float()
        report(out, prefill_logits_rel_err_bf16=float((a - b).norm() / a.norm()))
        del a, b

    del ours
    if dev.type == "cuda":
        torch.cuda.empty_cache()

    # -- ours through the app's Session: default panels, CUDA graph, frames built on the host --
    from lineage.playback.session import Session
    from lineage.families.scenario import checkpoint_scenario
    from lineage.scenario import loads
    text = checkpoint_scenario(folder, ids=[int(x) for x in ids[0, :args.prefill + args.steps]],
                               dtype=dtype, device="cuda" if dev.type == "cuda" else "cpu", prefill=args.prefill)
    text = text.replace("mode: greedy", "mode: teacher")
    t0 = time.perf_counter()
    s = Session(loads(text, "bench.yaml", folder))
    report(out, session_open_s=time.perf_counter() - t0, backend=s.info["backend"], notes=s.info["notes"],
           watch=s.info["models"][0].get("watch"))
    # -- the two decoders, interleaved in blocks so that drift of the GPU's clocks or of the host's
    # load falls on both alike: ours through the Session, transformers' forward with its cache ----
    # ours in two ways, alternating by block: each captured step queued before the last frame
    # is built (GraphStep.launch, the app's way), and one step at a time (the way before it: a
    # launch that queues nothing, as where the cache is full)
    from lineage.graph_step import GraphStep
    queue = GraphStep.launch
    ours_t, single_t, hf_t, nbytes, ratios = [], [], [], [], []
    n = min(args.steps, s.total)
    with torch.inference_mode():
        res = ref(ids_d[:, :args.prefill], use_cache=True, logits_to_keep=1)     # 32K x vocab logits: 10 GiB
        cache = res.past_key_values
        for start in range(0, n, BLOCK):
            block_ours, block_hf = [], []
            ahead = (start // BLOCK) % 2 == 0
            GraphStep.launch = queue if ahead else (lambda self, token: False)
            for i in range(start, min(start + BLOCK, n)):
                t0 = time.perf_counter()
                f = s.frame(i)
                block_ours.append(time.perf_counter() - t0)
                nbytes.append(f.nbytes)
            GraphStep.launch = queue
            if not ahead:
                single_t += block_ours
            for t in range(start, min(start + BLOCK, n)):
                sync(dev)
                t0 = time.perf_counter()
                res = ref(ids_d[:, args.prefill + t:args.prefill + t + 1], cache=cache, use_cache=True)
                cache = res.past_key_values
                res.logits[0, -1].argmax().item()        # the decoder needs the token on the host
                block_hf.append(time.perf_counter() - t0)
            if ahead:
                ours_t += block_ours
            hf_t += block_hf
            if start > 0 and ahead:                     # the first block holds graph capture and warm-up
                ratios.append(statistics.median(block_hf) / statistics.median(block_ours))
    if single_t:
        report(out, ours_one_at_a_time_ms_per_token=statistics.median(single_t[1:]) * 1e3)
    ours_ms = statistics.median(ours_t[3:]) * 1e3
    hf_ms = statistics.median(hf_t[3:]) * 1e3
    report(out, ours_observed_ms_per_token=ours_ms, ours_first3_ms=[round(x * 1e3, 2) for x in ours_t[:3]],
           frame_bytes=statistics.median(nbytes))
    report(out, hf_ms_per_token=hf_ms, hf_ms_first3=[round(x * 1e3, 2) for x in hf_t[:3]])
    report(out, ratio_per_block=[round(r, 2) for r in ratios])
    report(out, speedup_vs_hf=hf_ms / ours_ms)
    if dev.type == "cuda":
        report(out, peak_gpu_gib=torch.cuda.max_memory_allocated() / 2**30)
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
