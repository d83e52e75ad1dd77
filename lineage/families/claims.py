"""What config.json claims, checked against what the safetensors headers hold, before anything is
built: a config is only text, and 20,000 layers or 4,096 experts of width 65,536 cost minutes of
building on meta and gigabytes of destination tensors before the first shard would show they are
not there. The headers (names and shapes, no data) are already read; the arithmetic is
`arithmetic.count`, which the family tests prove equal to the parameters the loader fills."""
from __future__ import annotations

import math
import re
from pathlib import Path

from ..arithmetic import count, human
from .problems import PretrainedError
from .shards import Shards

# a decoder layer's number in a tensor name (`model.layers.7.`, `h.7.`, `backbone.layers.7.`); the
# multi-token-prediction layers (`mtp.`) and a vision tower (`visual.`) count their own
_LAYER = re.compile(r"(?:^|\.)(?:layers|h)\.(\d{1,9})\.")
_NOT_DECODER = ("mtp.", "model.visual.", "visual.")
# slack over the arithmetic, so that a rounding in it never refuses a real checkpoint: a lying
# config still cannot make the loader allocate much past what the files hold
SLACK = 1 << 20


def check_claims(cfg, shards: Shards, config: Path) -> None:
    """PretrainedError, one line, when config.json describes more layers or more parameters than
    the safetensors files hold."""
    layers = {int(m.group(1)) for name in shards.names() if not name.startswith(_NOT_DECODER)
              for m in [_LAYER.search(name)] if m}
    if layers and max(layers) + 1 < cfg.n_layers:
        raise PretrainedError(f"{config}: describes {cfg.n_layers:,} layers; the safetensors files hold "
                              f"{len(layers):,} (numbered up to {max(layers)})")
    held = sum(math.prod(shards.shape(n)) for n in shards.names())
    implied = count(cfg)["total"]
    if implied > held + held // 8 + SLACK:
        raise PretrainedError(f"{config}: describes {human(implied)} parameters ({implied:,}); the safetensors "
                              f"files hold {human(held)} values ({held:,})")
