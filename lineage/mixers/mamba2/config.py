"""Mamba-2's config, its own rule and its kind's descriptor (`MIXER`), torch-free: `lineage
params`, `validate` and a replayed trace read them without importing module.py."""
from __future__ import annotations

from dataclasses import dataclass

from ...arithmetic import recurrent_state_bytes
from ...config_checks import ConfigError
from ...kinds import MechanismConfig, Mixer


@dataclass
class Mamba2Config(MechanismConfig):
    """Mamba-2 (Dao and Gu): the decayed sum. Per head a (state_dim x head_dim) state fades by one
    retention alpha = exp(dt A) a step and adds B^T (dt x); B and C come in n_groups groups shared
    by the heads; a short causal conv over x | B | C; y = C S + D x, then RMSNorm(y * silu(z)) per group."""
    d_model: int = 64
    n_heads: int = 2
    head_dim: int = 32                 # P, x's channels per head: the state's V
    state_dim: int = 32                # N, the width of B and C: the state's K
    n_groups: int = 1                  # B and C heads; each serves n_heads // n_groups consecutive heads
    conv_size: int = 4                 # 0 turns the short causal conv off
    chunk_size: int | None = 64        # forward() uses the chunked form; None: token recurrence
    norm_eps: float = 1e-5             # as published for the gated RMSNorm

    @property
    def inner(self) -> int:
        return self.n_heads * self.head_dim                              # x and z channels

    @property
    def conv_channels(self) -> int:
        return self.inner + 2 * self.n_groups * self.state_dim           # x | B | C

    def params(self) -> int:
        d, H, I = self.d_model, self.n_heads, self.inner
        proj = d * (I + self.conv_channels) + d * H                      # in_proj (z | x | B | C), dt_proj
        conv = self.conv_channels * (self.conv_size + 1) if self.conv_size else 0   # weights and a bias
        return proj + conv + 3 * H + I + I * d                           # A_log, dt_bias, D; norm; out_proj

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        conv = self.conv_channels * max(self.conv_size - 1, 0) * cache_dtype_bytes
        return recurrent_state_bytes(self.n_heads, self.state_dim, self.head_dim, dtype_bytes) + conv

    def check(self, name: str, field: str) -> None:
        if self.n_heads % self.n_groups:
            raise ConfigError(f"{name}: {field}.n_heads {self.n_heads} must be a multiple of n_groups "
                              f"{self.n_groups}", (field, "n_groups"))


MIXER = Mixer("mamba2", "Mamba-2", "mamba2", Mamba2Config,
              "lineage.mixers.mamba2.module:Mamba2", "S", "black on #d787d7",
              holds_state=True, has_decay=True, tiny="tiny-mamba2", aliases=("Mamba2", "ssd"))
