"""Checks across fields that the schema cannot express: the models a spec builds, layer and
head indices against them, panels against what each model holds, tasks, checkpoints, captions.
Also how many frames a scenario yields (it depends on the input and the decoding)."""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from ..arithmetic import DTYPE_BYTES, count, model_memory
from ..did_you_mean import did_you_mean
from ..figures import figure_steps
from ..prefill import activation_bytes, chunk_for
from ..presets import PRESETS
from .build import build_config, pretrained_dir
from .panels import LAYER_PANELS, MEMORY_PANELS, NEEDS, mixer_kinds, panel_layers
from .reader import Located
from .schema import MQAR, Scenario, TopicShift, TwoFacts
from .tasks import generate


MAX_SCENARIO_BYTES = 3 << 29       # 1.5 GiB: every model's weights, state and cache at the last step,
                                   # plus the widest moment of the prefill


def resident_bytes(cfgs: list, dtype: str, steps: int) -> int:
    """What a scenario's models hold at once at its last step: weights and recurrent state in the
    scenario's dtype, caches grown over `steps` tokens (the frames themselves are bounded apart)."""
    elem = DTYPE_BYTES[dtype]
    total = 0
    for cfg in cfgs:
        mem = model_memory(cfg, steps, cache_dtype_bytes=elem, state_dtype_bytes=elem)
        total += count(cfg)["total"] * elem + mem["total_bytes"]
    return total


def prefill_bytes(cfgs: list, dtype: str, tokens: int, device: str = "cpu") -> int:
    """The transient peak of reading `tokens` tokens at once on `device` (lineage.prefill.activation_bytes):
    the models prefill one after another, so the widest one's, not the sum. Zero without a prefill."""
    if tokens <= 0:
        return 0
    return max(activation_bytes(cfg, tokens, DTYPE_BYTES[dtype], device) for cfg in cfgs)


def run_device(want: str) -> str:
    """"cuda" or "cpu": where a run puts a scenario whose `device` is `want`, as the runner picks
    it (lineage.playback.runners: "auto" is CUDA when torch sees a GPU, "cuda" without one falls
    back to the CPU), asked without importing torch, as validate must stay torch-free: torch answers
    where it is already imported, else the NVIDIA driver's list of GPUs, less those
    CUDA_VISIBLE_DEVICES hides. A CPU-only torch on a GPU machine is taken for CUDA: its budget is
    the larger (16K-token chunks, the prefix copied for cuDNN), so the error is on the safe side."""
    if want == "cpu":
        return "cpu"
    torch = sys.modules.get("torch")
    if torch is not None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        return "cpu"
    try:
        with os.scandir("/proc/driver/nvidia/gpus") as gpus:
            return "cuda" if any(True for _ in gpus) else "cpu"
    except OSError:                 # no NVIDIA driver
        return "cpu"


def _check_budget(sc: Scenario, toys: list, loc: Located, problems: list, base_dir: Path | None) -> None:
    """Weights, state and cache at the last step, plus the prefill's activations, within
    MAX_SCENARIO_BYTES: `validate` and `record` both come here, so what validates records.
    Without the prefill's share, a k3-mini scenario with prefill: 99800 validated."""
    prefill = sc.decoding.prefill
    kept = resident_bytes(toys, sc.dtype, (total_steps(sc, base_dir) or 0) + prefill)
    device = run_device(sc.device)      # a GPU's wider chunks need more than the CPU's
    act = prefill_bytes(toys, sc.dtype, prefill, device)
    if kept + act <= MAX_SCENARIO_BYTES:
        return
    limit = f"limit {MAX_SCENARIO_BYTES / 2**30:.1f} GiB"
    if kept <= MAX_SCENARIO_BYTES:      # the prefill is what tips it over: say so where it is set
        where = f"on {'CUDA' if device == 'cuda' else 'the CPU'} ({chunk_for(device):,}-token chunks; device: {sc.device})"
        problems.append(loc.problem(("decoding", "prefill"),
                                    f"reading {prefill:,} tokens at once {where} needs {act / 2**30:.2f} GiB of "
                                    f"activations on top of {kept / 2**30:.2f} GiB of weights, state and cache "
                                    f"({limit}): a smaller prefill, or fewer or smaller models"))
        return
    problems.append(loc.problem(("models",) if sc.models is not None else ("model",),   # 8 gpt2-small reached 4 GB
                                f"the scenario's models would hold {kept / 2**30:.1f} GiB of weights, state "
                                f"and cache by its last step ({limit}): fewer or smaller models, or fewer steps"))


def semantic(sc: Scenario, loc: Located, problems: list, base_dir: Path | None) -> None:
    """Checks across fields: presets, overrides, layer indices, panels against the model."""
    cfgs = [build_config(s, sc.model_path(i), loc, problems, base_dir) for i, s in enumerate(sc.model_specs)]
    specs = sc.model_specs
    toys = [c for c, s in zip(cfgs, specs) if s.pretrained is None]      # a checkpoint is as big as it is
    _check_weights(sc, cfgs, loc, problems, base_dir)
    if all(c is not None for c in cfgs) and toys and sc.input is not None:
        _check_budget(sc, toys, loc, problems, base_dir)
    if sc.input is not None:
        _check_positions(sc, cfgs, loc, problems, base_dir)
    memories = [s.memory is not None for s in specs]
    if sc.input is not None and any(memories) and sc.input.task is None:
        i = memories.index(True)
        problems.append(loc.problem(sc.model_path(i) + ("memory",),
                                    "a memory model is fed by a task (two_facts, mqar or topic_shift), not text or ids"))
    for i, s in enumerate(specs):
        m = s.memory
        if m is not None and m.channel_decay is not None:
            p = sc.model_path(i) + ("memory", "channel_decay")
            if m.rule not in ("kda", "gated_linear"):
                problems.append(loc.problem(p, "channel_decay needs rule: kda or gated_linear (one decay per key channel)"))
            elif len(m.channel_decay) != m.key_dim:
                problems.append(loc.problem(p, f"has {len(m.channel_decay)} entries; expected key_dim = {m.key_dim}"))
            elif any(g > 0 for g in m.channel_decay):
                problems.append(loc.problem(p, "log decays must be <= 0 (alpha = exp(g) <= 1)"))
        if m is not None and sc.input is not None and isinstance(sc.input.task, TwoFacts) and m.key_dim < 2:
            problems.append(loc.problem(sc.model_path(i) + ("memory", "key_dim"), "two_facts needs key_dim >= 2"))
    task = sc.input.task if sc.input is not None else None
    if isinstance(task, (MQAR, TopicShift)):
        need = task.pairs * (2 if isinstance(task, TopicShift) else 1)
        if need > task.vocab // 2:
            problems.append(loc.problem(("input", "task", "pairs"), f"{task.pairs} pairs need {need} distinct keys; "
                                        f"vocab {task.vocab} has {task.vocab // 2} (keys are its first half)"))
            return
    if any(memories) and not all(memories):
        problems.append(loc.problem(("models",), "mix of memory models and language models: they read the input "
                                    "differently (events vs tokens); put them in separate scenarios"))
    if sc.input is not None and sc.input.ids is not None:
        for i, cfg in enumerate(cfgs):
            if cfg is not None and max(sc.input.ids) >= cfg.vocab_size:
                j = max(range(len(sc.input.ids)), key=lambda t: sc.input.ids[t])
                problems.append(loc.problem(("input", "ids", j), f"token id {sc.input.ids[j]} is past the "
                                            f"vocabulary of {cfg.name} ({cfg.vocab_size})"))
    tok = scenario_tokenizer(sc, base_dir)
    if sc.input is not None and sc.input.text is not None and tok is None and specs and specs[0].pretrained \
            and cfgs[0] is not None:
        problems.append(loc.problem(("input", "text"), _no_tokenizer(specs[0], base_dir or sc.base_dir)))
    elif sc.input is not None and sc.input.text is not None and tok is None:     # text refused above, else bytes
        for i, cfg in enumerate(cfgs):     # text is read byte by byte: ids 0..255
            if cfg is not None and cfg.vocab_size < 256:
                problems.append(loc.problem(sc.model_path(i), f"{cfg.name} has a vocabulary of {cfg.vocab_size}; "
                                            "text input is read as bytes and needs at least 256"))
    if sc.input is not None and sc.input.text is not None and tok is not None:
        ids = tok.encode(sc.input.text)
        for i, cfg in enumerate(cfgs):
            if cfg is not None and ids and max(ids) >= cfg.vocab_size:
                problems.append(loc.problem(("input", "text"), f"the tokenizer makes id {max(ids)}, past the "
                                            f"vocabulary of {cfg.name} ({cfg.vocab_size})"))
        if not ids:
            problems.append(loc.problem(("input", "text"), "the tokenizer makes no tokens of this text"))
            return
    if sc.input is not None and sc.input.text is not None:
        n = input_length(sc, base_dir)
        if sc.decoding.prefill >= n and sc.decoding.mode == "teacher":
            problems.append(loc.problem(("decoding", "prefill"), f"prefill {sc.decoding.prefill} leaves no input "
                                        f"to step through (the text is {n} tokens)"))
    given = [(("weights", "checkpoint"), sc.weights.checkpoint, any(memories))]
    given += [(sc.model_path(i) + ("checkpoint",), s.checkpoint, s.memory is not None)
              for i, s in enumerate(specs) if s.checkpoint is not None]
    for where, path, memory in given:
        if path is not None:
            _check_checkpoint(where, path, memory, loc, problems, base_dir)
    for key in sc.weights.set:
        if not any(memories):
            problems.append(loc.problem(("weights", "set", key), "hand-set values are for memory models"))
        elif key not in ("keys", "values"):
            problems.append(loc.problem(("weights", "set", key), f"unknown hand-set table {key!r} "
                                        f"(expected keys or values){did_you_mean(key, ['keys', 'values'])}", key=True))
        elif sc.input is not None and sc.input.task is not None:
            _check_table(sc, key, loc, problems)
    for j, p in enumerate(sc.panels):
        path = ("panels", j)
        if p.kind in ("figure",):
            if sc.figure is None:
                problems.append(loc.problem(path + ("kind",), "a figure panel needs a figure section"))
            continue
        if p.kind in ("captions", "lineage"):
            continue
        if not specs:
            problems.append(loc.problem(path + ("kind",), f"a {p.kind} panel needs a model"))
            continue
        if p.model >= len(specs):
            problems.append(loc.problem(path + ("model",), f"model {p.model} does not exist "
                                        f"(the scenario has {len(specs)}: 0-{len(specs) - 1})"))
            continue
        cfg, spec = cfgs[p.model], specs[p.model]
        if spec.memory is not None:
            if p.kind not in MEMORY_PANELS:
                problems.append(loc.problem(path + ("kind",), f"a memory model has no {p.kind} panel "
                                            "(state, decay, recall and tokens apply)"))
            continue
        if cfg is None:
            continue
        if p.kind == "recall":
            problems.append(loc.problem(path + ("kind",), "the recall panel reads a memory model's hand-set keys"))
            continue
        if p.layer is not None and p.layer >= cfg.n_layers:
            problems.append(loc.problem(path + ("layer",), f"layer {p.layer} is past the last layer "
                                        f"({cfg.name} has {cfg.n_layers}: 0-{cfg.n_layers - 1})"))
            continue
        layers, shown = panel_layers(cfg, p.kind, p.layer) if p.kind in LAYER_PANELS else ((), None)
        if p.kind in NEEDS and p.kind != "gate":             # the gate's own words are below
            if p.layer is not None and p.layer not in layers:
                problems.append(loc.problem(path + ("layer",), f"layer {p.layer} is {cfg.mixers[p.layer]}, which has "
                                            f"no {p.kind} to show (layers with one: "
                                            f"{_listed(layers) or 'none'})"))
                continue
            if shown is None:
                problems.append(loc.problem(path + ("kind",), f"{cfg.name} has no layer the {p.kind} panel can "
                                            f"show (it needs {'/'.join(mixer_kinds(p.kind))})"))
                continue
            sub = cfg.mixer_config(cfg.mixers[shown])
            if p.head >= sub.n_heads:
                problems.append(loc.problem(path + ("head",), f"head {p.head} does not exist ({sub.n_heads} heads: "
                                            f"0-{sub.n_heads - 1})"))
        if p.kind == "routing" and not layers:
            problems.append(loc.problem(path + ("kind",), f"{cfg.name} has no MoE layer to route"))
        if p.kind == "depth" and cfg.attnres is None:
            problems.append(loc.problem(path + ("kind",), f"{cfg.name} has no attention residuals"))
        # the gate panel's layers record a gate only where their config has one (mla.output_gate)
        if p.kind == "gate" and not any(cfg.mixer_config(cfg.mixers[i]).output_gate for i in layers):
            problems.append(loc.problem(path + ("kind",), f"{cfg.name} has no gated MLA layer (mla.output_gate)"))
        elif p.kind == "gate" and p.layer is not None and p.layer not in layers:
            problems.append(loc.problem(path + ("layer",), f"layer {p.layer} is {cfg.mixers[p.layer]}, not MLA "
                                        f"(MLA layers: {_listed(layers)})"))
    if sc.figure is not None:
        names = [getattr(sc.figure, a) for a in ("big", "small", "compare") if getattr(sc.figure, a, None)]
        names += list(getattr(sc.figure, "presets", []))
        for name in names:
            if name not in PRESETS:
                problems.append(loc.problem(("figure",), f"unknown preset {name!r}{did_you_mean(name, PRESETS)}"))
    total = total_steps(sc, base_dir)
    for j, c in enumerate(sc.captions):
        if total is not None and c.at >= total:
            # named at the key the file used: step (from 1) or the older at (from 0)
            key = "step" if ("captions", j, "step") in loc.values else "at"
            said = f"step {c.step}" if key == "step" else f"at {c.at} (step {c.step})"
            problems.append(loc.problem(("captions", j, key), f"{said} is past the end (the scenario has "
                                        f"{total} steps: 1-{total})"))
        kinds = [p.kind for p in sc.panels]
        for n, kind in enumerate(c.panels if kinds else ()):     # every name, not only the first
            if kind not in kinds:
                at = ("captions", j, "panel", n)                 # `panel: [state, gate]`: the entry
                where = at if at in loc.values else at[:-1]      # `panel: gate`
                problems.append(loc.problem(where, f"the scenario has no {kind} panel "
                                            f"(its panels: {', '.join(dict.fromkeys(kinds))})"))


def _check_weights(sc: Scenario, cfgs: list, loc: Located, problems: list, base_dir: Path | None) -> None:
    """Each checkpoint whose config.json read: its weight files against it from the safetensors
    headers (lineage.families.loader.check_weights: a tensor of the wrong shape, place or dtype),
    so what validates loads. The one check here that imports torch, for a meta build of the
    model; only scenarios naming a checkpoint pay it. A folder named twice is checked once."""
    seen = set()
    for i, (cfg, spec) in enumerate(zip(cfgs, sc.model_specs)):
        if cfg is None or spec.pretrained is None:
            continue
        from ..families import PretrainedError, read_model_config
        from ..families.loader import check_weights
        try:
            _, arch, root, raw = read_model_config(pretrained_dir(spec, base_dir))
            if root in seen:
                continue
            seen.add(root)
            check_weights(cfg, arch, root, raw.get("model_type"))
        except PretrainedError as e:
            problems.append(loc.problem(sc.model_path(i) + ("pretrained",), str(e)))
            continue
        if spec.device_map is not None:       # planned as record would plan it here: a map that cannot fit
            from ..families.placement import plan_checkpoint
            context = (total_steps(sc, base_dir) or 0) + sc.decoding.prefill + 2
            try:
                plan_checkpoint(root, spec.device_map, context, spec.dtype, base_dir)
            except PretrainedError as e:
                problems.append(loc.problem(sc.model_path(i) + ("device_map",), str(e)))


def _listed(layers) -> str:
    return ", ".join(map(str, layers))


def _check_table(sc: Scenario, key: str, loc: Located, problems: list) -> None:
    """A hand-set keys or values table: rows of finite numbers as wide as every memory model's
    keys (values), and at least as many rows as the task uses (the toy memory indexes them)."""
    rows, path = sc.weights.set[key], ("weights", "set", key)
    widths = {s.memory.key_dim if key == "keys" else s.memory.value_dim for s in sc.model_specs if s.memory}
    if not (isinstance(rows, list) and rows and all(isinstance(r, list) for r in rows)):
        problems.append(loc.problem(path, "expected a list of rows, each a list of numbers"))
        return
    width = min(widths)
    for j, row in enumerate(rows):
        if len(widths) > 1 or len(row) != width or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in row):
            problems.append(loc.problem(path + (j,), f"row {j} must be {width} finite numbers "
                                        f"({'key_dim' if key == 'keys' else 'value_dim'} of every memory model)"))
            return
    seq = generate(sc.input.task)
    need = seq.n_keys if key == "keys" else seq.n_values
    if len(rows) < need:
        problems.append(loc.problem(path, f"has {len(rows)} rows; the task uses {need} {key}"))


def _no_tokenizer(spec, base_dir: Path | None) -> str:
    """Why a checkpoint gives no tokenizer: none there, or the broken file's own one line."""
    from ..families.problems import PretrainedError
    from ..families.tokenizer import tokenizer_for
    try:
        tokenizer_for(pretrained_dir(spec, base_dir), strict=True)
    except PretrainedError as e:
        return f"{spec.label}'s tokenizer cannot be read: {e}"
    return f"{spec.label} has no tokenizer files (tokenizer.json): give the input as ids"


def scenario_tokenizer(sc: Scenario, base_dir: Path | None = None):
    """The first model's checkpoint tokenizer when it is a pretrained model that has one (every
    model of the scenario reads the ids it makes), else None: text is read as bytes."""
    specs = sc.model_specs
    if not specs or specs[0].pretrained is None:
        return None
    from ..families.tokenizer import tokenizer_for
    return tokenizer_for(pretrained_dir(specs[0], base_dir or sc.base_dir))


def input_tokens(sc: Scenario, base_dir: Path | None = None) -> list[int]:
    """The input text or ids as token ids (text through the checkpoint's tokenizer, or as bytes)."""
    if sc.input.ids is not None:
        return list(sc.input.ids)
    tok = scenario_tokenizer(sc, base_dir)
    return tok.encode(sc.input.text) if tok is not None else list(sc.input.text.encode("utf-8"))


def input_length(sc: Scenario, base_dir: Path | None = None) -> int | None:
    if sc.input is None:
        return None
    if sc.input.text is not None:
        return len(input_tokens(sc, base_dir))
    if sc.input.ids is not None:
        return len(sc.input.ids)
    seq = generate(sc.input.task)
    return len(seq.events) if any(s.memory is not None for s in sc.model_specs) else len(seq.tokens)


def total_steps(sc: Scenario, base_dir: Path | None = None) -> int | None:
    """How many frames the scenario yields."""
    if sc.figure is not None and not sc.model_specs:
        n = figure_steps(sc.figure)
        return min(sc.steps or n, n)
    n = input_length(sc, base_dir)
    if n is None:
        return sc.steps
    avail = n - sc.decoding.prefill
    if sc.decoding.mode == "teacher" or any(s.memory is not None for s in sc.model_specs):
        return max(min(sc.steps or avail, avail), 0)
    return sc.steps or max(avail, 1) + 32


def _check_positions(sc: Scenario, cfgs: list, loc: Located, problems: list, base_dir: Path | None) -> None:
    """A model with a learned position table (GPT-2: 1,024) reads no token past its end: the
    scenario's prefill and steps must fit, or it would fail at that step, not here."""
    try:
        steps = total_steps(sc, base_dir) or 0
    except (ValueError, OSError):           # an input that does not read is reported elsewhere
        return
    need = sc.decoding.prefill + steps
    for i, cfg in enumerate(cfgs):
        if cfg is None or not cfg.n_positions or need <= cfg.n_positions:
            continue
        room = cfg.n_positions - sc.decoding.prefill
        where = ("steps",) if sc.steps is not None else ("input",)
        problems.append(loc.problem(where, f"{cfg.name} has learned positions for {cfg.n_positions:,} tokens; "
                                    f"the scenario feeds {need:,} (prefill {sc.decoding.prefill} + {steps:,} steps): "
                                    f"give at most {max(room, 0):,} steps" + (" or a shorter input" if sc.steps is None
                                                                                else "")))
        return


def _check_checkpoint(where: tuple, path: str, memory: bool, loc: Located, problems: list, base_dir: Path | None) -> None:
    """A checkpoint named at `where` (weights.checkpoint, or one model's checkpoint) exists and is safetensors."""
    ck = Path(path)
    if not ck.is_absolute() and base_dir is not None:
        ck = base_dir / ck
    try:
        is_file = ck.is_file()
    except OSError as e:          # a name longer than the file system takes, say
        problems.append(loc.problem(where, f"cannot use this path: {e.strerror or e}"))
        is_file = None
    if is_file is False:
        problems.append(loc.problem(where, f"no such file: {str(ck)[:200]}"))
    elif is_file and ck.suffix != ".safetensors":
        problems.append(loc.problem(where, "expected a .safetensors file"))
    if memory:
        problems.append(loc.problem(where, "memory models take hand-set keys and values, not a checkpoint"))
