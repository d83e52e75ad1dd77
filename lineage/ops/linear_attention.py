"""Linear attention (Katharopoulos et al.): the state adds k^T v and never corrects; the
lineage's first recurrent row. Reference only: its sums are cheap enough without a kernel."""

from __future__ import annotations

import torch
from torch import Tensor

from .checks import check_qkv, initial_state_or_zeros



def linear_attention(q: Tensor, k: Tensor, v: Tensor, *, scale: float | None = None,
                     normalize: bool = True, initial_state: tuple[Tensor, Tensor] | None = None,
                     attention: bool = False):
    """Additive memory: ``S += k^T v``, ``z += k``, ``o = (q S) / (q z)``.

    q and k are used as given: the layer applies the feature map (``elu + 1``) first, so the
    normaliser ``q z`` is positive. With ``normalize=False`` the output is ``q S`` (the form the
    two-facts figure reads). Computed in chunks of 64: masked attention inside a chunk, the state
    carried between chunks, exactly equal to the token loop.
    Returns ``o`` (B, T, H, V) and the final ``(S (B, H, K, V), z (B, H, K))``; with
    ``attention=True`` also the attention the state implements, A (B, H, T, T), and the part of o
    the initial state gives (B, T, H, V), so that o = A v + that part (effective_attention.py).
    """
    B, T, H, K, V = check_qkv(q, k, v)
    scale = K ** -0.5 if scale is None else scale
    if initial_state is None:
        S, z = q.new_zeros(B, H, K, V), q.new_zeros(B, H, K)
    else:
        S, z = initial_state
        S, z = initial_state_or_zeros(S, B, H, K, V, q), z.to(q.dtype)
    S0, z0 = S, z
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
    if attention:
        from .effective_attention import linear
        return (o, (S, z), *linear(q, k, scale, normalize, S0, z0))
    return o, (S, z)
