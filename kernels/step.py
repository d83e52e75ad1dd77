"""One decoding token of KDA / Gated DeltaNet / DeltaNet, in one kernel launch.

Forward only: there is no backward.

    S = Diag(e^g) S                   (KDA: row i scaled by e^{g[i]}; per-head gate: all of S)
    u = beta (v - k S)                (V,)
    S = S + k^T u                     (K, V), written back in place
    o = scale q S                     (V,)

The state is fp32 (B, H, K, V) and is read and written exactly once: at large batch the
kernel is a copy of the state, so its speed is the device's copy bandwidth. At batch 1 it is
launch bound, so the launcher does only cheap checks and allocates nothing but o.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _kda_step_kernel(q, k, v, g, beta, S, o, scale,
                     K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                     GATE: tl.constexpr):
    """One (batch, head) and one block of BV state columns per program.
    q, k, g: (B*H, K); v, o: (B*H, V); beta: (B*H,); S: (B*H, K, V) fp32, updated in place.
    GATE: 0 none, 1 one log decay per head (g (B*H,)), 2 one per key channel."""
    i_bh, i_v = tl.program_id(0), tl.program_id(1)
    i_bh = i_bh.to(tl.int64)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    p_S = S + (i_bh * K + o_k[:, None]) * V + o_v[None, :]                       # (BK, BV)
    m_S = m_k[:, None] & m_v[None, :]
    b_S = tl.load(p_S, mask=m_S, other=0.)                                         # (BK, BV) fp32
    b_q = tl.load(q + i_bh * K + o_k, mask=m_k, other=0.).to(tl.float32) * scale   # (BK,)
    b_k = tl.load(k + i_bh * K + o_k, mask=m_k, other=0.).to(tl.float32)           # (BK,)
    b_v = tl.load(v + i_bh * V + o_v, mask=m_v, other=0.).to(tl.float32)           # (BV,)
    b_beta = tl.load(beta + i_bh).to(tl.float32)
    if GATE == 2:
        b_S *= tl.exp(tl.load(g + i_bh * K + o_k, mask=m_k, other=0.).to(tl.float32))[:, None]
    elif GATE == 1:
        b_S *= tl.exp(tl.load(g + i_bh).to(tl.float32))
    b_u = b_beta * (b_v - tl.sum(b_k[:, None] * b_S, 0))                           # (BV,)
    b_S += b_k[:, None] * b_u[None, :]
    tl.store(p_S, b_S, mask=m_S)
    tl.store(o + i_bh * V + o_v, tl.sum(b_q[:, None] * b_S, 0).to(o.dtype.element_ty), mask=m_v)


def _step_config(BH: int, K: int, V: int) -> tuple[int, int, int]:
    """(BK, BV, num_warps). Measured on the H200 (K = V = 128): batch 1 wants many small
    programs (BV = 16: 2.3 us of GPU time), batch 256 wide tiles (BV = 64: 3.9 TB/s)."""
    BK = max(16, triton.next_power_of_2(K))
    BV = min(16 if BH < 512 else 64, max(16, triton.next_power_of_2(V)))
    return BK, BV, (4 if BK * BV <= 8192 else 8)


_CONFIGS: dict = {}     # (B*H, K, V) -> _step_config(...): plain Python on the hot path


# Compiled kernels by everything Triton specializes on, for the fast launch below.
_COMPILED: dict = {}
_FAST: list = []        # [the current-stream getter] while the direct launch is in use


def _init_fast():
    try:
        _FAST.append(triton.runtime.driver.active.get_current_stream)
    except Exception:  # noqa: BLE001
        pass


def kda_step(q, k, v, g, beta, state, *, scale=None, config=None):
    """One token of KDA (or Gated DeltaNet with g (B, H), or DeltaNet with g None), forward
    only (no backward). q, k (B, H, K); v (B, H, V); g (B, H, K), (B, H) or None; beta (B, H);
    state (B, H, K, V) fp32 contiguous, updated IN PLACE. One kernel launch.
    Returns o (B, H, V) in v's dtype: the read after this token's write.
    ``config`` = (BK, BV, num_warps) overrides the tile choice (for benchmarks)."""
    if q.dim() != 3 or v.dim() != 3:
        raise ValueError(f"kda_step: q must be (B, H, K) and v (B, H, V); got {tuple(q.shape)}, {tuple(v.shape)}")
    B, H, K = q.shape
    V = v.shape[-1]
    if k.shape != q.shape or v.shape[:2] != q.shape[:2] or beta.shape != q.shape[:2]:
        raise ValueError(f"kda_step: want q, k (B, H, K), v (B, H, V), beta (B, H); got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}, {tuple(beta.shape)}")
    if state.shape != (B, H, K, V) or state.dtype != torch.float32 or not state.is_contiguous():
        raise ValueError(f"kda_step: state must be a contiguous float32 (B, H, K, V) = {(B, H, K, V)}; "
                         f"got {state.dtype} {tuple(state.shape)}")
    if g is None:
        gate, g = 0, q
    elif g.shape == q.shape:
        gate = 2
    elif g.shape == q.shape[:2]:
        gate = 1
    else:
        raise ValueError(f"kda_step: g must be (B, H, K) or (B, H); got {tuple(g.shape)}")
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
            and g.is_contiguous() and beta.is_contiguous()):
        raise ValueError("kda_step: q, k, v, g, beta must be contiguous")
    if config is None:
        config = _CONFIGS.get((B * H, K, V))
        if config is None:
            config = _CONFIGS[(B * H, K, V)] = _step_config(B * H, K, V)
    BK, BV, warps = config
    o = torch.empty_like(v)
    grid = (B * H, (V + BV - 1) // BV)
    args = (q, k, v, g, beta, state, o, K ** -0.5 if scale is None else scale, K, V, BK, BV, gate)
    if not q.is_cuda:
        _kda_step_kernel[grid](*args, num_warps=warps)
        return o
    if not _COMPILED and not _FAST:
        _init_fast()
    # Launch bound at small batch: Triton's generic launch path (argument binding and
    # specialization) costs more host time than the kernel takes on the GPU. After the first
    # call for a given specialization, launch the compiled kernel directly. The key holds what
    # Triton specializes on here: dtypes, sizes, tiles, and 16-byte alignment of the pointers
    # (all aligned is the only case cached; torch's allocations always are).
    aligned = ((q.data_ptr() | k.data_ptr() | v.data_ptr() | g.data_ptr() | beta.data_ptr()
                | state.data_ptr() | o.data_ptr()) & 15) == 0
    key = (q.device.index, q.dtype, g.dtype, beta.dtype, K, V, BK, BV, gate, warps)
    kernel = _COMPILED.get(key) if aligned and _FAST else None
    if kernel is not None:
        try:
            kernel.run(grid[0], grid[1], 1, _FAST[0](key[0]), kernel.function, kernel.packed_metadata,
                       None, None, None, *args)
            return o
        except Exception:  # noqa: BLE001 - an internal API changed: use the generic path from now on
            _FAST.clear()
    kernel = _kda_step_kernel[grid](*args, num_warps=warps)
    if aligned and _FAST and hasattr(kernel, "run") and hasattr(kernel, "packed_metadata"):
        _COMPILED[key] = kernel
    return o
