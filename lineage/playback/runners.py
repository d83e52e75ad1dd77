"""Runners: what a Session steps. A scenario's models are language models fed tokens, or toy
memories fed a task's events, or there are none (a figure alone); the session picks its runner
once, at the start (`make_runner`), and asks it for each step's frame fields.

A runner gives `info_models`, `device` and `backend` (for the trace's info) and
`step(i) -> (meta, arrays)`: the step's frame fields, made by `observe`.
"""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from ..observed import StepObs
from ..arithmetic import count
from ..configs import MIXERS
from ..scenario.build import build_config, pretrained_dir
from ..scenario.checks import input_tokens, scenario_tokenizer, total_steps
from ..scenario.panels import WATCHED, panel_layers
from ..scenario.problems import Problem, ScenarioError
from ..scenario.reader import Located, load_text
from ..scenario.schema import Scenario
from ..scenario.tasks import generate
from ..tokenizer import ByteTokenizer
from . import observe


def make_runner(sc: Scenario, device: str, notes: list[str], prefill_progress=None):
    """The runner for the scenario's models; notes collects what the user should be told.
    `prefill_progress(model label, tokens done, tokens in all)` is called as each model reads
    the prefill (at 0 first, then after each chunk)."""
    specs = sc.model_specs
    if not specs:
        return NoModels()
    import torch
    device = _device(torch, device, notes)
    if specs[0].memory is not None:
        return MemoryRunner(sc, device)
    return LMRunner(sc, device, notes, prefill_progress)


class MemoryRefused(ValueError):
    """The scenario's models cannot hold its input where they run: one line naming what they
    would need and what is free (said before anything grows, not as an out-of-memory error)."""


def free_bytes(device) -> int | None:
    """Bytes free for new tensors on `device`: on CUDA what the driver has free plus what torch's
    allocator holds unused, on the CPU /proc/meminfo's MemAvailable; None where unknown."""
    if device.type == "cuda":
        import torch
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    if device.type == "cpu":
        try:
            with open("/proc/meminfo", encoding="ascii") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
    return None


def memory_problem(models: list, prefill: int, steps: int, what: str) -> str | None:
    """Why `models` cannot read `prefill` tokens and step `steps` more on their devices, or None:
    what each keeps (cache and state at the last step, lineage.arithmetic.model_memory) and the
    transient peak of the chunked prefill (lineage.prefill.activation_bytes), against free_bytes."""
    from ..arithmetic import fmt_bytes, layer_cache_bytes
    from ..prefill import activation_bytes, chunk_for
    need: dict = {}                     # device -> [kept, transient]
    for r in models:
        elem = r.torch.empty((), dtype=r.dtype).element_size()
        # each layer's cache and state live on its device (a device map spreads the layers)
        places = getattr(getattr(r, "model", None), "places", None)
        if places is None:
            kept = layer_cache_bytes(r.cfg, prefill + steps, cache_dtype_bytes=elem, state_dtype_bytes=max(elem, 4))
            places, sizes = [r.device] * len(kept), [elem] * len(kept)
        else:                   # each layer's cache and state live on its device, in its dtype
            sizes = [next(b.parameters()).element_size() for b in r.model.blocks]
            per = {e: layer_cache_bytes(r.cfg, prefill + steps, cache_dtype_bytes=e, state_dtype_bytes=max(e, 4))
                   for e in set(sizes)}                     # once per dtype, not once per layer
            kept = [per[e][i] for i, e in enumerate(sizes)]
        for device, b in zip(places, kept):
            need.setdefault(str(device), [device, 0, 0])[1] += b
        # a chunk passes every device in turn, at the smallest chunk of them (lineage.prefill)
        chunk_device = min(places, key=chunk_for)
        for i, device in {str(d): (j, d) for j, d in enumerate(places)}.values():
            k = need[str(device)]
            act = activation_bytes(r.cfg, max(prefill, 1), sizes[i], chunk_device)
            k[2] = max(k[2], act)           # the models prefill one after another
    for device, kept, act in need.values():
        free = free_bytes(device)
        if free is not None and kept + act > free:
            where = ("this GPU" if device.type == "cuda" else "this machine") if len(need) == 1 else str(device)
            return (f"{what}: {prefill + steps:,} tokens need {fmt_bytes(kept)} of cache and state and "
                    f"{fmt_bytes(act)} of activations; {where} has {fmt_bytes(free)} free")
    return None


def _device(torch, want: str, notes: list[str]):
    if want == "cuda" and not torch.cuda.is_available():
        notes.append("cuda asked for but not available: running on the CPU")
        return torch.device("cpu")
    if want == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(want)


def _one_thread_if_small(torch, device, n_params: int) -> None:
    if device.type == "cpu" and torch.get_num_threads() > 1 and n_params < 20_000_000:
        # a step of a small model is dozens of tiny ops: extra intra-op threads only
        # spin, and steal the core the UI draws on (7.2 ms a step on one thread,
        # 12.5 ms on two while the app draws, measured on the 2-core dev box)
        torch.set_num_threads(1)


class NoModels:
    """A figure alone: its frames are arithmetic, made by the session."""
    info_models: list = []
    device = "none"
    backend = "none (arithmetic)"

    def step(self, i: int) -> tuple[dict, dict]:
        return {}, {}


class LMRunner:
    """The scenario's language models side by side on the same tokens (the input's, then decoded
    from the first model's logits)."""

    def __init__(self, sc: Scenario, device, notes: list[str], prefill_progress=None):
        import torch
        self.torch, self.sc = torch, sc
        specs = sc.model_specs
        problems: list = []
        cfgs = [build_config(s, sc.model_path(i), Located(sc.source or "<scenario>", None), problems, sc.base_dir)
                for i, s in enumerate(specs)]
        if problems:
            raise ScenarioError(problems)
        totals = [count(cfg)["total"] for cfg in cfgs]
        _one_thread_if_small(torch, device, sum(totals))
        dtype = getattr(torch, sc.dtype)             # the schema's names are torch's (arithmetic.DTYPE_BYTES)
        self.answers: dict = {}
        self.tokenizer = scenario_tokenizer(sc)          # a checkpoint's own, or None: bytes
        if sc.input.task is None:
            self.tokens = input_tokens(sc)
        else:
            seq = generate(sc.input.task)
            self.tokens, self.answers = list(seq.tokens), seq.answers
        # a checkpoint's ids are its own vocabulary's, not bytes: shown as ids (a toy's are bytes)
        self.as_ids = specs[0].pretrained is not None and self.tokenizer is None
        if self.as_ids:
            notes.append(f"{specs[0].label} has no tokenizer files: tokens are shown as ids")
        self.last = total_steps(sc)          # once: for a text input it tokenizes the whole text
        context = sc.decoding.prefill + (self.last or 0)              # positions cached by the last step
        self.models = [SteppedModel(cfg, sc, device, dtype, sc.base_dir, spec=s, spec_path=sc.model_path(i),
                                    notes=notes, watch=_watched(sc, i, cfg, context) if s.pretrained else None,
                                    follow=not s.pretrained or any(p.kind == "attention" and p.model == i
                                                                   for p in sc.panels))
                       for i, (s, cfg) in enumerate(zip(specs, cfgs))]
        self.info_models = [{"name": s.label, "kind": "lm", "config": dataclasses.asdict(cfg), "params": total}
                            for s, cfg, total in zip(specs, cfgs, totals)]
        for info, r in zip(self.info_models, self.models):
            if r.pretrained is not None:
                info.update(pretrained=r.pretrained, dtype=str(r.dtype).removeprefix("torch."), device=str(r.device),
                            watch=None if r.watch is None else sorted(r.watch),
                            places=None if r.model.places is None else [str(d) for d in r.model.places])
        notes += sorted({r.backend_note for r in self.models if r.backend_note})
        self.device, self.backend = str(device), self.models[0].backend
        prefill = self.tokens[:sc.decoding.prefill]
        refused = memory_problem(self.models, len(prefill), self.last or 0, _input_name(sc))
        if refused is not None:
            raise MemoryRefused(refused)
        for r, s in zip(self.models, specs):
            report = None
            if prefill_progress is not None and prefill:
                report = functools.partial(prefill_progress, s.label)
                report(0, len(prefill))
            r.prefill(prefill, progress=report)
        if prefill:                 # steps start at the end of what was read at once: say where
            notes.append(f"prefilled {len(prefill):,} of {len(self.tokens):,} tokens")
        self.gen = torch.Generator().manual_seed(sc.decoding.seed)

    def step(self, i: int) -> tuple[dict, dict]:
        sc = self.sc
        pos = sc.decoding.prefill + i
        if pos < len(self.tokens):
            token, source = self.tokens[pos], "input"
        else:
            token, source = self._decode(self.models[0].logits), sc.decoding.mode
        text = self._text(token)
        nxt = int(self.tokens[pos + 1]) if pos + 1 < len(self.tokens) else None
        fields = observe.token_meta(pos, int(token), text, source, self.answers.get(pos), nxt)
        # the next token, where it is known now: each captured step then queues the next one
        # before this frame is built (GraphStep.launch), so the device never waits for the host
        ahead = nxt if self.last is None or i + 1 < self.last else None
        meta, arrays = observe.lm_step_fields(fields, (r.step(int(token), ahead) for r in self.models))
        if self.tokenizer is not None or self.as_ids:   # the guesses as text too: a replay has no tokenizer to ask
            for m, mm in enumerate(meta["models"]):
                texts = [self._text(int(t)) for t in observe.guess_ids(arrays, m)]
                observe.guess_texts(mm, [t.rstrip() for t in texts] if self.as_ids else texts)
        return meta, arrays

    def _text(self, token: int) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.token_str(token)
        if self.as_ids:
            return f"#{token} "           # the stream is these texts joined: a space between ids
        return ByteTokenizer().token_str(token) if token < 256 else str(token)

    def _decode(self, logits) -> int:
        torch = self.torch
        d = self.sc.decoding
        if logits is None:
            return 0
        if d.mode in ("greedy", "teacher"):
            return int(logits.argmax())
        z = logits / d.temperature
        if d.top_k:
            v, _ = z.topk(min(d.top_k, z.numel()))
            z = z.masked_fill(z < v[-1], float("-inf"))
        return int(torch.multinomial(z.softmax(-1).cpu(), 1, generator=self.gen))


def _input_name(sc: Scenario) -> str:
    """What a memory refusal is said about: the input file, else the scenario file."""
    if sc.input is not None and sc.input.file is not None:
        return Path(sc.input.file).name
    return Path(sc.source).name if sc.source else "the input"


class MemoryRunner:
    """The scenario's toy memories, each fed the task's events one per step."""
    backend = "reference (toy memory)"

    def __init__(self, sc: Scenario, device):
        import torch
        from .toy import Memory
        _one_thread_if_small(torch, device, 0)
        seq = generate(sc.input.task)
        self.events, self.device = seq.events, str(device)
        self.memories = [Memory(s.memory, seq, sc.input.task, sc.weights.seed, sc.weights.set) for s in sc.model_specs]
        self.info_models = [{"name": s.label, "kind": "memory", **s.memory.model_dump()} for s in sc.model_specs]

    def step(self, i: int) -> tuple[dict, dict]:
        ev = self.events[i]
        return observe.memory_step_fields(
            ev.label(), (observe.memory_fields(mem.step(ev), mem.spec.rule, ev.label()) for mem in self.memories))


class SteppedModel:
    """One language model: prefill with the parallel / chunked forward, then observed steps."""

    def __init__(self, cfg, sc: Scenario, device, dtype, base_dir: Path | None, spec=None, spec_path=("model",),
                 notes: list | None = None, watch: frozenset | None = None, follow: bool = False):
        import torch
        from ..model import LM
        self.torch = torch
        self.cfg = cfg
        self.watch = watch
        self.pretrained = None
        notes = notes if notes is not None else []
        self.capacity = (total_steps(sc) or 0) + sc.decoding.prefill + 2     # positions cached by the last step
        if spec is not None and spec.pretrained is not None:
            device = _device(torch, spec.device, notes) if spec.device else device
            self.model, self.pretrained = _load_pretrained(sc, spec, spec_path, device, base_dir, self.capacity,
                                                           notes)
            dtype = next(self.model.parameters()).dtype
            if spec.device_map is not None:        # the map chose the devices: ids go in where the embedding is
                device = self.model.wte.weight.device
        else:
            torch.manual_seed(sc.weights.seed)       # same seed, same preset: same weights side by side
            model = LM(cfg)
            own = spec.checkpoint if spec is not None else None
            if own is not None:                        # this model's own file, then the scenario's
                _load_checkpoint(model, sc, base_dir, own, spec_path + ("checkpoint",))
            elif sc.weights.checkpoint is not None:
                _load_checkpoint(model, sc, base_dir, sc.weights.checkpoint, ("weights", "checkpoint"))
            self.model = model.to(device=device, dtype=dtype).eval()
        self.dtype = dtype
        from ..backend import resolve, set_backend
        spread = self.model.places is not None
        cuda = next((d for d in self.model.places or () if d.type == "cuda"), None)
        self.backend, self.backend_note = resolve(cuda or device)
        set_backend(self.model, self.backend)       # a block placed on the CPU keeps the reference
        self.device = device
        self.state = None
        self.logits = None
        self.load: dict = {}                         # layer -> tokens per expert so far
        # layer -> effective.Window, for the attention panel's rows of a recurrent layer: a toy
        # model's always (a panel may be opened on it later), a checkpoint's only where the
        # scenario has an attention panel on it (each row costs O(W K) a head a watched layer)
        self.follow: dict | None = {} if follow else None
        # on CUDA the observed step is launch bound: after the first token, capture it in a CUDA
        # graph (LINEAGE_GRAPH=0 turns this off; =compile also runs torch.compile first). Models
        # with learned positions index by a host integer and step eagerly.
        import os
        mode = os.environ.get("LINEAGE_GRAPH", "auto").lower()
        off = mode in ("0", "off", "no") or device.type != "cuda" or self.model.wpe is not None or spread
        if spread and cuda is not None and mode not in ("0", "off", "no"):
            # per-device graphs (one for each device's run of layers) are not built yet
            notes.append("the model spans devices: its steps run eagerly (one CUDA graph cannot span devices)")
        self.graph_mode = None if off else mode
        self.stepper = None
        self.notes = notes                          # the session's: a failed capture adds one

    def prefill(self, ids: list[int], progress=None) -> None:
        """Read ids in chunks (lineage.prefill); progress(done, total) after each."""
        if not ids:
            return
        from ..prefill import prefill
        x = self.torch.tensor([ids], device=self.device)
        logits, self.state = prefill(self.model, x, self.state, progress=progress)
        self.logits = logits[0].float()

    def step(self, token: int, ahead: int | None = None) -> tuple[dict, dict]:
        """Observe the step on `token`; `ahead`: the next step's token, where it is known now."""
        torch = self.torch
        if self.stepper is not None:
            logits, obs = self.stepper.step(token)
            self.logits = logits[0].to(torch.float32, copy=True)    # before a launch overwrites it
            launch = None if ahead is None else functools.partial(self.stepper.launch, ahead)
            return observe.lm_fields(obs, self.cfg, self.load, self.watch, launch, self.follow)
        obs = StepObs()
        with torch.inference_mode():
            logits, self.state = self.model.step(torch.tensor([token], device=self.device), self.state, obs)
        if self.graph_mode is not None:
            from ..graph_step import GraphStep
            try:
                self.stepper = GraphStep(self.model, self.state, self.capacity,
                                         compile=self.graph_mode == "compile")
            except RuntimeError as e:   # a failed capture leaves self.state as it was: step eagerly
                self.notes.append(f"CUDA graph capture failed, steps run eagerly: {str(e).splitlines()[0]}")
            self.graph_mode = None
        self.logits = logits[0].float()
        return observe.lm_fields(obs, self.cfg, self.load, self.watch, follow=self.follow)


def _load_checkpoint(model, sc: Scenario, base_dir: Path | None, name: str, where: tuple) -> None:
    from ..weights import load_into
    path = Path(name)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        load_into(model, path)
    except ValueError as e:
        raise _weights_error(sc, where, str(e)) from None


WATCH_ALL_BYTES = 8 << 20      # a checkpoint whose states (S and dS, float16) fit this keeps every layer
FRAME_BYTES = 2                 # a frame's S, dS and attention rows: float16 (host_copy.compact)


def _watched(sc: Scenario, m: int, cfg, context: int = 0) -> frozenset | None:
    """The layers whose state, decay and attention rows model m's frames keep: every layer (None)
    when they are small, else those its state, decay and attention panels show (the first layer
    with one where a panel names none). Kimi Linear 48B's KDA states are 2 MB a layer: all 20
    would be 40 MB a frame. An attention row covers every position cached (`context` by the last
    step, float16): a long input's rows of every layer would make each frame grow with it.
    A state's bytes are its config's answer (state_bytes of the state matrices alone, no conv
    cache: what `lineage memory` and the cache panel count), not a formula of this function's
    own (one counted Mamba-2's state_dim x head_dim S as head_dim x head_dim: half, at the
    published 128 x 64)."""
    layers = [(MIXERS[k], cfg.layer_mixer_config(i)) for i, k in enumerate(cfg.mixers)]
    per_frame = sum(2 * c.state_bytes(FRAME_BYTES, 0) for m, c in layers if m.holds_state)     # S and dS
    per_frame += sum(FRAME_BYTES * c.n_heads * context for m, c in layers if m.attends)
    if per_frame <= WATCH_ALL_BYTES:
        return None
    shown = (panel_layers(cfg, p.kind, p.layer).shown for p in sc.panels if p.kind in WATCHED and p.model == m)
    return frozenset(layer for layer in shown if layer is not None)


def _load_pretrained(sc: Scenario, spec, spec_path: tuple, device, base_dir: Path | None, context: int,
                     notes: list):
    """(model, its directory) or a ScenarioError placed at the spec's `pretrained` field (at its
    `device_map` for a map that cannot be planned). A device map is planned for the run's
    context (cache and state at its last step) and what lands where is said in `notes`."""
    from ..families import PretrainedError, load_pretrained
    path = pretrained_dir(spec, base_dir)
    placed = None
    if spec.device_map is not None:
        from ..families.placement import describe, gb, plan_checkpoint
        try:
            placed = plan_checkpoint(path, spec.device_map, context, spec.dtype, base_dir)
        except PretrainedError as e:
            raise _weights_error(sc, spec_path + ("device_map",), str(e)) from None
        notes.append("placed by device map " + spec.device_map + ": " + "; ".join(
            f"{d.device} {describe(d.units)} ({gb(d.total)})" for d in placed.used()))
    try:
        model, _ = load_pretrained(path, device=device, dtype=spec.dtype,
                                   device_map=None if placed is None else placed.device_map)
    except PretrainedError as e:
        raise _weights_error(sc, spec_path + ("pretrained",), str(e)) from None
    return model, str(path)


def _weights_error(sc: Scenario, where: tuple, msg: str) -> ScenarioError:
    """A problem found when the checkpoint's values are read (validate reads only its config and
    headers), placed at the scenario's `weights.checkpoint` like every other problem with a field."""
    file = sc.source or "<scenario>"
    try:
        return ScenarioError([load_text(sc.text or "", file).problem(where, msg)])
    except ScenarioError:           # no text to place it in (a scenario built in code)
        return ScenarioError([Problem(file, 1, 1, ".".join(map(str, where)), msg)])
