"""The files of a checkpoint directory: where it is (a hub cache folder's snapshot), and its
weights, safetensors only, one file or an index of shards.

Every file is opened (header read and checked by the `safetensors` library, which refuses a
truncated file, a header whose offsets or shapes disagree with the data, or junk) before any
tensor is read, so a missing or broken shard is found before minutes of loading. Tensors are
then read one at a time through the library's memory map: the caller copies each into its
final place, so no second copy of the weights is ever held.
"""
from __future__ import annotations

import os
from pathlib import Path

from .hfconfig import read_json
from .hub import RefMissing, snapshot_of
from .problems import PretrainedError

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
# An index names each tensor once: 9 MB for DeepSeek-V3's 91K tensors in 163 shards, among the
# largest published. The bounds hold a hostile one to seconds and a few hundred MB: 55 MB of 2.6M
# tiny entries, one shard each, took 46 s (a stat per shard) and 840 MB
INDEX_BYTES, INDEX_TENSORS, MAX_SHARDS = 32 << 20, 1 << 19, 1 << 14
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.pth", "tf_model.h5",
           "flax_model.msgpack")
CONVERT = ("convert it once where you trust the file: python -c \"import torch; from safetensors.torch "
           "import save_file; save_file(torch.load('pytorch_model.bin', weights_only=True), "
           "'model.safetensors')\"")


# safetensors' dtype names -> torch's (the ones torch has; another is shown as the file names it)
_TORCH_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
                "F8_E5M2": "float8_e5m2", "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
                "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool"}


def resolve_dir(path) -> Path:
    """The directory holding config.json: `path` itself, or for a hub cache folder
    (`models--org--name`) the snapshot that refs/main names (or its only snapshot). A hub id
    (`org/name`) is found in the cache by lineage.families.hub, before it comes here."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise PretrainedError(f"{root}: not a directory (a checkpoint is a folder with config.json and *.safetensors)")
    snaps = root / "snapshots"
    if not (root / "config.json").exists() and snaps.is_dir():
        if os.path.lexists(root / "refs" / "main"):      # a dangling link too: read, and refused, as any ref
            try:
                return snapshot_of(root, "main")      # read bounded, a commit id, a folder inside the repo
            except RefMissing:                        # a commit not held: the only snapshot, as before
                pass
        found = sorted(p for p in snaps.iterdir() if p.is_dir())
        if len(found) == 1:
            return found[0]
        raise PretrainedError(f"{root}: {len(found)} snapshots and no refs/main; give the snapshot folder itself")
    return root


def weight_files(root: Path) -> list[Path]:
    """The safetensors files the checkpoint's weights are in, checked to exist."""
    index = root / INDEX
    if index.exists():
        weight_map = read_json(index, INDEX_BYTES, INDEX_TENSORS).get("weight_map")
        if not isinstance(weight_map, dict):
            raise PretrainedError(f"{index}: weight_map: expected an object of tensor name -> shard file, got "
                                  f"{'nothing' if weight_map is None else type(weight_map).__name__}")
        for tensor, name in weight_map.items():
            if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith(".") or not name:
                raise PretrainedError(f"{index}: weight_map: tensor {tensor[:80]}: shard name {str(name)[:80]!r} "
                                      "is not a file in the directory")
        names = sorted(set(weight_map.values()))
        if len(names) > MAX_SHARDS:
            raise PretrainedError(f"{index}: weight_map names {len(names):,} shard files (lineage reads at most "
                                  f"{MAX_SHARDS:,})")
        missing = [n for n in names if not (root / n).is_file()]
        if missing:
            raise PretrainedError(f"{root}: shard {missing[0]} is missing ({len(missing)} of {len(names)} "
                                  "shards named by the index are not there)")
        return [root / n for n in names]
    if (root / SINGLE).is_file():
        return [root / SINGLE]
    pickled = [n for n in PICKLES if (root / n).exists()]
    if pickled:
        raise PretrainedError(f"{root / pickled[0]}: pickle-based weights are never loaded (unpickling runs "
                              f"code); {CONVERT}")
    raise PretrainedError(f"{root}: no {SINGLE} or {INDEX} in the directory")


def _why(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


class Shards:
    """Every tensor of the checkpoint by name; `get(name)` reads one tensor (on the CPU)."""

    def __init__(self, files: list[Path]):
        from safetensors import safe_open
        self._handles, self.where = [], {}
        for path in files:
            try:
                h = safe_open(str(path), framework="pt", device="cpu")
                names = list(h.keys())
            except Exception as e:    # SafetensorError, OSError: every kind means "not usable"
                raise PretrainedError(f"{path}: not a usable safetensors file ({_why(e)})") from None
            self._handles.append(h)
            for name in names:
                if name in self.where:
                    raise PretrainedError(f"{path}: tensor {name} is also in {files[self.where[name][0]].name}")
                self.where[name] = (len(self._handles) - 1, path)

    def names(self) -> list[str]:
        return list(self.where)

    def shape(self, name: str) -> tuple[int, ...]:
        i, _ = self.where[name]
        return tuple(self._handles[i].get_slice(name).get_shape())

    def dtype(self, name: str) -> str:
        """The header's dtype by torch's name (`float32`, `int32`), or its own name lowercased."""
        i, _ = self.where[name]
        kind = self._handles[i].get_slice(name).get_dtype()
        return _TORCH_NAMES.get(kind, kind.lower())

    def get(self, name: str):
        i, path = self.where[name]
        try:
            return self._handles[i].get_tensor(name)
        except Exception as e:
            raise PretrainedError(f"{path}: tensor {name} cannot be read ({_why(e)})") from None
