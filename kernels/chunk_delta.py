"""Chunked forward of the delta-rule family: KDA, Gated DeltaNet and DeltaNet, in Triton.

Forward only: there is no backward (the app only ever runs inference).

Same meaning as the readable references (the model package's ops.py, never imported
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

import math

import torch
import triton
import triton.language as tl

BT = 64      # chunk length (tokens)
BC = 16      # sub-block of a chunk: the diagonal blocks of A are BC x BC
NB = BT // BC

GATE_NONE, GATE_HEAD, GATE_CHANNEL = 0, 1, 2
LOG2E = tl.constexpr(1.4426950408889634)


# --------------------------------------------------------------------------- kernel 1

@triton.jit(do_not_specialize=["T"])
def _chunk_cumsum_kernel(g, G, T, HD: tl.constexpr, BT: tl.constexpr, BN: tl.constexpr):
    """G[t] = log2(e) * the sum of g over the chunk's tokens up to and including t: base-2
    units, so that every decay downstream is one exp2 (tl.exp is a multiply and an exp2).
    g, G: (B, T, H, D) with D = K (per channel) or D = 1 (per head, (B, T, H)), seen as
    (B, T, HD) with HD = H * D: a program takes BN contiguous columns (heads x channels) of one
    chunk. Grid (chunks, cdiv(HD, BN), B)."""
    i_t, i_n, i_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_t = i_t * BT + tl.arange(0, BT)                                   # (BT,)
    o_n = i_n * BN + tl.arange(0, BN)                                   # (BN,)
    m = (o_t < T)[:, None] & (o_n < HD)[None, :]
    off = (i_b.to(tl.int64) * T + o_t[:, None]) * HD + o_n[None, :]     # (BT, BN)
    b_g = tl.load(g + off, mask=m, other=0.).to(tl.float32)            # (BT, BN)
    tl.store(G + off, tl.cumsum(b_g, axis=0) * LOG2E, mask=m)


# --------------------------------------------------------------------------- kernel 2

@triton.jit
def _pair_of(i_p, NB: tl.constexpr):
    """The p-th block below the diagonal, row-major: p = i (i - 1) / 2 + j  ->  (i, j), i > j."""
    i_i = i_p * 0 + 1
    for m in tl.static_range(2, NB):
        i_i += (i_p >= m * (m - 1) // 2).to(tl.int32)
    return i_i, i_p - i_i * (i_i - 1) // 2


@triton.jit(do_not_specialize=["T"])
def _scores_inter_kernel(q, k, G, beta, A, P, scale, T,
                         H: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
                         BK: tl.constexpr, GATE: tl.constexpr, PREC: tl.constexpr):
    """One BC x BC block (i, j), i > j, of a chunk's A and P, and the zero block (j, i).

        A[r, s] = beta_r sum_c k_r[c] k_s[c] e^{G_r[c] - G_s[c]}       r in block i, s in block j
        P[r, s] = scale sum_c q_r[c] k_s[c] e^{G_r[c] - G_s[c]}

    Every s is earlier than every r, so per-channel gates split at n = first token of block i:
    (q_r e^{G_r - G_n}) . (k_s e^{G_n - G_s}), both factors <= 1: one (BC, BK) x (BK, BC)
    matmul per K slice. Per-head gates multiply a plain matmul by e^{G_r - G_s} (scalar).
    Grid (chunks * NB (NB - 1) / 2, B*H): every program is small and independent, and
    together with the diagonal kernel they write each of the chunk's blocks exactly once
    (the later kernels read whole rows of P and the diagonal blocks of A)."""
    NP: tl.constexpr = (BT // BC) * (BT // BC - 1) // 2
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_t, i_p = i_c // NP, i_c % NP
    i_i, i_j = _pair_of(i_p, BT // BC)
    i_b, i_h = (i_bh // H).to(tl.int64), i_bh % H
    r0 = i_t * BT + i_i * BC                        # first token of the row block (= n)
    s0 = i_t * BT + i_j * BC                        # first token of the column block
    o_d = tl.arange(0, BC)
    o_r, o_s = r0 + o_d, s0 + o_d                   # (BC,) row / column tokens
    m_r, m_s = o_r < T, o_s < T
    row_r = (i_b * T + o_r) * H + i_h               # (BC,) flat (b, t, h) row index
    row_s = (i_b * T + o_s) * H + i_h
    row_n = (i_b * T + r0) * H + i_h                # scalar

    b_A = tl.zeros([BC, BC], dtype=tl.float32)
    b_P = tl.zeros([BC, BC], dtype=tl.float32)
    # a loop, not static_range: unrolled, the compiler hoisted every slice's loads and exps into the
    # dot-operand layout, where each warp holds the whole 16-row tile (a 16-row matmul cannot be
    # split across warps): 4x the exps at 4 warps, 255 registers (ptxas, sm_90a). As a loop it
    # keeps them distributed (142 registers at BK = 32) and can be pipelined.
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m_k = o_k < K
        m_rk = m_r[:, None] & m_k[None, :]
        m_sk = m_s[:, None] & m_k[None, :]
        b_kr = tl.load(k + row_r[:, None] * K + o_k[None, :], mask=m_rk, other=0.).to(tl.float32)      # (BC, BK)
        b_qr = tl.load(q + row_r[:, None] * K + o_k[None, :], mask=m_rk, other=0.).to(tl.float32)
        b_ks = tl.load(k + row_s[:, None] * K + o_k[None, :], mask=m_sk, other=0.).to(tl.float32)
        if GATE == 2:
            b_gr = tl.load(G + row_r[:, None] * K + o_k[None, :], mask=m_rk, other=0.)                   # (BC, BK) fp32
            b_gs = tl.load(G + row_s[:, None] * K + o_k[None, :], mask=m_sk, other=0.)
            b_gn = tl.load(G + row_n * K + o_k, mask=m_k & (o_k * 0 + r0 < T), other=0.)                          # (BK,)
            b_fr = tl.exp2(tl.minimum(b_gr - b_gn[None, :], 0.))                                           # <= 1
            b_ks *= tl.exp2(tl.minimum(b_gn[None, :] - b_gs, 0.))                                          # <= 1
            b_kr *= b_fr
            b_qr *= b_fr
        b_kc = tl.trans(b_ks)                                                                             # (BK, BC)
        b_A += tl.dot(b_kr, b_kc, input_precision=PREC)
        b_P += tl.dot(b_qr, b_kc, input_precision=PREC)
    if GATE == 1:
        b_gr = tl.load(G + row_r, mask=m_r, other=0.)
        b_gs = tl.load(G + row_s, mask=m_s, other=0.)
        b_d = tl.exp2(tl.minimum(b_gr[:, None] - b_gs[None, :], 0.))                                       # (BC, BC)
        b_A *= b_d
        b_P *= b_d
    b_beta = tl.load(beta + row_r, mask=m_r, other=0.).to(tl.float32)
    p_rs = row_r[:, None] * BT + i_j * BC + o_d[None, :]                                                 # block (i, j)
    tl.store(A + p_rs, (b_A * b_beta[:, None]).to(A.dtype.element_ty), mask=m_r[:, None])
    tl.store(P + p_rs, (b_P * scale).to(P.dtype.element_ty), mask=m_r[:, None])
    p_sr = row_s[:, None] * BT + i_i * BC + o_d[None, :]                                                 # block (j, i): 0
    b_z = tl.zeros([BC, BC], dtype=tl.float32)
    tl.store(A + p_sr, b_z.to(A.dtype.element_ty), mask=m_s[:, None])
    tl.store(P + p_sr, b_z.to(P.dtype.element_ty), mask=m_s[:, None])


@triton.jit(do_not_specialize=["T"])
def _scores_diag_kernel(q, k, G, beta, A, P, scale, T,
                        H: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
                        BK: tl.constexpr, GATE: tl.constexpr, PREC: tl.constexpr):
    """Per-head or no gates: the diagonal BC x BC block (i, i) of a chunk's A (strictly lower)
    and P (inclusive lower): one matmul k_r . k_s (q_r . k_s), times the scalar decay
    e^{G_r - G_s} (0 above the diagonal, masked). Grid (chunks * NB, B*H)."""
    tl.static_assert(GATE != 2, "per-channel gates go to _scores_diag_token_kernel")
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_t, i_i = i_c // (BT // BC), i_c % (BT // BC)
    i_b, i_h = (i_bh // H).to(tl.int64), i_bh % H
    o_d = tl.arange(0, BC)                          # (BC,) index inside the block
    o_r = i_t * BT + i_i * BC + o_d
    m_r = o_r < T
    row_r = (i_b * T + o_r) * H + i_h               # (BC,)
    b_A = tl.zeros([BC, BC], dtype=tl.float32)
    b_P = tl.zeros([BC, BC], dtype=tl.float32)
    for i_k in range(0, K, BK):     # a loop, not static_range: see the inter kernel
        o_k = i_k + tl.arange(0, BK)
        m_rk = m_r[:, None] & (o_k < K)[None, :]
        b_kr = tl.load(k + row_r[:, None] * K + o_k[None, :], mask=m_rk, other=0.).to(tl.float32)      # (BC, BK)
        b_qr = tl.load(q + row_r[:, None] * K + o_k[None, :], mask=m_rk, other=0.).to(tl.float32)
        b_kc = tl.trans(b_kr)
        b_A += tl.dot(b_kr, b_kc, input_precision=PREC)
        b_P += tl.dot(b_qr, b_kc, input_precision=PREC)
    if GATE == 1:
        b_g = tl.load(G + row_r, mask=m_r, other=0.)
        b_d = tl.exp2(tl.minimum(b_g[:, None] - b_g[None, :], 0.))                                         # (BC, BC)
        b_A *= b_d
        b_P *= b_d
    b_beta = tl.load(beta + row_r, mask=m_r, other=0.).to(tl.float32)
    b_A = tl.where(o_d[:, None] > o_d[None, :], b_A * b_beta[:, None], 0.)
    b_P = tl.where(o_d[:, None] >= o_d[None, :], b_P * scale, 0.)
    p_d = row_r[:, None] * BT + i_i * BC + o_d[None, :]
    tl.store(A + p_d, b_A.to(A.dtype.element_ty), mask=m_r[:, None])
    tl.store(P + p_d, b_P.to(P.dtype.element_ty), mask=m_r[:, None])


@triton.jit(do_not_specialize=["T"])
def _scores_diag_token_kernel(q, k, G, beta, A, P, scale, T,
                              H: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
                              BK: tl.constexpr, BH: tl.constexpr):
    """Per-channel gates: row t of its diagonal BC x BC block of A and P, for BH heads at once.

        A[t, s] = beta_t sum_c k_t[c] k_s[c] e^{G_t[c] - G_s[c]}     s < t, s in t's block
        P[t, s] = scale sum_c q_t[c] k_s[c] e^{G_t[c] - G_s[c]}      s <= t

    One (BH, K) elementwise step per earlier token of the block: every exponent is <= 0, so
    the decay is exact with no split token, and the loop stops at t (causal: 8.5 steps on
    average). The BH heads of one token are contiguous in memory. Each step stores its BH
    entries straight away; the columns right of the diagonal (and A's diagonal) get their
    zeros in one store first, at addresses the loop never writes.
    Grid (B*T, cdiv(H, BH))."""
    i_bt, i_hg = tl.program_id(0).to(tl.int64), tl.program_id(1)
    i_b, i_t = i_bt // T, i_bt % T
    s0 = i_t // BC * BC                              # first token of t's block
    o_h = i_hg * BH + tl.arange(0, BH)               # (BH,) heads
    o_k = tl.arange(0, BK)
    o_c = tl.arange(0, BC)
    m_h = o_h < H
    m_hk = m_h[:, None] & (o_k < K)[None, :]
    row_t = (i_b * T + i_t) * H + o_h                                                   # (BH,)
    p_t = row_t[:, None] * K + o_k[None, :]                                             # (BH, BK)
    b_q = tl.load(q + p_t, mask=m_hk, other=0.).to(tl.float32) * scale
    b_k = tl.load(k + p_t, mask=m_hk, other=0.).to(tl.float32) \
        * tl.load(beta + row_t, mask=m_h, other=0.).to(tl.float32)[:, None]
    b_g = tl.load(G + p_t, mask=m_hk, other=0.)
    p_row = row_t * BT + (i_t % BT) // BC * BC                                          # (BH,) column s0 of row t
    b_z = tl.zeros([BH, BC], dtype=tl.float32)
    p_d = p_row[:, None] + o_c[None, :]                                                 # (BH, BC)
    tl.store(A + p_d, b_z.to(A.dtype.element_ty), mask=m_h[:, None] & (o_c[None, :] >= i_t - s0))
    tl.store(P + p_d, b_z.to(P.dtype.element_ty), mask=m_h[:, None] & (o_c[None, :] > i_t - s0))
    for s in range(s0, i_t + 1):
        p_s = ((i_b * T + s) * H + o_h)[:, None] * K + o_k[None, :]
        b_e = tl.load(k + p_s, mask=m_hk, other=0.).to(tl.float32) \
            * tl.exp2(tl.minimum(b_g - tl.load(G + p_s, mask=m_hk, other=0.), 0.))      # (BH, BK)
        tl.store(P + p_row + (s - s0), tl.sum(b_q * b_e, 1).to(P.dtype.element_ty), mask=m_h)
        if s < i_t:
            tl.store(A + p_row + (s - s0), tl.sum(b_k * b_e, 1).to(A.dtype.element_ty), mask=m_h)


# --------------------------------------------------------------------------- kernel 3

@triton.jit
def _load_block(A, i_b, i_h, T, t0, I: tl.constexpr, J: tl.constexpr,
                H: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    """Block (I, J) of the chunk's A: rows t0 + I*BC + a, columns J*BC + b. (BC, BC)"""
    o_a = tl.arange(0, BC)
    o_t = t0 + I * BC + o_a
    rows = (i_b * T + o_t) * H + i_h
    return tl.load(A + rows[:, None] * BT + J * BC + o_a[None, :], mask=(o_t < T)[:, None], other=0.)


@triton.jit
def _store_block(X, b_x, i_b, i_h, T, t0, I: tl.constexpr, J: tl.constexpr,
                 H: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr):
    o_a = tl.arange(0, BC)
    o_t = t0 + I * BC + o_a
    rows = (i_b * T + o_t) * H + i_h
    tl.store(X + rows[:, None] * BT + J * BC + o_a[None, :], b_x, mask=(o_t < T)[:, None])


@triton.jit(do_not_specialize=["T"])
def _chunk_solve_kernel(A, X, T, H: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr, PREC: tl.constexpr):
    """X = (I + A)^-1 for one chunk. A and X: (B, T, H, BT); A fp32, X fp32 or bf16 (rounded
    only at the store: the solve itself runs in fp32).

    A is strictly lower triangular; with 16 x 16 blocks A_IJ and X_IJ:
      diagonal:  X_II = (I + A_II)^-1 by forward substitution on all four blocks at once
                 (row a of X_II - I is  -A_II[a] - A_II[a] (X_II - I), rows < a already final);
      below:     X_IJ = -X_II sum_{J <= M < I} A_IM X_MJ   (I > J).
    Only the lower blocks of X are written."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = (i_bh // H).to(tl.int64), i_bh % H
    t0 = i_t * BT
    # the four diagonal blocks as one tile: D[I, a, b] = A[t0 + I*BC + a, I*BC + b]   (4, BC, BC)
    o_I = tl.arange(0, 4)[:, None, None]
    o_a = tl.arange(0, BC)[None, :, None]
    o_b = tl.arange(0, BC)[None, None, :]
    o_t = t0 + o_I * BC + o_a                                                       # (4, BC, 1)
    rows = (i_b * T + o_t) * H + i_h
    b_Y = -tl.load(A + rows * BT + o_I * BC + o_b, mask=o_t < T, other=0.)          # (4, BC, BC)
    for a in range(1, BC):
        b_row = tl.sum(tl.where(o_a == a, b_Y, 0.), 1)                              # (4, BC): -A_II[a]
        b_row += tl.sum(b_row[:, :, None] * b_Y, 1)                                 # + (-A_II[a]) (X_II - I)
        b_Y = tl.where(o_a == a, b_row[:, None, :], b_Y)
    b_X = b_Y + (o_a == o_b).to(tl.float32)                                         # (4, BC, BC)
    b_X00 = tl.sum(tl.where(o_I == 0, b_X, 0.), 0)                                  # (BC, BC)
    b_X11 = tl.sum(tl.where(o_I == 1, b_X, 0.), 0)
    b_X22 = tl.sum(tl.where(o_I == 2, b_X, 0.), 0)
    b_X33 = tl.sum(tl.where(o_I == 3, b_X, 0.), 0)

    b_A10 = _load_block(A, i_b, i_h, T, t0, 1, 0, H, BT, BC)
    b_A20 = _load_block(A, i_b, i_h, T, t0, 2, 0, H, BT, BC)
    b_A21 = _load_block(A, i_b, i_h, T, t0, 2, 1, H, BT, BC)
    b_A30 = _load_block(A, i_b, i_h, T, t0, 3, 0, H, BT, BC)
    b_A31 = _load_block(A, i_b, i_h, T, t0, 3, 1, H, BT, BC)
    b_A32 = _load_block(A, i_b, i_h, T, t0, 3, 2, H, BT, BC)
    b_X10 = -tl.dot(b_X11, tl.dot(b_A10, b_X00, input_precision=PREC), input_precision=PREC)
    b_X21 = -tl.dot(b_X22, tl.dot(b_A21, b_X11, input_precision=PREC), input_precision=PREC)
    b_X20 = -tl.dot(b_X22, tl.dot(b_A20, b_X00, input_precision=PREC)
                    + tl.dot(b_A21, b_X10, input_precision=PREC), input_precision=PREC)
    b_X32 = -tl.dot(b_X33, tl.dot(b_A32, b_X22, input_precision=PREC), input_precision=PREC)
    b_X31 = -tl.dot(b_X33, tl.dot(b_A31, b_X11, input_precision=PREC)
                    + tl.dot(b_A32, b_X21, input_precision=PREC), input_precision=PREC)
    b_X30 = -tl.dot(b_X33, tl.dot(b_A30, b_X00, input_precision=PREC)
                    + tl.dot(b_A31, b_X10, input_precision=PREC)
                    + tl.dot(b_A32, b_X20, input_precision=PREC), input_precision=PREC)

    # X is block lower triangular: store its ten lower blocks, the next kernel applies it
    _store_block(X, b_X00, i_b, i_h, T, t0, 0, 0, H, BT, BC)
    _store_block(X, b_X10, i_b, i_h, T, t0, 1, 0, H, BT, BC)
    _store_block(X, b_X11, i_b, i_h, T, t0, 1, 1, H, BT, BC)
    _store_block(X, b_X20, i_b, i_h, T, t0, 2, 0, H, BT, BC)
    _store_block(X, b_X21, i_b, i_h, T, t0, 2, 1, H, BT, BC)
    _store_block(X, b_X22, i_b, i_h, T, t0, 2, 2, H, BT, BC)
    _store_block(X, b_X30, i_b, i_h, T, t0, 3, 0, H, BT, BC)
    _store_block(X, b_X31, i_b, i_h, T, t0, 3, 1, H, BT, BC)
    _store_block(X, b_X32, i_b, i_h, T, t0, 3, 2, H, BT, BC)
    _store_block(X, b_X33, i_b, i_h, T, t0, 3, 3, H, BT, BC)


@triton.jit(do_not_specialize=["T"])
def _chunk_apply_kernel(k, v, G, beta, X, W, U, KG, T,
                        H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                        BC: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, GATE: tl.constexpr, PREC: tl.constexpr):
    """W = X (beta k e^G) and U = X (beta v) for one chunk, as (BT, BT) x (BT, BK) matmuls, and
    the gated keys the state pass adds with, KG = k e^{G_C - G} (C: the chunk's last token;
    not written without gates, where KG is k itself).
    X (B, T, H, BT) holds the inverse's lower blocks; entries right of the diagonal block of a
    row were never written and are masked to 0 here."""
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = (i_bh // H).to(tl.int64), i_bh % H
    o_c = tl.arange(0, BT)
    o_t = i_t * BT + o_c
    m_t = o_t < T
    rows = (i_b * T + o_t) * H + i_h                                                  # (BT,)
    m_X = m_t[:, None] & (o_c[None, :] < (o_c[:, None] // BC + 1) * BC)
    b_X = tl.load(X + rows[:, None] * BT + o_c[None, :], mask=m_X, other=0.)          # (BT, BT)
    b_beta = tl.load(beta + rows, mask=m_t, other=0.).to(tl.float32)                  # (BT,)
    row_l = (i_b * T + tl.minimum(i_t * BT + BT, T) - 1) * H + i_h                  # last token of the chunk
    if GATE == 1:
        b_g = tl.load(G + rows, mask=m_t, other=0.)                                     # (BT,)
        b_eg = tl.exp2(tl.minimum(b_g, 0.))
        b_egl = tl.exp2(tl.minimum(tl.load(G + row_l) - b_g, 0.))                       # e^{G_C - G}
    for i_k in tl.static_range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m = m_t[:, None] & (o_k < K)[None, :]
        p_k = rows[:, None] * K + o_k[None, :]
        b_k = tl.load(k + p_k, mask=m, other=0.).to(tl.float32)                         # (BT, BK)
        b_r = b_k * b_beta[:, None]
        if GATE == 2:
            b_g = tl.load(G + p_k, mask=m, other=0.)
            b_gl = tl.load(G + row_l * K + o_k, mask=o_k < K, other=0.)                  # (BK,)
            b_r *= tl.exp2(tl.minimum(b_g, 0.))
            tl.store(KG + p_k, (b_k * tl.exp2(tl.minimum(b_gl[None, :] - b_g, 0.))).to(KG.dtype.element_ty), mask=m)
        elif GATE == 1:
            b_r *= b_eg[:, None]
            tl.store(KG + p_k, (b_k * b_egl[:, None]).to(KG.dtype.element_ty), mask=m)
        b_w = tl.dot(b_X, b_r.to(b_X.dtype), input_precision=PREC)                    # (BT, BK)
        tl.store(W + p_k, b_w.to(W.dtype.element_ty), mask=m)
    for i_v in tl.static_range(0, V, BV):
        o_v = i_v + tl.arange(0, BV)
        m = m_t[:, None] & (o_v < V)[None, :]
        b_r = tl.load(v + rows[:, None] * V + o_v[None, :], mask=m, other=0.).to(tl.float32) * b_beta[:, None]
        b_u = tl.dot(b_X, b_r.to(b_X.dtype), input_precision=PREC)                    # (BT, BV)
        tl.store(U + rows[:, None] * V + o_v[None, :], b_u.to(U.dtype.element_ty), mask=m)


# --------------------------------------------------------------------------- kernels 5 and 6

@triton.jit(do_not_specialize=["T"])
def _chunk_state_kernel(KG, G, W, U, S0, S, Hc, Vn, T,
                        H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                        BK: tl.constexpr, BV: tl.constexpr, GATE: tl.constexpr,
                        HAS_INIT: tl.constexpr, PREC: tl.constexpr):
    """The only sequential part: for each chunk in order, with S (BK, BV) in registers,

        Hc[chunk] = S                                     (the state entering the chunk)
        u         = U - W S                               (BT, BV), stored to Vn
        S         = e^{G_C} S + KG^T u                    (BK, BV)

    Only what the next chunk needs is on this path; o is computed afterwards for all chunks in
    parallel (_chunk_out_kernel). The chunk's tiles are small (W, KG and U in the input dtype)
    so the loads of the next chunk can be pipelined behind this one's matmuls.
    KG, W: (B, T, H, K); U, Vn: (B, T, H, V); S0, S: (B, H, K, V) fp32; Hc: (B*H, NT, K, V)
    in the matmul operand dtype. Grid (V blocks, B*H)."""
    i_v, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = (i_bh // H).to(tl.int64), i_bh % H
    NT = tl.cdiv(T, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    o_c = tl.arange(0, BT)
    m_k, m_v = o_k < K, o_v < V
    m_S = m_k[:, None] & m_v[None, :]
    p_S = o_k[:, None] * V + o_v[None, :]                                          # (BK, BV) in one (K, V)
    if HAS_INIT:
        b_S = tl.load(S0 + i_bh.to(tl.int64) * K * V + p_S, mask=m_S, other=0.).to(tl.float32)
    else:
        b_S = tl.zeros([BK, BV], dtype=tl.float32)
    for i_t in range(0, NT):
        o_t = i_t * BT + o_c
        m_t = o_t < T
        rows = (i_b * T + o_t) * H + i_h                                             # (BT,)
        row_l = (i_b * T + tl.minimum(i_t * BT + BT, T) - 1) * H + i_h              # last token of the chunk
        tl.store(Hc + (i_bh.to(tl.int64) * NT + i_t) * K * V + p_S, b_S.to(Hc.dtype.element_ty), mask=m_S)
        b_w = tl.load(W + rows[:, None] * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.)   # (BT, BK)
        b_u = tl.load(U + rows[:, None] * V + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0.)   # (BT, BV)
        b_v = b_u.to(tl.float32) - tl.dot(b_w.to(Hc.dtype.element_ty), b_S.to(Hc.dtype.element_ty),
                                          input_precision=PREC)
        b_v = b_v.to(Vn.dtype.element_ty)
        tl.store(Vn + rows[:, None] * V + o_v[None, :], b_v, mask=m_t[:, None] & m_v[None, :])
        # KG loaded as its transpose (BK, BT), the matmul's left operand
        b_kt = tl.load(KG + rows[None, :] * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
        if GATE == 2:
            b_S *= tl.exp2(tl.minimum(tl.load(G + row_l * K + o_k, mask=m_k, other=0.), 0.))[:, None]
        elif GATE == 1:
            b_S *= tl.exp2(tl.minimum(tl.load(G + row_l), 0.))
        b_S += tl.dot(b_kt.to(Vn.dtype.element_ty), b_v, input_precision=PREC)
    tl.store(S + i_bh.to(tl.int64) * K * V + p_S, b_S, mask=m_S)


@triton.jit(do_not_specialize=["T"])
def _chunk_out_kernel(q, G, Hc, Vn, P, o, scale, T,
                      H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                      BK: tl.constexpr, BV: tl.constexpr, GATE: tl.constexpr, PREC: tl.constexpr):
    """o of one chunk, from the state entering it and its delta writes:

        o = (scale q e^G) Hc[chunk] + P u                 (BT, BV)

    Grid (V blocks, chunks, B*H): every chunk at once."""
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = (i_bh // H).to(tl.int64), i_bh % H
    NT = tl.cdiv(T, BT)
    o_c = tl.arange(0, BT)
    o_t = i_t * BT + o_c
    o_v = i_v * BV + tl.arange(0, BV)
    m_t, m_v = o_t < T, o_v < V
    rows = (i_b * T + o_t) * H + i_h                                                 # (BT,)
    p_h = Hc + (i_bh.to(tl.int64) * NT + i_t) * K * V
    if GATE == 1:
        b_eg = tl.exp2(tl.minimum(tl.load(G + rows, mask=m_t, other=0.), 0.)) * scale     # (BT,)
    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m_k = o_k < K
        m = m_t[:, None] & m_k[None, :]
        b_q = tl.load(q + rows[:, None] * K + o_k[None, :], mask=m, other=0.).to(tl.float32)           # (BT, BK)
        if GATE == 2:
            b_q *= tl.exp2(tl.minimum(tl.load(G + rows[:, None] * K + o_k[None, :], mask=m, other=0.), 0.)) * scale
        elif GATE == 1:
            b_q *= b_eg[:, None]
        else:
            b_q *= scale
        b_h = tl.load(p_h + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0.)   # (BK, BV)
        b_o += tl.dot(b_q.to(Hc.dtype.element_ty), b_h, input_precision=PREC)
    b_p = tl.load(P + rows[:, None] * BT + o_c[None, :], mask=m_t[:, None], other=0.)                  # (BT, BT)
    b_u = tl.load(Vn + rows[:, None] * V + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0.)  # (BT, BV)
    b_o += tl.dot(b_p.to(Vn.dtype.element_ty), b_u, input_precision=PREC)
    tl.store(o + rows[:, None] * V + o_v[None, :], b_o.to(o.dtype.element_ty), mask=m_t[:, None] & m_v[None, :])


# --------------------------------------------------------------------------- launcher

_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _pow2(n: int, lo: int = 16) -> int:
    return max(lo, triton.next_power_of_2(n))


def _state_config(K: int, half: bool) -> tuple[int, int, int]:
    """(BV, num_warps, num_stages) of the sequential kernel: S is (BK, BV) fp32 in registers;
    a stage of its pipeline holds one chunk's W and KG tiles (BT x BK each) and U (BT x BV).
    The fastest measured on the H200 with the output kernel's tiles below (BENCHMARKS.md,
    "Tile choices")."""
    BK = _pow2(K)
    if half and BK <= 128:
        return 64, 4, 3
    return 32, 4, (2 if BK * (2 if half else 4) <= 512 else 1)


_CUMSUM = (64, 4)    # (columns a program, num_warps); the fastest measured (BENCHMARKS.md, "Tile choices")


def _cumsum(g, cfg=_CUMSUM):
    """Launches stage 1: the in-chunk cumsum of contiguous g (B, T, H) or (B, T, H, K), in fp32.
    cfg = (columns a program, num_warps)."""
    B, T = g.shape[:2]
    HD = math.prod(g.shape[2:])
    G = torch.empty(g.shape, device=g.device, dtype=torch.float32)
    BN = min(_pow2(HD, 1), cfg[0])
    _chunk_cumsum_kernel[(triton.cdiv(T, BT), triton.cdiv(HD, BN), B)](g, G, T, HD=HD, BT=BT, BN=BN, num_warps=cfg[1])
    return G


def _scores(q, k, G, beta, A, P, scale: float, gate: int, prec: str, opt: dict) -> None:
    """Launches stage 2 into A (B, T, H, BT) fp32 and P (B, T, H, BT): every entry of every row
    t < T is written (0 above the diagonal): one program per block below the diagonal, plus,
    for the diagonal blocks, one per token and group of heads (per-channel gates) or one per
    block (per-head and no gates)."""
    B, T, H, K = q.shape
    NT = triton.cdiv(T, BT)
    iBK, iW = opt["split_inter"]
    _scores_inter_kernel[(NT * NB * (NB - 1) // 2, B * H)](
        q, k, G, beta, A, P, scale, T, H=H, K=K, BT=BT, BC=BC, BK=min(_pow2(K), iBK), GATE=gate,
        PREC=prec, num_warps=iW)
    if gate == GATE_CHANNEL:
        tBH, tW = opt["diag_token"]
        _scores_diag_token_kernel[(B * T, triton.cdiv(H, tBH))](
            q, k, G, beta, A, P, scale, T, H=H, K=K, BT=BT, BC=BC, BK=_pow2(K), BH=tBH, num_warps=tW)
    else:
        dBK, dW = opt["split_diag"]
        _scores_diag_kernel[(NT * NB, B * H)](
            q, k, G, beta, A, P, scale, T, H=H, K=K, BT=BT, BC=BC, BK=min(_pow2(K), dBK),
            GATE=gate, PREC=prec, num_warps=dW)


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
    opt = dict(cumsum=_CUMSUM, inter=q.dtype, x=xdt, split_inter=(32, 1), split_diag=(32, 1), diag_token=(4, 2),
               solve=1, apply=4, dot=q.dtype if q.is_cuda else torch.float32,
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
    NT = triton.cdiv(T, BT)
    BK = min(_pow2(K), 64)
    BV = min(_pow2(V), 64)

    # 1. G = in-chunk cumsum of g (fp32)
    if gate != GATE_NONE:
        g = g.contiguous()
        G = _cumsum(g, opt["cumsum"])
    else:
        G = q  # never read

    # 2. A (strictly lower, beta folded in) and P (inclusive lower, scale folded in)
    A = torch.empty(B, T, H, BT, device=dev, dtype=torch.float32)
    P = torch.empty(B, T, H, BT, device=dev, dtype=opt["inter"])
    _scores(q, k, G, beta, A, P, scale, gate, prec, opt)

    # 3. X = (I + A)^-1
    X = torch.empty(B, T, H, BT, device=dev, dtype=opt["x"])
    _chunk_solve_kernel[(NT, B * H)](A, X, T, H=H, BT=BT, BC=BC, PREC=prec, num_warps=opt["solve"])

    # 4. W = X beta k e^G, U = X beta v, KG = k e^{G_C - G}
    W = torch.empty(B, T, H, K, device=dev, dtype=opt["inter"])
    U = torch.empty(B, T, H, V, device=dev, dtype=opt["inter"])
    KG = torch.empty(B, T, H, K, device=dev, dtype=opt["inter"]) if gate != GATE_NONE else k
    _chunk_apply_kernel[(NT, B * H)](k, v, G, beta, X, W, U, KG, T, H=H, K=K, V=V, BT=BT, BC=BC,
                                     BK=BK, BV=BV, GATE=gate, PREC=prec, num_warps=opt["apply"])

    # 5. the chunks in order: the state entering each chunk, the delta writes u, the final state
    Hc = torch.empty(B * H, NT, K, V, device=dev, dtype=dot)
    Vn = torch.empty(B, T, H, V, device=dev, dtype=dot)
    sBV, sW, sS = opt["state"]
    sBV = min(_pow2(V), sBV)
    _chunk_state_kernel[(triton.cdiv(V, sBV), B * H)](
        KG, G, W, U, S0, S, Hc, Vn, T, H=H, K=K, V=V, BT=BT, BK=_pow2(K), BV=sBV, GATE=gate,
        HAS_INIT=initial_state is not None, PREC=prec, num_warps=sW, num_stages=sS)

    # 6. o for every chunk at once
    o = torch.empty(B, T, H, V, device=dev, dtype=q.dtype)
    oBK, oBV, oW, oS = opt["out"]
    oBV = min(_pow2(V), oBV)
    _chunk_out_kernel[(triton.cdiv(V, oBV), NT, B * H)](
        q, G, Hc, Vn, P, o, scale, T, H=H, K=K, V=V, BT=BT, BK=min(_pow2(K), oBK), BV=oBV,
        GATE=gate, PREC=prec, num_warps=oW, num_stages=oS)
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
