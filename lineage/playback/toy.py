"""A bare memory with hand-set keys and values: the toy figures run the real update rules
on vectors a teacher chose, one write or read per step, with nothing learned in between."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from .. import ops
from ..figures import two_unit_keys

if TYPE_CHECKING:   # annotations only: the toy needs neither the pydantic schema nor the task generator
    from ..scenario.schema import MemorySpec
    from ..scenario.tasks import Event, TaskSequence


class Memory:
    """One head, K x V state, fed explicit (key, value, beta, gate) events.

    rules: 'linear' (S += k^T v, no normaliser: the additive memory of the two-facts figure),
    'gated_linear' (Mamba-2's decayed additive memory: S = alpha S + k^T v, with `channel_decay`
    every step and the separator's gate; it fades by age, never by key), 'delta', 'gated_delta'
    (the separator's gate scales all of S), 'kda' (per-channel `channel_decay` every step, plus
    the separator's gate).
    """

    def __init__(self, spec: MemorySpec, seq: TaskSequence, task, seed: int, hand_set: dict):
        self.spec = spec
        K, V = spec.key_dim, spec.value_dim
        dt = torch.float64                      # toy numbers are read to many digits
        gen = torch.Generator().manual_seed(seed)
        if task.kind == "two_facts":
            keys = two_unit_keys(task.overlap, K)                                   # (2, K)
            values = torch.tensor(task.values, dtype=dt)[:, None].expand(2, V).clone()
        else:
            keys = _keys(seq.n_keys, K, spec.key_overlap, gen)
            if seq.n_values <= V:               # one-hot values: recall errors read as confusions
                values = torch.eye(V, dtype=dt)[: seq.n_values]
            else:
                values = torch.nn.functional.normalize(torch.randn(seq.n_values, V, generator=gen, dtype=dt), dim=-1)
        if "keys" in hand_set:
            keys = _table(hand_set["keys"], K, "keys")
        if "values" in hand_set:
            values = _table(hand_set["values"], V, "values")
        self.keys, self.values = keys, values                                       # (n_keys, K), (n_values, V)
        self.channel = (torch.tensor(spec.channel_decay, dtype=dt) if spec.channel_decay is not None
                        else torch.zeros(K, dtype=dt))
        self.S = torch.zeros(K, V, dtype=dt)
        self.written: dict[int, int] = {}        # key id -> value id, in write order

    def step(self, ev: Event) -> dict:
        rule = self.spec.rule
        K = self.spec.key_dim
        decay = torch.ones(K, dtype=self.S.dtype)
        if rule in ("gated_delta", "kda", "gated_linear"):
            decay = torch.exp(torch.full((K,), ev.gate, dtype=self.S.dtype)
                              + (self.channel if rule in ("kda", "gated_linear") else 0))
        S = self.S * decay[:, None]
        if ev.kind == "write":
            if ev.key >= len(self.keys) or ev.value >= len(self.values):
                raise ValueError(f"event {ev.label()} is past the hand-set tables "
                                 f"({len(self.keys)} keys, {len(self.values)} values)")
            k, v = self.keys[ev.key], self.values[ev.value]
        else:
            k = self.keys[ev.key] if ev.kind == "read" else torch.zeros(K, dtype=S.dtype)
            v = torch.zeros(self.spec.value_dim, dtype=S.dtype)
        read = k @ S                                                                # (V,) before the write
        beta = ev.beta if ev.kind == "write" else 0.0
        if rule in ("linear", "gated_linear"):
            u = beta * v                                                            # add, never correct
        else:
            u = beta * (v - read)                                                   # correct what k recalls
        dS = torch.outer(k, u)
        self.S = S + dS
        if ev.kind == "write":
            self.written.pop(ev.key, None)
            self.written[ev.key] = ev.value
        ids = list(self.written)
        recall = (self.keys[ids] @ self.S) if ids else torch.zeros(0, self.spec.value_dim, dtype=S.dtype)
        target = self.values[[self.written[i] for i in ids]] if ids else recall
        return {"S": self.S.clone(), "dS": dS, "k": k, "v": v, "read": read, "decay": decay,
                "beta": beta, "out": k @ self.S if ev.kind == "read" else None,
                "recall_keys": ids, "recall": recall, "target": target}


def _keys(n: int, K: int, overlap: float, gen) -> Tensor:
    """n unit keys whose pairwise cosine is `overlap`: sqrt(c) * shared + sqrt(1 - c) * own,
    with the shared and own directions orthonormal (exact while n < K; beyond that the own
    parts are random unit vectors and the cosines only approximate c)."""
    dt = torch.float64
    if overlap == 0.0:
        return torch.nn.functional.normalize(torch.randn(n, K, generator=gen, dtype=dt), dim=-1)
    basis, _ = torch.linalg.qr(torch.randn(K, K, generator=gen, dtype=dt))   # orthonormal columns
    shared = basis[:, 0]
    if n < K:
        own = basis[:, 1:n + 1].T                                                  # (n, K)
    else:
        own = torch.nn.functional.normalize(torch.randn(n, K, generator=gen, dtype=dt), dim=-1)
    keys = overlap ** 0.5 * shared + (1 - overlap) ** 0.5 * own
    return torch.nn.functional.normalize(keys, dim=-1)


def _table(rows, width: int, name: str) -> Tensor:
    t = torch.tensor(rows, dtype=torch.float64)
    if t.dim() != 2 or t.shape[1] != width:
        raise ValueError(f"weights.set.{name} must be a list of rows of {width} numbers; got shape {tuple(t.shape)}")
    return t


def check_recurrence(mem: Memory, events: list[Event]) -> Tensor:
    """The same events through `lineage.ops` (used by tests): the toy must be the real rule."""
    K, V = mem.spec.key_dim, mem.spec.value_dim
    writes = [e for e in events if e.kind == "write"]
    k = mem.keys[[e.key for e in writes]].view(1, -1, 1, K)
    v = mem.values[[e.value for e in writes]].view(1, -1, 1, V)
    beta = torch.tensor([e.beta for e in writes], dtype=torch.float64).view(1, -1, 1)
    if mem.spec.rule == "linear":
        return ops.linear_attention(k, k, v * beta[..., None], normalize=False)[1][0][0, 0]
    if mem.spec.rule == "gated_linear":
        # the closed form: S_T = sum_t (decay applied after t) * k_t^T beta_t v_t, decay from log sums
        logs = torch.stack([torch.full((K,), e.gate, dtype=torch.float64) + mem.channel for e in events])
        after = logs.flip(0).cumsum(0).flip(0) - logs            # (T, K): log decay applied after step t
        rows = [i for i, e in enumerate(events) if e.kind == "write"]
        S = torch.zeros(K, V, dtype=torch.float64)
        for j, t in enumerate(rows):
            S += torch.outer(k[0, j, 0] * after[t].exp(), beta[0, j, 0] * v[0, j, 0])
        return S
    return ops.delta_rule(k, k, v, beta)[1][0, 0]
