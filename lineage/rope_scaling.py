"""RoPE scaling as real checkpoints name it, and what its numbers must be. Torch-free: the
frequencies themselves are computed in lineage/mixers/rope.py."""
from __future__ import annotations

from dataclasses import dataclass

from .config_checks import ConfigError


@dataclass
class RopeScalingConfig:
    """RoPE as real checkpoints name it (transformers' rope_type). 'default' is plain RoPE;
    the others stretch it past the context the model was trained at: 'linear' divides
    every frequency by factor; 'llama3' (Llama 3.1) divides only the slow ones (wavelength over
    original_context / low_freq_factor), keeps the fast ones (under original_context /
    high_freq_factor) and blends between; 'yarn' ramps from kept to divided over the channels that
    turn beta_fast .. beta_slow times in original_context, and scales cos and sin by
    attention_factor (None: 0.1 ln(factor) + 1)."""
    kind: str = "default"              # 'default', 'linear', 'llama3' or 'yarn'
    factor: float = 1.0
    original_context: int | None = None  # original_max_position_embeddings (llama3, yarn)
    low_freq_factor: float = 1.0       # llama3
    high_freq_factor: float = 4.0      # llama3
    beta_fast: float = 32.0            # yarn
    beta_slow: float = 1.0             # yarn
    attention_factor: float | None = None  # yarn
    truncate: bool = True              # yarn: round the ramp's ends to whole channels


def check_rope_scaling(name: str, r: RopeScalingConfig, section: str = "attention") -> None:
    where = (section, "rope_scaling")
    if r.kind not in ("default", "linear", "llama3", "yarn"):
        raise ConfigError(f"{name}: {section}.rope_scaling.kind must be 'default', 'linear', 'llama3' or 'yarn', "
                          f"got {r.kind!r}",
                          where + ("kind",))
    if not r.factor > 0:
        raise ConfigError(f"{name}: {section}.rope_scaling.factor must be > 0, got {r.factor}", where + ("factor",))
    if r.kind in ("llama3", "yarn") and r.original_context is None:
        raise ConfigError(f"{name}: {section}.rope_scaling.original_context is needed by {r.kind!r}",
                          where + ("original_context",))
    if r.kind == "llama3" and not 0 < r.low_freq_factor < r.high_freq_factor:
        raise ConfigError(f"{name}: {section}.rope_scaling needs 0 < low_freq_factor < high_freq_factor",
                          where + ("low_freq_factor",))
    # equal betas (Kimi K2's 1 and 1) ramp over one channel, as transformers takes them
    if r.kind == "yarn" and not 0 < r.beta_slow <= r.beta_fast:
        raise ConfigError(f"{name}: {section}.rope_scaling needs 0 < beta_slow <= beta_fast", where + ("beta_slow",))
