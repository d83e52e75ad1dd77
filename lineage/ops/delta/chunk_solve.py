"""Stages 3 and 4 of the chunked delta rule (see ``chunk_delta``): X = (I + A)^-1 by
16 x 16 blocks, then W = X (beta k e^G), U = X (beta v) and the gated keys KG = k e^{G_C - G}
of the state update."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .chunk_layout import BC, BT, GATE_NONE, pow2


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


# --------------------------------------------------------------------------- launchers

def solve(A, x_dtype, prec: str, warps: int):
    """X = (I + A)^-1 (B, T, H, BT) in x_dtype, for A (B, T, H, BT) strictly lower by chunk."""
    B, T, H, _ = A.shape
    X = torch.empty(B, T, H, BT, device=A.device, dtype=x_dtype)
    _chunk_solve_kernel[(triton.cdiv(T, BT), B * H)](A, X, T, H=H, BT=BT, BC=BC, PREC=prec, num_warps=warps)
    return X


def apply(k, v, G, beta, X, gate: int, prec: str, dtype, warps: int):
    """(W, U, KG) in dtype: W = X beta k e^G, U = X beta v, KG = k e^{G_C - G} (k itself when
    there is no gate)."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    W = torch.empty(B, T, H, K, device=k.device, dtype=dtype)
    U = torch.empty(B, T, H, V, device=k.device, dtype=dtype)
    KG = torch.empty(B, T, H, K, device=k.device, dtype=dtype) if gate != GATE_NONE else k
    _chunk_apply_kernel[(triton.cdiv(T, BT), B * H)](k, v, G, beta, X, W, U, KG, T, H=H, K=K, V=V, BT=BT, BC=BC,
                                                     BK=min(pow2(K), 64), BV=min(pow2(V), 64), GATE=gate,
                                                     PREC=prec, num_warps=warps)
    return W, U, KG
