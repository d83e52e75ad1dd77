"""The lineage at a glance: how memory changed from GPT-2 to Kimi K3, one row per step."""
from __future__ import annotations

from .base import TextPanel


LINEAGE_TABLE = [
    ("GPT-2 (2019)", "softmax attention", "KV cache, grows per token", "O(N) per sequence"),
    ("Linear attention", "k^T v added to S", "fixed K x V per head", "interferes as it fills"),
    ("DeltaNet", "corrects what k recalls", "fixed K x V per head", "targeted overwrite"),
    ("Gated DeltaNet", "+ one decay per head", "fixed K x V per head", "erase in bulk"),
    ("KDA (Kimi Linear)", "+ one decay per channel", "fixed K x V per head", "erase row by row"),
    ("MLA", "softmax over a latent", "512 + 64 per token", "compressed cache"),
    ("Kimi K3", "3 KDA : 1 gated MLA, MoE", "state + MLA cache", "hybrid; AttnRes over depth"),
]


def prepare(cur, i: int, p: dict, width: int) -> None:
    """The table is the same at every step: nothing to prepare."""
    return None


def lines(view: None, width: int) -> list[str]:
    out = ["lineage: how memory changed, GPT-2 to K3"]
    for row in LINEAGE_TABLE:
        out.append("  " + f"{row[0]:<18}{row[1]:<26}{row[2]:<26}{row[3]}"[: width - 2])
    return out


class LineagePanel(TextPanel):
    kind = "lineage"
    prepare = staticmethod(prepare)
    lines = staticmethod(lines)
