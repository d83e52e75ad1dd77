"""The MoE tensors both hybrids name the same way: a router, routed experts (one tensor per
expert and matrix, or transformers' stacked `gate_up_proj` / `down_proj`) and shared experts,
onto MoE's stacked `w_in` (gate | up) and `w_out`. The names of the pieces differ per
architecture and are passed in."""
from __future__ import annotations

import re

from ..configs import MoEConfig


def experts(p: str, rest: str, t, c: MoEConfig, router: str, expert: str, shared: str, names: tuple):
    """[(our parameter, index, tensor)] for one MoE tensor named `rest` under the layer's MoE
    prefix, or None when it is not one."""
    F, Fs = c.expert_dim, (c.shared_dim or c.expert_dim) * c.n_shared
    gate, up, down = names
    if rest == router:
        return [(p + "router.weight", (), t)]
    if rest == "shared_expert_gate.weight":
        return [(p + "shared_gate.weight", (), t)]
    if rest == "gate.e_score_correction_bias":
        return [(p + "score_bias", (), t)]
    if rest == f"{expert}.gate_up_proj":
        return [(p + "w_in", (), t)]
    if rest == f"{expert}.down_proj":
        return [(p + "w_out", (), t)]
    m = re.fullmatch(rf"{expert}\.(\d+)\.(\w+)\.weight", rest)
    if m is not None:
        e, w = int(m.group(1)), m.group(2)
        if e >= c.n_experts:
            return None
        if w == gate:
            return [(p + "w_in", (e, slice(0, F)), t)]
        if w == up:
            return [(p + "w_in", (e, slice(F, 2 * F)), t)]
        return [(p + "w_out", (e,), t)] if w == down else None
    m = re.fullmatch(rf"{shared}\.(\w+)\.weight", rest)
    if m is not None and c.n_shared:
        w = m.group(1)
        if w in ("gate_proj", "up_proj"):
            return [(p + "shared_in.weight", (slice(0, Fs) if w == "gate_proj" else slice(Fs, 2 * Fs),), t)]
        return [(p + "shared_out.weight", (), t)] if w == "down_proj" else None
    return None
