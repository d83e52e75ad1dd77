"""One decode step's attention over a long cache, against the form it replaced (issue 30).

    python -m tests.benchmarks.bench_cached_step                 # the CPU; CUDA when there is one
    python -m tests.benchmarks.bench_cached_step --lengths 4096,32768 --device cuda

MLA at Kimi Linear's width (32 heads, latent 512 + 64): the absorbed step (`MLA._attend`:
query into the latent space, the latents read once for all heads) against the expanded one it
replaced (every cached latent up-projected to each head's key and value each token). Softmax
attention at Llama-3.1-8B's (32 query heads over 8 KV heads, head 128): query heads grouped as
rows against their KV head (`SoftmaxAttention._attend`) against `repeat_interleave` of the cache. The
same query and cache, same run, float32 on the CPU, bfloat16 on CUDA; the outputs are compared.
"""
from __future__ import annotations

import argparse
import time

import torch

from lineage.configs import AttentionConfig, MLAConfig
from lineage.mixers.attention.module import SoftmaxAttention
from lineage.mixers.mla.module import MLA

from .timing import wall


def expanded_mla(m: MLA, x, q, cache):
    """The step as it was: the cache expanded to every head's keys and values, (B, H, L, .)."""
    cfg = m.cfg
    B, H, T, _ = q.shape
    L = cache.c.shape[1]
    kv = m.kv_b(cache.c).view(B, L, H, -1).transpose(1, 2)
    k_nope, v = kv.split([cfg.qk_nope_head_dim, cfg.v_head_dim], dim=-1)
    k = torch.cat([k_nope, cache.k_pe[:, None].expand(B, H, L, -1)], dim=-1)
    probs = ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).softmax(-1)
    return m.o_proj((probs @ v).transpose(1, 2).reshape(B, T, H * cfg.v_head_dim))


def repeated_kv(a: SoftmaxAttention, q, cache):
    """The step as it was: each KV head's cache copied to its query heads."""
    B, H, T, D = q.shape
    rep = H // a.cfg.kv_heads
    k, v = (t.repeat_interleave(rep, dim=1) for t in (cache.k, cache.v))
    probs = ((q @ k.transpose(-1, -2)) * D ** -0.5).softmax(-1)
    return (probs @ v).transpose(1, 2).reshape(B, T, H * D)


def rel(a, b) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


@torch.inference_mode()
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="4096,16384", help="cached tokens")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    dev = torch.device(args.device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), torch.cuda.get_device_name() if dev.type == "cuda"
          else "cpu", torch.__version__, f"threads {torch.get_num_threads()}", dtype, flush=True)
    torch.manual_seed(0)
    mla = MLA(MLAConfig(d_model=2304, n_heads=32, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                        v_head_dim=128)).to(dev, dtype).eval()
    att = SoftmaxAttention(AttentionConfig(d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128, bias=False,
                                    rope_dim=128)).to(dev, dtype).eval()
    for L in (int(n) for n in args.lengths.split(",")):
        time_mla(mla, L, dev, dtype)
        time_gqa(att, L, dev, dtype)


def time_mla(mla: MLA, L: int, dev, dtype) -> None:
    x = torch.randn(1, L, 2304, device=dev, dtype=dtype) * 0.5
    _, lat = mla(x)                                            # a cache of L latents
    xt = torch.randn(1, 1, 2304, device=dev, dtype=dtype) * 0.5
    q, cache = mla._append(xt, lat)
    err = rel(mla._attend(xt, q, cache)[0], expanded_mla(mla, xt, q, cache))
    t_new, t_old = wall(lambda: mla._attend(xt, q, cache)), wall(lambda: expanded_mla(mla, xt, q, cache))
    print(f"MLA, {L:,} cached: absorbed {t_new * 1e3:.2f} ms, expanded {t_old * 1e3:.2f} ms, "
          f"{t_old / t_new:.1f}x; outputs differ by {err:.1e}", flush=True)


def time_gqa(att: SoftmaxAttention, L: int, dev, dtype) -> None:
    x = torch.randn(1, L, 4096, device=dev, dtype=dtype) * 0.5
    _, kv = att(x)
    xt = torch.randn(1, 1, 4096, device=dev, dtype=dtype) * 0.5
    q, cache = att._append(xt, kv)
    err = rel(att._attend(q, cache)[0], repeated_kv(att, q, cache))
    t_new, t_old = wall(lambda: att._attend(q, cache)), wall(lambda: repeated_kv(att, q, cache))
    print(f"GQA, {L:,} cached: grouped {t_new * 1e3:.2f} ms, repeated {t_old * 1e3:.2f} ms, "
          f"{t_old / t_new:.1f}x; outputs differ by {err:.1e}", flush=True)

if __name__ == "__main__":
    main()
