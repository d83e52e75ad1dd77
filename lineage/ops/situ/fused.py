"""Fused SiTU gated unit of K3's experts, in Triton. Forward only: there is no backward.

    x = gate | up  (..., 2F)   ->   beta tanh(gate / beta) sigmoid(gate) * up'   (..., F)
    up' = up, or linear_beta tanh(up / linear_beta) when linear_beta is given.

One read of x, one write of the output; the math runs in fp32 and is stored in x's dtype.
The kernel is bound by memory, so it spends few special-function operations per element:
tanh(z) = sign(z) (1 - t) / (1 + t) with t = e^{-2|z|} <= 1 (never overflows), sigmoid(a) =
1 / (1 + e^{-a}), and all the fractions share one division. Near z = 0, where 1 - t cancels,
the numerator comes from the series tanh(z) = z - z^3/3 + 2 z^5/15 (error < 1e-7 for |z| < 0.1).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _tanh_parts(z):
    """tanh(z) = n / d with d = 1 + e^{-2|z|} in [1, 2]. Returns (n, d)."""
    b_abs = tl.abs(z)
    b_t = tl.exp(-2.0 * b_abs)
    b_z2 = z * z
    b_series = b_abs * (1.0 - b_z2 * (0.3333333333333333 - b_z2 * 0.13333333333333333))
    b_n = tl.where(b_abs < 0.1, b_series * (1.0 + b_t), 1.0 - b_t)
    return tl.where(z < 0, -b_n, b_n), 1.0 + b_t


@triton.jit
def _situ_glu_kernel(x, y, F, beta, inv_beta, linear_beta, inv_linear_beta,
                     HAS_LIN: tl.constexpr, BLOCK: tl.constexpr):
    """x: (M, 2F) rows of gate | up; y: (M, F). One row and BLOCK columns per program."""
    i_m, i_f = tl.program_id(0), tl.program_id(1)
    o_f = i_f * BLOCK + tl.arange(0, BLOCK)                         # (BLOCK,)
    m_f = o_f < F
    p_x = x + i_m.to(tl.int64) * 2 * F + o_f
    b_a = tl.load(p_x, mask=m_f, other=0.).to(tl.float32)         # gate
    b_b = tl.load(p_x + F, mask=m_f, other=0.).to(tl.float32)     # up
    b_n, b_d = _tanh_parts(b_a * inv_beta)
    b_num = beta * b_n
    b_den = b_d * (1.0 + tl.exp(-b_a))          # inf for very negative gates: the result is 0
    if HAS_LIN:
        b_nu, b_du = _tanh_parts(b_b * inv_linear_beta)
        b_num *= linear_beta * b_nu
        b_den *= b_du
    else:
        b_num *= b_b
    tl.store(y + i_m.to(tl.int64) * F + o_f, (b_num / b_den).to(y.dtype.element_ty), mask=m_f)


def situ_glu(x, beta=4.0, linear_beta=None, *, config=None):
    """Fused ``situ(gate) * up`` for x = (..., 2F) = gate | up, returns (..., F) in x's dtype.
    Forward only (no backward). With linear_beta, up is first soft-clamped to
    ``linear_beta * tanh(up / linear_beta)``. ``config`` = (BLOCK, num_warps) overrides the
    tile choice (for benchmarks)."""
    if x.dim() < 1 or x.shape[-1] % 2:
        raise ValueError(f"situ_glu needs an even last dimension (gate | up); got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"situ_glu: x must be float32, bfloat16 or float16; got {x.dtype}")
    if not beta > 0 or (linear_beta is not None and not linear_beta > 0):
        raise ValueError(f"situ_glu: beta and linear_beta must be positive; got {beta}, {linear_beta}")
    F = x.shape[-1] // 2
    x = x.contiguous()
    y = x.new_empty(*x.shape[:-1], F)
    M = x.numel() // (2 * F) if F else 0
    if M == 0:
        return y
    # the fastest tile measured on the H200 (BENCHMARKS.md, "Tile choices")
    BLOCK, warps = config or (min(1024, max(128, triton.next_power_of_2(F))), 0)
    warps = warps or max(1, min(4, BLOCK // 256))
    lb = 1.0 if linear_beta is None else float(linear_beta)
    _situ_glu_kernel[(M, triton.cdiv(F, BLOCK))](
        x, y, F, float(beta), 1.0 / float(beta), lb, 1.0 / lb,
        HAS_LIN=linear_beta is not None, BLOCK=BLOCK, num_warps=warps)
    return y
