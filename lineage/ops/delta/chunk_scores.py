"""Stages 1 and 2 of the chunked delta rule (see ``chunk_delta``): the in-chunk cumulative
log decay G, and the scores A (k against k, beta folded in) and P (q against k, scale folded
in) of every chunk, each decay exponentiated only as a difference <= 0."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .chunk_layout import BC, BT, GATE_CHANNEL, LOG2E, NB, pow2


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


# --------------------------------------------------------------------------- launchers

CUMSUM = (64, 4)    # (columns a program, num_warps); the fastest measured (BENCHMARKS.md, "Tile choices")


def cumsum(g, cfg=CUMSUM):
    """Launches stage 1: the in-chunk cumsum of contiguous g (B, T, H) or (B, T, H, K), in fp32.
    cfg = (columns a program, num_warps)."""
    B, T = g.shape[:2]
    HD = math.prod(g.shape[2:])
    G = torch.empty(g.shape, device=g.device, dtype=torch.float32)
    BN = min(pow2(HD, 1), cfg[0])
    _chunk_cumsum_kernel[(triton.cdiv(T, BT), triton.cdiv(HD, BN), B)](g, G, T, HD=HD, BT=BT, BN=BN, num_warps=cfg[1])
    return G


def scores(q, k, G, beta, A, P, scale: float, gate: int, prec: str, opt: dict) -> None:
    """Launches stage 2 into A (B, T, H, BT) fp32 and P (B, T, H, BT): every entry of every row
    t < T is written (0 above the diagonal): one program per block below the diagonal, plus,
    for the diagonal blocks, one per token and group of heads (per-channel gates) or one per
    block (per-head and no gates)."""
    B, T, H, K = q.shape
    NT = triton.cdiv(T, BT)
    iBK, iW = opt["split_inter"]
    _scores_inter_kernel[(NT * NB * (NB - 1) // 2, B * H)](
        q, k, G, beta, A, P, scale, T, H=H, K=K, BT=BT, BC=BC, BK=min(pow2(K), iBK), GATE=gate,
        PREC=prec, num_warps=iW)
    if gate == GATE_CHANNEL:
        tBH, tW = opt["diag_token"]
        _scores_diag_token_kernel[(B * T, triton.cdiv(H, tBH))](
            q, k, G, beta, A, P, scale, T, H=H, K=K, BT=BT, BC=BC, BK=pow2(K), BH=tBH, num_warps=tW)
    else:
        dBK, dW = opt["split_diag"]
        _scores_diag_kernel[(NT * NB, B * H)](
            q, k, G, beta, A, P, scale, T, H=H, K=K, BT=BT, BC=BC, BK=min(pow2(K), dBK),
            GATE=gate, PREC=prec, num_warps=dW)
