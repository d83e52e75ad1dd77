"""The attention a recurrent layer's state implements, followed live for the attention panel.

A state's read-out at step t is a sum over the values written: o_t = sum_s A[t, s] v_s + what the
state held before them (lineage.ops.effective_attention has the whole-sequence form). Stepping,
each write's key is carried forward through every later transition instead of recomputing the
product: after step t the window holds w_s = M_t ... M_{s+1} k_s for its last W writes, and

    A[t, s] = c_s (q_t . w_s)         c_s: beta_s (delta rule), dt_s (Mamba-2), 1 (linear attention)

Each step costs O(W K) per head: decay every w (alpha, per head or per key channel), then for the
delta rule take out what the new write rewrote, w -= beta_t k_t (k_t . w). What the state held
before the window (the prefill, and writes older than W) is the read-out less the window's sum,
given as its share of the read-out, so a row's parts add up to the whole read-out.
"""
from __future__ import annotations

WINDOW = 256            # the positions a row covers; older writes fold into the "before" share


class Window:
    """One layer's last W writes (batch element 0), each key carried forward to this step."""

    def __init__(self, size: int = WINDOW):
        self.size = size
        self.w = None           # (H, n, K) the keys, carried forward
        self.c = None           # (H, n) each write's strength
        self.v = None           # (H, n, V) the values written

    def step(self, mx):
        """mx: this step's StateObs (q set) -> A row (H, n) over the last n positions (this one
        last); each position's share of the read-out (H, n), A[t, s] (v_s . o) / |o|^2; the share
        the state held before them (H,). The shares of a row add up to 1."""
        import torch
        f = torch.float32
        q, k, v, S = (t[0].to(f) for t in (mx.q, mx.k, mx.v, mx.S))   # (H, K), (H, K), (H, V), (H, K, V)
        c = torch.ones_like(k[:, 0]) if mx.beta is None else mx.beta[0].to(f)     # (H,)
        if self.w is not None:
            w = self.w
            if mx.alpha is not None:
                a = mx.alpha[0].to(f)                                  # (H,) or (H, K)
                w = w * (a[:, None, None] if a.dim() == 1 else a[:, None, :])
            if mx.corrects:       # S = S + k^T beta (v - k S): older keys lose what k now reads
                w = w - (c[:, None, None] * k[:, None, :]) * (w @ k[:, :, None])
            keep = slice(-(self.size - 1), None) if self.size > 1 else slice(0, 0)
            self.w = torch.cat([w[:, keep], k[:, None]], 1)
            self.c = torch.cat([self.c[:, keep], c[:, None]], 1)
            self.v = torch.cat([self.v[:, keep], v[:, None]], 1)
        else:
            self.w, self.c, self.v = k[:, None], c[:, None], v[:, None]
        row = self.c * (self.w @ q[:, :, None])[..., 0]                # (H, n)
        o = (q[:, None] @ S)[:, 0]                                     # (H, V): the read-out
        norm = (o * o).sum(-1).clamp_min(1e-30)                        # (H,) |o|^2
        parts = row[..., None] * self.v                                # (H, n, V): each value's part of o
        shares = (parts @ o[:, :, None])[..., 0] / norm[:, None]       # (H, n)
        before = ((o - parts.sum(1)) * o).sum(-1) / norm               # (H,)
        return row, shares, before
