"""What an observed step reports: one frozen record per kind of sublayer, filled in by the
sublayer itself, read by `lineage.playback.observe` (which turns batch element 0 into frame
fields). A mixer's `step(x, state, obs)` sets `obs.mixer`, an FFN's sets `obs.ffn`; a sublayer
with nothing to show (a dense FFN) leaves its slot None. Which fields a frame keeps, under which
key and how, is declared once by field name in that module's tables (STATE, ROUTING, ...).

Tensors keep the batch dimension B and stay where they were computed (a GPU's stay there until
the frame is made, so only what the open panels show is copied). No torch import: the records
only hold tensors, and `lineage.playback` reads them without importing torch itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Tensor = Any    # torch.Tensor; named so the shapes below read as they do in the mechanisms


@dataclass(frozen=True, eq=False)
class StateObs:
    """A recurrent mixer's step (linear attention, the delta family, Mamba-2): the K x V state
    per head after this token's write, the write, and what the key read back before it."""
    S: Tensor                  # (B, H, K, V) after the write
    dS: Tensor                 # (B, H, K, V) the write itself, k^T u
    k: Tensor                  # (B, H, K) the key written (Mamba-2: B, shared by its group)
    v: Tensor                  # (B, H, V) the value (Mamba-2: x)
    read: Tensor               # (B, H, V) what k recalled from the state, after the decay
    beta: Tensor | None        # (B, H) write strength: the delta rule's beta, Mamba-2's dt; None: linear
    alpha: Tensor | None       # (B, H) or (B, H, K) retention e^g applied before the write; None: no decay
    state_bytes: int           # what the layer holds per sequence (linear attention: S and z)
    q: Tensor | None = None    # (B, H, K) the query as the read applies it: the read-out is q @ S
                               # (the scale and linear attention's normaliser folded in; Mamba-2: C)
    corrects: bool = False     # the delta rule: a write also changes what older keys read back
                               # (lineage.playback.effective follows it for the attention panel)


@dataclass(frozen=True, eq=False)
class AttentionObs:
    """A softmax or MLA layer's step: each query head's weights over the cached positions."""
    weights: Tensor            # (B, H, L): over positions 0 ..; each row sums to 1. A static
                               # (graph) cache's row spans its whole buffer, unwritten slots 0
    length: int                # positions 0 .. length-1 the row covers (a window's dropped ones included)
    cache_len: int             # tokens the cache holds (a sliding window: at most W)
    cache_bytes: int           # what it holds, in bytes
    gate: Tensor | None = None  # (B, H*dv) gated MLA's output gate; None elsewhere


@dataclass(frozen=True, eq=False)
class RoutingObs:
    """A mixture of experts' step: the router's choice for this token."""
    scores: Tensor             # (B, E) the router's scores
    experts: Tensor            # (B, k) int: the chosen experts
    weights: Tensor            # (B, k) their weights
    shared_share: Tensor | None  # (B,) the shared experts' part of the output norm; None: no shared expert


@dataclass(eq=False)
class LayerObs:
    """One block's slots, filled as the step runs through it."""
    mixer: StateObs | AttentionObs | None = None
    ffn: RoutingObs | None = None
    attnres: tuple | None = None   # (w_mixer, w_ffn), (N, B) each: Attention Residuals' depth weights


@dataclass(eq=False)
class StepObs:
    """A language model's observed step; pass `StepObs()` to `LM.step` and it fills it in."""
    layers: list = field(default_factory=list)   # LayerObs per block
    top_ids: Tensor | None = None      # (B, top) the likeliest next tokens
    top_probs: Tensor | None = None    # (B, top)
    pos: int | None = None             # the position of the token just read
    attnres_final: Tensor | None = None  # (N, B) the depth weights before the output head
