"""Gated DeltaNet's config and its kind's descriptor (`MIXER`), torch-free: `lineage params`,
`validate` and a replayed trace read them without importing module.py. Its rules are DeltaNet's."""
from __future__ import annotations

from dataclasses import dataclass

from ...kinds import Mixer
from ..deltanet.config import DeltaNetConfig


@dataclass
class GatedDeltaNetConfig(DeltaNetConfig):
    """Gated DeltaNet: DeltaNet plus one decay per head, g = -exp(A_log) softplus(a(x) + dt_bias)."""
    # beta = 2 sigmoid(b(x)) in (0, 2) instead of sigmoid(b(x)) in (0, 1) (OLMo-Hybrid): the write's
    # transition I - beta k^T k then has eigenvalue 1 - beta down to -1 along k, so a step can flip
    # what k recalls instead of only erasing it (negative eigenvalues, Grazzi et al. 2024)
    allow_neg_eigval: bool = False

    def params(self) -> int:
        d, H, V = self.d_model, self.n_heads, self.v_dim
        return super().params() + d * H + 2 * H + d * H * V          # a_proj, A_log, dt_bias, g_proj


MIXER = Mixer("gdn", "Gated DeltaNet", "gdn", GatedDeltaNetConfig,
              "lineage.mixers.gated_deltanet.module:GatedDeltaNet", "G", "black on #5fd7af",
              holds_state=True, has_decay=True, kernel=True, tiny="tiny-gated-deltanet",
              aliases=("GatedDeltaNet", "gated_delta_rule", "gated-deltanet", "gated_delta"))
