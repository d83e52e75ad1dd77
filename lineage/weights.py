"""A .safetensors file into a built model: the one reader of weight files behind scenarios'
`checkpoint` fields and `lineage eval` / `arena` (real checkpoints' shards: lineage.families)."""
from __future__ import annotations

from pathlib import Path


def load_into(model, path: str | Path) -> None:
    """Copy the file's tensors into `model` (each into its parameter's dtype). ValueError with
    one line naming the file and the first problem: unreadable, NaN or inf values (they would
    make every panel NaN), shapes that differ, tensors missing or unknown."""
    import torch
    from safetensors.torch import load_file
    try:
        tensors = load_file(str(path))
    except Exception as e:  # safetensors raises several kinds; all mean "not a usable file"
        raise ValueError(f"cannot read {path}: {e}") from None
    for name, t in tensors.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{path}: tensor {name} holds NaN or inf values")
    try:
        result = model.load_state_dict(tensors, strict=False)
    except RuntimeError as e:   # shape mismatches: keep torch's first line, it names the tensor
        detail = next((line.strip() for line in str(e).splitlines()[1:] if line.strip()), str(e))
        raise ValueError(f"{path} does not fit the model: {detail}") from None
    bad = []
    if result.missing_keys:
        bad.append(f"missing {len(result.missing_keys)} tensors (first: {result.missing_keys[0]})")
    if result.unexpected_keys:
        bad.append(f"{len(result.unexpected_keys)} unknown tensors (first: {result.unexpected_keys[0]})")
    if bad:
        raise ValueError(f"{path} does not fit the model: " + "; ".join(bad))
