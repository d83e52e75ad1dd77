"""`load_pretrained`: a checkpoint directory in the Hugging Face layout -> the project's own `LM`.

The model is built on the meta device (no memory, no random init), every tensor's place and
shape is checked from the safetensors headers alone, then each parameter is allocated once at its
final dtype and device, and every checkpoint tensor is copied into its place as it is read, shard
by shard: the weights exist once, never as a float32 or CPU copy of the whole. Which tensor goes
where, and what each config field means, is the architecture's file.
"""
from __future__ import annotations

from pathlib import Path

from ..arithmetic import DTYPE_BYTES, dtype_name
from ..did_you_mean import did_you_mean
from . import deepseek_v3, gemma3_text, gpt2, kimi_linear, lfm2, llama, mamba2, olmo_hybrid, qwen3_5, qwen3_next
from .claims import check_claims
from .hfconfig import Fields, read_config
from .problems import PretrainedError, ShapeError
from .shards import Shards, resolve_dir, weight_files
from .tokenizer import load_tokenizer

# one file per family; a file may open several model_types (its MODEL_TYPES)
FAMILIES = (
    deepseek_v3,
    gemma3_text,
    gpt2,
    kimi_linear,
    lfm2,
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


def load_pretrained(path, device="cpu", dtype=None, device_map: dict | None = None):
    """(model, tokenizer or None). `dtype` None: the checkpoint's own (config.json's `dtype` or
    `torch_dtype`) on a GPU, float32 on the CPU or when it names none. `device_map` (a plan's
    unit -> device, lineage.families.placement) places each layer instead of `device`: each
    tensor is allocated on its layer's device and filled there from the shards, and with `dtype`
    None the CPU's layers take float32 as above. Raises PretrainedError, one line, for anything
    wrong with the directory."""
    import torch
    cfg, arch, root, raw = read_model_config(path)
    own = own_dtype(raw)
    tokenizer = load_tokenizer(root)        # a broken tokenizer file is found before any weight is read
    shards, model, params = check_weights(cfg, arch, root, raw.get("model_type"))
    where = _devices(params, device_map, device)
    types = {}
    for d in set(where.values()):
        # the CPU has no bf16 triangular solve (the chunked reference needs one): float32 there
        want = "float32" if dtype is None and d.type == "cpu" else dtype
        types[d] = torch_dtype(want) or torch_dtype(own)
    # a router's choice bias stays float32 (as the reference keeps it): in bf16 near-equal experts would swap
    dest = {n: torch.empty(p.shape, dtype=torch.float32 if n.endswith("score_bias") else types[where[n]],
                           device=where[n]) for n, p in params.items()}
    for name in shards.names():
        t = shards.get(name)
        for ours, index, piece in arch.pieces(name, t, cfg):     # each checked by check_headers
            target = dest[ours][index]
            target.copy_(piece)
            # a sum is finite unless some value is not (or it overflows: then look at each value);
            # one pass with no mask allocated, where isfinite().all() took half the load on the CPU
            if target.is_floating_point() and not bool(torch.isfinite(target.sum(dtype=torch.float32))) \
                    and not bool(torch.isfinite(target).all()):
                raise PretrainedError(f"{shards.where[name][1]}: tensor {name} holds NaN or inf values")
        del t
    if cfg.tie_embeddings and "lm_head.weight" in shards.where:
        _same_head(shards, dest["wte.weight"])
    for n, t in dest.items():
        owner, _, leaf = n.rpartition(".")
        model.get_submodule(owner)._parameters[leaf] = torch.nn.Parameter(t, requires_grad=False)
    if cfg.tie_embeddings:
        model.lm_head.weight = model.wte.weight
    try:
        model.placed()
    except ValueError as e:
        raise PretrainedError(str(e)) from None
    return model.eval(), tokenizer


def own_dtype(raw: dict) -> str:
    """The dtype config.json says the weights are in (`dtype` or `torch_dtype`, a multimodal
    composite's under `text_config`), as torch names it; float32 when it names none we know."""
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}
    own = raw.get("dtype") or raw.get("torch_dtype") or text.get("dtype") or text.get("torch_dtype")
    return (dtype_name(own) if isinstance(own, str) else None) or "float32"


def _devices(params: dict, device_map: dict | None, device) -> dict:
    """parameter name -> torch.device: `device` for all, or each parameter's unit's device in
    `device_map` (unit: 'wte', 'blocks.3', 'norm_f', 'lm_head', as placement.units_of names them)."""
    import torch
    if device_map is None:
        d = torch.device(device)
        return dict.fromkeys(params, d)
    out = {}
    for n in params:
        head, _, rest = n.partition(".")
        unit = f"{head}.{rest.partition('.')[0]}" if head == "blocks" else head
        if unit not in device_map:
            raise PretrainedError(f"the device map places no {unit} (it places {', '.join(list(device_map)[:4])}, ...)")
        out[n] = torch.device(device_map[unit])
    return out


def check_weights(cfg, arch, root: Path, model_type) -> tuple[Shards, object, dict]:
    """The weight files against config.json from their safetensors headers alone, all a load checks
    before it allocates anything: the claims (layers and sizes the files hold), then the model on
    meta and every tensor's place, shape and dtype. -> (the shards, the meta model, its parameters
    by name; a tied head appears once, as wte.weight). `lineage validate` stops here: no weights
    are read, only torch's import and a meta build (0.2 s for Kimi Linear's published 27 layers)."""
    shards = Shards(weight_files(root))
    check_claims(cfg, shards, root / "config.json")      # before the build: layers and sizes the files hold
    model = build_on_meta(cfg)
    params = dict(model.named_parameters())
    if any(True for _ in model.buffers()):
        raise PretrainedError(f"{cfg.name}: the model has buffers the loader does not fill")
    check_headers(arch, cfg, shards, params, root, model_type)
    return shards, model, params


def build_on_meta(cfg):
    """The project's `LM` for `cfg` on the meta device, built for its parameters' shapes alone."""
    import torch

    from ..model import LM
    with torch.device("meta"), shapes_only():
        return LM(cfg)


def shapes_only():
    """A torch function mode for work on meta tensors whose values are never read (a model's
    build, a header's tensor split into pieces): random draws are skipped and elementwise math
    gives an empty meta tensor of the broadcast shape. Run as torch runs it, the first draw or
    elementwise op on meta in a process imports torch._dynamo for its Python meta kernels: 2 s and
    150 MB on the 2-core box, most of a hostile folder's refusal (BENCHMARKS.md, Reliability)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class ShapesOnly(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if func in (torch.randn, torch.rand):            # a factory: the same shape, no draw
                kwargs.pop("generator", None)
                return torch.empty(*args, **kwargs)
            if getattr(func, "__module__", None) == "torch.nn.init" or name in _DRAWS:
                return args[0] if args else kwargs["tensor"]      # in place: the tensor as it is
            op = name.strip("_")
            op = op[1:] if op not in _ELEMENTWISE and op[:1] == "r" else op      # __rmul__: mul, reflected
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if op in _ELEMENTWISE and tensors and all(t.is_meta for t in tensors) and not kwargs:
                if name.endswith("_") and not name.startswith("_"):      # in place: shape and dtype kept
                    return args[0]
                shape = _broadcast([tuple(t.shape) for t in tensors])
                if shape is not None:               # else torch raises its own error below
                    dtype = torch.result_type(*args[:2]) if len(args) > 1 else tensors[0].dtype
                    if op in _TO_FLOAT and not dtype.is_floating_point:
                        dtype = torch.get_default_dtype()
                    return torch.empty(shape, dtype=dtype, device="meta")
            return func(*args, **kwargs)

    return ShapesOnly()


# the in-place draws a module's constructor may make on a fresh parameter
_DRAWS = frozenset(("normal_", "uniform_", "random_", "exponential_", "log_normal_", "cauchy_", "geometric_",
                    "bernoulli_"))
# elementwise math a constructor or a family's `pieces` does (as a function, a method or an operator,
# reflected or in place), and those of it whose result is floating for integer inputs
_ELEMENTWISE = frozenset(("add", "sub", "mul", "div", "truediv", "pow", "neg", "log", "log1p", "exp", "expm1",
                          "sqrt", "rsqrt", "reciprocal", "sigmoid", "tanh", "abs"))
_TO_FLOAT = frozenset(("div", "truediv", "log", "log1p", "exp", "expm1", "sqrt", "rsqrt", "reciprocal", "sigmoid",
                       "tanh"))


def _broadcast(shapes: list[tuple]) -> tuple | None:
    """The shape these broadcast to, or None where they do not: by hand, as torch.broadcast_shapes
    imports sympy (1 s) for symbolic sizes."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        sizes = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def check_headers(arch, cfg, shards: Shards, params: dict, root: Path, model_type) -> None:
    """Every checkpoint tensor's place, shape and kind of dtype checked against the model's
    parameters from the safetensors headers alone (each tensor a meta tensor of its header's shape
    and dtype, split by the family's `pieces` as its data will be), and every parameter covered:
    a wrong tensor is refused before gigabytes of destination are allocated and shards are read."""
    written = dict.fromkeys(params, 0)
    with shapes_only():
        for name in shards.names():
            _check_header(arch, cfg, shards, name, params, written, model_type)
    over = [n for n in params if written[n] > params[n].numel()]
    if over:        # two tensors of the file land on the same parameter (a fused and a split form, say)
        raise PretrainedError(f"{root}: the checkpoint fills {over[0]} more than once ({written[over[0]]:,} values "
                              f"written for its {params[over[0]].numel():,}; two tensors map to it)")
    short = [n for n in params if written[n] != params[n].numel()]
    if short:
        raise PretrainedError(f"{root}: the checkpoint lacks weights config.json implies: {short[0]} "
                              f"({written[short[0]]:,} of {params[short[0]].numel():,} values found; "
                              f"{len(short)} parameters incomplete)")


def _check_header(arch, cfg, shards: Shards, name: str, params: dict, written: dict, model_type) -> None:
    """One tensor of check_headers: its pieces against the parameters, their values counted in `written`."""
    import torch
    where = shards.where[name][1]
    shape, kind = shards.shape(name), shards.dtype(name)
    dtype = getattr(torch, kind, None)           # a kind torch lacks is refused below, as not floating
    t = torch.empty(shape, dtype=dtype if isinstance(dtype, torch.dtype) else torch.uint8, device="meta")
    try:
        parts = arch.pieces(name, t, cfg)
    except ShapeError as e:          # a fused tensor checked before it is split
        raise PretrainedError(f"{where}: tensor {name} has shape {shape}; config.json implies {e.want} for it") from None
    except PretrainedError as e:     # a family's own words about the tensor: said at its file
        raise PretrainedError(f"{where}: {e}") from None
    if parts is None:
        raise PretrainedError(f"{where}: tensor {name} is not part of a {model_type} model as config.json describes it")
    if parts and not t.is_floating_point():     # cast to float, ids or flags become nonsense weights
        raise PretrainedError(f"{where}: tensor {name} holds {kind} values, not floating-point weights")
    for ours, index, piece in parts:
        if ours not in params:
            raise PretrainedError(f"{where}: tensor {name} does not fit config.json (no {ours} in this model)")
        target = params[ours][index]
        if tuple(target.shape) != tuple(piece.shape):
            raise PretrainedError(f"{where}: tensor {name} has shape {shape}; config.json implies "
                                  f"{tuple(target.shape)} for it")
        written[ours] += piece.numel()


def _same_head(shards: Shards, wte) -> None:
    """config.json ties the head to the embedding, yet the file carries a head of its own: use
    it only if it is the embedding, else refuse (dropping a trained head silently changes the model)."""
    import torch
    head = shards.get("lm_head.weight")
    if tuple(head.shape) != tuple(wte.shape) or not torch.equal(head.to(wte.device, wte.dtype), wte):
        raise PretrainedError(f"{shards.where['lm_head.weight'][1]}: tensor lm_head.weight differs from the "
                              "embedding, but config.json ties them (tie_word_embeddings); refusing to drop it "
                              "(set tie_word_embeddings to false to use the file's head)")
