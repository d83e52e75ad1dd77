"""`load_pretrained`: a checkpoint directory in the Hugging Face layout -> the project's own `LM`.

The model is built on the meta device (no memory, no random init), each parameter is allocated
once at its final dtype and device, and every checkpoint tensor is copied into its place as it
is read, shard by shard: the weights exist once, never as a float32 or CPU copy of the whole.
Which tensor goes where, and what each config field means, is the architecture's file.
"""
from __future__ import annotations

from pathlib import Path

from ..arithmetic import DTYPE_BYTES, dtype_name
from ..did_you_mean import did_you_mean
from . import gpt2, kimi_linear, llama, mamba2, olmo_hybrid, qwen3_5, qwen3_next
from .claims import check_claims
from .hfconfig import Fields, read_config
from .problems import PretrainedError, ShapeError
from .shards import Shards, resolve_dir, weight_files
from .tokenizer import load_tokenizer

# one file per family; a file may open several model_types (its MODEL_TYPES)
FAMILIES = (
    gpt2,
    kimi_linear,
    llama,
    mamba2,
    olmo_hybrid,
    qwen3_5,
    qwen3_next,
)
ARCHS = {kind: m for m in FAMILIES for kind in m.MODEL_TYPES}


def is_checkpoint(path) -> bool:
    """Whether `path` is a directory that looks like a checkpoint (for `lineage run PATH`)."""
    p = Path(path).expanduser()
    return p.is_dir() and ((p / "config.json").exists() or (p / "snapshots").is_dir())


def read_model_config(path):
    """(ModelConfig, architecture module, resolved dir, raw config) without reading any weights."""
    root = resolve_dir(path)
    raw = read_config(root)
    kind = raw.get("model_type")
    if not isinstance(kind, str) or kind not in ARCHS:
        hint = did_you_mean(kind, ARCHS) if isinstance(kind, str) else ""
        shown = repr(kind) if isinstance(kind, str) or kind is None else f"of type {type(kind).__name__}"
        raise PretrainedError(f"{root / 'config.json'}: model_type {shown[:60]} is not supported{hint} "
                              f"(lineage loads {', '.join(sorted(ARCHS))})")
    arch = ARCHS[kind]
    fields = Fields(raw, root / "config.json", kind)
    cfg = arch.config(fields, root.name if root.parent.name != "snapshots" else root.parent.parent.name)
    fields.done()
    try:
        cfg.check()
    except (ValueError, TypeError, ArithmeticError) as e:   # every field was read checked: a last net only
        raise PretrainedError(f"{root / 'config.json'}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    return cfg, arch, root, raw


def torch_dtype(name):
    import torch
    if name is None or isinstance(name, torch.dtype):
        return name
    if dtype_name(name) is None:
        raise PretrainedError(f"dtype {name!r} is not one of {', '.join(sorted(DTYPE_BYTES))}")
    return getattr(torch, dtype_name(name))


def load_pretrained(path, device="cpu", dtype=None):
    """(model, tokenizer or None). `dtype` None: the checkpoint's own (config.json's `dtype` or
    `torch_dtype`) on a GPU, float32 on the CPU or when it names none. Raises PretrainedError, one line, for anything
    wrong with the directory."""
    import torch
    from ..model import LM
    cfg, arch, root, raw = read_model_config(path)
    device = torch.device(device)
    if dtype is None and device.type == "cpu":
        dtype = "float32"       # the CPU has no bf16 triangular solve (the chunked reference needs one)
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}    # a multimodal composite's
    own = raw.get("dtype") or raw.get("torch_dtype") or text.get("dtype") or text.get("torch_dtype")
    dtype = torch_dtype(dtype) or torch_dtype(dtype_name(own) or "float32")
    tokenizer = load_tokenizer(root)        # a broken tokenizer file is found before any weight is read
    shards = Shards(weight_files(root))
    check_claims(cfg, shards, root / "config.json")      # before the build: layers and sizes the files hold
    with torch.device("meta"):
        model = LM(cfg)
    params = dict(model.named_parameters())             # a tied head appears once, as wte.weight
    if any(True for _ in model.buffers()):
        raise PretrainedError(f"{cfg.name}: the model has buffers the loader does not fill")
    # a router's choice bias stays float32 (as the reference keeps it): in bf16 near-equal experts would swap
    dest = {n: torch.empty(p.shape, dtype=torch.float32 if n.endswith("score_bias") else dtype, device=device)
            for n, p in params.items()}
    written = dict.fromkeys(dest, 0)
    for name in shards.names():
        t = shards.get(name)
        try:
            parts = arch.pieces(name, t, cfg)
        except ShapeError as e:          # a fused tensor checked before it is split
            raise PretrainedError(f"{shards.where[name][1]}: tensor {name} has shape {tuple(t.shape)}; "
                                  f"config.json implies {e.want} for it") from None
        if parts is None:
            raise PretrainedError(f"{shards.where[name][1]}: tensor {name} is not part of a {raw.get('model_type')} model "
                                  f"as config.json describes it")
        if parts and not t.is_floating_point():     # cast to float, ids or flags become nonsense weights
            raise PretrainedError(f"{shards.where[name][1]}: tensor {name} holds {str(t.dtype).removeprefix('torch.')} "
                                  "values, not floating-point weights")
        for ours, index, piece in parts:
            if ours not in dest:
                raise PretrainedError(f"{shards.where[name][1]}: tensor {name} does not fit config.json "
                                      f"(no {ours} in this model)")
            target = dest[ours][index]
            if tuple(target.shape) != tuple(piece.shape):
                raise PretrainedError(f"{shards.where[name][1]}: tensor {name} has shape {tuple(t.shape)}; "
                                      f"config.json implies {tuple(target.shape)} for it")
            target.copy_(piece)
            # a sum is finite unless some value is not (or it overflows: then look at each value);
            # one pass with no mask allocated, where isfinite().all() took half the load on the CPU
            if target.is_floating_point() and not bool(torch.isfinite(target.sum(dtype=torch.float32))) \
                    and not bool(torch.isfinite(target).all()):
                raise PretrainedError(f"{shards.where[name][1]}: tensor {name} holds NaN or inf values")
            written[ours] += piece.numel()
        del t
    short = [n for n in dest if written[n] != dest[n].numel()]
    if short:
        raise PretrainedError(f"{root}: the checkpoint lacks weights config.json implies: {short[0]} "
                              f"({written[short[0]]:,} of {dest[short[0]].numel():,} values found; "
                              f"{len(short)} parameters incomplete)")
    if cfg.tie_embeddings and "lm_head.weight" in shards.where:
        _same_head(shards, dest["wte.weight"])
    for n, t in dest.items():
        owner, _, leaf = n.rpartition(".")
        model.get_submodule(owner)._parameters[leaf] = torch.nn.Parameter(t, requires_grad=False)
    if cfg.tie_embeddings:
        model.lm_head.weight = model.wte.weight
    return model.eval(), tokenizer


def _same_head(shards: Shards, wte) -> None:
    """config.json ties the head to the embedding, yet the file carries a head of its own: use
    it only if it is the embedding, else refuse (dropping a trained head silently changes the model)."""
    import torch
    head = shards.get("lm_head.weight")
    if tuple(head.shape) != tuple(wte.shape) or not torch.equal(head.to(wte.device, wte.dtype), wte):
        raise PretrainedError(f"{shards.where['lm_head.weight'][1]}: tensor lm_head.weight differs from the "
                              "embedding, but config.json ties them (tie_word_embeddings); refusing to drop it "
                              "(set tie_word_embeddings to false to use the file's head)")
