"""Shape checks shared by the references: one clear ValueError before any work."""

from __future__ import annotations

from torch import Tensor


def check_qkv(q: Tensor, k: Tensor, v: Tensor) -> tuple[int, int, int, int, int]:
    if q.dim() != 4 or k.shape != q.shape:
        raise ValueError(f"q and k must both be (B, T, H, K); got {tuple(q.shape)} and {tuple(k.shape)}")
    if v.dim() != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"v must be (B, T, H, V) matching q's (B, T, H); got {tuple(v.shape)}")
    B, T, H, K = q.shape
    return B, T, H, K, v.shape[-1]


def check_gates(q: Tensor, g: Tensor | None, beta: Tensor, per_channel: bool) -> None:
    B, T, H, K = q.shape
    if beta.shape != (B, T, H):
        raise ValueError(f"beta must be (B, T, H) = {(B, T, H)}; got {tuple(beta.shape)}")
    if g is not None:
        want = (B, T, H, K) if per_channel else (B, T, H)
        if g.shape != want:
            raise ValueError(f"g must be {want}; got {tuple(g.shape)}")


def initial_state_or_zeros(initial_state: Tensor | None, B: int, H: int, K: int, V: int, ref: Tensor) -> Tensor:
    if initial_state is None:
        return ref.new_zeros(B, H, K, V)
    if initial_state.shape != (B, H, K, V):
        raise ValueError(f"initial_state must be (B, H, K, V) = {(B, H, K, V)}; got {tuple(initial_state.shape)}")
    return initial_state.to(ref.dtype)
