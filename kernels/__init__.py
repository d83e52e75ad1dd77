"""Triton kernels: forward only (no backward), the same meaning as the readable PyTorch
references of the model package (its ``ops.py``), which this package never imports.

- ``kda``, ``gated_delta_rule``, ``delta_rule``: chunked forward (chunk 64), any T, K, V <= 256.
- ``kda_step``: one decoding token, state updated in place, one kernel launch.
- ``situ_glu``: fused SiTU gated unit, one read of x and one write.
- ``moe_experts``: one decoding token's routed experts, read in place from the stacked weights.

This package imports only torch and triton, and triton only when a kernel is first used, so
``import kernels; kernels.available()`` is safe everywhere and cheap. torch.compile's op for
``kda_step`` is registered only when a compiled caller first needs it (see ``kernels.step``).
"""
from __future__ import annotations

import importlib.util
import os

__all__ = ["available", "kda", "gated_delta_rule", "delta_rule", "kda_step", "situ_glu", "moe_experts"]


def available() -> bool:
    """True when the kernels can run here: triton importable and either a CUDA device or
    ``TRITON_INTERPRET=1`` (the CPU interpreter, slow, for tests)."""
    if importlib.util.find_spec("triton") is None:
        return False
    if os.environ.get("TRITON_INTERPRET") == "1":
        return True
    import torch
    return torch.cuda.is_available()


def __getattr__(name):
    # import on first use, then bind the name here so later look-ups are plain attribute reads
    # (kda_step sits on a launch-bound path)
    if name in ("kda", "gated_delta_rule", "delta_rule"):
        from . import chunk_delta as module
    elif name == "kda_step":
        from . import step as module
    elif name == "situ_glu":
        from . import situ as module
    elif name == "moe_experts":
        from . import moe_step as module
    else:
        raise AttributeError(f"module 'kernels' has no attribute {name!r}")
    value = globals()[name] = getattr(module, name)
    return value
