"""Chunked forward of the delta-rule family: KDA, Gated DeltaNet and DeltaNet, in Triton.

Forward only: there is no backward (the app only ever runs inference).

Same meaning as the readable references (naive.py beside this file, never imported
here): q, k (B, T, H, K), v (B, T, H, V), log decays g <= 0 ((B, T, H, K) for KDA,
(B, T, H) for Gated DeltaNet, none for DeltaNet), beta (B, T, H), fp32 state S (B, H, K, V)
read as ``k @ S``. One step is

    S_t = Diag(e^{g_t}) S_{t-1};   S_t += k_t^T beta_t (v_t - k_t S_t);   o_t = scale q_t S_t.

The sequence is cut into chunks of BT = 64 tokens. Inside a chunk, with G the in-chunk
cumulative log decay (G_r = g_1 + ... + g_r, G <= 0 and non-increasing) and S0 the state
entering the chunk, the delta writes u satisfy a unit-lower-triangular system:

    (I + A) u = beta v - beta (k e^G) S0,     A[r, s] = beta_r sum_i k_r[i] k_s[i] e^{G_r[i] - G_s[i]}  (s < r)
    u = U - W S0,   U = (I + A)^-1 (beta v),   W = (I + A)^-1 (beta k e^G)
    o_r   = (scale q_r e^{G_r}) S0 + sum_{s <= r} P[r, s] u_s,   P[r, s] = scale sum_i q_r[i] k_s[i] e^{G_r[i] - G_s[i]}
    S_end = e^{G_C} S0 + sum_s (k_s e^{G_C - G_s})^T u_s            (C = last token of the chunk)

Six stages, each kernel launched once:

1. ``_chunk_cumsum_kernel``  (chunks, cdiv(H*D, 64), B), D = K or 1: G = in-chunk cumsum of g, kept in fp32
   and in base-2 units (times log2 e): the kernels below write e^{G_r - G_s} as exp2 of the
   stored difference.
2. A and P: ``_scores_inter_kernel`` (chunks * 6, B*H): one 16 x 16 block below the diagonal
   (and the zero block mirrored above it), and the diagonal 16 x 16 blocks:
   ``_scores_diag_token_kernel`` (B*T, cdiv(H, 4)) for per-channel gates, one row of its block per
   program, or ``_scores_diag_kernel`` (chunks * 4, B*H) for per-head and no gates, one matmul
   per block. Small independent programs with no whole-chunk tiles: an earlier 16-row-strip
   kernel spilled registers at every warp count and made the op 1.35x slower.
3. ``_chunk_solve_kernel``   (chunks, B*H): X = (I + A)^-1 by 16 x 16 blocks.
4. ``_chunk_apply_kernel``   (chunks, B*H): W = X (beta k e^G), U = X (beta v), and the gated
   keys KG = k e^{G_C - G} of the state update.
5. ``_chunk_state_kernel``   (V blocks, B*H): walks the chunks in order carrying S in registers;
   stores the state entering each chunk, u = U - W S and the final state. The entering
   states are scratch of B*H*chunks*K*V in the matmul operand dtype: 134 MB at B=4, T=4096,
   H=16, K=V=128 in bf16, 1 GiB at B=1, T=128k.
6. ``_chunk_out_kernel``     (V blocks, chunks, B*H): o = (scale q e^G) S0 + P u, every chunk at once.

This module checks the inputs, picks the options and calls the stages in order; the kernels
and their launchers are in ``chunk_scores`` (1 and 2), ``chunk_solve`` (3 and 4) and
``chunk_state`` (5 and 6), the layout they share in ``chunk_layout``.

Overflow: decays are only ever exponentiated as differences that are <= 0. Where a product
e^{G_r - G_s} must become a matmul (blocks below the diagonal), it is split at the first token
n of the row block, which lies between s and r: e^{G_r - G_n} e^{G_n - G_s}, both factors <= 1.
Inside a diagonal block no such token exists, so per-channel gates are computed pair by pair
there, e^{G_r - G_s} exactly. Arguments are clamped with min(., 0) as well, so padded rows
(t >= T, loaded as 0) can never produce inf * 0.

Precision: fp32 inputs run every matmul in full fp32 (ieee) and store everything in fp32.
16-bit inputs use tf32 for the score matmuls, keep W, U, P, the gated keys, u and the chunks'
entering states in the input dtype (bf16 inputs also X), and feed those to 16-bit matmuls;
G, A, accumulation and the carried state are always fp32.
"""
from __future__ import annotations

import torch
import triton

from . import chunk_scores, chunk_solve, chunk_state
from .chunk_layout import BT, GATE_CHANNEL, GATE_HEAD, GATE_NONE, pow2


_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _state_config(K: int, half: bool) -> tuple[int, int, int]:
    """(BV, num_warps, num_stages) of the sequential kernel: S is (BK, BV) fp32 in registers;
    a stage of its pipeline holds one chunk's W and KG tiles (BT x BK each) and U (BT x BV).
    The fastest measured on the H200 with the output kernel's tiles below (BENCHMARKS.md,
    "Tile choices")."""
    BK = pow2(K)
    if half and BK <= 128:
        return 64, 4, 3
    return 32, 4, (2 if BK * (2 if half else 4) <= 512 else 1)


def _chunk_delta(q, k, v, g, beta, scale, initial_state, chunk_size, gate: int, name: str, options=None):
    """Checks, allocates, launches the six stages. ``options`` (benchmarks only) overrides
    the tuned choices:
      cumsum       (columns a program, num_warps) of the cumsum;
      inter        dtype of W, U, P, and KG where there are gates;
      x            dtype of X = (I + A)^-1;
      split_inter  (BK, num_warps) of the blocks below the diagonal;
      split_diag   (BK, num_warps) of the diagonal blocks, per-head and no gates;
      diag_token   (heads a program, num_warps) of the diagonal blocks, per-channel gates;
      solve, apply num_warps of those kernels;
      dot          operand dtype of the state pass's matmuls for 16-bit inputs, also the dtype
                   the entering states and u are stored in (fp32 inputs always use fp32);
      state        (BV, num_warps, num_stages) of the sequential kernel (by default chosen
                   from K and the operand size);
      out          (BK, BV, num_warps, num_stages) of the output kernel.
    Dtypes are torch dtypes. Unknown names are an error."""
    if q.dim() != 4 or k.shape != q.shape:
        raise ValueError(f"{name}: q and k must both be (B, T, H, K); got {tuple(q.shape)} and {tuple(k.shape)}")
    if v.dim() != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"{name}: v must be (B, T, H, V) matching q's (B, T, H); got {tuple(v.shape)}")
    B, T, H, K = q.shape
    V = v.shape[-1]
    if beta.shape != (B, T, H):
        raise ValueError(f"{name}: beta must be (B, T, H) = {(B, T, H)}; got {tuple(beta.shape)}")
    if gate != GATE_NONE:
        want = (B, T, H, K) if gate == GATE_CHANNEL else (B, T, H)
        if g.shape != want:
            raise ValueError(f"{name}: g must be {want}; got {tuple(g.shape)}")
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"{name}: q, k, v must share one dtype of float32, bfloat16, float16; "
                         f"got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (1 <= K <= 256 and 1 <= V <= 256):
        raise ValueError(f"{name}: K and V must be in 1..256; got K={K}, V={V}")
    if chunk_size is not None and int(chunk_size) != BT:
        raise ValueError(f"{name}: the kernel's chunk size is {BT}; got chunk_size={chunk_size}")
    if initial_state is not None and initial_state.shape != (B, H, K, V):
        raise ValueError(f"{name}: initial_state must be (B, H, K, V) = {(B, H, K, V)}; "
                         f"got {tuple(initial_state.shape)}")
    tensors = (q, k, v, beta) + ((g,) if gate != GATE_NONE else ()) + \
        ((initial_state,) if initial_state is not None else ())
    if any(x.device != q.device for x in tensors):
        raise ValueError(f"{name}: all inputs must be on one device")
    if B * H > 65535 or triton.cdiv(T, BT) > 65535:     # CUDA's limit on a grid's 2nd and 3rd axes
        raise ValueError(f"{name}: at most 65535 sequences x heads and {65535 * BT} tokens a call; "
                         f"got B*H = {B * H}, T = {T}")
    scale = K ** -0.5 if scale is None else float(scale)
    dev = q.device
    S = torch.empty(B, H, K, V, device=dev, dtype=torch.float32)
    if T == 0:
        if initial_state is not None:
            S.copy_(initial_state)
        else:
            S.zero_()
        return q.new_empty(B, 0, H, V), S

    # 16-bit inputs: W, U, P, the gated keys, u and the entering states are stored in the input
    # dtype and the state pass's matmuls take 16-bit operands (fp32 accumulation, fp32 state),
    # as flash-linear-attention does: faster than fp32 storage at a small cost in accuracy.
    # On the GPU only: the CPU interpreter has no bf16 matmul.
    half = q.dtype != torch.float32
    # The default tiles and warps below are the fastest measured on the H200; the numbers,
    # and why one warp suits the 16-row block dots and the solve's row-by-row substitution,
    # are in BENCHMARKS.md ("Tile choices"). X = (I + A)^-1 is kept in bf16 for bf16 inputs
    # (as flash-linear-attention keeps its inverse): faster, within the 5e-3 error bar. fp16
    # inputs keep it in fp32: the inverse is not bounded by fp16's range.
    xdt = torch.bfloat16 if q.dtype == torch.bfloat16 and q.is_cuda else torch.float32
    opt = dict(cumsum=chunk_scores.CUMSUM, inter=q.dtype, x=xdt, split_inter=(32, 1), split_diag=(32, 1),
               diag_token=(4, 2), solve=1, apply=4, dot=q.dtype if q.is_cuda else torch.float32,
               state=None, out=(64, 128, 4, 2))
    unknown = set(options or {}) - set(opt)
    if unknown:     # a misspelt option would silently time the defaults
        raise ValueError(f"{name}: unknown options {sorted(unknown)}; known: {sorted(opt)}")
    opt.update(options or {})
    if not {opt["inter"], opt["x"], opt["dot"]} <= set(_DTYPES):
        raise ValueError(f"{name}: inter, x and dot must be torch dtypes among {_DTYPES}")
    dot = opt["dot"] if half else torch.float32
    if opt["state"] is None:    # tiles for the operand size: 16-bit tiles at 3 stages overflow in fp32
        opt["state"] = _state_config(K, dot != torch.float32)
    q, k, v, beta = q.contiguous(), k.contiguous(), v.contiguous(), beta.contiguous()
    S0 = initial_state.to(torch.float32).contiguous() if initial_state is not None else S
    prec = "ieee" if q.dtype == torch.float32 else "tf32"

    # 1. G = in-chunk cumsum of g (fp32)
    G = chunk_scores.cumsum(g.contiguous(), opt["cumsum"]) if gate != GATE_NONE else q   # q: never read
    # 2. A (strictly lower, beta folded in) and P (inclusive lower, scale folded in)
    A = torch.empty(B, T, H, BT, device=dev, dtype=torch.float32)
    P = torch.empty(B, T, H, BT, device=dev, dtype=opt["inter"])
    chunk_scores.scores(q, k, G, beta, A, P, scale, gate, prec, opt)
    # 3. X = (I + A)^-1
    X = chunk_solve.solve(A, opt["x"], prec, opt["solve"])
    # 4. W = X beta k e^G, U = X beta v, KG = k e^{G_C - G}
    W, U, KG = chunk_solve.apply(k, v, G, beta, X, gate, prec, opt["inter"], opt["apply"])
    # 5. the chunks in order: the state entering each chunk, the delta writes u, the final state
    Hc, Vn = chunk_state.state_pass(KG, G, W, U, S0, S, gate, initial_state is not None, prec, dot, opt["state"])
    # 6. o for every chunk at once
    o = chunk_state.output(q, G, Hc, Vn, P, scale, gate, prec, opt["out"])
    return o, S


def kda(q, k, v, g, beta, *, scale=None, initial_state=None, chunk_size=64, options=None):
    """Kimi Delta Attention, chunked forward (no backward).

    q, k (B, T, H, K); v (B, T, H, V); g (B, T, H, K) log decays <= 0, one per key channel;
    beta (B, T, H); initial_state (B, H, K, V) or None. bf16 / fp16 / fp32 inputs, fp32
    accumulation. Any T; K, V <= 256; chunk_size must be 64 (None is taken as 64: the same
    result as the token recurrence up to rounding). Returns o (B, T, H, V) in q's dtype and
    the final state S (B, H, K, V) in fp32.
    ``options`` overrides the stages' tiles and precisions (for benchmarks; see _chunk_delta).
    """
    return _chunk_delta(q, k, v, g, beta, scale, initial_state, chunk_size, GATE_CHANNEL, "kda", options)


def gated_delta_rule(q, k, v, g, beta, *, scale=None, initial_state=None, chunk_size=64):
    """Gated DeltaNet, chunked forward (no backward): as `kda` with one log decay per head,
    g (B, T, H). Returns o (B, T, H, V) in q's dtype and S (B, H, K, V) in fp32."""
    return _chunk_delta(q, k, v, g, beta, scale, initial_state, chunk_size, GATE_HEAD, "gated_delta_rule")


def delta_rule(q, k, v, beta, *, scale=None, initial_state=None, chunk_size=64):
    """DeltaNet, chunked forward (no backward): as `kda` with no decay.
    Returns o (B, T, H, V) in q's dtype and S (B, H, K, V) in fp32."""
    return _chunk_delta(q, k, v, None, beta, scale, initial_state, chunk_size, GATE_NONE, "delta_rule")
