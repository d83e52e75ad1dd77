"""Linear attention's config and its kind's descriptor (`MIXER`), torch-free: `lineage params`,
`validate` and a replayed trace read them without importing module.py."""
from __future__ import annotations

from dataclasses import dataclass

from ...arithmetic import recurrent_state_bytes
from ...kinds import MechanismConfig, Mixer


@dataclass
class LinearAttentionConfig(MechanismConfig):
    """Additive linear attention with the elu + 1 feature map and a normaliser."""
    d_model: int = 64
    n_heads: int = 2
    head_dim: int = 32

    def params(self) -> int:
        return 4 * self.d_model * self.n_heads * self.head_dim

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        return recurrent_state_bytes(self.n_heads, self.head_dim, self.head_dim, dtype_bytes, normaliser=True)


MIXER = Mixer("linear", "linear attention", "linear", LinearAttentionConfig,
              "lineage.mixers.linear_attention.module:LinearAttention", "L", "black on #d7d75f",
              holds_state=True, tiny="tiny-linear", aliases=("LinearAttention", "linear_attention"))
