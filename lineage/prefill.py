"""Reading a long input in bounded memory: the prompt goes through the model a chunk of tokens at
a time, each chunk continuing from the state the one before left, and only the last position
reaches the LM head.

Whole, a 32K-token prompt costs what its widest intermediate costs at 32K rows: Kimi Linear's
logits alone are 32,768 x 163,840 floats (21 GB), its routed experts' inputs 8 x 32K rows. In
chunks of C tokens every intermediate is C rows; what grows with the prompt is only what the
model must keep (softmax and MLA caches), which `lineage.arithmetic.model_memory` counts."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .configs import FFNS

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
    `chunk` tokens a pass (chunk_for the ids' device by default, the smallest over its devices
    for a model a device map spread); `progress(done, total)` is
    called after each chunk (tokens so far, all of them)."""
    if chunk is None:     # a model spread over devices passes each chunk through all: the smallest chunk
        chunk = min(chunk_for(d) for d in getattr(model, "places", None) or [ids.device])
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


# mask entries per block where the queries attend in blocks (lineage.mixers.causal.BLOCK_ELEMENTS,
# a test holds the two equal): torch-free here, as `validate` budgets with this module
MASK_BLOCK = 1 << 24
# what the CPU allocator keeps beyond the live tensors: glibc raises its mmap threshold to the size
# of a freed block (up to 32 MB), so a chunk's freed intermediates stay resident as heap the next
# one reuses. Measured: peak RSS growth 1.3-1.5x the live peak, and 15% apart run to run (k3-mini
# at 4,096 tokens: 147 and 168 MB, 112 MB with MALLOC_MMAP_THRESHOLD_ pinned; tiny-hybrid at
# 16,384: 198 MB, 136 MB pinned)
CPU_HEAP = 1.6
# a process's first prefill initialises torch's CPU kernels: 7-12 MB of RSS at 64 tokens
CPU_FIRST = 12 << 20


def activation_bytes(cfg, tokens: int, dtype_bytes: int, device="cpu") -> int:
    """An upper estimate of the transient memory a prefill of `tokens` tokens (in chunks) needs
    beyond the weights and what the model keeps: a layer's live intermediates at the chunk's rows,
    the short convs' inputs their caches hold, and for a softmax or MLA layer its keys and values
    of the whole prefix expanded per head while a chunk attends to them. `device`: where it runs
    (its chunk_for). On the CPU, with what the model keeps, it was 1.04-1.5x the highest peak RSS
    growth of three runs of prefills of k3-mini-like models and a Kimi Linear config, which vary
    by up to 30% run to run (bench_prefill --check-estimate, BENCHMARKS.md)."""
    rows, d = min(tokens, chunk_for(device)), cfg.d_model
    cuda = str(device).startswith("cuda")
    width = 4 * 3 * d               # the stream, its norm, a sublayer's output and the sum, per row
    expanded = pinned = routed = mask = 0
    attends = False
    for i in range(cfg.n_layers):
        c = cfg.layer_mixer_config(i)
        # a mixer's projections are about params / d wide, and its chunked form keeps several
        # tensors of that order per row (a KDA chunk's q, k, v, decays and C x C blocks): six of
        # them cover k3-mini's KDA (71 MB live at 4,096 rows, 721 wide)
        width = max(width, 6 * (c.params() // d))
        if cfg.mixers[i] == "softmax":
            expanded = max(expanded, 2 * c.n_heads * c.dim * tokens * dtype_bytes)
            attends = True
        elif cfg.mixers[i] == "mla":
            # the latent's up-projection (keys' nope part and values), then the keys with their rope
            # part and the values padded to the keys' width, for the whole prefix at each chunk
            qk, v = c.qk_nope_head_dim + c.qk_rope_head_dim, c.v_head_dim
            expanded = max(expanded, c.n_heads * (c.qk_nope_head_dim + v + 2 * qk) * tokens * dtype_bytes)
            attends = True
        # a short conv's cache is a view of its chunk's input (the last size - 1 rows of the
        # concatenation), so each conv layer keeps a chunk of its channels alive until its next one
        size = getattr(c, "conv_size", 0) or 0
        if size:
            channels = getattr(c, "conv_channels", None) or (c.n_heads + 2 * c.kv_heads) * c.dim
            pinned += channels * (rows + size - 1) * dtype_bytes
    if cuda:      # the prefix's keys and values copied once more for cuDNN (causal.py)
        expanded *= 2
    elif attends and tokens > rows:
        # a chunk continuing a cache attends in blocks of queries (causal.py: no fused CPU kernel
        # takes a bottom-right mask) with a boolean mask of up to MASK_BLOCK entries (or 16 rows of
        # the prefix), which SDPA turns into a float mask of the queries' dtype: 80 MB in float32
        mask = min(rows * tokens, max(MASK_BLOCK, 16 * tokens)) * (1 + dtype_bytes)
    for kind in set(cfg.ffns) - {"none"}:
        f = cfg.ffn_config(kind)
        if FFNS[kind].routes:
            width = max(width, 4 * (f.shared_dim or f.expert_dim) * f.n_shared)     # shared experts: gate | up, twice
            # every token's k rows live at once: gathered at the experts' input width, their gate
            # and up halves and its product, the outputs, and the outputs gathered to be combined
            e = f.latent_dim or d
            routed = rows * f.top_k * (3 * e + 3 * f.expert_dim) * dtype_bytes
        else:
            width = max(width, 4 * f.d_ff)                # gate | up (or hidden), and the activation's output
    if cuda:
        return max(rows * width * dtype_bytes, routed) + expanded + pinned + cfg.vocab_size * 4
    # the CPU's allocator keeps a share of what a chunk freed (CPU_HEAP), but not of the prefix's
    # keys and values: past glibc's largest mmap threshold (32 MB) once long, they are mapped and
    # unmapped whole
    return int((max(rows * width * dtype_bytes, routed) + pinned + mask) * CPU_HEAP) + expanded + \
        cfg.vocab_size * 4 + CPU_FIRST
