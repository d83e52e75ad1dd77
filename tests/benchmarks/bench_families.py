"""Each checkpoint family at a published width with random bf16 weights, on one GPU (issue 29).

1. Agreement that tells a mapping error from bf16 itself: ours in bf16, transformers in bf16 and
   ours in float32, each against transformers in float32 on the same weights (prefill logits:
   relative error and the share of positions with the same argmax). A mapping error shows as ours
   far from the reference while transformers-bf16 is near it; bf16 chaos puts both far.
2. Decoding: ms per token of our observed step (the app's Session: default panels, CUDA graph,
   frames built on the host) against transformers' own step with its cache, same weights, same
   run, interleaved in blocks so that clock drift falls on both.

    python -m tests.benchmarks.bench_families --family llama --layers 8     # H200
    python -m tests.benchmarks.bench_families --smoke                       # CPU, tiny widths, every family

One JSON line per result (a run cut short still reports what it reached); with $OUT set, they are
also written to $OUT/bench_families.jsonl.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from .bench_pretrained import random_weights, sync

# family: (transformers class, published config of one checkpoint, a tiny width for --smoke).
# The layer count is --layers: as many as fit beside transformers' float32 copy.
FAMILIES = {
    "llama": ("LlamaForCausalLM",      # Llama-3.1-8B
              dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                   num_key_value_heads=8, rms_norm_eps=1e-5, max_position_embeddings=131072,
                   rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                        high_freq_factor=4.0, original_max_position_embeddings=8192)),
              dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2)),
    "qwen3": ("Qwen3ForCausalLM",      # Qwen3-8B
              dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_attention_heads=32,
                   num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6, max_position_embeddings=40960,
                   rope_parameters=dict(rope_type="default", rope_theta=1000000.0)),
              dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=16)),
    "mistral": ("MistralForCausalLM",  # Mistral-7B-v0.1
                dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                     num_key_value_heads=8, rms_norm_eps=1e-5, sliding_window=4096, max_position_embeddings=32768,
                     rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
                dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_attention_heads=4,
                     num_key_value_heads=2, sliding_window=16)),
    "olmo_hybrid": ("OlmoHybridForCausalLM",   # allenai/Olmo-Hybrid-7B (transformers' defaults, as it documents)
                    dict(vocab_size=100352, hidden_size=3840, intermediate_size=11008, num_attention_heads=30,
                         num_key_value_heads=30, rms_norm_eps=1e-6, linear_num_key_heads=30, linear_num_value_heads=30,
                         linear_key_head_dim=96, linear_value_head_dim=192, linear_conv_kernel_dim=4,
                         linear_allow_neg_eigval=True, rope_parameters=dict(rope_type="default", rope_theta=None),
                         tie_word_embeddings=False),
                    dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_attention_heads=4,
                         num_key_value_heads=2, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                         linear_value_head_dim=16, linear_allow_neg_eigval=True, pad_token_id=0)),
    "qwen3_5_moe": ("Qwen3_5MoeForCausalLM",    # Qwen/Qwen3.5-35B-A3B (transformers' defaults, as it documents)
                    dict(vocab_size=248320, hidden_size=2048, num_attention_heads=16, num_key_value_heads=2,
                         head_dim=256, num_experts=256, num_experts_per_tok=8, moe_intermediate_size=512,
                         shared_expert_intermediate_size=512, linear_num_key_heads=16, linear_num_value_heads=32,
                         linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
                         full_attention_interval=4, rms_norm_eps=1e-6, tie_word_embeddings=False,
                         rope_parameters=dict(rope_type="default", rope_theta=1e7, partial_rotary_factor=0.25,
                                              mrope_section=[11, 11, 10], mrope_interleaved=True)),
                    dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                         shared_expert_intermediate_size=16, linear_num_key_heads=2, linear_num_value_heads=4,
                         linear_key_head_dim=16, linear_value_head_dim=16, pad_token_id=0)),
    "gemma3_text": ("Gemma3ForCausalLM",    # google/gemma-3-4b-it's text model (34 layers, 5 windowed : 1 global)
                    dict(vocab_size=262208, hidden_size=2560, intermediate_size=10240, num_attention_heads=8,
                         num_key_value_heads=4, head_dim=256, query_pre_attn_scalar=256, sliding_window=1024,
                         sliding_window_pattern=6, rms_norm_eps=1e-6, max_position_embeddings=131072,
                         rope_parameters={"full_attention": dict(rope_type="linear", factor=8.0, rope_theta=1e6),
                                          "sliding_attention": dict(rope_type="default", rope_theta=1e4)}),
                    dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16, sliding_window=16,
                         sliding_window_pattern=3, pad_token_id=0)),
    "lfm2": ("Lfm2ForCausalLM",        # LiquidAI/LFM2-1.2B: 10 conv + 6 attention layers
             dict(vocab_size=65536, hidden_size=2048, intermediate_size=12288, num_attention_heads=32,
                  num_key_value_heads=8, conv_L_cache=3, full_attn_idxs=[2, 5, 8, 10, 12, 14], norm_eps=1e-5,
                  block_multiple_of=256, block_ffn_dim_multiplier=1.0, tie_word_embeddings=True,
                  rope_parameters=dict(rope_type="default", rope_theta=1e6)),
             dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                  full_attn_idxs=[1], block_multiple_of=16, pad_token_id=0)),
    "mamba2": ("Mamba2ForCausalLM",    # state-spaces/mamba2-2.8b
               dict(vocab_size=50288, hidden_size=2560, num_heads=80, head_dim=64, state_size=128, n_groups=1,
                    expand=2, conv_kernel=4, chunk_size=256, tie_word_embeddings=True, layer_norm_epsilon=1e-5),
               dict(vocab_size=512, hidden_size=64, num_heads=8, head_dim=16, state_size=16, n_groups=2, expand=2,
                    chunk_size=16)),
}


def emit(kw: dict) -> None:
    line = json.dumps(kw)
    print(line, flush=True)
    if os.environ.get("OUT"):
        with open(Path(os.environ["OUT"], "bench_families.jsonl"), "a") as f:
            f.write(line + "\n")


def checkpoint(family: str, layers: int, smoke: bool, dev) -> tuple[Path, object]:
    """A transformers model of the family with random weights, saved as bf16 (float32 for --smoke):
    (folder, its config)."""
    import transformers
    cls_name, published, tiny = FAMILIES[family]
    cls = getattr(transformers, cls_name)
    cfg = cls.config_class(num_hidden_layers=layers, **(tiny if smoke else published))
    dtype = torch.float32 if smoke else torch.bfloat16
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)
    with torch.device(dev):
        ref = cls(cfg)
    torch.set_default_dtype(torch.float32)
    random_weights(ref)
    folder = Path(tempfile.mkdtemp(prefix=f"{family}-"))
    ref.save_pretrained(str(folder), max_shard_size="4GB")
    del ref
    free(dev)
    return folder, cfg


def free(dev) -> None:
    sync(dev)
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def theirs(family: str, folder: Path, dtype, dev):
    import transformers
    cls = getattr(transformers, FAMILIES[family][0])
    where = {"device_map": str(dev)} if dev.type == "cuda" else {}
    return cls.from_pretrained(str(folder), dtype=dtype, **where).eval()


def ours(folder: Path, dtype: str, dev):
    import lineage
    from lineage.backend import resolve, set_backend
    m, _ = lineage.load_pretrained(folder, device=dev, dtype=dtype)
    set_backend(m, resolve(dev)[0])             # as the app does: Triton kernels on CUDA
    return m


def compare(a, b) -> dict:
    a, b = a.float(), b.float()
    return dict(rel=round(float((a - b).norm() / a.norm()), 5),
                same_argmax=round(float((a.argmax(-1) == b.argmax(-1)).float().mean()), 4))


def agreement(family: str, folder: Path, ids, dev, smoke: bool) -> object:
    """Prefill logits of each against transformers in float32; returns transformers' bf16 model
    (float32 for --smoke) for the decoding race."""
    with torch.inference_mode():
        ref = theirs(family, folder, torch.float32, dev)
        want = ref(ids, use_cache=False).logits.float()
        del ref
        free(dev)
        got = {}
        for dtype in ("float32",) if smoke else ("float32", "bfloat16"):
            m = ours(folder, dtype, dev)
            got[f"ours_{dtype}"] = compare(want, m(ids)[0])
            del m
            free(dev)
        ref = theirs(family, folder, torch.float32 if smoke else torch.bfloat16, dev)
        if not smoke:
            got["transformers_bfloat16"] = compare(want, ref(ids, use_cache=False).logits)
    emit(dict(family=family, part="agreement against transformers float32", prefill=ids.shape[1], **got))
    return ref


BLOCK = 8            # tokens per turn when the two decoders alternate


def race(family: str, folder: Path, ref, ids, prefill: int, steps: int, dtype: str, dev) -> None:
    from lineage.playback.session import Session
    from lineage.families.scenario import checkpoint_scenario
    from lineage.scenario import loads
    text = checkpoint_scenario(folder, ids=[int(x) for x in ids[0]], dtype=dtype, device=dev.type)
    text = text.replace("mode: greedy", f"mode: teacher\n  prefill: {prefill}")
    t0 = time.perf_counter()
    s = Session(loads(text, "bench.yaml", folder))
    opened = time.perf_counter() - t0
    ours_t, hf_t = [], []
    n = min(steps, s.total)
    with torch.inference_mode():
        cache = ref(ids[:, :prefill], use_cache=True).past_key_values
        for start in range(0, n, BLOCK):
            for i in range(start, min(start + BLOCK, n)):
                t0 = time.perf_counter()
                s.frame(i)
                ours_t.append(time.perf_counter() - t0)
            for t in range(start, min(start + BLOCK, n)):
                sync(dev)
                t0 = time.perf_counter()
                res = ref(ids[:, prefill + t:prefill + t + 1], cache=cache, use_cache=True)
                cache = res.past_key_values
                res.logits[0, -1].argmax().item()        # a decoder needs the token on the host
                hf_t.append(time.perf_counter() - t0)
    s.close()
    o, h = statistics.median(ours_t[3:]) * 1e3, statistics.median(hf_t[3:]) * 1e3
    emit(dict(family=family, part="decode", session_open_s=round(opened, 2), steps=n,
              ours_observed_ms_per_token=round(o, 2), transformers_ms_per_token=round(h, 2),
              speedup=round(h / o, 2), backend=s.info["backend"]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES), help="repeatable; default: all")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--prefill", type=int, default=64)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--smoke", action="store_true", help="tiny widths in float32 on the CPU: the script runs")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False       # the float32 reference must be float32
    torch.backends.cudnn.allow_tf32 = False
    emit(dict(device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", torch=torch.__version__,
              date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), layers=args.layers))
    for family in args.family or sorted(FAMILIES):
        folder, cfg = checkpoint(family, args.layers, args.smoke, dev)
        ids = torch.randint(3, cfg.vocab_size, (1, args.prefill + args.steps),
                            generator=torch.Generator().manual_seed(1)).to(dev)
        ref = agreement(family, folder, ids[:, :args.prefill], dev, args.smoke)
        race(family, folder, ref, ids, args.prefill, args.steps, "float32" if args.smoke else "bfloat16", dev)
        del ref
        free(dev)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
