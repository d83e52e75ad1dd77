"""The delta-rule family in readable PyTorch: DeltaNet, Gated DeltaNet and KDA, the references
the modules and this folder's Triton kernels (chunk.py, fused_recurrent.py) are checked against.
Conventions (shared with flash-linear-attention, see FACTS.md section 1):

- q, k: (B, T, H, K); v: (B, T, H, V); per-head state S: (B, H, K, V), read as ``k @ S``.
- q is multiplied by ``scale`` (default ``K ** -0.5``).
- gates are log decays ``g <= 0``; the decay factor is ``alpha = exp(g)``.
  Gated DeltaNet: g is (B, T, H); KDA: g is (B, T, H, K) (one decay per key channel).
- ``beta`` is (B, T, H), already in (0, 1), or in (0, 2) where a layer allows negative eigenvalues
  (OLMo-Hybrid): nothing here assumes beta <= 1.
- one step: decay, then the delta write, then read:
  ``S = diag(alpha) S;  S = S + k^T beta (v - k S);  o = q S``  (output includes token t).

``chunk_size=None`` runs the token recurrence; an integer runs the chunked form, which resolves
the delta corrections inside a chunk with one unit-lower-triangular solve (the UT / WY form)
and carries the state between chunks. Any T works: the tail is padded with tokens that
neither decay nor write. Everything works in float32 and float64 on the CPU.

With ``attention=True`` each also returns the attention its state implements, A (B, H, T, T)
(causal, independent of v and the initial state), and the part of o the initial state gives
(B, T, H, V): o = A v + that part (see ``lineage.ops.effective_attention``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..checks import check_gates, check_qkv, initial_state_or_zeros
from .decayed_scores import SUB_CHUNK, _decayed_scores



def _recurrent(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor,
               scale: float, S: Tensor) -> tuple[Tensor, Tensor]:
    """Token-by-token recurrence. g is None, (B, T, H) or (B, T, H, K)."""
    T = q.shape[1]
    o = q.new_empty(*q.shape[:3], v.shape[-1])
    for t in range(T):
        if g is not None:
            alpha = g[:, t].exp()                           # (B, H) or (B, H, K)
            S = S * (alpha[..., None, None] if alpha.dim() == 2 else alpha[..., None])
        k_t = k[:, t].unsqueeze(-2)                         # (B, H, 1, K)
        u = beta[:, t, :, None, None] * (v[:, t].unsqueeze(-2) - k_t @ S)   # (B, H, 1, V)
        S = S + k_t.transpose(-1, -2) @ u                   # (B, H, K, V)
        o[:, t] = (q[:, t].unsqueeze(-2) * scale @ S).squeeze(-2)
    return o, S


def _chunked(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None, beta: Tensor,
             scale: float, S: Tensor, C: int) -> tuple[Tensor, Tensor]:
    """Chunked form. Inside a chunk of C tokens, with G the cumulative log decay from the chunk
    start (G_r = g_1 + ... + g_r) and S0 the state entering the chunk, the delta writes
    u_r = beta_r (v_r - k_r S_r^decayed) satisfy a unit-lower-triangular system

        (I + A) u = beta v - beta (k * e^G) S0,   A[r, s] = beta_r sum_i k_r[i] k_s[i] e^(G_r[i] - G_s[i])  (s < r)

    so u = U - W S0 with U = (I + A)^-1 beta v and W = (I + A)^-1 beta (k * e^G). Then

        o_r   = (q_r * e^G_r) S0 + sum_{s <= r} [sum_i q_r[i] k_s[i] e^(G_r[i] - G_s[i])] u_s
        S_end = e^G_C * S0 + sum_s (k_s * e^(G_C - G_s))^T u_s.

    Decays enter only as differences G_r - G_s with s <= r, which are <= 0, so nothing
    overflows at any gate strength (see `_decayed_scores` for how that stays cheap).
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    pad = (-T) % C
    if pad:  # padded tokens have k = 0, beta = 0 and g = 0: they neither decay nor write
        q, k, v, beta = (F.pad(x, (0, 0) * (x.dim() - 2) + (0, pad)) for x in (q, k, v, beta))
        if g is not None:
            g = F.pad(g, (0, 0) * (g.dim() - 2) + (0, pad))
    N = (T + pad) // C
    # (B, T, H, X) -> (B, H, N, C, X)
    q, k, v = (x.reshape(B, N, C, H, -1).permute(0, 3, 1, 2, 4) for x in (q, k, v))
    beta = beta.reshape(B, N, C, H).permute(0, 3, 1, 2)     # (B, H, N, C)
    per_channel = g is not None and g.dim() == 4
    if g is None:
        G = q.new_zeros(B, H, N, C, 1)
    elif per_channel:
        G = g.reshape(B, N, C, H, K).permute(0, 3, 1, 2, 4).cumsum(3)            # (B, H, N, C, K)
    else:
        G = g.reshape(B, N, C, H).permute(0, 3, 1, 2).cumsum(3).unsqueeze(-1)    # (B, H, N, C, 1)
    q = q * scale
    o = q.new_empty(B, H, N, C, V)
    # take chunks in groups that keep the largest temporary (B, H, n, C, C) or (B, H, n, 16, 16, K)
    # near 16M elements: a long prompt does not need gigabytes, short ones run in one go
    group = max(1, (1 << 24) // (B * H * C * max(C, 16 * K)))
    for n0 in range(0, N, group):
        sl = slice(n0, n0 + group)
        U, W, P, qg, k_end, eG_end = _intra_chunk(q[:, :, sl], k[:, :, sl], v[:, :, sl],
                                                  beta[:, :, sl], G[:, :, sl])
        for n in range(U.shape[2]):                          # only the state hand-off is sequential
            u = U[:, :, n] - W[:, :, n] @ S                  # (B, H, C, V)
            o[:, :, n0 + n] = qg[:, :, n] @ S + P[:, :, n] @ u
            S = eG_end[:, :, n] * S + k_end[:, :, n].transpose(-1, -2) @ u   # (B, H, K, V)
    o = o.permute(0, 2, 3, 1, 4).reshape(B, N * C, H, V)[:, :T]   # (B, T, H, V)
    return o, S


def _intra_chunk(q, k, v, beta, G):
    """Everything inside a group of chunks that does not depend on the incoming state.
    Shapes: q, k (B, H, n, C, K); v (B, H, n, C, V); beta (B, H, n, C); G (B, H, n, C, 1 or K)."""
    C, V = q.shape[3], v.shape[-1]
    sub = SUB_CHUNK if C % SUB_CHUNK == 0 else C
    strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)
    incl = strict | torch.eye(C, dtype=torch.bool, device=q.device)
    kk, qk = _decayed_scores(q, k, G, sub)
    A = (beta[..., None] * kk).masked_fill(~strict, 0)      # strictly lower
    P = qk.masked_fill(~incl, 0)                             # (B, H, n, C, C)
    L = torch.eye(C, dtype=q.dtype, device=q.device) + A     # unit lower triangular
    eG = G.exp()                                             # (B, H, n, C, 1 or K)
    rhs = torch.cat([beta[..., None] * v, beta[..., None] * k * eG], dim=-1)   # (B, H, n, C, V + K)
    sol = torch.linalg.solve_triangular(L, rhs, upper=False, unitriangular=True)
    U, W = sol[..., :V], sol[..., V:]                        # (B, H, n, C, V), (B, H, n, C, K)
    qg = q * eG                                              # (B, H, n, C, K)
    k_end = k * (G[..., -1:, :] - G).exp()                  # (B, H, n, C, K): decay from s to chunk end
    eG_end = eG[..., -1, :].unsqueeze(-1)                    # (B, H, n, 1 or K, 1): row scale of S0
    return U, W, P, qg, k_end, eG_end


def _delta_family(q, k, v, g, beta, scale, initial_state, chunk_size, per_channel, attention=False):
    B, T, H, K, V = check_qkv(q, k, v)
    check_gates(q, g, beta, per_channel)
    scale = K ** -0.5 if scale is None else scale
    S = initial_state_or_zeros(initial_state, B, H, K, V, q)
    if attention:       # the read-out as the effective attention's (effective_attention.py)
        from ..effective_attention import delta
        return (*_delta_family(q, k, v, g, beta, scale, S, chunk_size, per_channel), *delta(q, k, g, beta, scale, S))
    if chunk_size is None:
        return _recurrent(q, k, v, g, beta, scale, S)
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be a positive integer or None; got {chunk_size}")
    if T == 0:
        return q.new_empty(B, 0, H, V), S
    return _chunked(q, k, v, g, beta, scale, S, int(chunk_size))


def delta_rule(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, *, scale: float | None = None,
               initial_state: Tensor | None = None, chunk_size: int | None = None, attention: bool = False):
    """DeltaNet: ``S = S + k^T beta (v - k S)``, ``o = q S``. Returns o (B, T, H, V), S (B, H, K, V)."""
    return _delta_family(q, k, v, None, beta, scale, initial_state, chunk_size, False, attention)


def gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, *,
                     scale: float | None = None, initial_state: Tensor | None = None,
                     chunk_size: int | None = None, attention: bool = False):
    """Gated DeltaNet: one log decay per head, g (B, T, H); decay the whole state, then the delta write."""
    return _delta_family(q, k, v, g, beta, scale, initial_state, chunk_size, False, attention)


def kda(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, *, scale: float | None = None,
        initial_state: Tensor | None = None, chunk_size: int | None = None, attention: bool = False):
    """Kimi Delta Attention: one log decay per key channel, g (B, T, H, K); row i of S is scaled
    by exp(g[i]) before the delta write."""
    return _delta_family(q, k, v, g, beta, scale, initial_state, chunk_size, True, attention)
