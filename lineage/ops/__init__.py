"""The lineage's operations, each beside the Triton kernels that compute it fast, as
flash-linear-attention keeps an op's ``naive.py``, ``chunk.py`` and ``fused_recurrent.py`` together:

    linear_attention.py   linear attention (reference only)
    delta/                DeltaNet, Gated DeltaNet, KDA: naive.py, chunk*.py, fused_recurrent.py
    ssd.py                Mamba-2's decayed sum (reference only)
    situ/                 SiTU and its gated unit: naive.py, fused.py
    moe/                  one decoding token's routed experts: fused_step.py
    attn_res.py           attention over depth (reference only)
    kernels.py            the Triton versions under one name, imported on first use

Names here are the readable float references (FACTS.md section 1 has the conventions); the
fast versions with the same signatures and meaning are ``lineage.ops.kernels.kda`` and so on.
The kernel files import only torch and triton, never the rest of the package.
"""
from .attn_res import attn_res
from .delta.naive import delta_rule, gated_delta_rule, kda
from .linear_attention import linear_attention
from .situ.naive import situ, situ_glu
from .ssd import ssd

__all__ = ["linear_attention", "delta_rule", "gated_delta_rule", "kda", "ssd", "situ", "situ_glu", "attn_res"]
