"""Reading a long input in bounded memory: the prompt goes through the model a chunk of tokens at
a time, each chunk continuing from the state the one before left, and only the last position
reaches the LM head.

Whole, a 32K-token prompt costs what its widest intermediate costs at 32K rows: Kimi Linear's
logits alone are 32,768 x 163,840 floats (21 GB), its routed experts' inputs 8 x 32K rows. In
chunks of C tokens every intermediate is C rows; what grows with the prompt is only what the
model must keep (softmax and MLA caches), which `lineage.arithmetic.model_memory` counts."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:        # torch only where a prefill runs: `validate` budgets one with activation_bytes
    from torch import Tensor

# tokens per pass. On the CPU 4,096: past ~2K a pass is matmul bound, and the loading screen's
# progress moves every chunk. On CUDA wider: Kimi Linear (27 layers) on an H200 at 128K tokens took
# 6.9 s in 4,096-token chunks (14 GB transient), 5.6 s in 16,384 (25 GB), transformers' one pass
# 5.9 s (30 GB): a chunk's grouped matmuls and its attention over the prefix run better wide
CHUNK = 4096
CUDA_CHUNK = 16384


def chunk_for(device) -> int:
    """Tokens per pass on this device (a torch.device or its name)."""
    return CUDA_CHUNK if str(device).startswith("cuda") else CHUNK


def prefill(model, ids: Tensor, state=None, chunk: int | None = None,
            progress: Callable[[int, int], None] | None = None) -> tuple[Tensor, object]:
    """ids (B, T) -> logits of the last position (B, vocab) and the model's state after it.
    `chunk` tokens a pass (chunk_for the ids' device by default); `progress(done, total)` is
    called after each chunk (tokens so far, all of them)."""
    chunk = chunk_for(ids.device) if chunk is None else chunk
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1 token, got {chunk}")
    T = ids.shape[1]
    if T == 0:
        raise ValueError("nothing to prefill: no tokens")
    import torch
    logits = None
    with torch.inference_mode():
        for lo in range(0, T, chunk):
            logits, state = model(ids[:, lo:lo + chunk], state, last=True)     # (B, 1, vocab)
            if progress is not None:
                progress(min(lo + chunk, T), T)
    return logits[:, -1], state


def activation_bytes(cfg, tokens: int, dtype_bytes: int, device="cpu") -> int:
    """An upper estimate of the transient memory a prefill of `tokens` tokens (in chunks) needs
    beyond the weights and what the model keeps: a few of a layer's widest intermediates at the
    chunk's rows, plus, for a softmax or MLA layer, its keys and values of the whole prefix
    expanded per head while a chunk attends to them. `device`: where it runs (its chunk_for)."""
    rows, d = min(tokens, chunk_for(device)), cfg.d_model
    width = 3 * d
    expanded = 0
    for i in range(cfg.n_layers):
        c = cfg.layer_mixer_config(i)
        width = max(width, c.params() // d)              # a mixer's projections: about params / d wide
        if cfg.mixers[i] == "softmax":
            expanded = max(expanded, 2 * c.n_heads * c.dim * tokens * dtype_bytes)
        elif cfg.mixers[i] == "mla":                      # keys, and values padded to the keys' width
            expanded = max(expanded, 2 * c.n_heads * (c.qk_nope_head_dim + c.qk_rope_head_dim) * tokens * dtype_bytes)
    if str(device).startswith("cuda"):      # the prefix's keys and values copied once more for cuDNN (causal.py)
        expanded *= 2
    for kind in set(cfg.ffns) - {"none"}:
        f = cfg.ffn_config(kind)
        if kind == "moe":       # each token's k experts' rows, then the shared experts'
            width = max(width, 2 * f.top_k * f.expert_dim + 2 * (f.shared_dim or f.expert_dim) * f.n_shared)
        else:
            width = max(width, 2 * f.d_ff)
    return 4 * rows * width * dtype_bytes + expanded + cfg.vocab_size * 4
