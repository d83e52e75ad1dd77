"""A trained model on disk: OUT.safetensors (the weights) and OUT.json (the recipe and metrics).

Both are written to a temporary name and published in one step (lineage.files.publish), so an
interrupted run leaves the last complete checkpoint, never half of one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from ..files import publish, read_regular
from ..presets import get_preset

MAX_SIDECAR = 1 << 20


def config_hash(cfg) -> str:
    """A short digest of the fields of a config that differ from their defaults: a preset edited
    after training no longer matches, while an option added later with a default that keeps the
    old behaviour (as real checkpoints' router and attention options were) does not orphan files."""
    text = json.dumps(_set_fields(cfg), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _set_fields(obj):
    if dataclasses.is_dataclass(obj):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = dataclasses.MISSING
            if default is dataclasses.MISSING or value != default:
                out[f.name] = _set_fields(value)
        return out
    if isinstance(obj, (list, tuple)):
        return [_set_fields(x) for x in obj]
    return obj


def sidecar_path(path: str | Path) -> Path:
    return Path(path).with_suffix(".json")


def save(model, path: str | Path, meta: dict, fp16: bool = True) -> None:
    """Weights (fp16 unless told otherwise; buffers too) and the sidecar, each atomically."""
    from safetensors.torch import save_file
    path = Path(path)
    tensors = {}
    for name, t in model.state_dict().items():
        t = t.detach().cpu()             # a copy each: a tied head shares wte's memory, which safetensors refuses
        tensors[name] = (t.half() if fp16 and t.is_floating_point() else t.clone()).contiguous()
    for target, write in ((path, lambda p: save_file(tensors, str(p))),
                          (sidecar_path(path), lambda p: Path(p).write_text(json.dumps(meta, indent=2) + "\n"))):
        partial = target.with_name(target.name + ".partial")
        write(partial)
        publish(partial, target, overwrite=True)


def read_sidecar(path: str | Path) -> dict:
    """The sidecar beside a checkpoint; ValueError with the reason when it is missing or not one."""
    side = sidecar_path(path)
    try:
        meta = json.loads(read_regular(side, MAX_SIDECAR))
    except OSError as e:
        raise ValueError(f"{side}: cannot read the recipe beside the checkpoint: {e.strerror or e}") from None
    except ValueError as e:
        raise ValueError(f"{side}: not JSON: {e}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("preset"), str):
        raise ValueError(f"{side}: not a lineage training sidecar (no preset)")
    return meta


def load(path: str | Path, device="cpu"):
    """(model in float32, eval mode, sidecar). ValueError for a file that does not fit its recipe."""
    from ..model import LM
    from ..weights import load_into
    meta = read_sidecar(path)
    cfg = get_preset(meta["preset"])
    if meta.get("config_hash") not in (None, config_hash(cfg)):
        raise ValueError(f"{path}: trained on another version of preset {meta['preset']!r} "
                         f"(config hash {meta.get('config_hash')}, now {config_hash(cfg)}); retrain it")
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such checkpoint")
    model = LM(cfg)
    load_into(model, path)                # float16 files land in the float32 parameters
    return model.to(device).eval(), meta

