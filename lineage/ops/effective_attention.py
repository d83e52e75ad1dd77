"""The attention a recurrent state implements. With the keys, queries, gates and betas fixed, every
row of the lineage reads a sum over earlier values: o_t = sum_{s <= t} A[t, s] v_s, plus what an
initial state S0 gives. A is causal, does not depend on v or S0, and is what a KV cache would have
to hold weights for to give the same read-out: GPT-2's softmax rows on the recurrent mixers' terms.

Per family, with M_t the state's transition at step t (S_t = M_t S_{t-1} + c_t k_t^T v_t):

    linear attention   M_t = I                              c_t = 1   (normalised: A / (q_t . z_t))
    delta rule         M_t = (I - beta_t k_t^T k_t) diag(alpha_t)   c_t = beta_t
    SSD (Mamba-2)      M_t = alpha_t I                      c_t = dt_t

A[t, s] = c_s q_t M_t ... M_{s+1} k_s^T. For the delta rule the product is where a later write
erased an older value: A carries negative weight there. It is computed in closed form, not by
that product: the sequence as one chunk of the UT form (delta/naive.py's `_chunked`), where the
read-out is P (I + A_kk)^-1 (beta v - beta (k e^G) S0) + (q e^G) S0, so A = P (I + A_kk)^-1 diag(beta)
and the initial state's part is (q e^G - P (I + A_kk)^-1 diag(beta) (k e^G)) S0.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .delta.decayed_scores import SUB_CHUNK, _decayed_scores


def linear(q: Tensor, k: Tensor, scale: float, normalize: bool, S0: Tensor, z0: Tensor) -> tuple[Tensor, Tensor]:
    """q, k (B, T, H, K); S0 (B, H, K, V); z0 (B, H, K) -> A (B, H, T, T), the state's part (B, T, H, V)."""
    q, k = q.transpose(1, 2) * scale, k.transpose(1, 2)                     # (B, H, T, K)
    T = q.shape[2]
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    A = (q @ k.transpose(-1, -2)).masked_fill(~causal, 0)                   # (B, H, T, T)
    part = q @ S0                                                           # (B, H, T, V)
    if normalize:
        den = q @ z0.unsqueeze(-1) + A.sum(-1, keepdim=True)                # (B, H, T, 1): q_t . z_t
        A, part = A / den, part / den
    return A, part.transpose(1, 2)


def delta(q: Tensor, k: Tensor, g: Tensor | None, beta: Tensor, scale: float, S0: Tensor) -> tuple[Tensor, Tensor]:
    """q, k (B, T, H, K); g None, (B, T, H) or (B, T, H, K); beta (B, T, H); S0 (B, H, K, V)
    -> A (B, H, T, T), the state's part (B, T, H, V)."""
    B, T, H, K = q.shape
    pad = (-T) % SUB_CHUNK      # padded tokens neither read, decay nor write
    q, k, beta = (F.pad(x, (0, 0) * (x.dim() - 2) + (0, pad)) for x in (q, k, beta))
    q, k = q.transpose(1, 2) * scale, k.transpose(1, 2)                     # (B, H, C, K), C = T + pad
    beta = beta.transpose(1, 2)                                             # (B, H, C)
    if g is None:
        G = q.new_zeros(*q.shape[:3], 1)
    else:
        g = F.pad(g, (0, 0) * (g.dim() - 2) + (0, pad))
        G = (g.transpose(1, 2) if g.dim() == 4 else g.transpose(1, 2).unsqueeze(-1)).cumsum(2)   # (B, H, C, 1 or K)
    C = q.shape[2]
    strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)
    kk, qk = _decayed_scores(q, k, G, SUB_CHUNK)                            # (B, H, C, C): s <= r valid
    L = torch.eye(C, dtype=q.dtype, device=q.device) + (beta[..., None] * kk).masked_fill(~strict, 0)
    P = qk.masked_fill(~(strict | torch.eye(C, dtype=torch.bool, device=q.device)), 0)
    # P L^-1 = X with X L = P: solve L^T X^T = P^T (upper triangular, unit diagonal)
    X = torch.linalg.solve_triangular(L.transpose(-1, -2), P.transpose(-1, -2), upper=True,
                                      unitriangular=True).transpose(-1, -2)             # (B, H, C, C)
    A = X * beta[..., None, :]                                              # (B, H, C, C)
    eG = G.exp()
    part = (q * eG - A @ (k * eG)) @ S0                                     # (B, H, C, V)
    return A[..., :T, :T], part[:, :, :T].transpose(1, 2)


def ssd(u_scale: Tensor, g: Tensor, B: Tensor, C: Tensor, S0: Tensor) -> tuple[Tensor, Tensor]:
    """u_scale = dt (b, T, H); g (b, T, H); B, C (b, T, H, N) (groups expanded); S0 (b, H, N, P)
    -> A (b, H, T, T) over x, the state's part (b, T, H, P)."""
    T = g.shape[1]
    G = g.transpose(1, 2).cumsum(-1)                                        # (b, H, T)
    causal = torch.ones(T, T, dtype=torch.bool, device=g.device).tril()
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()   # (b, H, T, T)
    Bh, Ch = B.transpose(1, 2), C.transpose(1, 2)                           # (b, H, T, N)
    A = (Ch @ Bh.transpose(-1, -2)) * decay * u_scale.transpose(1, 2)[..., None, :]
    part = (Ch * G[..., None].exp()) @ S0                                   # (b, H, T, P)
    return A, part.transpose(1, 2)
