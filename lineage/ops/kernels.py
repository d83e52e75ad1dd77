"""The Triton kernels under one name: forward only (no backward), the same meaning as the
readable references beside them (``lineage.ops``), which the kernel files never import.

- ``kda``, ``gated_delta_rule``, ``delta_rule``: chunked forward (chunk 64), any T, K, V <= 256.
- ``kda_step``: one decoding token, state updated in place, one kernel launch.
- ``situ_glu``: fused SiTU gated unit, one read of x and one write.
- ``moe_experts``: one decoding token's routed experts, read in place from the stacked weights.

The kernel files import only torch and triton, and triton only when a kernel is first used, so
``from lineage.ops import kernels; kernels.available()`` is safe everywhere and cheap.
torch.compile's op for ``kda_step`` is registered only when a compiled caller first needs it
(see ``lineage.ops.delta.fused_recurrent``).
"""
from __future__ import annotations

import importlib.util
import os

# each fast op and the module (beside its reference) that holds it
_WHERE = {"kda": "delta.chunk", "gated_delta_rule": "delta.chunk", "delta_rule": "delta.chunk",
          "kda_step": "delta.fused_recurrent", "situ_glu": "situ.fused", "moe_experts": "moe.fused_step"}
__all__ = ["available", *_WHERE]


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
    if name not in _WHERE:
        raise AttributeError(f"module 'lineage.ops.kernels' has no attribute {name!r}")
    module = importlib.import_module(f"lineage.ops.{_WHERE[name]}")
    value = globals()[name] = getattr(module, name)
    return value
