"""KDA's config, its own rule and its kind's descriptor (`MIXER`), torch-free: `lineage params`,
`validate` and a replayed trace read them without importing module.py."""
from __future__ import annotations

from dataclasses import dataclass

from ...config_checks import ConfigError
from ...kinds import Mixer
from ..deltanet.config import DeltaNetConfig


@dataclass
class KDAConfig(DeltaNetConfig):
    """Kimi Delta Attention: one decay per key channel from a low-rank projection.

    gate_form 'kimi' (Kimi Linear):   g = -exp(A_log[h]) * softplus(f + dt_bias)
    gate_form 'bounded' (K3):          g = lower_bound * sigmoid(exp(A_log[h]) * (f + dt_bias))
    """
    gate_rank: int | None = None       # low-rank width of the decay projection; None: head_dim
    gate_form: str = "bounded"         # 'kimi' or 'bounded'
    lower_bound: float = -5.0
    output_gate_rank: int | None = None  # None: full-rank sigmoid output gate (K3); int: low rank (Kimi Linear)

    def params(self) -> int:
        d, H, K = self.d_model, self.n_heads, self.head_dim
        r = self.gate_rank or K
        n = super().params() + d * r + r * H * K + H + H * K         # decay f_a, f_b, A_log, dt_bias
        V = self.v_dim
        return n + (d * H * V if self.output_gate_rank is None else self.output_gate_rank * (d + H * V))

    def check(self, name: str, field: str) -> None:
        super().check(name, field)
        if self.gate_form not in ("kimi", "bounded"):
            raise ConfigError(f"{name}: {field}.gate_form must be 'kimi' or 'bounded', got {self.gate_form!r}",
                              (field, "gate_form"))


MIXER = Mixer("kda", "Kimi Delta Attention", "kda", KDAConfig,
              "lineage.mixers.kda.module:KDA", "K", "black on #87d700",
              holds_state=True, has_decay=True, kernel=True, tiny="tiny-kda", aliases=("KDA",))
