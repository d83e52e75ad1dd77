"""Mamba-2's decayed sum (SSD), the contrast to the delta rule: the state only fades and adds,
``S = alpha S + B^T (dt x)``, ``y = C S + D x``, with the same state layout (K = the width N of
B and C, V = the head's channels P) and the same two forms (token recurrence, chunks)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .checks import initial_state_or_zeros



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
        initial_state: Tensor | None = None, chunk_size: int | None = None, attention: bool = False):
    """Mamba-2's selective state space layer (Dao and Gu, 2024) in its SSD form: per head h,

        S_t = alpha_t S_{t-1} + B_t^T (dt_t x_t),   y_t = C_t S_t + D x_t,   alpha_t = exp(g_t)

    x (batch, T, H, P): the head's input channels; dt (batch, T, H) > 0: the step size, which
    scales the write; g (batch, T, H) <= 0: the log decay, in Mamba-2 ``dt * A`` with
    A = -exp(A_log) per head; B, C (batch, T, G, N): the write and read vectors, group j serving
    heads j H/G .. (j + 1) H/G - 1; D (H,): the skip. The state S is (batch, H, N, P): read as
    ``C @ S`` like the delta family's ``q @ S``, with no scale on C (as published).

    g is an argument beside dt (not A) so that a caller can change the decay alone; the eval
    probe holds alpha = 1 at separators without touching the write. Returns y (batch, T, H, P)
    and the final S; with ``attention=True`` also A (batch, H, T, T), the attention over x the
    state implements, and the initial state's part of y (batch, T, H, P):
    y - D x = A x + that part (effective_attention.py).
    """
    b, T, H, P, G, N = _check_ssd(x, dt, g, B, C, D)
    S = initial_state_or_zeros(initial_state, b, H, N, P, x)
    B, C = (t.repeat_interleave(H // G, dim=2) for t in (B, C))            # (b, T, H, N)
    S0 = S
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
    if attention:
        from .effective_attention import ssd as effective
        return (y, S, *effective(dt, g, B, C, S0))
    return y, S
