"""Readable reference implementations of every memory mechanism in the lineage.

These are the functions the app, the modules and the Triton kernels are checked against.
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

``ssd`` is Mamba-2's decayed sum, the contrast to the delta rule: the state only fades and adds,
``S = alpha S + B^T (dt x)``, ``y = C S + D x``, with the same state layout (K = the width N of
B and C, V = the head's channels P) and the same two forms.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "linear_attention",
    "delta_rule",
    "gated_delta_rule",
    "kda",
    "ssd",
    "situ",
    "situ_glu",
    "attn_res",
]


# ----------------------------------------------------------------------------- checks

def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> tuple[int, int, int, int, int]:
    if q.dim() != 4 or k.shape != q.shape:
        raise ValueError(f"q and k must both be (B, T, H, K); got {tuple(q.shape)} and {tuple(k.shape)}")
    if v.dim() != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"v must be (B, T, H, V) matching q's (B, T, H); got {tuple(v.shape)}")
    B, T, H, K = q.shape
    return B, T, H, K, v.shape[-1]


def _check_gates(q: Tensor, g: Tensor | None, beta: Tensor, per_channel: bool) -> None:
    B, T, H, K = q.shape
    if beta.shape != (B, T, H):
        raise ValueError(f"beta must be (B, T, H) = {(B, T, H)}; got {tuple(beta.shape)}")
    if g is not None:
        want = (B, T, H, K) if per_channel else (B, T, H)
        if g.shape != want:
            raise ValueError(f"g must be {want}; got {tuple(g.shape)}")


def _initial(initial_state: Tensor | None, B: int, H: int, K: int, V: int, ref: Tensor) -> Tensor:
    if initial_state is None:
        return ref.new_zeros(B, H, K, V)
    if initial_state.shape != (B, H, K, V):
        raise ValueError(f"initial_state must be (B, H, K, V) = {(B, H, K, V)}; got {tuple(initial_state.shape)}")
    return initial_state.to(ref.dtype)


# ----------------------------------------------------------------------- linear attention

def linear_attention(q: Tensor, k: Tensor, v: Tensor, *, scale: float | None = None,
                     normalize: bool = True, initial_state: tuple[Tensor, Tensor] | None = None
                     ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """Additive memory: ``S += k^T v``, ``z += k``, ``o = (q S) / (q z)``.

    q and k are used as given: the layer applies the feature map (``elu + 1``) first, so the
    normaliser ``q z`` is positive. With ``normalize=False`` the output is ``q S`` (the form the
    two-facts figure reads). Computed in chunks of 64: masked attention inside a chunk, the state
    carried between chunks, exactly equal to the token loop.
    Returns ``o`` (B, T, H, V) and the final ``(S (B, H, K, V), z (B, H, K))``.
    """
    B, T, H, K, V = _check_qkv(q, k, v)
    scale = K ** -0.5 if scale is None else scale
    if initial_state is None:
        S, z = q.new_zeros(B, H, K, V), q.new_zeros(B, H, K)
    else:
        S, z = initial_state
        S, z = _initial(S, B, H, K, V, q), z.to(q.dtype)
    C = 64
    o = q.new_empty(B, T, H, V)
    for t0 in range(0, T, C):
        qc = q[:, t0:t0 + C].transpose(1, 2) * scale       # (B, H, c, K)
        kc = k[:, t0:t0 + C].transpose(1, 2)               # (B, H, c, K)
        vc = v[:, t0:t0 + C].transpose(1, 2)               # (B, H, c, V)
        causal = torch.ones(qc.shape[2], qc.shape[2], dtype=torch.bool, device=q.device).tril()
        scores = (qc @ kc.transpose(-1, -2)).masked_fill(~causal, 0)   # (B, H, c, c), includes t itself
        num = qc @ S + scores @ vc                          # (B, H, c, V)
        if normalize:
            den = qc @ z.unsqueeze(-1) + scores.sum(-1, keepdim=True)  # (B, H, c, 1)
            num = num / den
        o[:, t0:t0 + C] = num.transpose(1, 2)
        S = S + kc.transpose(-1, -2) @ vc                   # (B, H, K, V)
        z = z + kc.sum(2)                                   # (B, H, K)
    return o, (S, z)


# ----------------------------------------------------------- the delta-rule family (core)

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


SUB_CHUNK = 8     # diagonal blocks of this size are computed pairwise (see _decayed_scores)


def _decayed_scores(q: Tensor, k: Tensor, G: Tensor, sub: int) -> tuple[Tensor, Tensor]:
    """kk[r, s] = sum_i k_r[i] k_s[i] e^(G_r[i] - G_s[i]) and qk[r, s] likewise with q_r, for s <= r
    (entries with s > r are junk; callers mask them). q, k (..., C, K); G (..., C, 1 or K), the
    cumulative log decay, non-increasing along C.

    Computing e^(G_r - G_s) for every pair costs a (C, C, K) tensor. Instead the chunk is cut
    into sub-chunks of `sub` tokens: for s in sub-chunk j and r after it, split the decay at the
    boundary b (the last token of j): e^(G_r - G_b) e^(G_b - G_s), both factors <= 1, so the
    block is one matmul and nothing overflows. Only the diagonal blocks go pairwise (sub, sub, K).
    """
    C = q.shape[-2]
    kk, qk = q.new_zeros(*q.shape[:-1], C), q.new_zeros(*q.shape[:-1], C)
    tri = torch.ones(sub, sub, dtype=torch.bool, device=q.device).tril()
    for j in range(C // sub):
        cols = slice(j * sub, (j + 1) * sub)
        G_b = G[..., (j + 1) * sub - 1:(j + 1) * sub, :]                       # (..., 1, K)
        to_b = (G - G_b).clamp(max=0).exp()           # rows at or before b are junk here, never overflow
        from_b = k[..., cols, :] * (G_b - G[..., cols, :]).exp()               # (..., sub, K)
        kk[..., :, cols] = (k * to_b) @ from_b.transpose(-1, -2)                # (..., C, sub)
        qk[..., :, cols] = (q * to_b) @ from_b.transpose(-1, -2)
        diff = G[..., cols, None, :] - G[..., None, cols, :]                    # (..., sub, sub, K)
        decay = diff.masked_fill(~tri[..., None], float("-inf")).exp()
        k_s = k[..., None, cols, :] * decay                                     # (..., sub, sub, K)
        kk[..., cols, cols] = (k[..., cols, None, :] * k_s).sum(-1)
        qk[..., cols, cols] = (q[..., cols, None, :] * k_s).sum(-1)
    return kk, qk


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


def _delta_family(q, k, v, g, beta, scale, initial_state, chunk_size, per_channel):
    B, T, H, K, V = _check_qkv(q, k, v)
    _check_gates(q, g, beta, per_channel)
    scale = K ** -0.5 if scale is None else scale
    S = _initial(initial_state, B, H, K, V, q)
    if chunk_size is None:
        return _recurrent(q, k, v, g, beta, scale, S)
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be a positive integer or None; got {chunk_size}")
    if T == 0:
        return q.new_empty(B, 0, H, V), S
    return _chunked(q, k, v, g, beta, scale, S, int(chunk_size))


def delta_rule(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, *, scale: float | None = None,
               initial_state: Tensor | None = None, chunk_size: int | None = None
               ) -> tuple[Tensor, Tensor]:
    """DeltaNet: ``S = S + k^T beta (v - k S)``, ``o = q S``. Returns o (B, T, H, V), S (B, H, K, V)."""
    return _delta_family(q, k, v, None, beta, scale, initial_state, chunk_size, per_channel=False)


def gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, *,
                     scale: float | None = None, initial_state: Tensor | None = None,
                     chunk_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Gated DeltaNet: one log decay per head, g (B, T, H); decay the whole state, then the delta write."""
    return _delta_family(q, k, v, g, beta, scale, initial_state, chunk_size, per_channel=False)


def kda(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, *, scale: float | None = None,
        initial_state: Tensor | None = None, chunk_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Kimi Delta Attention: one log decay per key channel, g (B, T, H, K); row i of S is scaled
    by exp(g[i]) before the delta write."""
    return _delta_family(q, k, v, g, beta, scale, initial_state, chunk_size, per_channel=True)


# ------------------------------------------------------------------------- Mamba-2 (SSD)

def _check_ssd(x: Tensor, dt: Tensor, g: Tensor, B: Tensor, C: Tensor, D: Tensor | None) -> tuple[int, ...]:
    if x.dim() != 4:
        raise ValueError(f"x must be (batch, T, H, P); got {tuple(x.shape)}")
    b, T, H, P = x.shape
    for name, t in (("dt", dt), ("g", g)):
        if t.shape != (b, T, H):
            raise ValueError(f"{name} must be (batch, T, H) = {(b, T, H)}; got {tuple(t.shape)}")
    if B.dim() != 4 or B.shape[:2] != (b, T) or C.shape != B.shape:
        raise ValueError(f"B and C must both be (batch, T, G, N) with x's (batch, T); got {tuple(B.shape)} "
                         f"and {tuple(C.shape)}")
    G, N = B.shape[2:]
    if H % G:
        raise ValueError(f"the {G} groups of B and C must divide the {H} heads")
    if D is not None and D.shape != (H,):
        raise ValueError(f"D must be (H,) = {(H,)}; got {tuple(D.shape)}")
    return b, T, H, P, G, N


def _ssd_recurrent(u: Tensor, g: Tensor, B: Tensor, C: Tensor, S: Tensor) -> tuple[Tensor, Tensor]:
    """Token by token. u = dt x (b, T, H, P), the write's value; g (b, T, H); B, C (b, T, H, N)."""
    y = u.new_empty(u.shape)
    for t in range(u.shape[1]):
        alpha = g[:, t].exp()                                               # (b, H): retention this step
        S = alpha[..., None, None] * S + B[:, t, :, :, None] * u[:, t, :, None, :]   # (b, H, N, P)
        y[:, t] = (C[:, t, :, None, :] @ S).squeeze(-2)                     # (b, H, P), includes token t
    return y, S


def _ssd_chunked(u: Tensor, g: Tensor, B: Tensor, C: Tensor, S: Tensor, L: int) -> tuple[Tensor, Tensor]:
    """Chunks of L tokens. With G_r = g_1 + ... + g_r the log decay from the chunk start to token r
    and S0 the state entering the chunk:

        y_r   = (C_r e^G_r) S0 + sum_{s <= r} (C_r . B_s) e^(G_r - G_s) u_s
        S_end = e^G_L S0 + sum_s (B_s e^(G_L - G_s))^T u_s

    The decay is one scalar per head, so the in-chunk weights are one (L, L) matrix per head
    (attention with a decay mask: the "duality" of the name). Every exponent is a difference
    G_r - G_s with s <= r, or G_r itself, so all are <= 0 and nothing overflows however strong
    the decay; only the hand-off of S between chunks is sequential.
    """
    b, T, H, P = u.shape
    N = B.shape[-1]
    pad = (-T) % L
    if pad:      # padded tokens have u = 0 and g = 0: they neither write nor decay
        u, B, C = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (u, B, C))
        g = F.pad(g, (0, 0, 0, pad))
    n = (T + pad) // L
    # (b, T, H, X) -> (b, H, n, L, X)
    u, B, C = (t.reshape(b, n, L, H, -1).permute(0, 3, 1, 2, 4) for t in (u, B, C))
    G = g.reshape(b, n, L, H).permute(0, 3, 1, 2).cumsum(-1)                # (b, H, n, L)
    causal = torch.ones(L, L, dtype=torch.bool, device=u.device).tril()
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()   # (b, H, n, L, L)
    scores = (C @ B.transpose(-1, -2)) * decay                             # (b, H, n, L, L)
    y_in = scores @ u                                                      # (b, H, n, L, P): this chunk's writes
    C_in = C * G[..., None].exp()                                          # (b, H, n, L, N): reads S0, decayed
    B_out = B * (G[..., -1:] - G)[..., None].exp()                         # (b, H, n, L, N): decayed to chunk end
    written = B_out.transpose(-1, -2) @ u                                  # (b, H, n, N, P)
    keep = G[..., -1].exp()[..., None, None]                               # (b, H, n, 1, 1)
    y = u.new_empty(b, H, n, L, P)
    for c in range(n):
        y[:, :, c] = y_in[:, :, c] + C_in[:, :, c] @ S
        S = keep[:, :, c] * S + written[:, :, c]                           # (b, H, N, P)
    return y.permute(0, 2, 3, 1, 4).reshape(b, n * L, H, P)[:, :T], S      # (b, T, H, P)


def ssd(x: Tensor, dt: Tensor, g: Tensor, B: Tensor, C: Tensor, *, D: Tensor | None = None,
        initial_state: Tensor | None = None, chunk_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Mamba-2's selective state space layer (Dao and Gu, 2024) in its SSD form: per head h,

        S_t = alpha_t S_{t-1} + B_t^T (dt_t x_t),   y_t = C_t S_t + D x_t,   alpha_t = exp(g_t)

    x (batch, T, H, P): the head's input channels; dt (batch, T, H) > 0: the step size, which
    scales the write; g (batch, T, H) <= 0: the log decay, in Mamba-2 ``dt * A`` with
    A = -exp(A_log) per head; B, C (batch, T, G, N): the write and read vectors, group j serving
    heads j H/G .. (j + 1) H/G - 1; D (H,): the skip. The state S is (batch, H, N, P): read as
    ``C @ S`` like the delta family's ``q @ S``, with no scale on C (as published).

    g is an argument beside dt (not A) so that a caller can change the decay alone; the eval
    probe holds alpha = 1 at separators without touching the write. Returns y (batch, T, H, P)
    and the final S.
    """
    b, T, H, P, G, N = _check_ssd(x, dt, g, B, C, D)
    S = _initial(initial_state, b, H, N, P, x)
    B, C = (t.repeat_interleave(H // G, dim=2) for t in (B, C))            # (b, T, H, N)
    u = x * dt[..., None]                                                  # (b, T, H, P): the dt-scaled write
    if chunk_size is None:
        y, S = _ssd_recurrent(u, g, B, C, S)
    elif int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be a positive integer or None; got {chunk_size}")
    elif T == 0:
        y = x.new_empty(x.shape)
    else:
        y, S = _ssd_chunked(u, g, B, C, S, int(chunk_size))
    if D is not None:
        y = y + D[:, None] * x                                             # the skip, past the state
    return y, S


# --------------------------------------------------------------------------------- SiTU

def situ(x: Tensor, beta: float = 4.0) -> Tensor:
    """Sigmoid-Tanh Unit: ``beta * tanh(x / beta) * sigmoid(x)``. SiLU-like near 0, bounded by beta."""
    return beta * torch.tanh(x / beta) * torch.sigmoid(x)


def situ_glu(x: Tensor, beta: float = 4.0, linear_beta: float | None = None) -> Tensor:
    """Gated unit of K3's experts. x is (..., 2F) = gate | up; returns (..., F) = situ(gate) * up,
    with the up branch soft-clamped to ``linear_beta * tanh(up / linear_beta)`` when given."""
    if x.shape[-1] % 2:
        raise ValueError(f"situ_glu needs an even last dimension (gate | up); got {x.shape[-1]}")
    gate, up = x.chunk(2, dim=-1)
    if linear_beta is not None:
        up = linear_beta * torch.tanh(up / linear_beta)
    return situ(gate, beta) * up


# ------------------------------------------------------------------ attention residuals

def attn_res(query: Tensor, sources: Tensor, norm_weight: Tensor | None = None,
             eps: float = 1e-6) -> tuple[Tensor, Tensor]:
    """Attention over depth. sources (N, ..., D): the embedding, the completed block sums and the
    running partial sum. query (D,) is the aggregation point's learned pseudo-query.
    Keys are the RMS-normalised sources (so a source that is merely large cannot dominate),
    values the raw sources. Returns h (..., D) and weights (N, ...), summing to 1 over N.
    """
    if sources.shape[-1] != query.shape[-1]:
        raise ValueError(f"query dim {query.shape[-1]} != source dim {sources.shape[-1]}")
    w = query if norm_weight is None else query * norm_weight      # (D,)
    keys = sources * torch.rsqrt(sources.pow(2).mean(-1, keepdim=True) + eps)   # (N, ..., D)
    scores = keys @ w                                                # (N, ...)
    weights = scores.softmax(dim=0)                                  # (N, ...)
    h = (weights.unsqueeze(-1) * sources).sum(0)                     # (..., D)
    return h, weights
