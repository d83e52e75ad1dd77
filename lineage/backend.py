"""Which implementation runs the delta-rule family: the Triton kernels or the readable reference.

`auto` (the default) takes the kernels when the model is on a CUDA device and Triton is
importable; `LINEAGE_BACKEND=reference|triton` forces a choice. Forcing `triton` where it
cannot run falls back to the reference and says why (the status bar shows it).
"""
from __future__ import annotations

import os

CHOICES = ("auto", "reference", "triton")


def _wanted() -> str:
    return os.environ.get("LINEAGE_BACKEND", "auto").strip().lower() or "auto"


def env_problem() -> str | None:
    """One line when LINEAGE_BACKEND is set to none of CHOICES (a typo such as `tirton`), else
    None. The run still goes on, on the reference; the commands say this before it starts, so
    a typo is never silently a slower run."""
    want = _wanted()
    if want in CHOICES:
        return None
    from .did_you_mean import did_you_mean
    return (f"LINEAGE_BACKEND={want[:40]!r} is not one of {', '.join(CHOICES)}{did_you_mean(want, CHOICES)}: "
            "using the reference")


def resolve(device) -> tuple[str, str | None]:
    """(backend, note) for a model on `device`; note explains a fallback, else None."""
    want = _wanted()
    if want not in CHOICES:
        return "reference", env_problem()
    if want == "reference":
        return "reference", None
    try:
        from lineage.ops import kernels
        here = kernels.available()
    except Exception:  # a broken triton install must not stop the app
        here = False
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    runs = here and (getattr(device, "type", str(device)) == "cuda" or interpret)
    if want == "triton":
        if runs:
            return "triton", None
        return "reference", "LINEAGE_BACKEND=triton but Triton kernels cannot run here (no CUDA or no triton): using the reference"
    return ("triton" if runs and not interpret else "reference"), None


def set_backend(model, backend: str) -> None:
    """Point every layer of `model` (an LM) whose kind has Triton kernels (its descriptor's
    `kernel`), and every MoE, at `backend`. The others keep the reference: a new mixer that reuses DeltaNet's
    code but not its op then runs on CUDA too, instead of failing where kernels lacks its op.
    A block a device map put on the CPU keeps the reference beside CUDA blocks on the kernels."""
    from .configs import FFNS, MIXERS
    spread = getattr(model, "places", None) is not None and os.environ.get("TRITON_INTERPRET") != "1"
    for blk in model.blocks:
        here = backend
        if spread and backend == "triton" and next(blk.parameters()).device.type != "cuda":
            here = "reference"
        if MIXERS[blk.mixer_kind].kernel:
            blk.mixer.backend = here
        if FFNS[blk.ffn_kind].routes:           # the step's routed experts (kernels.moe_experts)
            blk.ffn.backend = here
