"""Multi-head latent attention's config and its kind's descriptor (`MIXER`), torch-free: `lineage
params`, `validate` and a replayed trace read them without importing module.py."""
from __future__ import annotations

from dataclasses import dataclass

from ...arithmetic import mla_bytes_per_token
from ...config_checks import ConfigError
from ...kinds import MechanismConfig, Mixer
from ...rope_scaling import RopeScalingConfig, check_rope_scaling


@dataclass
class MLAConfig(MechanismConfig):
    """Multi-head latent attention: one cached latent of kv_lora_rank + qk_rope_head_dim per token."""
    d_model: int = 64
    n_heads: int = 2
    q_lora_rank: int | None = None     # None: a direct query projection
    kv_lora_rank: int = 32
    qk_nope_head_dim: int = 16
    qk_rope_head_dim: int = 8
    v_head_dim: int = 16
    rope: bool = False                 # Kimi uses NoPE: the shared key part is not rotated
    rope_theta: float = 10000.0
    rope_scaling: RopeScalingConfig | None = None   # None: plain RoPE at rope_theta (DeepSeek-V3: YaRN)
    rope_interleave: bool = False      # DeepSeek's rotated channels come as pairs (0, 1), (2, 3), ...
    softmax_scale: float | None = None  # None: (qk_nope + qk_rope)^-0.5 (DeepSeek-V3's YaRN sharpens it)
    output_gate: bool = False          # K3: sigmoid(g(x)) per channel before o_proj
    norm_eps: float = 1e-6

    def params(self) -> int:
        d, H = self.d_model, self.n_heads
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        r = self.q_lora_rank
        q = d * H * qk if r is None else d * r + r + r * H * qk
        kv = (d * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
              + self.kv_lora_rank * H * (self.qk_nope_head_dim + self.v_head_dim))
        o = H * self.v_head_dim * d + (d * H * self.v_head_dim if self.output_gate else 0)
        return q + kv + o

    def cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return mla_bytes_per_token(self.kv_lora_rank, self.qk_rope_head_dim, dtype_bytes)

    def check(self, name: str, field: str) -> None:
        if self.rope and self.qk_rope_head_dim % 2:
            raise ConfigError(f"{name}: {field}.qk_rope_head_dim must be even to be rotated", (field, "qk_rope_head_dim"))
        if self.rope_scaling is not None:
            check_rope_scaling(name, self.rope_scaling, field)


MIXER = Mixer("mla", "multi-head latent attention", "mla", MLAConfig,
              "lineage.mixers.mla.module:MLA", "M", "black on #ff8700",
              attends=True, gate=True, aliases=("MLA",))
