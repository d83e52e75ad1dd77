"""Stages 5 and 6 of the chunked delta rule (see ``chunk_delta``): the chunks in order,
carrying the state (the state entering each chunk, the delta writes u, the final state), then
the output of every chunk at once."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .chunk_layout import BT, pow2


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


# --------------------------------------------------------------------------- launchers

def state_pass(KG, G, W, U, S0, S, gate: int, has_init: bool, prec: str, dtype, cfg):
    """Walks the chunks, updating S (B, H, K, V) fp32 in place from S0; returns the states
    entering each chunk Hc (B*H, chunks, K, V) and u = U - W S (B, T, H, V), both in dtype.
    cfg = (BV, num_warps, num_stages)."""
    B, T, H, K = W.shape
    V = U.shape[-1]
    Hc = torch.empty(B * H, triton.cdiv(T, BT), K, V, device=W.device, dtype=dtype)
    Vn = torch.empty(B, T, H, V, device=W.device, dtype=dtype)
    sBV, sW, sS = cfg
    sBV = min(pow2(V), sBV)
    _chunk_state_kernel[(triton.cdiv(V, sBV), B * H)](
        KG, G, W, U, S0, S, Hc, Vn, T, H=H, K=K, V=V, BT=BT, BK=pow2(K), BV=sBV, GATE=gate,
        HAS_INIT=has_init, PREC=prec, num_warps=sW, num_stages=sS)
    return Hc, Vn


def output(q, G, Hc, Vn, P, scale: float, gate: int, prec: str, cfg):
    """o (B, T, H, V) in q's dtype = (scale q e^G) S0 + P u, every chunk at once.
    cfg = (BK, BV, num_warps, num_stages)."""
    B, T, H, K = q.shape
    V = Vn.shape[-1]
    o = torch.empty(B, T, H, V, device=q.device, dtype=q.dtype)
    oBK, oBV, oW, oS = cfg
    oBV = min(pow2(V), oBV)
    _chunk_out_kernel[(triton.cdiv(V, oBV), triton.cdiv(T, BT), B * H)](
        q, G, Hc, Vn, P, o, scale, T, H=H, K=K, V=V, BT=BT, BK=min(pow2(K), oBK), BV=oBV,
        GATE=gate, PREC=prec, num_warps=oW, num_stages=oS)
    return o
