"""DeltaNet's config, its own rules and its kind's descriptor (`MIXER`), torch-free: `lineage
params`, `validate` and a replayed trace read them without importing module.py. Gated DeltaNet's
and KDA's configs extend this one, as their modules extend DeltaNet."""
from __future__ import annotations

from dataclasses import dataclass

from ...arithmetic import recurrent_state_bytes
from ...config_checks import ConfigError
from ...kinds import MechanismConfig, Mixer


@dataclass
class DeltaNetConfig(MechanismConfig):
    """DeltaNet: SiLU then L2-normalised q and k, sigmoid beta, optional short causal conv."""
    d_model: int = 64
    n_heads: int = 2
    head_dim: int = 32                 # K (and V unless value_dim is set)
    conv_size: int = 4                 # 0 turns the short causal conv off
    chunk_size: int | None = 64        # forward() uses the chunked form; None: token recurrence
    norm_eps: float = 1e-6
    # Qwen3-Next's shape (real checkpoints): fewer q/k heads than value heads, each q/k head serving
    # n_heads // n_key_heads consecutive value heads, and values of their own width
    n_key_heads: int | None = None     # None: n_heads
    value_dim: int | None = None       # None: head_dim

    @property
    def key_heads(self) -> int:
        return self.n_heads if self.n_key_heads is None else self.n_key_heads

    @property
    def v_dim(self) -> int:
        return self.head_dim if self.value_dim is None else self.value_dim

    @property
    def conv_channels(self) -> int:
        return 2 * self.key_heads * self.head_dim + self.n_heads * self.v_dim      # q | k | v

    def params(self) -> int:
        d, H, K, V = self.d_model, self.n_heads, self.head_dim, self.v_dim
        n = 2 * d * self.key_heads * K + d * H * V + d * H + V + H * V * d   # q, k, v, beta, o_norm, o_proj
        return n + self.conv_channels * self.conv_size                   # depthwise short conv

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        conv = self.conv_channels * max(self.conv_size - 1, 0) * cache_dtype_bytes
        return recurrent_state_bytes(self.n_heads, self.head_dim, self.v_dim, dtype_bytes) + conv

    def check(self, name: str, field: str) -> None:
        if self.n_heads % self.key_heads:
            raise ConfigError(f"{name}: {field}.n_heads {self.n_heads} must be a multiple of n_key_heads "
                              f"{self.key_heads}", (field, "n_key_heads"))


MIXER = Mixer("deltanet", "DeltaNet", "deltanet", DeltaNetConfig,
              "lineage.mixers.deltanet.module:DeltaNet", "D", "black on #af87ff",
              holds_state=True, kernel=True, tiny="tiny-deltanet", aliases=("DeltaNet", "delta_rule", "delta"))
