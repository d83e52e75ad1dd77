"""The sequence mixers, one folder per row of the lineage, and the helpers they share.

A mixer's folder holds `config.py`, torch-free: its config dataclass (parameters, cache and state
bytes, its own rules in `check`) and `MIXER`, its kind's descriptor (lineage/kinds.py); and
`module.py`: its nn.Module, its state and its step, which only `lineage.model.mixer_class`
imports, by the name the descriptor gives. Its op is under lineage/ops/. The shared helpers:
`causal` (a prompt's causal attention through torch's fused kernels), `rope`, `short_conv` and
`static_cache` (the fixed-capacity caches a CUDA graph captures).

`MIXERS` below is every kind, in the order listings and the arena show them; a new mixer is one
import line and its name in that list (and its ModelConfig field, lineage/configs.py). Importing
this package imports the configs only, never torch.
"""
from .attention.config import MIXER as SOFTMAX
from .linear_attention.config import MIXER as LINEAR
from .deltanet.config import MIXER as DELTANET
from .gated_deltanet.config import MIXER as GDN
from .kda.config import MIXER as KDA
from .mamba2.config import MIXER as MAMBA2
from .mla.config import MIXER as MLA
from .gated_conv.config import MIXER as GATED_CONV

MIXERS = {m.name: m for m in (SOFTMAX, LINEAR, DELTANET, GDN, KDA, MAMBA2, MLA, GATED_CONV)}
