"""The gated short convolution's config, its own rule and its kind's descriptor (`MIXER`),
torch-free: `lineage params`, `validate` and a replayed trace read them without importing
module.py."""
from __future__ import annotations

from dataclasses import dataclass

from ...config_checks import ConfigError
from ...kinds import MechanismConfig, Mixer


@dataclass
class GatedConvConfig(MechanismConfig):
    """A double-gated depthwise causal convolution (Liquid AI's LFM2): in_proj makes three parts
    B, C, x of d_model channels each; B * x is convolved over the last `conv_size` tokens, channel
    by channel; C gates the result; out_proj maps it back. What it holds between tokens is its
    last conv_size - 1 inputs (B * x): a constant-size cache, no state matrix, no attention."""
    d_model: int = 64
    conv_size: int = 3                 # the conv's width in tokens (LFM2's conv_L_cache); at least 1
    bias: bool = False                 # biases on in_proj, the conv and out_proj (LFM2's conv_bias)

    @property
    def conv_channels(self) -> int:
        return self.d_model                                              # the conv runs over B * x

    def params(self) -> int:
        d = self.d_model
        return d * 3 * d + d * self.conv_size + d * d + (3 * d + d + d) * self.bias

    def state_bytes(self, dtype_bytes: int = 4, cache_dtype_bytes: int = 2) -> int:
        """No state matrix; the conv's last conv_size - 1 inputs, in the cache dtype."""
        return self.d_model * (self.conv_size - 1) * cache_dtype_bytes

    def check(self, name: str, field: str) -> None:
        if self.conv_size < 1:
            raise ConfigError(f"{name}: {field}.conv_size must be at least 1 (the layer is its convolution), "
                              f"got {self.conv_size}", (field, "conv_size"))


MIXER = Mixer("gated_conv", "gated short conv", "gated_conv", GatedConvConfig,
              "lineage.mixers.gated_conv.module:GatedConv", "C", "black on #d7af87",
              aliases=("GatedConv",))
