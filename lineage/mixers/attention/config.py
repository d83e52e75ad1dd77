"""Softmax attention's config, its own rules and its kind's descriptor (`MIXER`), torch-free:
`lineage params`, `validate` and a replayed trace read them without importing module.py."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...arithmetic import kv_bytes_per_token
from ...config_checks import ConfigError
from ...kinds import MechanismConfig, Mixer
from ...rope_scaling import RopeScalingConfig, check_rope_scaling


@dataclass
class AttentionConfig(MechanismConfig):
    """GPT-2 style causal softmax attention with a KV cache; grouped KV heads when n_kv_heads < n_heads."""
    d_model: int = 768
    n_heads: int = 12
    n_kv_heads: int | None = None      # None: one KV head per query head (MHA)
    head_dim: int | None = None        # None: d_model // n_heads
    bias: bool = True                  # GPT-2 has biases on every projection
    # Qwen3-Next's gated attention (real checkpoints); the defaults are GPT-2's plain attention
    qk_norm: bool = False              # RMSNorm over each head's q and k before attending
    # OLMo-2/3's form of qk_norm: one RMSNorm over the whole q (H*D) and the whole k (Hkv*D) of a
    # token, its weight per channel of every head; the heads' scales are then not independent
    qk_norm_all_heads: bool = False
    rope_dim: int = 0                  # rotary embedding on the first rope_dim channels of a head (0: none)
    rope_theta: float = 10000.0
    rope_scaling: RopeScalingConfig | None = None   # None: plain RoPE at rope_theta
    sliding_window: int | None = None  # each query sees itself and the W - 1 tokens before; the cache keeps W
    # Gemma 3's local layers: a windowed layer rotates at this theta, unscaled (rope_scaling is the
    # global layers' alone); None: every layer at rope_theta and rope_scaling
    sliding_rope_theta: float | None = None
    softmax_scale: float | None = None  # the scale on q . k; None: head_dim^-0.5 (Gemma 3: query_pre_attn_scalar^-0.5)
    output_gate: bool = False          # sigmoid(g(x)) per channel before the output projection
    norm_eps: float = 1e-6
    # short causal conv over q|k|v, as the delta-rule presets have; None (not 0) is "none", so a
    # trace of a model without one carries no field that an older lineage would refuse
    conv_size: int | None = None

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def dim(self) -> int:
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    def params(self) -> int:
        H, Hkv, D, d = self.n_heads, self.kv_heads, self.dim, self.d_model
        qkv = d * (H + 2 * Hkv) * D + (H + 2 * Hkv) * D * self.bias
        norms = (H + Hkv) * D if self.qk_norm_all_heads else 2 * D
        extra = norms * self.qk_norm + (d * H * D + H * D * self.bias) * self.output_gate
        conv = (H + 2 * Hkv) * D * (self.conv_size or 0)
        return qkv + H * D * d + d * self.bias + extra + conv

    def cache_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return kv_bytes_per_token(self.kv_heads, self.dim, dtype_bytes)

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        """No state matrix; with a short conv, its last conv_size - 1 inputs of q|k|v."""
        return (self.n_heads + 2 * self.kv_heads) * self.dim * max((self.conv_size or 0) - 1, 0) * cache_dtype_bytes

    def check(self, name: str, field: str) -> None:
        if self.dim < 1:
            raise ConfigError(f"{name}: {field}.n_heads {self.n_heads} leaves heads of d_model // n_heads = 0 "
                              f"channels (set {field}.head_dim)", (field, "n_heads"))
        if self.n_kv_heads is not None and self.n_heads % self.n_kv_heads:
            raise ConfigError(f"{name}: {field}.n_heads {self.n_heads} must be a multiple of n_kv_heads "
                              f"{self.n_kv_heads}", (field, "n_kv_heads"))
        if self.rope_dim % 2 or self.rope_dim > self.dim:
            raise ConfigError(f"{name}: {field}.rope_dim must be even and at most head_dim", (field, "rope_dim"))
        if self.rope_scaling is not None:
            check_rope_scaling(name, self.rope_scaling, field)
        for key in ("sliding_rope_theta", "softmax_scale"):
            if getattr(self, key) is not None and not getattr(self, key) > 0:
                raise ConfigError(f"{name}: {field}.{key} must be > 0, got {getattr(self, key)}", (field, key))

    def layer(self, sliding: bool) -> "AttentionConfig":
        """One layer's config: a full layer without the window, a windowed one at its own RoPE
        where sliding_rope_theta is set (ModelConfig.layer_mixer_config says which layer is which)."""
        if not sliding:
            return dataclasses.replace(self, sliding_window=None, sliding_rope_theta=None)
        if self.sliding_window and self.sliding_rope_theta is not None:
            return dataclasses.replace(self, rope_theta=self.sliding_rope_theta, rope_scaling=None,
                                       sliding_rope_theta=None)
        return self


MIXER = Mixer("softmax", "softmax attention", "attention", AttentionConfig,
              "lineage.mixers.attention.module:SoftmaxAttention", "A", "black on #5fafff",
              attends=True, tiny="tiny-softmax", aliases=("SoftmaxAttention",))
