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
        """One event through the rule's op in lineage.ops (T = 1, the state carried in): the toy
        chooses the vectors and the gate, the op does the update. k is also the query (scale 1),
        so the op's output is what k reads back after the step."""
        rule, K, V = self.spec.rule, self.spec.key_dim, self.spec.value_dim
        dt = self.S.dtype
        log_decay = torch.zeros(K, dtype=dt)                                        # (K,) log alpha
        if rule in ("gated_delta", "kda", "gated_linear"):
            log_decay = log_decay + ev.gate + (self.channel if rule in ("kda", "gated_linear") else 0)
        decay = log_decay.exp()
        if ev.kind == "write":
            if ev.key >= len(self.keys) or ev.value >= len(self.values):
                raise ValueError(f"event {ev.label()} is past the hand-set tables "
                                 f"({len(self.keys)} keys, {len(self.values)} values)")
            k, v = self.keys[ev.key], self.values[ev.value]
        else:
            k = self.keys[ev.key] if ev.kind == "read" else torch.zeros(K, dtype=dt)
            v = torch.zeros(V, dtype=dt)
        beta = ev.beta if ev.kind == "write" else 0.0
        decayed = self.S * decay[:, None]                                           # (K, V)
        read = k @ decayed                                                          # (V,) before the write
        out, S = _op(rule, k, v, beta, log_decay, self.S)
        dS = S - decayed                                                            # the write the op made
        self.S = S
        if ev.kind == "write":
            self.written.pop(ev.key, None)
            self.written[ev.key] = ev.value
        ids = list(self.written)
        recall = (self.keys[ids] @ self.S) if ids else torch.zeros(0, V, dtype=dt)
        target = self.values[[self.written[i] for i in ids]] if ids else recall
        # named as the frame's tables name their fields (playback/observe.py: STATE, DECAY, RECALL, READOUT)
        return {"S": self.S.clone(), "dS": dS, "k": k, "v": v, "read": read, "alpha": decay,
                "beta": beta, "out": out if ev.kind == "read" else None,
                "keys": ids, "recall": recall, "target": target}


def _op(rule: str, k: Tensor, v: Tensor, beta: float, log_decay: Tensor, S: Tensor) -> tuple[Tensor, Tensor]:
    """One token of the rule's op from lineage.ops, in its (B, T, H, X) layout with B = T = H = 1.
    k (K,), v (V,), log_decay (K,), S (K, V) -> (k read after the step (V,), new S (K, V))."""
    K, V = S.shape
    q = k.view(1, 1, 1, K)
    b = torch.full((1, 1, 1), beta, dtype=S.dtype)
    if rule == "linear":        # no normaliser: z is carried and ignored; beta scales the value
        o, (S, _) = ops.linear_attention(q, q, beta * v.view(1, 1, 1, V), scale=1.0, normalize=False,
                                         initial_state=(S.view(1, 1, K, V), S.new_zeros(1, 1, K)))
        return o.view(V), S.view(K, V)
    if rule == "gated_linear":
        # Mamba-2's decayed sum, one decay per key channel: row i of S fades and adds on its own,
        # S_i = alpha_i S_i + k_i beta v, so each channel is one SSD head of width N = 1
        o, S = ops.ssd(v.view(1, 1, 1, V).expand(1, 1, K, V), b.expand(1, 1, K), log_decay.view(1, 1, K),
                       k.view(1, 1, K, 1), k.view(1, 1, K, 1), initial_state=S.view(1, K, 1, V))
        return o.view(K, V).sum(0), S.view(K, V)                                   # k S = sum_i k_i S_i
    if rule == "delta":
        o, S = ops.delta_rule(q, q, v.view(1, 1, 1, V), b, scale=1.0, initial_state=S.view(1, 1, K, V))
    elif rule == "gated_delta":  # one gate for the head: every channel's log decay is the same
        o, S = ops.gated_delta_rule(q, q, v.view(1, 1, 1, V), log_decay[:1].view(1, 1, 1), b, scale=1.0,
                                    initial_state=S.view(1, 1, K, V))
    elif rule == "kda":
        o, S = ops.kda(q, q, v.view(1, 1, 1, V), log_decay.view(1, 1, 1, K), b, scale=1.0,
                       initial_state=S.view(1, 1, K, V))
    else:
        raise ValueError(f"unknown toy memory rule {rule!r}")
    return o.view(V), S.view(K, V)


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
