"""Placing a checkpoint's layers over several devices, planned before any weight is read (issue 32).

A device map is written as Hugging Face users write it: `auto` or `balanced` (the layers spread
evenly over the GPUs), `sequential` (each GPU filled before the next), an explicit list
`cuda:0,cuda:1` (balanced over those; `cpu` may close the list), or a JSON file mapping module
names to devices (`{"model.embed_tokens": 0, "model.layers.0": "cuda:0", ...}`, the hub's
names or ours). The plan is made on the meta device: the project's own `LM` built for its shapes
alone, each layer sized by its parameters plus the cache and state it holds at the context asked,
and accelerate's `get_balanced_memory` / `infer_auto_device_map` choose where each whole layer goes
(a Block is never split). The embedding comes first in the model's order, so it lands on the first
device; the head, last, on the last one used. `load_pretrained(..., device_map=plan.device_map)`
then puts each layer's tensors on its device, and the model carries its hidden state between
devices at layer boundaries (`LM.placed`).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..arithmetic import layer_cache_bytes
from ..did_you_mean import did_you_mean
from ..files import read_regular
from .problems import PretrainedError

MAX_MAP_FILE = 1 << 20          # a map of every layer of a 1,000-layer model is under 64 KiB
MAX_ENTRIES = 10_000
MAX_DEVICES = 64
# the bytes a layer occupies besides its parameters are hung on it as a meta buffer of this
# name: accelerate sizes a module by its tensors, so it then counts a layer's cache as the layer's
CACHE_BUFFER = "_planned_cache_and_state"
# how the hub names the units of a causal LM (a multimodal composite adds `language_model.`)
_HUB = {"model.embed_tokens": "wte", "model.wpe": "wpe", "transformer.wte": "wte", "transformer.wpe": "wpe",
        "model.norm": "norm_f", "transformer.ln_f": "norm_f", "lm_head": "lm_head"}
_HUB_LAYERS = re.compile(r"^(?:model\.(?:language_model\.)?layers|transformer\.h|backbone\.layers)(?=\.|$)")
_DEVICE = re.compile(r"^(?:cuda:(\d{1,3})|(\d{1,3})|cpu)$")
_SIZE = re.compile(r"^(?:(\d{1,3})x)?(\d+(?:\.\d+)?)\s*(GB|GiB|MB|MiB|TB|TiB)$", re.IGNORECASE)
_UNIT = {"gb": 10**9, "gib": 2**30, "mb": 10**6, "mib": 2**20, "tb": 10**12, "tib": 2**40}


class PlacementError(PretrainedError):
    """A device map, a memory size or a plan refused: one line, naming where and why."""


@dataclass(frozen=True)
class MapRequest:
    """A parsed --device-map. kind: auto | balanced | sequential (over the GPUs), devices (over
    `devices` in their order), file (`modules`: names as written -> device, placed as written)."""
    kind: str
    text: str                                   # as the user wrote it, for messages
    devices: tuple[str, ...] = ()
    modules: tuple[tuple[str, str, str], ...] = ()     # (name, device, "FILE:LINE:COL") per entry


@dataclass(frozen=True)
class DevicePlan:
    device: str
    capacity: int                  # bytes
    units: tuple[str, ...]         # "wte", "blocks.0", ..., "norm_f", "lm_head", in model order
    weight_bytes: int
    cache_bytes: int               # cache + recurrent state (+ conv caches) at the plan's context

    @property
    def total(self) -> int:
        return self.weight_bytes + self.cache_bytes


@dataclass(frozen=True)
class Plan:
    request: MapRequest
    context: int
    devices: tuple[DevicePlan, ...]      # every device the map may use, used or not
    device_map: dict                     # unit -> device

    def used(self) -> tuple[DevicePlan, ...]:
        return tuple(d for d in self.devices if d.units)


# ----------------------------------------------------------------------------- parsing


def parse_device_map(text: str) -> MapRequest:
    """--device-map's value -> MapRequest, or PlacementError naming the position and the problem."""
    if not isinstance(text, str) or not text.strip():
        raise PlacementError("--device-map: empty (auto, balanced, sequential, cuda:0,cuda:1 or FILE.json)")
    t = text.strip()
    if t in ("auto", "balanced", "sequential"):
        return MapRequest(t, t)
    path = Path(t).expanduser()
    # anything there but a folder is a map file: a FIFO or a device named so is refused as a file,
    # not misread as a device list
    if t.endswith(".json") or (os.path.lexists(path) and not path.is_dir()):
        return MapRequest("file", t, modules=_read_map_file(path))
    parts = t.split(",")
    if len(parts) > MAX_DEVICES:
        raise PlacementError(f"--device-map {t[:40]}...: {len(parts)} devices, at most {MAX_DEVICES}")
    devices = []
    for i, p in enumerate(parts, 1):
        dev = device_name(p.strip())
        if dev is None:
            hint = did_you_mean(p.strip(), ("auto", "balanced", "sequential")) if i == 1 and len(parts) == 1 else ""
            raise PlacementError(f"--device-map {t[:80]}: entry {i}, {p.strip()[:40]!r}, is not a device "
                                 f"(cuda:N or cpu){hint}; or give auto, balanced, sequential or a FILE.json")
        if dev in devices:
            raise PlacementError(f"--device-map {t[:80]}: entry {i}, {dev}, is listed twice")
        devices.append(dev)
    gpus = [d for d in devices if d != "cpu"]
    # accelerate fills the GPUs in index order and the CPU after them: a list in another order
    # would be silently reordered, so it is refused instead
    if devices != sorted(gpus, key=lambda d: int(d[5:])) + (["cpu"] if "cpu" in devices else []):
        raise PlacementError(f"--device-map {t[:80]}: list the GPUs in index order, then cpu (layers fill "
                             "them in that order)")
    return MapRequest("devices", t, devices=tuple(devices))


def device_name(value) -> str | None:
    """'cuda:1', '1', 1 -> 'cuda:1'; 'cpu' -> 'cpu'; anything else None ('disk' offload is not supported)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return f"cuda:{value}" if 0 <= value < 1000 else None
    m = _DEVICE.match(value) if isinstance(value, str) else None
    if m is None:
        return None
    n = m.group(1) or m.group(2)
    return "cpu" if n is None else f"cuda:{int(n)}"


def _read_map_file(path: Path) -> tuple[tuple[str, str, str], ...]:
    """A JSON object {module name: device}; each entry with where it is in the file, for messages.
    Read as every input is (lineage.files): a regular file only, opened without blocking (a FIFO
    or a link to /dev/zero is refused before a byte is read), at most MAX_MAP_FILE bytes."""
    try:
        raw = read_regular(path, MAX_MAP_FILE)
    except FileNotFoundError:
        raise PlacementError(f"{path}: no such device-map file") from None
    except OSError as e:        # not a regular file, past the limit: the reader's reason, without errno
        raise PlacementError(f"{path}: device-map file cannot be read ({e.strerror or type(e).__name__})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PlacementError(f"{path}: cannot be read as UTF-8 text") from None
    try:
        pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    except json.JSONDecodeError as e:
        raise PlacementError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    except RecursionError:      # json.loads recurses once per nested [ or {; a map is one flat object
        raise PlacementError(f"{path}:1:1: not a device map (JSON nested too deeply)") from None
    except ValueError as e:     # an integer past Python's 4,300 digits
        raise PlacementError(f"{path}: not JSON: {str(e).splitlines()[0][:80]}") from None
    if not isinstance(pairs, list) or (pairs and not isinstance(pairs[0], tuple)):
        raise PlacementError(f"{path}:1:1: a device map is a JSON object {{module name: device}}")
    if len(pairs) > MAX_ENTRIES:
        raise PlacementError(f"{path}: {len(pairs):,} entries, at most {MAX_ENTRIES:,}")
    out, seen = [], set()
    for name, dev in pairs:
        where = f"{path}:{_position(text, name)}"
        if isinstance(dev, list):           # an object (pairs) or an array
            raise PlacementError(f"{where}: {name!r} maps to a list or an object; give one device")
        d = device_name(dev)
        if d is None:
            shown = repr(dev)[:40]
            raise PlacementError(f"{where}: {name!r} maps to {shown}, not a device (cuda:N, an index N, or cpu; "
                                 "disk offload is not supported)")
        if name in seen:
            raise PlacementError(f"{where}: {name!r} is mapped twice")
        seen.add(name)
        out.append((name, d, where))
    if not out:
        raise PlacementError(f"{path}:1:1: the device map is empty")
    return tuple(out)


def _position(text: str, key: str) -> str:
    """LINE:COL of `key` as a JSON object key in `text` (its first occurrence; 1:1 if not found)."""
    at = text.find(json.dumps(key))
    if at < 0:
        return "1:1"
    line = text.count("\n", 0, at) + 1
    return f"{line}:{at - (text.rfind(chr(10), 0, at) + 1) + 1}"


def parse_gpu_memory(text: str) -> tuple[int, ...] | int:
    """--gpu-memory: '141GB' (each GPU the map uses) -> an int; '2x141GB' or '80GB,141GB' (exactly
    these GPUs, cuda:0 onward) -> a tuple of bytes. GB is 10^9 bytes, GiB 2^30, as accelerate reads them."""
    parts = [p.strip() for p in str(text).split(",")]
    sizes: list[int] = []
    for i, p in enumerate(parts, 1):
        m = _SIZE.match(p)
        if m is None:
            raise PlacementError(f"--gpu-memory {str(text)[:60]}: entry {i}, {p[:30]!r}, is not a size "
                                 "such as 141GB, 139GiB or 2x141GB")
        n = int(m.group(1) or 1)
        size = int(float(m.group(2)) * _UNIT[m.group(3).lower()])
        if not (1 <= n and size > 0) or len(sizes) + n > MAX_DEVICES:
            raise PlacementError(f"--gpu-memory {str(text)[:60]}: entry {i}, {p!r}: give 1 to {MAX_DEVICES} GPUs "
                                 "of a positive size")
        sizes += [size] * n
    if len(parts) == 1 and parts[0][:1].isdigit() and "x" not in parts[0].lower():
        return sizes[0]
    return tuple(sizes)


# ----------------------------------------------------------------------------- capacities


def capacities(request: MapRequest, gpu_memory=None, visible=None, cpu_bytes: int | None = None) -> dict:
    """{device: bytes} the plan may use, in fill order. `gpu_memory` from parse_gpu_memory (None:
    the visible GPUs' free memory, `visible`, a tuple of bytes from visible_gpus()); the CPU, where
    the map names it, has `cpu_bytes` (default: this machine's available memory)."""
    named = _named_devices(request)
    if named == ["cpu"]:                         # no GPU in the map: none needs to be visible
        return {"cpu": cpu_bytes if cpu_bytes is not None else _available_cpu_bytes()}
    if isinstance(gpu_memory, tuple):            # a described machine: cuda:0 .. cuda:n-1
        gpus = {f"cuda:{i}": b for i, b in enumerate(gpu_memory)}
        source = f"the {len(gpus)} GPU{'s' if len(gpus) > 1 else ''} --gpu-memory describes"
    elif isinstance(gpu_memory, int) and (named or visible):     # one size for each GPU
        gpus = {d: gpu_memory for d in (named or [f"cuda:{i}" for i in range(len(visible))]) if d != "cpu"}
        source = "the map"
    elif isinstance(gpu_memory, int) or not visible:
        if isinstance(gpu_memory, int):
            raise PlacementError(f"--device-map {request.text}: no GPU is visible here to count; say how many "
                                 f"the plan is for, e.g. --gpu-memory 2x{gpu_memory / 1e9:g}GB")
        raise PlacementError("no GPU is visible here (torch sees none); give the GPUs to plan for, e.g. "
                             "--gpu-memory 2x141GB")
    else:
        gpus = {f"cuda:{i}": b for i, b in enumerate(visible)}
        source = f"the {len(gpus)} visible GPU{'s' if len(gpus) > 1 else ''}"
    for d in named:
        if d != "cpu" and d not in gpus:
            where = next((w for n, dev, w in request.modules if dev == d), f"--device-map {request.text}")
            raise PlacementError(f"{where}: {d} is not visible ({source}: {', '.join(gpus) or 'none'})")
    if named:
        gpus = {d: gpus[d] for d in named if d != "cpu"}
    out = dict(gpus)
    if "cpu" in named:
        out["cpu"] = cpu_bytes if cpu_bytes is not None else _available_cpu_bytes()
    return out


def _named_devices(request: MapRequest) -> list[str]:
    if request.kind == "devices":
        return list(request.devices)
    if request.kind == "file":
        ds = {d for _, d, _ in request.modules}
        return sorted((d for d in ds if d != "cpu"), key=lambda d: int(d[5:])) + (["cpu"] if "cpu" in ds else [])
    return []


def visible_gpus() -> tuple[int, ...]:
    """Free bytes of each GPU torch sees (none on a CPU-only box)."""
    import torch
    if not torch.cuda.is_available():
        return ()
    return tuple(torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count()))


def _available_cpu_bytes() -> int:
    import psutil               # accelerate's own dependency
    return int(psutil.virtual_memory().available)


# ----------------------------------------------------------------------------- the plan


def plan_map(cfg, text: str, context: int, weight_bytes: float = 2, gpu_memory: str | None = None,
             run: bool = False, cpu_float32: bool = False) -> Plan:
    """`--device-map TEXT [--gpu-memory SIZES]` for cfg at `context` tokens: parsed, sized against
    the GPUs it names (the visible ones' free memory unless --gpu-memory describes a machine;
    a map of the CPU alone asks no GPU) and planned. `run`: for a load here, which only the
    visible GPUs can take. `cpu_float32`: the load puts the CPU's layers in float32 (no dtype
    asked), so a map that may use the CPU is planned at 4 bytes a weight. PlacementError, one
    line, where it cannot be (accelerate missing included)."""
    try:
        import accelerate  # noqa: F401  (the planner)
    except ImportError:
        raise PlacementError(f"--device-map {text[:80]} needs accelerate: pip install -e '.[multigpu]'") from None
    request = parse_device_map(text)
    sizes = parse_gpu_memory(gpu_memory) if gpu_memory is not None else None
    asks_gpu = _named_devices(request) != ["cpu"] and not isinstance(sizes, tuple)
    visible = visible_gpus() if asks_gpu else ()
    if run and asks_gpu and not visible:
        if request.kind not in ("auto", "balanced", "sequential"):
            raise PlacementError(f"{_what(request)}: no GPU is visible here (torch sees none); a map of cpu alone "
                                 "runs without one")
        # as Hugging Face's device_map="auto" does on a machine without a GPU: everything on the CPU
        request, visible = MapRequest("devices", request.text, devices=("cpu",)), ()
    caps = capacities(request, sizes, visible)
    if cpu_float32 and "cpu" in caps:
        weight_bytes = max(weight_bytes, 4)
    return plan(cfg, request, caps, context, weight_bytes)


def plan_checkpoint(path, device_map: str, context: int, dtype: str | None, base_dir=None) -> Plan:
    """The plan a run makes for a scenario's pretrained model with `device_map` (a map file
    relative to the scenario's folder, `base_dir`): what `record` loads and `validate` checks."""
    from ..arithmetic import DTYPE_BYTES
    from .loader import own_dtype, read_model_config
    text = device_map
    if text.endswith(".json") and base_dir is not None and not Path(text).expanduser().is_absolute():
        text = str(Path(base_dir) / text)
    cfg, _, _, raw = read_model_config(path)
    # the bytes a weight takes as the loader will load it: the dtype asked, else the checkpoint's own
    return plan_map(cfg, text, context, DTYPE_BYTES[dtype or own_dtype(raw)], run=True, cpu_float32=dtype is None)


def units_of(model) -> list[str]:
    """The placement units in model order: each top-level module, each block on its own."""
    out = []
    for name, child in model.named_children():
        if name == "blocks":
            out += [f"blocks.{i}" for i in range(len(child))]
        elif child is not None:
            out.append(name)
    return out


def plan(cfg, request: MapRequest, caps: dict, context: int, weight_bytes: int = 2) -> Plan:
    """Where each layer goes, and the bytes per device, without reading a weight; PlacementError,
    one line naming the device and the bytes over, when the map cannot fit."""
    import torch

    from .loader import build_on_meta
    if cfg.shape_only:
        raise PlacementError(f"preset {cfg.name!r} is shape-only: its layers are never built, so never placed "
                             "(lineage memory without --device-map gives its arithmetic)")
    dtype = {4: torch.float32, 2: torch.bfloat16, 1: torch.float8_e4m3fn}.get(weight_bytes)
    if dtype is None:
        raise PlacementError(f"--weight-bytes {weight_bytes:g}: a device map plans for 1, 2 or 4 bytes per parameter")
    if context < 1:
        raise PlacementError(f"--context {context}: must be at least 1")
    model = build_on_meta(cfg)
    for blk, n in zip(model.blocks, layer_cache_bytes(cfg, context)):
        blk.register_buffer(CACHE_BUFFER, torch.empty(n, dtype=torch.uint8, device="meta"), persistent=False)
    # a router's choice bias stays float32 (as the loader keeps it)
    special = {n: torch.float32 for n, _ in model.named_parameters() if n.endswith("score_bias")}
    units = units_of(model)
    if request.kind == "file":
        placed = _placed_as_written(request, units, cfg)
    else:
        placed = _placed_by_accelerate(model, request, caps, dtype, special)
    sizes = _unit_sizes(model, units, dtype, special)
    devices = tuple(DevicePlan(d, cap, tuple(u for u in units if placed[u] == d),
                               sum(sizes[u][0] for u in units if placed[u] == d),
                               sum(sizes[u][1] for u in units if placed[u] == d)) for d, cap in caps.items())
    for dp in devices:
        if dp.total > dp.capacity:
            need, have = sum(d.total for d in devices), sum(caps.values())
            raise PlacementError(
                f"{_what(request)}: does not fit: {dp.device} needs {gb(dp.total)} ({gb(dp.weight_bytes)} weights + "
                f"{gb(dp.cache_bytes)} cache and state at {context:,} tokens), {gb(dp.total - dp.capacity)} "
                f"over its {gb(dp.capacity)} (the model needs {gb(need)}, the {len(caps)} device"
                f"{'s' if len(caps) > 1 else ''} hold {gb(have)})")
    return Plan(request, context, devices, placed)


def _placed_by_accelerate(model, request: MapRequest, caps: dict, dtype, special) -> dict:
    """unit -> device by accelerate's planner, over `caps` in their order (accelerate's own keys:
    GPU indices, then 'cpu'). What it would offload to disk does not fit: it goes to the last
    device, whose bytes over are then reported."""
    import logging
    import warnings

    from accelerate.utils import get_balanced_memory, infer_auto_device_map
    keys = {d: int(d[5:]) if d.startswith("cuda:") else d for d in caps}
    back = {k: d for d, k in keys.items()}
    max_memory = {keys[d]: b for d, b in caps.items()}
    quiet = logging.getLogger("accelerate")
    level = quiet.level
    quiet.setLevel(logging.ERROR)       # "device 1 is not available": a plan for another machine is expected
    try:
        with warnings.catch_warnings():     # nor its advice on offloading to disk, which a plan never does
            warnings.simplefilter("ignore")
            if request.kind != "sequential" and sum(isinstance(k, int) for k in max_memory) > 1:
                max_memory = get_balanced_memory(model, dict(max_memory), no_split_module_classes=["Block"],
                                                 dtype=dtype, special_dtypes=special)
            got = infer_auto_device_map(model, dict(max_memory), no_split_module_classes=["Block"], dtype=dtype,
                                        special_dtypes=special, clean_result=False)
    finally:
        quiet.setLevel(level)
    last = list(caps)[-1]
    placed = {}
    for name, dev in got.items():
        d = back.get(dev, last)          # 'disk': does not fit anywhere
        if name == "blocks":            # the whole list on one device
            placed.update({u: d for u in units_of(model) if u.startswith("blocks.")})
        else:
            placed[name] = d
    for u in units_of(model):
        if u not in placed:       # accelerate split a unit it was not told to keep whole: never, but say so
            raise PlacementError(f"{_what(request)}: the planner split {u}; layers are placed whole")
    return placed


def _placed_as_written(request: MapRequest, units: list[str], cfg) -> dict:
    """unit -> device from a map file: each name (ours or the hub's) matched to a unit or a prefix
    of units ('' or 'blocks' cover many); the longest match decides, every unit must be covered."""
    owner: dict[str, tuple[int, str]] = {}
    for name, dev, where in request.modules:
        ours = _our_name(name)
        covered = [u for u in units if ours == "" or u == ours or u.startswith(ours + ".")]
        if not covered:
            inner = next((u for u in units if ours.startswith(u + ".")), None)
            if inner is not None:
                raise PlacementError(f"{where}: {name!r} is part of {_shown(inner)}; layers are placed whole "
                                     "(map the layer, not its parts)")
            hint = did_you_mean(name, [_hub_name(u) for u in units] + units)
            raise PlacementError(f"{where}: {name!r} is not a module of {cfg.name}{hint} (its modules: "
                                 f"{_hub_name(units[0])}, model.layers.0..{cfg.n_layers - 1}, model.norm, lm_head)")
        for u in covered:
            depth = len(ours)
            if u not in owner or owner[u][0] < depth:
                owner[u] = (depth, dev)
    missing = [u for u in units if u not in owner]
    if missing:
        raise PlacementError(f"{request.text}: {_shown(missing[0])} is not mapped to a device "
                             f"({len(missing)} module{'s' if len(missing) > 1 else ''} left; \"\": DEVICE maps the rest)")
    placed = {u: owner[u][1] for u in units}
    if cfg.tie_embeddings and placed.get("lm_head") != placed.get("wte"):
        raise PlacementError(f"{request.text}: the head is tied to the embedding (tie_word_embeddings): map "
                             f"lm_head to {placed['wte']}, where the embedding is")
    return placed


def _our_name(name: str) -> str:
    if name in _HUB:
        return _HUB[name]
    return _HUB_LAYERS.sub("blocks", name)


def _hub_name(unit: str) -> str:
    for hub, ours in _HUB.items():
        if ours == unit:
            return hub
    return unit.replace("blocks", "model.layers", 1)


def _shown(unit: str) -> str:
    return f"layer {unit[7:]}" if unit.startswith("blocks.") else _hub_name(unit)


def _unit_sizes(model, units: list[str], dtype, special) -> dict:
    """unit -> (weight bytes, cache-and-state bytes), by accelerate's sizing (the dtype the load
    gives each tensor). A tied head counts once, with the embedding: named_parameters lists a
    shared tensor under its first name only, so the head's size is 0."""
    from accelerate.utils import compute_module_sizes
    sizes = compute_module_sizes(model, dtype=dtype, special_dtypes=special)      # a defaultdict: 0 if absent
    out = {}
    for u in units:
        cache = sizes[f"{u}.{CACHE_BUFFER}"]
        out[u] = (sizes[u] - cache, cache)
    return out


def _what(request: MapRequest) -> str:
    return request.text if request.kind == "file" else f"--device-map {request.text}"


def gb(n: int) -> str:
    """Decimal gigabytes, as --gpu-memory 141GB and the cards are sold."""
    return f"{n / 1e9:.1f} GB"


def describe(units: tuple[str, ...]) -> str:
    """('wte', 'blocks.0', ..., 'blocks.23') -> 'embedding, layers 0-23'."""
    names = {"wte": "embedding", "wpe": "positions", "norm_f": "final norm", "lm_head": "head", "attnres": "attnres"}
    out, run = [], []
    for u in list(units) + [None]:
        if u is not None and u.startswith("blocks."):
            i = int(u[7:])
            if run and i == run[-1] + 1:
                run.append(i)
                continue
            if run:
                out.append(_span(run))
            run = [i]
            continue
        if run:
            out.append(_span(run))
            run = []
        if u is not None:
            out.append(names.get(u, u))
    return ", ".join(out)


def _span(run: list[int]) -> str:
    return f"layer {run[0]}" if len(run) == 1 else f"layers {run[0]}-{run[-1]}"
