"""A trained model on disk: OUT.safetensors (the weights) and OUT.json (the recipe and metrics).

Each file is written to a fresh temporary name and published in one step (lineage.files), so a
reader never sees half of one. Two renames are still two steps: a run killed between them would
pair new weights with the sidecar of the run before. So the weights carry their recipe too, in
the safetensors metadata, and read_sidecar refuses a sidecar that differs from it. Checkpoints
saved before that (the shipped ones in scenarios/weights/) have no embedded recipe: their
sidecar is trusted as it is.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import threading
from contextlib import contextmanager
from pathlib import Path

from ..files import kind_of, open_regular, read_regular, write_new
from ..presets import get_preset

MAX_SIDECAR = 1 << 20
MAX_HEADER = 16 << 20           # a safetensors header (the tensor index): ~100,000 tensors
RECIPE_KEY = "lineage.recipe"   # the sidecar's JSON in the weights' metadata


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


def save(model, path: str | Path, meta: dict, fp16: bool = True, force: bool = False, published=None) -> None:
    """Weights (fp16 unless told otherwise; buffers too) with `meta` inside their metadata, then
    `meta` as the sidecar. Without `force` neither may replace a file (FileExistsError, and
    nothing is written when either name is taken). ValueError, before anything is written, for
    weights that are NaN or inf, or that float16 cannot hold: a checkpoint is never broken.
    `published()` runs once both are in place, before a Ctrl-C held meanwhile goes through, so
    a caller that records what it wrote is never one checkpoint behind."""
    from safetensors.torch import save as encode
    import torch
    path = Path(path)
    side = sidecar_path(path)
    tensors = {}
    for name, t in model.state_dict().items():
        t = t.detach().cpu()             # a copy each: a tied head shares wte's memory, which safetensors refuses
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"tensor {name} holds NaN or inf values")
        t = (t.half() if fp16 and t.is_floating_point() else t.clone()).contiguous()
        if fp16 and t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"tensor {name} holds values beyond float16's range (65,504)")
        tensors[name] = t
    weights = encode(tensors, metadata={RECIPE_KEY: _canonical(meta)})
    recipe = json.dumps(meta, indent=2) + "\n"
    if not force:
        for target in (path, side):
            if os.path.lexists(target):
                raise FileExistsError(0, "exists (--force replaces it)", str(target))
    with _signals_held():                 # weights first: a kill between leaves a pair read_sidecar refuses
        write_new(path, weights, force)
        write_new(side, recipe, force)
        if published is not None:
            published()


def _canonical(meta) -> str:
    return json.dumps(meta, sort_keys=True, separators=(",", ":"))


@contextmanager
def _signals_held():
    """Ctrl-C (SIGINT) and SIGTERM wait until both files are published, so they never split a
    pair (a kill -9 still can; read_sidecar catches that). A handler that notes them, not a
    signal mask: a terminal's Ctrl-C may land on any of torch's threads. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    before = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if handler is not None and handler is not signal.SIG_IGN:     # None: set outside Python, left alone
            before[sig] = signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(caught):
            signal.raise_signal(sig)           # now, as it would have been: KeyboardInterrupt, or the end


def embedded_recipe(path: str | Path) -> dict | None:
    """The recipe saved inside a checkpoint's metadata, or None for one saved without it (the
    shipped checkpoints). ValueError when the file is not a readable safetensors file. Reads
    only the header, with a bound."""
    try:
        with open_regular(path) as f:
            head = f.read(8)
            size = int.from_bytes(head, "little") if len(head) == 8 else -1
            if not 0 <= size <= MAX_HEADER:
                raise ValueError(f"{path}: not a safetensors file" + (f" (a header of {size:,} bytes, limit "
                                                                      f"{MAX_HEADER:,})" if size > 0 else ""))
            data = f.read(size)
    except OSError as e:
        raise ValueError(f"{path}: cannot read the checkpoint: {e.strerror or e}") from None
    try:
        header = json.loads(data)
    except ValueError:
        raise ValueError(f"{path}: not a safetensors file (its header is not JSON)") from None
    stored = header.get("__metadata__") if isinstance(header, dict) else None
    text = stored.get(RECIPE_KEY) if isinstance(stored, dict) else None
    if text is None:
        return None
    try:
        recipe = json.loads(text) if isinstance(text, str) and len(text) <= MAX_SIDECAR else None
    except ValueError:
        recipe = None
    if not isinstance(recipe, dict):
        raise ValueError(f"{path}: its embedded recipe ({RECIPE_KEY}) is not a JSON object")
    return recipe


def read_sidecar(path: str | Path) -> dict:
    """The sidecar beside a checkpoint; ValueError with the reason when it is missing, not one,
    or not the one the weights were saved with (checked when the weights carry their recipe)."""
    from .tasks import make_spec
    side = sidecar_path(path)
    try:
        meta = json.loads(read_regular(side, MAX_SIDECAR))
    except OSError as e:
        raise ValueError(f"{side}: cannot read the recipe beside the checkpoint: {e.strerror or e}") from None
    except ValueError as e:
        raise ValueError(f"{side}: not JSON: {e}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("preset"), str):
        raise ValueError(f"{side}: not a lineage training sidecar (no preset)")
    for key in ("config_hash", "task"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise ValueError(f"{side}: {key} must be text, got {_short(meta[key])}")
    if "task_params" in meta:
        try:
            make_spec(meta.get("task"), meta["task_params"])
        except ValueError as e:
            raise ValueError(f"{side}: task_params: {e}") from None
    embedded = embedded_recipe(path) if os.path.lexists(path) else None
    if embedded is not None and _canonical(embedded) != _canonical(meta):
        first = ("preset", "task", "task_params", "steps_done", "seed", "steps", "lr", "batch")
        key = next(k for k in [*first, *embedded, *meta] if _canonical(embedded.get(k)) != _canonical(meta.get(k)))
        raise ValueError(f"{side} does not belong to {path}: the weights were saved with {key} "
                         f"{_short(embedded.get(key))}, the sidecar says {_short(meta.get(key))} "
                         "(a run stopped between writing the two?)")
    return meta


def _short(value) -> str:
    text = "(none)" if value is None else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load(path: str | Path, device="cpu"):
    """(model in float32, eval mode, sidecar). ValueError for a file that does not fit its recipe."""
    from ..model import LM
    from ..weights import load_into
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise ValueError(f"{path}: no such checkpoint") from None
    if not os.path.isfile(path):
        raise ValueError(f"{path}: is {kind_of(mode)}, not a checkpoint file")
    meta = read_sidecar(path)
    cfg = get_preset(meta["preset"])
    if meta.get("config_hash") not in (None, config_hash(cfg)):
        raise ValueError(f"{path}: trained on another version of preset {meta['preset']!r} "
                         f"(config hash {meta.get('config_hash')}, now {config_hash(cfg)}); retrain it")
    model = LM(cfg)
    load_into(model, path)                # float16 files land in the float32 parameters
    return model.to(device).eval(), meta
