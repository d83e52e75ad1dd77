"""The routed experts of one decoding token, in Triton: each chosen expert's matrices are read
where they lie in the stacked (E, ...) weights, never copied. Forward only.

    h_j = act(W_in[e_j] x)                   W_in (E, 2F, L) = gate | up,   h_j (F,)
    y   = sum_j w_j W_out[e_j] h_j           W_out (E, L, F),               y (L,)

A decoding step is bound by reading weights: gathering the k experts first (index_select)
writes and reads them once more, 38% of a Kimi Linear step's GPU time. Two launches: the
first computes every (token, choice)'s F hidden values in tiles of F, the second every output
tile, summing the k choices. Accumulation is in fp32; the hidden values are kept in fp32 (the
reference rounds them to the weights' dtype, so bf16 results differ at bf16's resolution).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..situ.fused import _tanh_parts


@triton.jit
def _experts_in_kernel(x, w_in, idx, h, L, F, K_TOP, beta, inv_beta, linear_beta, inv_linear_beta,
                       SITU: tl.constexpr, HAS_LIN: tl.constexpr, BLOCK_F: tl.constexpr, BLOCK_L: tl.constexpr):
    """x (B, L); w_in (E, 2F, L); idx (B, K_TOP); h (B, K_TOP, F) fp32. Program: one choice, BLOCK_F rows."""
    i_bk, i_f = tl.program_id(0), tl.program_id(1)
    i_b = i_bk // K_TOP
    e = tl.load(idx + i_bk).to(tl.int64)
    o_f = i_f * BLOCK_F + tl.arange(0, BLOCK_F)
    m_f = o_f < F
    p_gate = w_in + e * 2 * F * L + o_f[:, None].to(tl.int64) * L          # (BLOCK_F, 1) row starts
    p_up = p_gate + F * L
    acc_g = tl.zeros([BLOCK_F], dtype=tl.float32)
    acc_u = tl.zeros([BLOCK_F], dtype=tl.float32)
    for l0 in range(0, L, BLOCK_L):
        o_l = l0 + tl.arange(0, BLOCK_L)
        m_l = o_l < L
        b_x = tl.load(x + i_b.to(tl.int64) * L + o_l, mask=m_l, other=0.).to(tl.float32)       # (BLOCK_L,)
        m = m_f[:, None] & m_l[None, :]
        b_g = tl.load(p_gate + o_l[None, :], mask=m, other=0.).to(tl.float32)                 # (BLOCK_F, BLOCK_L)
        b_u = tl.load(p_up + o_l[None, :], mask=m, other=0.).to(tl.float32)
        acc_g += tl.sum(b_g * b_x[None, :], axis=1)
        acc_u += tl.sum(b_u * b_x[None, :], axis=1)
    if SITU:        # beta tanh(g / beta) sigmoid(g) * up', as situ/fused.py
        b_n, b_d = _tanh_parts(acc_g * inv_beta)
        b_num = beta * b_n
        b_den = b_d * (1.0 + tl.exp(-acc_g))
        if HAS_LIN:
            b_nu, b_du = _tanh_parts(acc_u * inv_linear_beta)
            b_num *= linear_beta * b_nu
            b_den *= b_du
        else:
            b_num *= acc_u
        b_h = b_num / b_den
    else:           # silu(g) * up
        b_h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    tl.store(h + i_bk.to(tl.int64) * F + o_f, b_h, mask=m_f)


@triton.jit
def _experts_out_kernel(h, w_out, idx, wts, y, L, F, K_TOP, BLOCK_L: tl.constexpr, BLOCK_F: tl.constexpr):
    """h (B, K_TOP, F) fp32; w_out (E, L, F); wts (B, K_TOP); y (B, L). Program: one token, BLOCK_L outputs."""
    i_b, i_l = tl.program_id(0), tl.program_id(1)
    o_l = i_l * BLOCK_L + tl.arange(0, BLOCK_L)
    m_l = o_l < L
    acc = tl.zeros([BLOCK_L], dtype=tl.float32)
    for j in range(0, K_TOP):
        i_bk = i_b.to(tl.int64) * K_TOP + j
        e = tl.load(idx + i_bk).to(tl.int64)
        w = tl.load(wts + i_bk).to(tl.float32)
        p_w = w_out + e * L * F + o_l[:, None].to(tl.int64) * F             # (BLOCK_L, 1) row starts
        part = tl.zeros([BLOCK_L], dtype=tl.float32)
        for f0 in range(0, F, BLOCK_F):
            o_f = f0 + tl.arange(0, BLOCK_F)
            m_f = o_f < F
            b_h = tl.load(h + i_bk * F + o_f, mask=m_f, other=0.)                              # (BLOCK_F,)
            b_w = tl.load(p_w + o_f[None, :], mask=m_l[:, None] & m_f[None, :], other=0.).to(tl.float32)
            part += tl.sum(b_w * b_h[None, :], axis=1)
        acc += w * part
    tl.store(y + i_b.to(tl.int64) * L + o_l, acc.to(y.dtype.element_ty), mask=m_l)


def moe_experts(x, w_in, w_out, idx, weights, act="silu", beta=4.0, linear_beta=None):
    """x (B, L); w_in (E, 2F, L) = gate | up; w_out (E, L, F); idx (B, k) chosen experts; weights
    (B, k) -> (B, L) in x's dtype: sum_j weights[:, j] W_out[idx_j] act(W_in[idx_j] x). act is
    'silu' (silu(gate) * up) or 'situ' (situ/fused.py's). Indices are not checked against E."""
    if act not in ("silu", "situ"):
        raise ValueError(f"moe_experts: act must be 'silu' or 'situ'; got {act!r}")
    E, F2, L = w_in.shape
    F = F2 // 2
    if F2 % 2 or w_out.shape != (E, L, F) or x.shape[-1] != L or idx.shape != weights.shape or idx.shape[0] != x.shape[0]:
        raise ValueError(f"moe_experts: shapes do not fit: x {tuple(x.shape)}, w_in {tuple(w_in.shape)}, "
                         f"w_out {tuple(w_out.shape)}, idx {tuple(idx.shape)}, weights {tuple(weights.shape)}")
    B, k = idx.shape
    x, w_in, w_out = x.contiguous(), w_in.contiguous(), w_out.contiguous()
    idx, weights = idx.contiguous(), weights.contiguous()
    h = torch.empty(B, k, F, device=x.device, dtype=torch.float32)
    y = torch.empty(B, L, device=x.device, dtype=x.dtype)
    if B == 0 or k == 0:
        return y.zero_()
    lb = 1.0 if linear_beta is None else float(linear_beta)
    BLOCK_F, BLOCK_L = 16, 256
    _experts_in_kernel[(B * k, triton.cdiv(F, BLOCK_F))](
        x, w_in, idx, h, L, F, k, float(beta), 1.0 / float(beta), lb, 1.0 / lb,
        SITU=act == "situ", HAS_LIN=linear_beta is not None, BLOCK_F=BLOCK_F, BLOCK_L=BLOCK_L, num_warps=4)
    BLOCK_L2, BLOCK_F2 = 8, 256
    _experts_out_kernel[(B, triton.cdiv(L, BLOCK_L2))](
        h, w_out, idx, weights, y, L, F, k, BLOCK_L=BLOCK_L2, BLOCK_F=BLOCK_F2, num_warps=4)
    return y
